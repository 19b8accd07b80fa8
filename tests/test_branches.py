"""`branches`: one branch per patch in a user's clone, each holding only its patch (and what it depends on),
placed as `verify` places it; all or nothing; and `checkout --base` builds a base the way verify judged it."""

import json

import pytest
from seriesfixtures import GOOD, TRUNCATE, VERSION, apply_changes, git, one_error_line, repo_state


# Changes `def mul`: with upstream's reordered `return b * a` below it, it goes in with a 3-way merge.
MUL_DEFAULT = (
    "core: give mul() a default factor",
    {
        "src/fakepkg/core.py": ("def mul(a, b):", "def mul(a, b=1):"),
        "tests/regress/test_mul_default.py": (
            "from fakepkg.core import mul\n\n\ndef test_mul_default():\n    assert mul(4) == 4\n"
        ),
    },
)
BRANCHES = {
    "trainer-series/core-make-add-add": "0001",
    "trainer-series/core-truncate-add": "0002",
    "trainer-series/fakepkg-add-version": "0003",
}


def _series_with_a_dependency(fake):
    names = fake.build_series(GOOD, TRUNCATE, VERSION)
    with open(fake.manifest, "a", encoding="utf-8") as fh:
        fh.write(f'\n[targets.fake.depends]\n"{names[1]}" = ["{names[0]}"]\n')
    return names


def _branches(repo):
    """{branch: commits on top of main} of the branches `branches` makes."""
    out = git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/trainer-series")
    return {name: int(git(repo, "rev-list", "--count", f"main..{name}")) for name in out.splitlines()}


def _state(repo):
    state = repo_state(repo)
    del state["branches"]
    return state


@pytest.mark.quick
def test_one_branch_per_patch_and_a_dependent_one_holds_its_dependency(fake):
    _series_with_a_dependency(fake)
    repo = fake.upstream_repo(fake.root / "fork")
    git(repo, "config", "user.name", "Fork Owner")
    git(repo, "config", "user.email", "owner@example.com")
    before = _state(repo)
    proc = fake.ok("branches", "--repo", str(repo))
    assert _branches(repo) == dict(zip(BRANCHES, [1, 2, 1], strict=True))
    assert _state(repo) == before  # HEAD, branch, files and status are left alone
    # The dependent branch holds exactly the first patch's branch, then its own patch.
    assert git(repo, "rev-parse", "trainer-series/core-truncate-add~1") == git(
        repo, "rev-parse", "trainer-series/core-make-add-add"
    )
    assert git(repo, "log", "--format=%s", "main..trainer-series/core-truncate-add").splitlines() == [
        "core: truncate add()",
        "core: make add() add",
    ]
    assert git(repo, "show", "trainer-series/fakepkg-add-version:src/fakepkg/core.py").count("return a - b") == 1
    # Before: authored as in the patch (the series' identity). Now by the clone's user, who also commits them.
    assert git(repo, "log", "-1", "--format=%an|%cn", "trainer-series/core-make-add-add") == "Fork Owner|Fork Owner"
    out = proc.stdout
    assert out.splitlines()[0].endswith(": 3 made, 0 moved, 0 unchanged")
    for branch, number in BRANCHES.items():
        assert f"  {number}   {branch}" in out
        assert f"--head <you>:{branch} " in out and f"pr {number} --target fake > /tmp/pr-fake-{number}.md" in out
    assert f"push --force-with-lease origin {' '.join(BRANCHES)}" in out
    assert "holds 0001 under 0002 (depends)" in out and "nothing was pushed" in out
    # Before: every pull request was opened ready for review. The one that carries another's commit is a draft that
    # names the branch it carries; the others are not.
    creates = {line.split("--head <you>:")[1].split()[0]: line for line in out.splitlines() if "gh pr create" in line}
    assert set(creates) == set(BRANCHES)
    assert "--draft" in creates["trainer-series/core-truncate-add"]
    assert "--draft" not in creates["trainer-series/core-make-add-add"]
    assert "--draft" not in creates["trainer-series/fakepkg-add-version"]
    assert (
        "  # a draft: trainer-series/core-truncate-add carries the commits of trainer-series/core-make-add-add; mark "
        "it ready once they are merged\n  gh pr create --repo " in out
    )
    assert "left out" not in out

    # Running it again changes nothing; after the base moves, it moves every branch.
    again = fake.ok("branches", "--repo", str(repo))
    assert again.stdout.splitlines()[0].endswith(": 0 made, 0 moved, 3 unchanged")
    tips = {branch: git(repo, "rev-parse", branch) for branch in BRANCHES}
    apply_changes(repo, {"README.md": ("A fake upstream", "A moved upstream")})
    git(repo, "commit", "--quiet", "-am", "upstream moves on")
    moved = fake.ok("branches", "--repo", str(repo))
    assert moved.stdout.splitlines()[0].endswith(": 0 made, 3 moved, 0 unchanged")
    assert _branches(repo) == dict(zip(BRANCHES, [1, 2, 1], strict=True))
    assert all(git(repo, "rev-parse", branch) != tip for branch, tip in tips.items())


