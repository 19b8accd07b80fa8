"""`--base sdist:VERSION` (base.resolve, fetch): the sdist of a release the manifest does not list is downloaded once
without a known hash (trust on first use), its sha256 recorded beside the download cache and checked on every later
use; one the manifest lists (`[targets.<name>.releases]`) is downloaded in hash-checking mode. pip finds the fake
sdists in a folder (no network)."""

import importlib.util
import json
import os
import shutil
from types import SimpleNamespace

import pytest
from seriesfixtures import make_tarball, release_files, sha256
from seriestool import base, fetch
from seriestool.errors import SeriesError
from seriestool.git import Repo


pytestmark = pytest.mark.skipif(importlib.util.find_spec("pip") is None, reason="needs pip in the test interpreter")


def _target(**releases):
    return SimpleNamespace(name="fake", package="fakepkg", version="1.0", sha256="ab" * 32, releases=releases)


@pytest.fixture
def index(tmp_path, monkeypatch):
    """A package index without a network: pip finds the sdists of fakepkg 1.0 and 1.1 in tmp_path/links."""
    links = tmp_path / "links"
    for version in ("1.0", "1.1"):
        make_tarball(links / f"fakepkg-{version}.tar.gz", f"fakepkg-{version}", release_files(version))
    env = {
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(links),
        "PIP_NO_CACHE_DIR": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return links


def _replace_on_the_index(index, version, readme):
    """The index now serves other bytes for the same release."""
    files = release_files(version, {"README.md": readme})
    return make_tarball(index / f"fakepkg-{version}.tar.gz", f"fakepkg-{version}", files)


def test_the_first_use_downloads_and_records_the_hash_later_uses_read_it(tmp_path, index):
    target, downloads, logged = _target(), tmp_path / "downloads", []
    spec = base.parse_spec("sdist:1.1", target)
    resolved = base.resolve(spec, target, downloads, logged.append)
    sha = sha256(index / "fakepkg-1.1.tar.gz")
    recorded = downloads / "recorded.json"
    assert resolved == base.BaseSpec("sdist", version="1.1", sha256=sha)
    assert logged == [
        "downloading fakepkg==1.1 sdist with pip",
        f"sdist fakepkg==1.1: sha256 {sha} (not in the manifest; recorded in {recorded})",
    ]
    assert json.loads(recorded.read_text(encoding="utf-8")) == {"fakepkg==1.1": sha}
    assert sorted(p.name for p in downloads.iterdir()) == sorted([sha, "recorded.json"])  # no temporary folder
    assert (downloads / sha / "fakepkg-1.1.tar.gz").read_bytes() == (index / "fakepkg-1.1.tar.gz").read_bytes()
    # A later use reads the record: no download, no line.
    (index / "fakepkg-1.1.tar.gz").unlink()
    logged.clear()
    assert base.resolve(spec, target, downloads, logged.append) == resolved and logged == []
    # The base: the sdist from the cache, the same commit every time (`create` resolves a spec itself too).
    first = base.create(target, resolved, tmp_path / "a", downloads=downloads, log=logged.append)
    assert base.create(target, spec, tmp_path / "b", downloads=downloads, log=logged.append) == first
    assert logged == ["extracting fakepkg-1.1.tar.gz"] * 2
    message = Repo(tmp_path / "a").out("log", "-1", "--format=%B", first)
    assert message == f"fakepkg 1.1\n\nsdist sha256 {sha}"
    assert "Version: 1.1" in (tmp_path / "a" / "PKG-INFO").read_text(encoding="utf-8")


def test_a_recorded_hash_is_checked_on_every_later_use(tmp_path, index):
    target, downloads = _target(), tmp_path / "downloads"
    spec = base.resolve(base.parse_spec("sdist:1.1", target), target, downloads, lambda line: None)
    recorded = downloads / "recorded.json"
    before = recorded.read_text(encoding="utf-8")
    origin = f"recorded on first use in {recorded}"
    # The index serves other bytes for 1.1 now: refused, never recorded instead.
    other = sha256(_replace_on_the_index(index, "1.1", "changed upstream\n"))
    shutil.rmtree(downloads / spec.sha256)
    with pytest.raises(SeriesError) as info:
        base.create(target, spec, tmp_path / "base", downloads=downloads, log=lambda line: None)
    assert str(info.value) == (
        f"sha256 mismatch for the fakepkg==1.1 sdist from the package index: got {other}, expected {spec.sha256} "
        f"({origin}); nothing was extracted"
    )
    assert not (tmp_path / "base").exists() and recorded.read_text(encoding="utf-8") == before
    assert sorted(p.name for p in downloads.iterdir()) == ["recorded.json"]
    # A cached file that changed is refused as well.
    (downloads / spec.sha256).mkdir()
    (downloads / spec.sha256 / "fakepkg-1.1.tar.gz").write_bytes(b"not the sdist")
    with pytest.raises(SeriesError) as info:
        base.create(target, spec, tmp_path / "base", downloads=downloads, log=lambda line: None)
    assert str(info.value).startswith(f"cached sdist {downloads / spec.sha256 / 'fakepkg-1.1.tar.gz'} has sha256 ")
    assert str(info.value).endswith(f", expected {spec.sha256} ({origin}); delete it to download again")
    assert not (tmp_path / "base").exists()


def test_a_release_the_manifest_lists_is_downloaded_hash_checked_and_not_recorded(tmp_path, index):
    downloads, logged = tmp_path / "downloads", []
    sha = sha256(index / "fakepkg-1.1.tar.gz")
    target = _target(**{"1.1": sha})
    spec = base.parse_spec("sdist:1.1", target)
    assert base.resolve(spec, target, downloads, logged.append) is spec and logged == []  # nothing to find out
    base.create(target, spec, tmp_path / "base", downloads=downloads, log=logged.append)
    assert logged == ["downloading fakepkg==1.1 sdist with pip", "extracting fakepkg-1.1.tar.gz"]
    assert sorted(p.name for p in downloads.iterdir()) == [sha]  # no record: the manifest knows it
    # A hash in the manifest that the index's file does not have: refused.
    wrong = _target(**{"1.1": "cd" * 32})
    with pytest.raises(SeriesError) as info:
        base.create(wrong, base.parse_spec("sdist:1.1", wrong), tmp_path / "other", downloads=downloads)
    assert str(info.value) == (
        f"sha256 mismatch for the fakepkg==1.1 sdist from the package index: got {sha}, expected {'cd' * 32} "
        "([targets.fake.releases] of the manifest); nothing was extracted"
    )
    assert sorted(p.name for p in downloads.iterdir()) == [sha] and not (tmp_path / "other").exists()


def test_a_release_not_on_the_index_leaves_nothing(tmp_path, index):
    target, downloads = _target(), tmp_path / "downloads"
    with pytest.raises(SeriesError) as info:
        base.resolve(base.parse_spec("sdist:99.0.0", target), target, downloads, lambda line: None)
    assert str(info.value) == "no fakepkg==99.0.0 sdist on the package index (it has 1.0, 1.1)"
    assert list(downloads.iterdir()) == []  # no cache folder, no recorded.json


def test_a_recorded_hash_is_never_replaced(tmp_path):
    path = fetch.record_sha256(tmp_path, "Fake_Pkg", "1.1", "ab" * 32)
    assert path == tmp_path / "recorded.json"
    assert fetch.recorded_sha256(tmp_path, "fake-pkg", "1.1") == "ab" * 32  # the package name normalized
    assert fetch.recorded_sha256(tmp_path, "fake-pkg", "1.2") is None
    fetch.record_sha256(tmp_path, "fake.pkg", "1.1", "ab" * 32)  # the same again: fine
    with pytest.raises(SeriesError) as info:
        fetch.record_sha256(tmp_path, "fake-pkg", "1.1", "cd" * 32)
    assert str(info.value) == (
        f"the fake-pkg==1.1 sdist downloaded now has sha256 {'cd' * 32}, but {'ab' * 32} is recorded in {path}; "
        "nothing was extracted"
    )
    assert json.loads(path.read_text(encoding="utf-8")) == {"fake-pkg==1.1": "ab" * 32}
    assert [p.name for p in tmp_path.iterdir()] == ["recorded.json"]  # no temporary file left
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(SeriesError) as info:
        fetch.recorded_sha256(tmp_path, "fake-pkg", "1.1")
    assert str(info.value).startswith(f"cannot read the recorded sdist hashes {path}: ")


VERSIONS = ", ".join(f"5.{minor}.0" for minor in range(10, 25))
PIP_FAILURES = [
    # the index answered, without that version
    (
        f"ERROR: Could not find a version that satisfies the requirement pkg==9.0 (from versions: {VERSIONS})\n"
        "ERROR: No matching distribution found for pkg==9.0",
        "no pkg==9.0 sdist on the package index (it has ..., 5.20.0, 5.21.0, 5.22.0, 5.23.0, 5.24.0)",
    ),
    # no answer at all (or no such package): the index may be unreachable
    (
        "Looking in indexes: http://127.0.0.1:9/simple\n"
        "ERROR: Could not find a version that satisfies the requirement pkg==9.0 (from versions: none)\n"
        "ERROR: No matching distribution found for pkg==9.0",
        "could not fetch the pkg==9.0 sdist with pip from http://127.0.0.1:9/simple (is the index reachable?): "
        "ERROR: No matching distribution found for pkg==9.0",
    ),
    (
        "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE.\n"
        "    pkg==9.0 from x:\n        Expected sha256 abab\n             Got        cdcd",
        "sha256 mismatch for the pkg==9.0 sdist from the package index: got cdcd, expected abab (recorded); "
        "nothing was extracted",
    ),
]


@pytest.mark.parametrize(("output", "line"), PIP_FAILURES)
def test_what_a_failed_pip_download_says(output, line):
    assert fetch._pip_failure("pkg", "9.0", output, ", expected abab (recorded)") == line
