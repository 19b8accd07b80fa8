"""`export`: stable bytes, stale files removed, only the target's list rewritten."""

import sys
from pathlib import Path

import pytest
from seriesfixtures import GOOD, NOT_RED, STYLE, apply_changes, git, manifest_text, one_error_line, read_patch_list


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from seriestool import manifest as manifest_mod  # noqa: E402


def _track(fake):
    """Put the fixture's patches/ folder under git so `git diff --exit-code` can judge an export."""
    git(fake.patches_dir, "init", "--quiet")
    git(fake.patches_dir, "add", "--all")
    git(fake.patches_dir, "commit", "--quiet", "-m", "exported")


def _unchanged(fake):
    assert git(fake.patches_dir, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(fake.patches_dir, "diff", "--exit-code", check=False) == ""


@pytest.mark.quick
def test_checkout_then_export_changes_no_byte(fake):
    fake.build_series(GOOD, NOT_RED, STYLE)
    _track(fake)
    fake.ok("checkout", "--replace")
    proc = fake.ok("export")
    assert "0 written, 3 unchanged, 0 removed; manifest unchanged" in proc.stdout
    _unchanged(fake)


def test_export_ignores_user_git_config(fake, tmp_path):
    fake.build_series(GOOD, NOT_RED)
    _track(fake)
    home = tmp_path / "home"
    home.mkdir()
    order = home / "order"
    order.write_text("tests/*\n", encoding="utf-8")
    (home / ".gitconfig").write_text(
        "[diff]\n\tnoprefix = true\n\tmnemonicPrefix = true\n\trenames = copies\n\talgorithm = minimal\n"
        f"\tcontext = 7\n\tindentHeuristic = false\n\torderFile = {order}\n"
        "[core]\n\tabbrev = 7\n\tquotePath = false\n"
        "[format]\n\tnumbered = true\n\tsignature = custom\n\tsignOff = true\n\tcoverLetter = true\n"
        "\theaders = X-Extra: 1\n\tsubjectPrefix = PATCH v2\n\tthread = shallow\n\tsuffix = .diff\n"
        "[color]\n\tui = always\n",
        encoding="utf-8",
    )
    env = fake.env(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    env.pop("GIT_CONFIG_GLOBAL", None)
    fake.ok("checkout", "--replace", env=env)
    # The same settings in the checkout's own config (which the tool cannot ignore) change nothing either.
    with open(fake.checkout_dir / ".git" / "config", "a", encoding="utf-8") as fh:
        fh.write((home / ".gitconfig").read_text(encoding="utf-8"))
    fake.ok("export", env=env)
    _unchanged(fake)


def test_export_follows_amends_and_drops(fake):
    fake.build_series(GOOD, NOT_RED, STYLE)
    _track(fake)
    repo = fake.checkout_dir
    # Rewrite the series: reword the first commit, drop the second.
    git(repo, "reset", "--quiet", "--hard", "series/base")
    for subject, changes in (("core: make add() really add", GOOD[1]), (STYLE[0], STYLE[1])):
        apply_changes(repo, changes)
        git(repo, "add", "--all")
        git(repo, "commit", "--quiet", "-m", subject)
    proc = fake.ok("export")
    assert "2 written, 0 unchanged, 3 removed" in proc.stdout, proc.stdout
    names = ["0001-core-make-add-really-add.patch", "0002-core-add-sub.patch"]
    assert read_patch_list(fake.manifest) == names
    assert sorted(p.name for p in (fake.patches_dir / "fake").glob("*.patch")) == names
    # A fresh checkout of the new series re-exports to the same bytes.
    git(fake.patches_dir, "add", "--all")
    git(fake.patches_dir, "commit", "--quiet", "-m", "second export")
    fake.ok("checkout", "--replace")
    fake.ok("export")
    _unchanged(fake)


def test_export_refuses_uncommitted_changes(fake):
    fake.build_series(GOOD)
    (fake.checkout_dir / "src/fakepkg/core.py").write_text("changed\n", encoding="utf-8")
    line = one_error_line(fake.run("export"))
    assert "uncommitted changes (src/fakepkg/core.py)" in line


def test_export_refuses_a_folder_that_is_not_a_checkout(fake):
    line = one_error_line(fake.run("export", "--dir", str(fake.root / "links")))
    assert "is not a git checkout" in line
    upstream = fake.upstream_repo(fake.root / "upstream")
    line = one_error_line(fake.run("export", "--dir", str(upstream)))
    assert "has no series/base tag" in line


def test_rewrite_patch_list_keeps_everything_else(tmp_path):
    path = tmp_path / "series.toml"
    other = '\n[targets.other]\n# keep me\npackage = "o"\nversion = "2"\nsha256 = "' + "1" * 64 + '"\n'
    other += 'git_url = "u"\ntests = "tests/"\npatches = ["0001-x.patch"]  # trailing\n'
    original = manifest_text("0" * 64, ["0001-old.patch"], extra=other)
    path.write_text(original, encoding="utf-8")
    manifest = manifest_mod.load(path)
    assert manifest_mod.rewrite_patch_list(manifest, "fake", ["0001-a.patch", "0002-b.patch"])
    text = path.read_text(encoding="utf-8")
    assert text == original.replace(
        'patches = [\n    "0001-old.patch",\n]', 'patches = [\n    "0001-a.patch",\n    "0002-b.patch",\n]'
    )
    assert manifest_mod.load(path).targets["other"].patches == ["0001-x.patch"]
    assert not manifest_mod.rewrite_patch_list(manifest, "fake", ["0001-a.patch", "0002-b.patch"])
    assert manifest_mod.rewrite_patch_list(manifest, "fake", [])
    assert "patches = []\n\n[targets.other]" in path.read_text(encoding="utf-8")
