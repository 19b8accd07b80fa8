"""companions.py: which companion release a target is judged with, `--with`, the manifest's releases and pairs, and
the names a verdict gives its world."""

import re
import tempfile
from pathlib import Path

import pytest
from parameterized import parameterized
from seriestool import companions, manifest
from seriestool.errors import SeriesError
from seriestool.verification import Verification, judged, tools


A, B, C = "a" * 64, "b" * 64, "c" * 64
MANIFEST = f"""
schema = 1

[targets.main]
package = "mainpkg"
version = "2.0"
sha256 = "{A}"
git_url = "https://example.invalid/main.git"
tests = "tests/"
patches = []
verify_with = ["side"]

[targets.main.releases]
"1.9" = "{B}"

[targets.main.companions]
"2.0" = {{ side = "5.1" }}
"1.9" = {{ side = "5.0" }}

[targets.side]
package = "side-pkg"
version = "5.1"
sha256 = "{B}"
git_url = "https://example.invalid/side.git"
tests = "tests/"
patches = []

[targets.side.releases]
"5.0" = "{C}"
"""


def _load(text=MANIFEST):
    """The manifest `text` (parameterized.expand cases take no pytest fixtures)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "series.toml"
        path.write_text(text, encoding="utf-8")
        return manifest.load(path)


@pytest.fixture
def loaded():
    return _load()


@parameterized.expand(
    [
        ("the pin's pair", "2.0", {}, "5.1", B, "paired with mainpkg 2.0 in the manifest"),
        ("an older release's pair", "1.9", {}, "5.0", C, "paired with mainpkg 1.9 in the manifest"),
        ("a base with no pair", "2.1.dev0", {}, "5.1", B, "the pin: mainpkg 2.1.dev0 has no pair in the manifest"),
        ("no declared version", None, {}, "5.1", B, "the pin: mainpkg of no declared version has no pair in"),
        ("--with wins over the pair", "1.9", {"side": "5.1"}, "5.1", B, "--with"),
    ]
)
def test_choose(_, base_version, chosen, version, digest, why):
    loaded = _load()
    (companion,) = companions.choose(loaded, loaded.target("main"), base_version, chosen)
    assert (companion.version, companion.target.sha256, companion.target.name) == (version, digest, "side")
    assert companion.why.startswith(why)
    # the companion target keeps everything but the release judged
    assert companion.target.patch_dir == loaded.target("side").patch_dir


def test_a_release_whose_hash_the_manifest_lacks(loaded):
    with pytest.raises(SeriesError, match=r"side-pkg 4\.9: its sdist's sha256 is not in the manifest; add it to"):
        companions.choose(loaded, loaded.target("main"), "2.0", {"side": "4.9"})
    asked = []
    (companion,) = companions.choose(
        loaded, loaded.target("main"), "2.0", {"side": "4.9"}, sha256_for=lambda t, v: asked.append(v) or "d" * 64
    )
    assert (companion.target.sha256, asked) == ("d" * 64, ["4.9"])


@parameterized.expand(
    [
        (["side"], "bad --with 'side': use NAME==VERSION"),
        (["side=="], "bad --with 'side==': use NAME==VERSION"),
        (["torch==2.13.0"], "--with torch==2.13.0: torch is not a companion of the targets verified (side)"),
        (["side==five"], "--with side==five: 'five' is not a release version"),
        (["side==5.0", "side==5.1"], "--with names side twice (5.0 and 5.1)"),
    ]
)
def test_bad_with_is_one_error(texts, message):
    loaded = _load()
    with pytest.raises(SeriesError) as error:
        companions.parse_with(texts, loaded, [loaded.target("main")])
    assert str(error.value).startswith(message)


def test_with(loaded):
    assert companions.parse_with(["side == 5.0", "side==5.0"], loaded, [loaded.target("main")]) == {"side": "5.0"}
    assert companions.parse_with(None, loaded, [loaded.target("main")]) == {}
    # a target that has no companions takes none
    with pytest.raises(SeriesError, match="side is not a companion of the targets verified"):
        companions.parse_with(["side==5.0"], loaded, [loaded.target("side")])


@parameterized.expand(
    [
        (
            "side.releases",
            '[targets.side.releases]\n"5.1" = "' + C + '"\n',
            "is not a release version other than the pin",
        ),
        ("side.releases", '[targets.side.releases]\n"5.0" = "xyz"\n', "the sha256 is not 64 lowercase hex digits"),
        ("main.companions", '[targets.main.companions]\n"2.0" = { other = "1.0" }\n', "which is not in verify_with"),
        ("main.companions", '[targets.main.companions]\n"2.0" = { side = "4.0" }\n', "neither the pin nor in"),
    ]
)
def test_bad_tables(table, replacement, message):
    text = re.sub(rf"\[targets\.{re.escape(table)}\]\n(\"[^\n]*\n)+", "", MANIFEST, count=1)
    with pytest.raises(SeriesError, match=re.escape(message)):
        _load(text + "\n" + replacement)


def test_the_verdict_names_its_world():
    found = Verification(info={"python": "3.11.7", "torch": "2.13.0+cpu", "pytest": "9.2.0", "ruff": "0.14.10"})
    found.targets = [
        {
            "name": "transformers",
            "base": {"version": "5.24.0", "describe": "x"},
            "with": [{"name": "accelerate", "version": "1.15.0"}],
        },
        {"name": "accelerate", "base": {"version": "1.16.0", "describe": "y"}, "with": []},
    ]
    assert (
        judged(found) == "transformers 5.24.0 + accelerate 1.15.0 + accelerate 1.16.0, torch 2.13.0+cpu, Python 3.11.7"
    )
    versions = tools(found, found.info)
    # the accelerate the transformers patches ran with is the one named
    assert (versions["transformers"], versions["accelerate"], versions["torch"]) == ("5.24.0", "1.15.0", "2.13.0+cpu")


@parameterized.expand(
    [
        (
            '"1.9" = [{ patch = "0001-x.patch", reason = "r" }]',
            "each entry is { patch, reason } with a patch of the list",
        ),
        ('"one" = [{ patch = "0001-a.patch", reason = "r" }]', "'one' is not a release version"),
        ('"1.9" = [{ patch = "0001-a.patch", reason = "" }]', "the reason must be one line"),
        ('"1.9" = []', "must map to a list of { patch, reason } tables"),
    ]
)
def test_bad_backports(entry, message):
    text = MANIFEST.replace("patches = []\nverify_with", 'patches = ["0001-a.patch"]\nverify_with', 1)
    with pytest.raises(SeriesError, match=re.escape(message)):
        _load(text + "\n[targets.main.backports]\n" + entry + "\n")


def test_backports():
    text = MANIFEST.replace("patches = []\nverify_with", 'patches = ["0001-a.patch"]\nverify_with', 1)
    loaded = _load(text + '\n[targets.main.backports]\n"1.9" = [{ patch = "0001-a.patch", reason = " why " }]\n')
    assert loaded.target("main").backports == {"1.9": {"0001-a.patch": "why"}}