def test_a_branch_that_is_not_ours_or_has_new_commits_is_not_moved(fake):
    _series_with_a_dependency(fake)
    repo = fake.upstream_repo(fake.root / "fork")
    git(repo, "branch", "trainer-series/fakepkg-add-version")  # the user's own branch of that name
    before = repo_state(repo)
    line = one_error_line(fake.run("branches", "--repo", str(repo)))
    assert "branch trainer-series/fakepkg-add-version" in line and "was not made by `branches`" in line
    assert repo_state(repo) == before  # not even the other two branches were made

    git(repo, "branch", "-D", "trainer-series/fakepkg-add-version")
    fake.ok("branches", "--repo", str(repo))
    # A commit of the user's on one of the branches: the next run leaves everything alone.
    git(repo, "switch", "--quiet", "trainer-series/core-make-add-add")
    apply_changes(repo, {"README.md": ("A fake upstream", "Review comments addressed in")})
    git(repo, "commit", "--quiet", "-am", "address review")
    git(repo, "switch", "--quiet", "main")
    apply_changes(repo, {"README.md": ("A fake upstream", "A moved upstream")})
    git(repo, "commit", "--quiet", "-am", "upstream moves on")
    before = repo_state(repo)
    line = one_error_line(fake.run("branches", "--repo", str(repo)))
    assert "trainer-series/core-make-add-add" in line and "'commit: address review'" in line
    assert repo_state(repo) == before


def test_a_dirty_clone_or_an_unknown_ref_is_refused(fake):
    _series_with_a_dependency(fake)
    repo = fake.upstream_repo(fake.root / "fork")
    (repo / "notes.txt").write_text("mine\n", encoding="utf-8")
    before = repo_state(repo)
    assert "has uncommitted changes or untracked files (notes.txt" in one_error_line(
        fake.run("branches", "--repo", str(repo))
    )
    assert repo_state(repo) == before
    (repo / "notes.txt").unlink()
    assert "'nope' is not a commit in" in one_error_line(
        fake.run("branches", "--repo", str(repo), "--base-ref", "nope")
    )
    assert _branches(repo) == {}


