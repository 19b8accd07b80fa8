"""`pr`: the upstream pull request text for one patch: the target repository's current template, nothing
ticked, and notes for the submitter (in an HTML comment) instead of a description in their name."""

import re
import sys
import tomllib
from pathlib import Path

import pytest
from seriesfixtures import GOOD, REPO_ROOT, TRUNCATE, one_error_line


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from seriestool import prtemplate  # noqa: E402
from seriestool.commands import pr  # noqa: E402


MESSAGE = """\
add() subtracted its arguments. Measured on
fakepkg 1.0:

                 result
  add(2, 3)      -1
  add(0, 0)      0

- it now adds, as its docstring
  says;
- nothing else changes (seen with
  other#12 and huggingface/trl#7).

tests/regress/test_add.py checks both calls.

Behaviour change: add() adds.

Fixes #123"""

# A second target whose repository is on GitHub: `other#12` in the message links to it.
OTHER = """
[targets.other]
package = "other"
version = "1.0"
sha256 = "%s"
git_url = "https://github.com/huggingface/other.git"
tests = "tests/"
patches = []
""" % ("0" * 64)


def _upstream(fake, repo, reviewers):
    """Point the fixture target at an upstream repository on GitHub, with reviewers."""
    text = fake.manifest.read_text(encoding="utf-8")
    text = text.replace("https://example.invalid/fakepkg.git", f"https://github.com/{repo}.git")
    text = text.replace('tests = "tests/regress/"\n', f'tests = "tests/regress/"\nreviewers = {reviewers}\n', 1)
    fake.manifest.write_text(text, encoding="utf-8")


def _pr(fake, *args):
    proc = fake.ok("pr", *args)
    title, blank, *body = proc.stdout.rstrip("\n").split("\n")
    assert blank == ""
    return title, "\n".join(body), proc.stderr


def _visible(body):
    """What GitHub shows of a body: without its HTML comments."""
    return re.sub(r"<!--.*?-->", "", body, flags=re.DOTALL)


def _notes(body):
    match = re.search(r"\n<!--\nNOTES FOR THE SUBMITTER(.*?)\n-->\n", body, flags=re.DOTALL)
    assert match, body
    return match.group(1)


def test_pr_follows_the_transformers_template_and_writes_no_description(fake, test_python):
    names = fake.build_series((*GOOD, MESSAGE), extra=OTHER)
    _upstream(fake, "huggingface/transformers", '["@SunMarc"]')
    title, body, err = _pr(fake, "0001")
    assert title == "core: make add() add"
    sections = [line for line in body.splitlines() if line.startswith("#")]
    assert sections == [
        "# What does this PR do?",
        "## Code Agent Policy",
        "## Before submitting",
        "## Who can review?",
    ]
    # Nothing is ticked, the policy box least of all.
    assert "[x]" not in body.lower()
    assert "\n- [ ] I confirm that this is not a pure code agent PR.\n" in body
    boxes = [line for line in body.splitlines() if line.startswith("- [ ] ")]
    assert len(boxes) == 6 and "[tests](https://huggingface.co/docs/transformers/testing)" in boxes[-1]
    # No sentence of the commit message shows as the description: it is in the notes, in a comment.
    visible = _visible(body)
    assert "subtracted" not in visible and "docstring" not in visible
    assert visible.count("Fixes #123") == 1 and body.index("-->\n\nFixes #123\n\n## Code Agent Policy") > 0
    assert body.endswith("## Who can review?\n\ntrainer: @SunMarc")
    notes = _notes(body)
    words = " ".join(notes.split())
    assert "huggingface/transformers has a Code Agent Policy (below)" in words
    assert "whose description is AI-written" in words
    assert "in your own words" in words and "Delete this comment before you submit." in words
    assert "  src/fakepkg/core.py              +1 -1\n  tests/regress/test_add.py (new)  +9 -0" in notes
    assert (
        "The before/after its commit message measured:\n  add() subtracted its arguments. Measured on\n"
        "  fakepkg 1.0:\n\n                   result\n    add(2, 3)      -1\n    add(0, 0)      0\n" in notes
    )
    assert "The behaviour change its commit message states:\n  Behaviour change: add() adds.\n" in notes
    assert "It says it fixes #123" in notes and "huggingface/other#12, huggingface/trl#7, #123" in notes
    assert "  python -m pytest -v tests/regress/test_add.py\n  No verify result for this patch yet" in notes
    assert "Branch:\n  trainer-series/core-make-add-add (`series.py branches`): this patch alone" in notes
    assert "- it now adds, as its docstring\n    says;" in notes  # the rest of the message, as written
    assert "no verify result for " + names[0] in err

    # After a verify run, its red/green result is in the notes.
    fake.ok("verify", "--python", test_python, "--target", "fake")
    _, body, err = _pr(fake, names[0])
    notes = _notes(body)
    assert "Result of the verify of 20" in notes and "on the fakepkg 1.0 release alone, CPU, torch " in notes
    assert "without the code change (red): 1 of 2 tests fail (test_add)\n    with it (green): 2 pass\n" in notes
    assert "no verify result" not in err

    # A result for another version of the patch is not used.
    patch = fake.patches_dir / "fake" / names[0]
    patch.write_text(patch.read_text(encoding="utf-8").replace("Measured on", "Seen on"), encoding="utf-8")
    _, body, err = _pr(fake, "0001-core-make-add-add")
    assert "Result of the verify" not in body and "is for another version of the patch" in err


