"""`apply`: all patches on a new branch of a clean clone, or nothing changed at all."""

import pytest
from seriesfixtures import GOOD, NOT_RED, STYLE, git, one_error_line, repo_state


def _lines(proc):
    return [" ".join(line.split()) for line in proc.stdout.splitlines()]


def _fork(fake, *patches):
    names = fake.build_series(*patches)
    return fake.upstream_repo(fake.root / "fork"), names


@pytest.mark.quick
def test_apply_on_a_new_branch(fake):
    fork, names = _fork(fake, GOOD, NOT_RED)
    start = git(fork, "rev-parse", "HEAD")
    proc = fake.ok("apply", "--repo", str(fork))
    assert _lines(proc) == [
        f"{names[0]} applied",
        f"{names[1]} applied",
        "branch series/fake: 2 applied, 0 already present",
    ]
    assert git(fork, "symbolic-ref", "--short", "HEAD") == "series/fake"
    assert git(fork, "log", "--format=%s", f"{start}..HEAD").splitlines() == [
        "core: document mul()",
        "core: make add() add",
    ]
    assert git(fork, "rev-parse", "main") == start
    assert git(fork, "status", "--porcelain") == ""


def test_already_present_patches_are_skipped(fake):
    fork, names = _fork(fake, GOOD, NOT_RED)
    fake.ok("apply", "--repo", str(fork), "--branch", "first")
    # On top of the result, a third patch: the first two are reported as already present.
    fake.build_series(GOOD, NOT_RED, STYLE)
    proc = fake.ok("apply", "--repo", str(fork), "--branch", "second")
    assert _lines(proc)[:3] == [
        f"{names[0]} already present",
        f"{names[1]} already present",
        "0003-core-add-sub.patch applied",
    ]
    assert git(fork, "rev-list", "--count", "first..second") == "1"


def test_conflict_rolls_back_everything(fake):
    fork, names = _fork(fake, GOOD, NOT_RED)
    # The fork changed the line the second patch touches: the first patch applies, the second conflicts.
    core = fork / "src/fakepkg/core.py"
    core.write_text(core.read_text(encoding="utf-8").replace("Multiply two numbers.", "Product."), encoding="utf-8")
    git(fork, "commit", "--quiet", "-am", "fork change")
    (fork / "ignored.log").write_text("ignored files do not count as dirty\n", encoding="utf-8")
    (fork / ".git/info/exclude").write_text("*.log\n", encoding="utf-8")
    before = repo_state(fork)
    proc = fake.run("apply", "--repo", str(fork))
    line = one_error_line(proc)
    assert f"patch {names[1]} does not apply" in line and "nothing was changed (still on main)" in line
    assert _lines(proc) == [
        f"{names[0]} applied",
        f"{names[1]} conflict (src/fakepkg/core.py)",
    ]
    assert repo_state(fork) == before
    assert not (fork / ".git/rebase-apply").exists()


def test_leave_out_conflicts_applies_the_rest(fake):
    """Before: a fork where one patch conflicts got nothing. Now `--leave-out-conflicts` applies what goes and
    names what it left out and why; nothing of the conflicting patch is kept."""
    fork, names = _fork(fake, GOOD, NOT_RED, STYLE)
    core = fork / "src/fakepkg/core.py"
    core.write_text(core.read_text(encoding="utf-8").replace("Multiply two numbers.", "Product."), encoding="utf-8")
    git(fork, "commit", "--quiet", "-am", "fork change")
    start = git(fork, "rev-parse", "HEAD")
    proc = fake.ok("apply", "--repo", str(fork), "--leave-out-conflicts")
    assert _lines(proc) == [
        f"{names[0]} applied",
        f"{names[1]} left out: conflict (src/fakepkg/core.py)",
        f"{names[2]} applied",
        "branch series/fake: 2 applied, 0 already present, 1 left out (named above)",
    ]
    made = git(fork, "log", "--format=%s", f"{start}..HEAD").splitlines()
    assert made == ["core: add sub()", "core: make add() add"]
    assert "Product." in core.read_text(encoding="utf-8") and git(fork, "status", "--porcelain") == ""