def test_a_patch_that_does_not_apply_gets_no_branch_and_the_others_are_made(fake):
    _series_with_a_dependency(fake)
    repo = fake.upstream_repo(fake.root / "fork")
    # Upstream rewrote the line the first patch changes, still wrong: it conflicts (and verify would say so).
    apply_changes(repo, {"src/fakepkg/core.py": ("return a - b", "return -(b - a)")})
    git(repo, "commit", "--quiet", "-am", "upstream rewrites add()")
    before = _state(repo)
    killed = fake.work / "branches" / ".fake.abcd1234" / "repo"  # left by a run that was killed
    killed.mkdir(parents=True)
    proc = fake.run("branches", "--repo", str(repo))
    # Before: one conflict blocked every branch (exit 2, none made). Now the third patch gets its branch, the first
    # is listed with its conflict, and the second, which depends on it, as blocked by it: exit 1.
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert _branches(repo) == {"trainer-series/fakepkg-add-version": 1}
    out = proc.stdout
    assert out.splitlines()[0].endswith(": 1 made, 0 moved, 0 unchanged")
    assert "no branch for 0001-core-make-add-add.patch: conflict: src/fakepkg/core.py: content differs" in out
    assert "no branch for 0002-core-truncate-add.patch: blocked by 0001 (conflict)\n" in out
    # No verify on this base yet: it is the next step (it tells a conflict from a fix upstream).
    assert "no branch for 0001 (conflict): `verify --target fake --base path:" in out
    assert "push --force-with-lease origin trainer-series/fakepkg-add-version\n" in out
    assert _state(repo) == before  # HEAD, branch and files are left alone
    assert not list((fake.work / "branches").iterdir())  # no scratch clone left behind, nor the old one
    record = json.loads((fake.work / "reports" / "branches-fake.json").read_text(encoding="utf-8"))
    assert record["base"] == git(repo, "rev-parse", "HEAD") and list(record["branches"]) == [
        "0003-fakepkg-add-__version__.patch"
    ]


def test_a_base_verify_passes_checkout_and_branches_build_as_verify_judged(fake, test_python):
    """A base where one patch is already upstream, one merges 3-way and one was fixed upstream differently:
    verify passes it, and checkout and branches leave out the same patches."""
    names = fake.build_series(GOOD, MUL_DEFAULT, VERSION)
    upstream = fake.upstream_repo(fake.root / "upstream")
    git(upstream, "am", "--quiet", str(fake.patches_dir / "fake" / names[2]))
    apply_changes(upstream, {"src/fakepkg/core.py": ("return a - b", "return sum((a, b))")})
    apply_changes(upstream, {"src/fakepkg/core.py": ("    return a * b\n", "    return b * a\n")})
    git(upstream, "commit", "--quiet", "-am", "upstream fixes add() its own way and reorders mul()")
    base = f"path:{upstream}"

    # Without a verify on this base, checkout cannot know that the conflict is a fix upstream.
    line = one_error_line(fake.run("checkout", "--dir", str(fake.root / "co"), "--base", base))
    assert f"patch {names[0]} does not apply" in line and f"`verify --target fake --base {base}` finds out" in line

    report = fake.root / "report.json"
    proc = fake.run("verify", "--python", test_python, "--target", "fake", "--base", base, "--json", str(report))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    statuses = [p["base_status"] for p in json.loads(report.read_text(encoding="utf-8"))["patches"]]
    assert statuses == ["fixed-differently", "3-way", "already-upstream"]

    dest = fake.root / "co"
    proc = fake.ok("checkout", "--dir", str(dest), "--base", base)
    assert git(dest, "log", "--format=%s", "series/base..HEAD").splitlines() == ["core: give mul() a default factor"]
    assert f"left out {names[0]}: fixed upstream differently, as the verify of 20" in proc.stderr
    assert f"left out {names[2]}: already upstream" in proc.stderr
    assert "+ 1 patch(es) on branch patches; left out: 0001 (fixed upstream differently" in proc.stdout

    proc = fake.ok("branches", "--repo", str(upstream))
    assert _branches(upstream) == {"trainer-series/core-give-mul-a-default-factor": 1}
    assert "  0002   trainer-series/core-give-mul-a-default-factor  1        3-way    ok (20" in proc.stdout
    assert f"left out {names[0]}: fixed upstream differently" in proc.stdout
    assert f"left out {names[2]}: already upstream" in proc.stdout


def test_a_clone_on_one_of_its_pr_branches_or_a_blocking_branch_is_refused_up_front(fake):
    _series_with_a_dependency(fake)
    repo = fake.upstream_repo(fake.root / "fork")
    fake.ok("branches", "--repo", str(repo))
    # Before: run on its own PR branch, it stacked every other branch on 0001 and called 0001 already upstream.
    git(repo, "switch", "--quiet", "trainer-series/core-make-add-add")
    before = repo_state(repo)
    line = one_error_line(fake.run("branches", "--repo", str(repo)))
    assert "is trainer-series/core-make-add-add, the branch of 0001: the others would be stacked on it" in line
    assert "no branch was made or moved" in line and repo_state(repo) == before
    # Before: `apply --branch trainer-series` (user.md's example), then branches: git's `cannot lock ref`.
    git(repo, "switch", "--quiet", "main")
    for branch in list(_branches(repo)):
        git(repo, "branch", "--quiet", "-D", branch)
    git(repo, "branch", "trainer-series")
    before = repo_state(repo)
    line = one_error_line(fake.run("branches", "--repo", str(repo)))
    assert line.startswith("series: error: branch trainer-series in ") and "git branch -m trainer-series" in line
    assert repo_state(repo) == before


