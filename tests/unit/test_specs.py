"""The one spec syntax of `--base` and `--upstream-tests` (base.parse_spec; docs/user.md, "Specs")."""

import dataclasses
from types import SimpleNamespace

import pytest
from seriestool import base
from seriestool.errors import SeriesError
from seriestool.git import Repo

from .conftest import commit


TARGET = SimpleNamespace(name="fake", package="fakepkg", version="1.2", sha256="ab" * 32, releases={"1.1": "cd" * 32})
OPTIONS = ("--base", "--upstream-tests")
GIT_SPECS = [
    ("git:https://example.invalid/x.git", ("https://example.invalid/x.git", "HEAD")),
    ("git:x", ("x", "HEAD")),
    ("git:https://example.invalid/x.git@v1.2", ("https://example.invalid/x.git", "v1.2")),
    ("git:https://example.invalid/x.git@release/v1", ("https://example.invalid/x.git", "release/v1")),
    # an `@` followed by a `:` is the URL's own (scp-like syntax)
    ("git:git@example.invalid:org/x.git", ("git@example.invalid:org/x.git", "HEAD")),
    ("git:git@example.invalid:org/x.git@main", ("git@example.invalid:org/x.git", "main")),
    # ... and so is the one ending the user of scheme://user@host
    ("git:ssh://git@example.invalid/x.git", ("ssh://git@example.invalid/x.git", "HEAD")),
    ("git:ssh://git@example.invalid/x.git@main", ("ssh://git@example.invalid/x.git", "main")),
    ("git:https://u@example.invalid", ("https://u@example.invalid", "HEAD")),
    ("git:file:///srv/x.git@main", ("file:///srv/x.git", "main")),
    # {version} in REF is the pinned version
    ("git:https://example.invalid/x.git@v{version}", ("https://example.invalid/x.git", "v1.2")),
    ("git:x@{version}-{version}", ("x", "1.2-1.2")),
]


@pytest.mark.parametrize("option", OPTIONS)
@pytest.mark.parametrize(("spec", "expected"), GIT_SPECS)
def test_git_specs_are_read_alike_by_both_options(spec, expected, option):
    assert base.parse_spec(spec, TARGET, option=option) == base.BaseSpec("git", *expected)


@pytest.mark.parametrize("spec", [None, "", "sdist"])
def test_the_sdist_is_a_base_only(spec):
    assert base.parse_spec(spec, TARGET) is base.SDIST == base.BaseSpec("sdist")
    with pytest.raises(SeriesError) as info:
        base.parse_spec(spec, TARGET, option="--upstream-tests")
    assert str(info.value) == f"bad --upstream-tests {spec!r}: use path:DIR (a tree with tests/) or git:URL@REF"