@pytest.mark.quick
def test_pr_follows_the_accelerate_template(fake):
    fake.build_series(GOOD)
    _upstream(fake, "huggingface/accelerate", '["@BenjaminBossan", "@SunMarc"]')
    _, body, _ = _pr(fake, "0001")
    sections = [line for line in body.splitlines() if line.startswith("#")]
    assert sections == ["# What does this PR do?", "## Before submitting", "## Who can review?"]
    assert "Code Agent Policy" not in body and "Fixes" not in _visible(body)
    assert "accelerate/blob/main/CONTRIBUTING.md#submitting-a-pull-request-pr), Pull Request section?" in body
    assert body.endswith("## Who can review?\n\nCore parts of the library: @BenjaminBossan @SunMarc")
    assert "NOTES FOR THE SUBMITTER" in body and "[x]" not in body


def test_reviewers_the_template_does_not_name_are_a_warning(fake):
    fake.build_series(GOOD)
    _upstream(fake, "huggingface/accelerate", '["@someone"]')
    proc = fake.ok("pr", "0001")
    assert proc.stdout.endswith("Core parts of the library: @someone\n")
    assert "its template names Core parts of the library: @BenjaminBossan @SunMarc" in proc.stderr


def test_the_manifest_names_the_reviewers_of_each_template():
    manifest = tomllib.loads((REPO_ROOT / "patches" / "series.toml").read_text(encoding="utf-8"))
    for table in manifest["targets"].values():
        template = prtemplate.TEMPLATES[prtemplate.github_repo(table["git_url"])]
        assert tuple(table["reviewers"]) == template.reviewers, table["package"]


def test_a_dependency_is_named_by_title_and_branch_never_by_number(fake):
    names = fake.build_series(GOOD, TRUNCATE)
    with open(fake.manifest, "a", encoding="utf-8") as fh:
        fh.write(f'\n[targets.fake.depends]\n"{names[1]}" = ["{names[0]}"]\n')
    _, body, _ = _pr(fake, "0002")
    notes = _notes(body)
    assert (
        "Dependencies:\n  The pull requests of these patches go first; name them by title in the description:\n"
        '  "core: make add() add" (branch trainer-series/core-make-add-add)\n' in notes
    )
    assert "Branch trainer-series/core-truncate-add (`series.py branches`) holds them under this patch" in notes
    assert "0001" not in body and "0002" not in body