# A patch whose test has a local helper that the manifest declares replaced by the clone's shared test helper.
DOUBLE = (
    "core: add double()",
    {
        "src/fakepkg/core.py": (
            '"""Arithmetic with a bug."""\n',
            '"""Arithmetic with a bug."""\n\n\ndef double(a):\n    return 2 * a\n',
        ),
        "tests/regress/test_double.py": (
            "from fakepkg.core import double\n\n\ndef three():\n    return 3\n\n\n"
            "def test_double():\n    assert double(three()) == 6\n"
        ),
    },
)
HOME = (
    "from fakepkg.core import mul\n\nfrom .helpers import number_two\n\n\n"
    "def test_mul():\n    assert mul(number_two(), 3) == 6\n"
)
HOMES = """
[targets.fake.test_homes]
"tests/regress/test_add.py" = "tests/test_core.py"
"tests/regress/test_truncate.py" = "tests/test_core.py"
"tests/regress/test_double.py" = "tests/test_core.py"
"tests/regress/test_version.py" = "tests/test_version.py"

[targets.fake.shared_helpers]
module = "tests/helpers.py"
"tests/regress/test_double.py" = { three = "number_three" }
"""


@pytest.mark.quick
def test_a_clone_with_upstream_s_tests_gets_them_moved_home_in_every_commit(fake):
    names = fake.build_series(GOOD, TRUNCATE, DOUBLE, VERSION)
    with open(fake.manifest, "a", encoding="utf-8") as fh:
        fh.write(f'\n[targets.fake.depends]\n"{names[1]}" = ["{names[0]}"]\n{HOMES}')
    plain = fake.upstream_repo(fake.root / "plain")  # no home file in its tests/: today's branches
    proc = fake.ok("branches", "--repo", str(plain))
    assert "tests/regress/test_add.py" in git(
        plain, "ls-tree", "-r", "--name-only", "trainer-series/core-make-add-add"
    )
    assert (
        "holds none of upstream's test files that [targets.fake.test_homes] names: the branches add the new test"
        in (proc.stdout)
    )

    repo = fake.upstream_repo(fake.root / "fork")
    (repo / "tests" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "tests" / "helpers.py").write_text(
        "def number_two():\n    return 2\n\n\ndef number_three():\n    return 3\n", encoding="utf-8"
    )
    (repo / "tests" / "test_core.py").write_text(HOME, encoding="utf-8")
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "-m", "upstream's tests")
    proc = fake.ok("branches", "--repo", str(repo))
    out = proc.stdout
    assert "holds none of upstream's test files" not in out
    add, truncate, double = (
        "trainer-series/core-make-add-add",
        "trainer-series/core-truncate-add",
        "trainer-series/core-add-double",
    )
    assert _branches(repo) == {add: 1, truncate: 2, double: 1, "trainer-series/fakepkg-add-version": 1}
    # Before: each branch added tests/regress/test_*.py. Now its commit moves them into upstream's file.
    for branch in (add, truncate, double):
        files = git(repo, "ls-tree", "-r", "--name-only", branch).splitlines()
        assert not [f for f in files if f.startswith("tests/regress/")], (branch, files)
    assert git(repo, "show", f"{add}:tests/test_core.py") == (
        "from fakepkg.core import add, mul\n\nfrom .helpers import number_two\n\n\ndef test_mul():\n"
        "    assert mul(number_two(), 3) == 6\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_add_zero():\n    assert add(0, 0) == 0"
    )
    # the dependent branch: the dependency's commit is the same as on its own branch, then its own move on top
    assert git(repo, "rev-parse", f"{truncate}~1") == git(repo, "rev-parse", add)
    assert git(repo, "diff", "--stat", f"{add}", truncate).count("|") == 2  # the source and tests/test_core.py
    assert "def test_truncate():" in git(repo, "show", f"{truncate}:tests/test_core.py")
    assert git(repo, "log", "--format=%s|%an", f"main..{truncate}").splitlines() == [
        "core: truncate add()|Clone User",
        "core: make add() add|Clone User",
    ]
    # the declared shared helper: the local `three` is gone, upstream's `number_three` is imported the home's way
    moved = git(repo, "show", f"{double}:tests/test_core.py")
    assert "from .helpers import number_three, number_two\n" in moved
    assert "def three" not in moved and "assert double(number_three()) == 6" in moved
    # a home upstream does not have is a new file
    assert git(repo, "show", "trainer-series/fakepkg-add-version:tests/test_version.py").startswith("import fakepkg")
    assert f"{add}: its tests moved into tests/test_core.py (as `homes` writes them)" in out
    assert "trainer-series/fakepkg-add-version: its tests moved into tests/test_version.py" in out
    # the record counts each commit's lines as its branch holds them, for `pr`'s notes
    record = json.loads((fake.work / "reports" / "branches-fake.json").read_text(encoding="utf-8"))
    numstat = [line.split("\t") for line in git(repo, "diff", "--numstat", f"{add}~1", add).splitlines()]
    assert record["branches"][names[0]]["numstat"] == {path: [int(a), int(r)] for a, r, path in numstat}
    assert record["branches"][names[0]]["numstat"]["tests/test_core.py"] == [9, 1]
    again = fake.ok("branches", "--repo", str(repo))  # the same commits again
    assert again.stdout.splitlines()[0].endswith(": 0 made, 0 moved, 4 unchanged")