@pytest.mark.parametrize("option", OPTIONS)
def test_a_path_is_made_absolute(tmp_path, monkeypatch, option):
    monkeypatch.chdir(tmp_path)
    assert base.parse_spec("path:clone", TARGET, option=option) == base.BaseSpec("path", str(tmp_path / "clone"))
    assert base.parse_spec("path:c", TARGET, option=option) == base.BaseSpec("path", str(tmp_path / "c"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert base.parse_spec("path:~/clone", TARGET, option=option).location == str(tmp_path / "home" / "clone")


BAD = [
    "path:",
    "sdist:",  # an empty VERSION
    "git:",
    "main",
    "https://example.invalid/x.git",
    "PATH:x",
    "git:https://example.invalid/x.git@",  # an empty REF
    "git:@main",  # an empty URL
    "git:@",
]


@pytest.mark.parametrize("spec", BAD)
def test_bad_specs(spec):
    with pytest.raises(SeriesError) as info:
        base.parse_spec(spec, TARGET)
    assert str(info.value) == f"bad base {spec!r}: use sdist, sdist:VERSION, path:DIR or git:URL@REF"
    with pytest.raises(SeriesError) as info:
        base.parse_spec(spec, TARGET, option="--upstream-tests")
    assert str(info.value) == f"bad --upstream-tests {spec!r}: use path:DIR (a tree with tests/) or git:URL@REF"


SDISTS = [
    ("sdist:1.2", base.SDIST),  # the pinned version: the plain sdist, not a moved base
    ("sdist:1.1", base.BaseSpec("sdist", version="1.1", sha256="cd" * 32)),  # [targets.fake.releases] knows it
    ("sdist:1.3", base.BaseSpec("sdist", version="1.3")),  # its hash is recorded on first use (`resolve`)
    ("sdist:1.3rc1", base.BaseSpec("sdist", version="1.3rc1")),
    ("sdist:1.3.0.dev0", base.BaseSpec("sdist", version="1.3.0.dev0")),
    ("sdist:1.2.0", base.BaseSpec("sdist", version="1.2.0")),  # another string than the pin's: another spec
]


@pytest.mark.parametrize(("spec", "expected"), SDISTS)
def test_the_sdist_of_a_release(spec, expected):
    assert base.parse_spec(spec, TARGET) == expected
    assert (base.parse_spec(spec, TARGET) is base.SDIST) is (expected == base.SDIST)
    with pytest.raises(SeriesError) as info:  # an sdist has no tests/
        base.parse_spec(spec, TARGET, option="--upstream-tests")
    assert str(info.value) == f"bad --upstream-tests {spec!r}: use path:DIR (a tree with tests/) or git:URL@REF"


@pytest.mark.parametrize("version", ["not-a-version", "v1.2", "1.2 ", " 1.2", "1..2", "==1.2", "1.2/x", "latest"])
def test_an_sdist_of_no_release_version_is_refused_before_any_download(version):
    with pytest.raises(SeriesError) as info:
        base.parse_spec(f"sdist:{version}", TARGET)
    assert str(info.value) == (
        f"bad base 'sdist:{version}': {version!r} is not a release version of fakepkg (sdist:VERSION, e.g. sdist:1.2)"
    )


@pytest.mark.parametrize(
    ("spec", "moved"),
    [
        (base.SDIST, False),
        (base.BaseSpec("sdist", version="1.1"), True),
        (base.BaseSpec("sdist", version="1.1", sha256="cd" * 32), True),
        (base.BaseSpec("path", "/x/clone"), True),
        (base.BaseSpec("git", "u", "main"), True),
    ],
)
def test_every_base_but_the_pinned_sdist_is_moved(spec, moved):
    assert spec.moved is moved


def test_describe_the_sdist_of_another_release_and_its_key():
    known = base.parse_spec("sdist:1.1", TARGET)
    assert known.describe(TARGET) == "fakepkg 1.1 sdist (sha256 cdcdcdcdcdcd...)"
    assert known.key(TARGET) == f"sdist:fakepkg==1.1:{'cd' * 32}"
    assert known.report_fields(TARGET) == {"version": "1.1", "sha256": "cd" * 32}
    assert base.SDIST.report_fields(TARGET) == {"version": "1.2", "sha256": "ab" * 32}
    assert base.BaseSpec("git", "u", "r").report_fields(TARGET) == {}
    unknown = base.parse_spec("sdist:1.3", TARGET)
    assert unknown.describe(TARGET) == "fakepkg 1.3 sdist"  # until `resolve` knows its hash
    assert dataclasses.replace(unknown, sha256="ef" * 32).key(TARGET) == f"sdist:fakepkg==1.3:{'ef' * 32}"


def test_describe_a_base_and_its_key():
    assert base.SDIST.describe(TARGET) == "fakepkg 1.2 sdist (sha256 abababababab...)"
    assert base.BaseSpec("path", "/x/clone").describe(TARGET) == "HEAD of /x/clone"
    assert base.BaseSpec("git", "https://e/x.git", "main").describe(TARGET) == "https://e/x.git@main"
    assert base.SDIST.key(TARGET) == f"sdist:fakepkg==1.2:{'ab' * 32}"
    assert base.BaseSpec("git", "u", "r").key(TARGET) == "git:u@r"
    assert base.BaseSpec("path", "/x").key(TARGET) == "path:/x@"


def test_check_spec_of_a_path(tmp_path):
    def message(path):
        with pytest.raises(SeriesError) as info:
            base.check_spec(base.BaseSpec("path", str(path)))
        return str(info.value)

    assert message(tmp_path / "missing") == f"base path {tmp_path / 'missing'} does not exist"
    (tmp_path / "file").write_text("", encoding="utf-8")
    assert message(tmp_path / "file") == f"base path {tmp_path / 'file'} is not a folder"
    (tmp_path / "plain").mkdir()
    assert message(tmp_path / "plain") == f"base path {tmp_path / 'plain'} is not a git repository"
    Repo(tmp_path).run("init", "--quiet", "--bare", "bare.git")
    bare = tmp_path / "bare.git"
    assert message(bare) == (
        f"base path {bare} is a bare git repository (no work tree): use git:{bare.as_uri()}@BRANCH for it"
    )
    # the spec that message suggests is read as it means
    assert base.parse_spec(f"git:{bare.as_uri()}@main", TARGET) == base.BaseSpec("git", bare.as_uri(), "main")
    empty = Repo.init(tmp_path / "empty")
    assert message(empty.path) == f"base path {empty.path} has no commits"
    (empty.path / "sub").mkdir()
    assert message(empty.path / "sub") == f"base path {empty.path} has no commits"  # its top folder is named
    commit(empty, {"a.txt": "a\n"})
    base.check_spec(base.BaseSpec("path", str(empty.path / "sub")))
    assert base._git_source(base.BaseSpec("path", str(empty.path / "sub"))) == (empty.path.as_uri(), "HEAD")
    assert base._git_source(base.BaseSpec("git", "u", "r")) == ("u", "r")
    base.check_spec(base.BaseSpec("git", str(tmp_path / "missing"), "main"))  # checked when fetched


@pytest.mark.parametrize(
    "version, older",
    [
        ("5.25.0.dev0", False),  # upstream main after the release
        ("5.24.0", False),
        ("v5.24.1", False),
        ("5.24.0.dev0", True),  # main before the release
        ("5.24.0rc1", True),
        ("5.23.0", True),
        ("5.9", True),
        ("6", False),
        (None, False),  # a base that declares no version is not called older
        ("main", False),
    ],
)
def test_a_base_older_than_the_pin(version, older):
    assert base.older_than(version, "5.24.0") is older


def test_the_version_a_base_declares(tmp_path):
    target = SimpleNamespace(package="fake-pkg", source_dir="src")
    repo = Repo.init(tmp_path / "repo")
    first = commit(repo, {"PKG-INFO": "Metadata-Version: 2.1\nName: fake-pkg\nVersion: 0.9\n"}, "sdist")
    second = commit(repo, {"src/fake_pkg/__init__.py": '"""Fake."""\n\n__version__ = "1.1.0.dev0"\n'}, "main")
    empty = commit(repo, {"PKG-INFO": "no version\n", "src/fake_pkg/__init__.py": "x = 1\n"}, "none")
    assert base.import_name(target) == "fake_pkg"
    assert base.version_of(repo, first, target) == "0.9"
    assert base.version_of(repo, second, target) == "1.1.0.dev0"  # __version__ first
    assert base.version_of(repo, empty, target) is None