def test_a_garbage_or_truncated_patch_is_bad_input(fake):
    names = fake.build_series(GOOD)
    patch = fake.patches_dir / "fake" / names[0]
    text = patch.read_text(encoding="utf-8")
    patch.write_text(text[: text.index("+def test_add_zero")], encoding="utf-8")
    line = one_error_line(fake.run("pr", "0001"))
    assert f"corrupt patch {names[0]} of fake: hunk 1 of tests/regress/test_add.py" in line and "cut short" in line
    patch.write_text("not a patch at all\n", encoding="utf-8")
    assert "it holds no diff" in one_error_line(fake.run("pr", "0001"))


def test_unknown_patch_is_one_error_line(fake):
    fake.build_series(GOOD)
    assert "unknown patch '0002' for fake" in one_error_line(fake.run("pr", "0002"))
    assert "unknown target 'nope'" in one_error_line(fake.run("pr", "0001", "--target", "nope"))
    assert "the following arguments are required: NAME" in one_error_line(fake.run("pr"))


def test_reading_a_commit_message():
    body = "Bug. Fixes #50212, whose other half\nwas fixed.\n\nRelated: accelerate#3, org/x#4\nCloses: org/x#2"
    assert pr.fixes(body) == ["#50212", "org/x#2"]
    assert pr.threads(body) == ["#50212", "accelerate#3", "org/x#4", "org/x#2"]
    assert pr.link_refs("See other#3 and org/other#4.", {"other": "org/other"}) == "See org/other#3 and org/other#4."
    text = "The bug.\n\nWith this change it works:\n\n  a  1\n  b  2\n\nTests: before: x, after: y."
    assert pr.measured(text) == ["With this change it works:", "  a  1\n  b  2", "Tests: before: x, after: y."]
    assert pr.measured("Bug.\n\nMeasured: 1 -> 2.\n\nTests: before: x.") == ["Measured: 1 -> 2."]
    assert prtemplate.github_repo("https://github.com/huggingface/transformers.git") == "huggingface/transformers"
    assert prtemplate.github_repo("https://example.invalid/x.git") is None


def test_notes_cannot_end_their_comment_early():
    notes = pr.Notes()
    notes.add("Odd", ["a --> b <!-- c"])
    notes.add("Empty", [])
    text = notes.comment(["intro"])
    assert text == "<!--\nintro\n\nOdd:\n  a - -> b <! -- c\n-->"


def test_branch_names_from_subjects():
    assert prtemplate.slug("Trainer: don't step the LR scheduler when a fused optimizer skips") == (
        "trainer-dont-step-the-lr-scheduler-when-a-fused-optimizer"
    )
    assert prtemplate.slug("Trainer: drop unknown keys when loading trainer_state.json") == (
        "trainer-drop-unknown-keys-when-loading-trainer-state-json"
    )
    assert prtemplate.slug("...") == "patch"
    names = prtemplate.branch_names([("a", "Fix it"), ("b", "fix: it!"), ("c", "Other")])
    assert names == {"a": "trainer-series/fix-it", "b": "trainer-series/fix-it-2", "c": "trainer-series/other"}


def test_pr_quotes_the_verify_of_the_base_its_branch_is_on(fake, test_python):
    """Before: `pr` quoted the last verify whatever its base (upstream main's commit for a branch on the release).
    Now it quotes the verify on the base `branches` put the patch's branch on (or on a commit with its files)."""
    from seriesfixtures import apply_changes, git

    fake.build_series(GOOD)
    fork = fake.upstream_repo(fake.root / "fork")  # the release's files: the sdist's tree
    fake.ok("verify", "--python", test_python)  # on the pinned sdist
    moved = fake.upstream_repo(fake.root / "main")
    apply_changes(moved, {"README.md": ("A fake upstream", "A moved upstream")})
    git(moved, "commit", "--quiet", "-am", "upstream moves on")
    commit = git(moved, "rev-parse", "HEAD")
    fake.ok("verify", "--python", test_python, "--target", "fake", "--base", f"path:{moved}")  # the last verify

    fake.ok("branches", "--repo", str(fork))
    _, body, err = _pr(fake, "0001")
    assert "on the fakepkg 1.0 release" in _notes(body) and commit[:12] not in body and "no verify" not in err

    fake.ok("branches", "--repo", str(moved))
    _, body, err = _pr(fake, "0001")
    assert f"on commit {commit[:12]}" in _notes(body).replace("\n", " ")

    apply_changes(moved, {"README.md": ("A moved upstream", "A moved-again upstream")})
    git(moved, "commit", "--quiet", "-am", "upstream moves on again")
    fake.ok("branches", "--repo", str(moved))
    _, body, err = _pr(fake, "0001")
    assert "No verify result on the base of its branch trainer-series/core-make-add-add" in _notes(body)
    assert "note: no verify result on the base of its branch" in err and "--base path:" in err