def test_a_branch_carries_the_upstream_test_change_its_patch_declares(fake):
    """Before: a patch that declares a change to one of upstream's tests (`upstream_tests_changed`, with its diff)
    got a branch without it, so upstream's CI would run the old assertion. Now its branch's commit carries it, and
    its message names the home its tests moved into, not the new file."""
    names = fake.build_series((*GOOD, "Tests: tests/regress/test_add.py, red without the fix."))
    diff = (
        "--- a/tests/test_core.py\n+++ b/tests/test_core.py\n@@ -4,7 +4,7 @@ from .helpers import number_two\n"
        " \n \n def test_mul():\n-    assert mul(number_two(), 3) == 6\n+    assert mul(3, number_two()) == 6\n"
        " \n \n def test_one():\n"
    )
    (fake.patches_dir / "mul.diff").write_text(diff, encoding="utf-8")
    text = fake.manifest.read_text(encoding="utf-8").replace(
        "\npatches = [", '\nupstream_tests = ["tests/test_core.py"]\npatches = [', 1
    )
    text += HOMES.replace('"tests/regress/test_double.py" = { three = "number_three" }\n', "")
    text += f'\n[targets.fake.upstream_tests_changed]\n"{names[0]}" = [{{ test = "tests/test_core.py::test_mul", '
    text += 'reason = "it asserts the old order", diff = "mul.diff" }]\n'
    fake.manifest.write_text(text, encoding="utf-8")
    repo = fake.upstream_repo(fake.root / "fork")
    (repo / "tests" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "tests" / "helpers.py").write_text("def number_two():\n    return 2\n", encoding="utf-8")
    (repo / "tests" / "test_core.py").write_text(HOME + "\n\ndef test_one():\n    assert 1\n", encoding="utf-8")
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "-m", "upstream's tests")
    proc = fake.ok("branches", "--repo", str(repo))
    home = git(repo, "show", "trainer-series/core-make-add-add:tests/test_core.py")
    assert "    assert mul(3, number_two()) == 6\n" in home and "def test_add():" in home, proc.stdout + proc.stderr
    message = git(repo, "log", "-1", "--format=%B", "trainer-series/core-make-add-add")
    assert message.endswith("Tests: tests/test_core.py, red without the fix."), message