def test_a_declared_backport_is_left_out_on_its_release(fake):
    """Before: on a fork of an older release where a patch needs a declared backport, `apply` made nothing. Now
    that patch is left out there with its reason, and every other patch goes in (no option needed)."""
    fork, names = _fork(fake, GOOD, NOT_RED, STYLE)
    text = fake.manifest.read_text(encoding="utf-8")
    text += f'\n[targets.fake.backports]\n"0.9" = [{{ patch = "{names[1]}", reason = "0.9 reworded mul()" }}]\n'
    fake.manifest.write_text(text, encoding="utf-8")
    core = fork / "src/fakepkg/core.py"
    core.write_text(core.read_text(encoding="utf-8").replace("Multiply two numbers.", "Product."), encoding="utf-8")
    (fork / "src/fakepkg/__init__.py").write_text('"""A fake package."""\n\n__version__ = "0.9"\n', encoding="utf-8")
    git(fork, "commit", "--quiet", "-am", "release 0.9")
    proc = fake.ok("apply", "--repo", str(fork))
    assert _lines(proc) == [
        f"{names[0]} applied",
        f"{names[1]} left out: needs a backport to fakepkg 0.9 (declared: 0.9 reworded mul())",
        f"{names[2]} applied",
        "branch series/fake: 2 applied, 0 already present, 1 left out (named above)",
    ]


def test_conflict_on_a_detached_head(fake):
    fork, names = _fork(fake, NOT_RED)
    core = fork / "src/fakepkg/core.py"
    core.write_text(core.read_text(encoding="utf-8").replace("Multiply two numbers.", "Product."), encoding="utf-8")
    git(fork, "commit", "--quiet", "-am", "fork change")
    git(fork, "checkout", "--quiet", "--detach", "HEAD")
    before = repo_state(fork)
    one_error_line(fake.run("apply", "--repo", str(fork)))
    assert repo_state(fork) == before


@pytest.mark.parametrize(
    "path, expected",
    [("README.md", "uncommitted changes or untracked files (README.md"), ("notes.txt", "(notes.txt, 1 in all)")],
    ids=["edited", "untracked"],
)
def test_dirty_tree_is_refused(fake, path, expected):
    fork, _ = _fork(fake, GOOD)
    (fork / path).write_text("edited\n", encoding="utf-8")
    before = repo_state(fork)
    assert expected in one_error_line(fake.run("apply", "--repo", str(fork)))
    assert repo_state(fork) == before


def test_not_a_git_repository(fake):
    fake.build_series(GOOD)
    plain = fake.root / "plain"
    plain.mkdir()
    assert "is not a git repository" in one_error_line(fake.run("apply", "--repo", str(plain)))
    assert "is not a folder" in one_error_line(fake.run("apply", "--repo", str(fake.root / "missing")))


def test_existing_branch_is_refused(fake):
    fork, _ = _fork(fake, GOOD)
    git(fork, "branch", "series/fake")
    before = repo_state(fork)
    assert "branch series/fake already exists" in one_error_line(fake.run("apply", "--repo", str(fork)))
    assert repo_state(fork) == before


def test_a_branch_that_collides_with_existing_or_pr_branches_is_refused(fake):
    fork, _ = _fork(fake, GOOD)
    git(fork, "branch", "mine")
    before = repo_state(fork)
    line = one_error_line(fake.run("apply", "--repo", str(fork), "--branch", "mine/series"))
    assert "branch mine in " in line and "keeps mine/series from being made" in line
    # user.md's example name, before: fine here, then `branches` failed on git's ref lock
    line = one_error_line(fake.run("apply", "--repo", str(fork), "--branch", "trainer-series"))
    assert "would collide with the branches `branches` makes (trainer-series/...)" in line
    assert repo_state(fork) == before


def test_unknown_target(fake):
    fork, _ = _fork(fake, GOOD)
    assert "unknown target 'other'" in one_error_line(fake.run("apply", "--repo", str(fork), "--target", "other"))


def test_empty_series_changes_nothing(fake):
    fork = fake.upstream_repo(fake.root / "fork")
    before = repo_state(fork)
    proc = fake.ok("apply", "--repo", str(fork))
    assert proc.stdout.strip() == "no patches for fake: nothing to apply"
    assert repo_state(fork) == before