def test_the_verify_quoted_says_which_patches_were_under_it(fake, test_python):
    """Before: "verify ... on the fakepkg 1.0 release" for a patch whose tests ran on the release plus the patches
    before it. Now it says the release alone, or the release plus which patches: those it depends on (its branch
    holds them) and the others (its branch does not)."""
    from seriesfixtures import TRUNCATE, VERSION

    names = fake.build_series(GOOD, VERSION, TRUNCATE)
    with open(fake.manifest, "a", encoding="utf-8") as fh:
        fh.write(f'\n[targets.fake.depends]\n"{names[2]}" = ["{names[0]}"]\n')
    fake.ok("verify", "--python", test_python, "--target", "fake")
    first = " ".join(_notes(_pr(fake, "0001")[1]).split())
    assert "on the fakepkg 1.0 release alone, CPU" in first and "Under it" not in first
    third = " ".join(_notes(_pr(fake, "0003")[1]).split())
    assert "on the fakepkg 1.0 release plus 2 earlier patches of the series, CPU" in third
    assert 'Under it in that run, the 1 patch it depends on (its branch holds them): "core: make add() add"' in third
    assert 'and 1 patch its branch does not hold (the tests ran on the series up to it): "fakepkg: add' in third


ISSUE = "core: add() subtracts\n\nadd(2, 3) returns -1 on fakepkg 1.0.\n"
DIFF = (
    "--- a/tests/test_smoke.py\n+++ b/tests/test_smoke.py\n@@ -1,2 +1,2 @@\n def test_smoke():\n-    assert True\n"
    "+    assert 1\n"
)


def _submission_tables(fake, names, issue):
    (fake.patches_dir / "issues").mkdir()
    (fake.patches_dir / "issues" / "add.md").write_text(ISSUE, encoding="utf-8")
    (fake.patches_dir / "smoke.diff").write_text(DIFF, encoding="utf-8")
    text = fake.manifest.read_text(encoding="utf-8").replace(
        'tests = "tests/regress/"\n', 'tests = "tests/regress/"\nupstream_tests = ["tests/test_smoke.py"]\n', 1
    )
    text += f'\n[targets.fake.issues]\n"{names[0]}" = {{ {issue} }}\n'
    text += '\n[targets.fake.test_homes]\n"tests/regress/test_add.py" = "tests/test_core.py"\n'
    text += f'\n[targets.fake.upstream_tests_changed]\n"{names[0]}" = [{{ test = "tests/test_smoke.py::test_smoke", '
    text += 'reason = "it asserts the old way", diff = "smoke.diff" }]\n'
    fake.manifest.write_text(text, encoding="utf-8")