# A repository check declared for GOOD; the Makefile of a clone of upstream has a `check-repo` target (in upstream's
# style: each `utils/check_*.py` script run as `-python ...`).
REPO_CHECK = (
    '[targets.fake.repo_checks]\n"{}" = [{{ make_target = "check-repo", command = "python utils/check_add.py" }}]\n'
)
MAKEFILE = (
    ".PHONY: check-repo fix-repo\n\n"
    "check-repo:\n"
    "\truff check src tests\n"
    "\t-python utils/check_copies.py\n"
    "\t-python utils/check_repo.py\n"
    "\t-python utils/add_dates.py --check-only\n"
    "\n\n"
    "fix-repo:\n"
    "\t-python utils/check_copies.py --fix_and_overwrite\n"
)
# The CI's repository-consistency job (upstream's .circleci/config.yml: the gate, `- run:` steps)
CI_CONFIG = (
    "jobs:\n"
    "    check_repository_consistency:\n"
    "        steps:\n"
    "            - checkout\n"
    "            - run: python utils/check_copies.py\n"
    "            - run: python utils/check_repo.py\n"
    "            - run: python utils/update_metadata.py --check-only\n"
)


def _series_with_a_repo_check(fake, extra=""):
    names = fake.build_series(GOOD, TRUNCATE, VERSION)
    with open(fake.manifest, "a", encoding="utf-8") as fh:
        fh.write(f'\n[targets.fake.depends]\n"{names[1]}" = ["{names[0]}"]\n\n' + REPO_CHECK.format(names[0]) + extra)
    return names


def _notes(text):
    """The submitter's notes of a `pr` body, unwrapped (one space between words)."""
    return " ".join(text.split("<!--", 1)[1].split("-->", 1)[0].split())


@pytest.mark.quick
def test_a_clone_with_the_makefile_gets_the_repo_check_line_in_the_pr_commit(fake):
    """Before: the branch of a patch that adds a repository check (`utils/check_*.py`) left upstream's Makefile alone,
    so `make check-repo` never ran it. Now its commit adds exactly the line, in the target's style, after its last
    check line, keeping the commit's author, date and message."""
    names = _series_with_a_repo_check(
        fake, HOMES.replace('"tests/regress/test_double.py" = { three = "number_three" }\n', "")
    )
    repo = fake.upstream_repo(fake.root / "fork")
    (repo / "Makefile").write_text(MAKEFILE, encoding="utf-8")
    (repo / ".circleci").mkdir()
    (repo / ".circleci" / "config.yml").write_text(CI_CONFIG, encoding="utf-8")
    (repo / "tests" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "tests" / "helpers.py").write_text("def number_two():\n    return 2\n", encoding="utf-8")
    (repo / "tests" / "test_core.py").write_text(HOME, encoding="utf-8")
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "-m", "upstream's Makefile and tests")
    proc = fake.ok("branches", "--repo", str(repo))
    add, truncate = "trainer-series/core-make-add-add", "trainer-series/core-truncate-add"
    assert _branches(repo) == {add: 1, truncate: 2, "trainer-series/fakepkg-add-version": 1}
    # its tests moved home in the same commit (a clone of upstream)
    assert git(repo, "show", "--format=", "--name-only", add).splitlines() == [
        ".circleci/config.yml",
        "Makefile",
        "src/fakepkg/core.py",
        "tests/test_core.py",
    ]
    # the PR's own commit holds the Makefile hunk: one line added, after utils/check_repo.py, with its `-`
    assert git(repo, "show", "--format=", "--numstat", add, "--", "Makefile") == "1\t0\tMakefile"
    assert git(repo, "show", f"{add}:Makefile") == MAKEFILE.replace(
        "\t-python utils/check_repo.py\n", "\t-python utils/check_repo.py\n\t-python utils/check_add.py\n"
    ).rstrip("\n")
    # and the CI's gate: a `- run:` step after its last check step, at its indentation
    assert git(repo, "show", f"{add}:.circleci/config.yml") == CI_CONFIG.replace(
        "- run: python utils/check_repo.py\n",
        "- run: python utils/check_repo.py\n            - run: python utils/check_add.py\n",
    ).rstrip("\n")
    patch_date = git(fake.checkout_dir, "log", "-1", "--format=%ad", "--date=raw", "HEAD~2")
    assert git(repo, "log", "-1", "--format=%an|%ad|%cd|%B", "--date=raw", add) == (
        f"Clone User|{patch_date}|{patch_date}|core: make add() add\n\nWhy and how."
    )
    # the dependent branch holds that same commit under its own; the branches of the others leave the Makefile alone
    assert git(repo, "rev-parse", f"{truncate}~1") == git(repo, "rev-parse", add)
    assert git(repo, "diff", "--name-only", add, truncate, "--", "Makefile") == ""
    assert git(repo, "diff", "--name-only", "main", "trainer-series/fakepkg-add-version", "--", "Makefile") == ""
    assert (
        f'{add}: its commit adds "-python utils/check_add.py" to the check-repo target of the Makefile (after '
        '"-python utils/check_repo.py")' in proc.stdout
    )
    record = json.loads((fake.work / "reports" / "branches-fake.json").read_text(encoding="utf-8"))
    assert record["branches"][names[0]]["repo_checks"][0]["added"] is True
    assert record["branches"][names[1]]["repo_checks"] == []
    notes = _notes(fake.ok("pr", "0001").stdout)
    assert (
        f"Branch {add} (`series.py branches`) adds the line `-python utils/check_add.py` to the `check-repo` target "
        'of the Makefile (after "-python utils/check_repo.py"), where upstream runs its repository checks' in notes
    )
    assert "Makefile (its repository checks: see below) +1" in notes
    assert ".circleci/config.yml (its repository checks: see below) +1" in notes
    assert (
        f"Branch {add} also adds the step `- run: python utils/check_add.py` to the CI's repository-consistency job "
        '(.circleci/config.yml), after "- run: python utils/check_repo.py": the gate' in notes
    )
    assert "check-repo" not in _notes(fake.ok("pr", "0002").stdout)
    # a second run makes the same commits
    again = fake.ok("branches", "--repo", str(repo))
    assert again.stdout.splitlines()[0].endswith(": 0 made, 0 moved, 3 unchanged")