def test_the_issue_to_open_the_test_homes_and_the_upstream_test_change(fake):
    from seriesfixtures import VERSION

    """Before: a PR whose message names no issue named none, and `pr` said nothing of where its tests go upstream
    nor of the change to upstream's own test. Now each comes from the manifest, and `pr --issue` prints the issue's
    text to open first."""
    names = fake.build_series(GOOD, VERSION)
    _submission_tables(fake, names, 'text = "issues/add.md"')
    _, body, err = _pr(fake, "0001")
    notes = _notes(body)
    words = " ".join(notes.split())
    assert "No upstream issue asks for this change yet: open one first." in words
    assert "`python3 scripts/series.py pr 0001 --target fake --issue` prints a text for it (issues/add.md" in words
    assert "Where its tests go upstream:" in notes
    assert "  - tests/regress/test_add.py::(its tests) -> tests/test_core.py" in notes
    assert "  `python3 scripts/series.py homes 0001 --target fake --upstream-tests SPEC` writes\n" in notes
    assert "on a branch made otherwise, apply it with `git apply " in words
    assert str(fake.patches_dir / "smoke.diff") in words
    assert "\n  --- a/tests/test_smoke.py\n  +++ b/tests/test_smoke.py\n" in notes and "  +    assert 1\n" in notes
    # the second patch's new test file is not mapped: a warning, and the notes say so
    _, body, err = _pr(fake, "0002")
    assert "not mapped: add it to [targets.fake.test_homes]" in _notes(body)
    assert "warning: tests/regress/test_version.py: no upstream test file in [targets.fake.test_homes]" in err

    proc = fake.ok("pr", "0001", "--issue")
    assert proc.stdout == ISSUE and "the issue is yours to open" in proc.stderr
    line = one_error_line(fake.run("pr", "0002", "--issue"))
    assert f"{names[1]} of fake has no issue text to open ([targets.fake.issues]" in line

    _submission_tables_reset(fake)
    names = fake.build_series(GOOD, VERSION)
    _submission_tables(fake, names, 'issue = "#77"')
    notes = " ".join(_notes(_pr(fake, "0001")[1]).split())
    assert "It answers #77 ([targets.fake.issues] in series.toml)" in notes
    assert "it answers #77: the item on a GitHub issue or forum thread" in notes


def _submission_tables_reset(fake):
    import shutil

    shutil.rmtree(fake.patches_dir / "issues")
    (fake.patches_dir / "smoke.diff").unlink()
    fake.write_manifest()


def test_a_behaviour_change_without_an_issue_is_a_warning(fake):
    names = fake.build_series((*GOOD, MESSAGE), NO_FIXES)
    _, body, err = _pr(fake, "0002")
    assert f"warning: {names[1]} states a behaviour change but names no issue it answers" in err
    assert "names no issue it answers ([targets.fake.issues] has no entry for it)" in " ".join(_notes(body).split())
    _, body, err = _pr(fake, "0001")  # it says `Fixes #123`
    assert "names no issue" not in err + body


NO_FIXES = (
    "core: make mul() multiply twice",
    {"src/fakepkg/core.py": ("return a * b", "return a * b * 1")},
    "mul() is slower.\n\nBehaviour change: mul() multiplies twice.",
)


def test_the_manifest_upstream_test_diffs_apply_to_upstream_tests():
    """Each `diff` of [targets.*.upstream_tests_changed] applies to upstream's test file (the copy of upstream's
    tests next to this repository, when it is there) and changes the declared test."""
    import subprocess

    upstream = REPO_ROOT.parent / "shared" / "upstream-tests"
    manifest = tomllib.loads((REPO_ROOT / "patches" / "series.toml").read_text(encoding="utf-8"))
    diffs = [
        (entry["test"], entry["diff"])
        for table in manifest["targets"].values()
        for entries in table.get("upstream_tests_changed", {}).values()
        for entry in entries
        if "diff" in entry
    ]
    for test, diff in diffs:
        text = (REPO_ROOT / "patches" / diff).read_text(encoding="utf-8")
        assert f"+++ b/{test.split('::')[0]}\n" in text and "\n@@ " in text, diff
        assert len(text.splitlines()) < 60, f"{diff}: a small diff, not a copy of upstream's file"
        if (upstream / test.split("::")[0]).is_file():
            check = subprocess.run(
                ["git", "apply", "--check", str(REPO_ROOT / "patches" / diff)], cwd=upstream, capture_output=True
            )
            assert check.returncode == 0, check.stderr