def test_a_clone_without_the_makefile_gets_its_branch_and_the_notes_give_the_line_to_add(fake):
    """A clone without a Makefile (a fork of the sdist): the branch is made as before and `pr` tells the submitter the
    line to add by hand, and where; so it does before `branches` made the branch."""
    names = _series_with_a_repo_check(fake)
    before = _notes(fake.ok("pr", "0001").stdout)
    assert "`series.py branches` has made no branch for it. Add it to the pull request's commit by hand" in before
    repo = fake.upstream_repo(fake.root / "fork")
    proc = fake.ok("branches", "--repo", str(repo))
    add = "trainer-series/core-make-add-add"
    assert _branches(repo)[add] == 1
    assert "Makefile" not in git(repo, "ls-tree", "-r", "--name-only", add)
    assert (
        f'{add}: "-python utils/check_add.py" is not in the check-repo target of the Makefile: the clone has no '
        "Makefile at its root (`pr 0001` says where to add it by hand)" in proc.stdout
    )
    record = json.loads((fake.work / "reports" / "branches-fake.json").read_text(encoding="utf-8"))
    assert record["branches"][names[0]]["repo_checks"][0]["why"] == "the clone has no Makefile at its root"
    notes = _notes(fake.ok("pr", "0001").stdout)
    assert (
        f"`series.py branches` could not add it to branch {add}: the clone has no Makefile at its root. Add it to "
        "the pull request's commit by hand: in the Makefile at the repository root, in the recipe of `check-repo:`, "
        "after its last `python utils/check_*.py` line" in notes
    )
    assert "(a tab, then the command): -python utils/check_add.py then `git add Makefile && git commit" in notes
    assert (
        "could not add it: the clone has no .circleci/config.yml. Add by hand, after its last `- run: python "
        "utils/check_*.py` step, at its indentation: `- run: python utils/check_add.py`." in notes
    )
