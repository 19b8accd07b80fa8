"""`pr`: the title and body of an upstream pull request for one patch, in the upstream template."""

import sys
from pathlib import Path

from seriesfixtures import GOOD, one_error_line


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

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

Fixes #123"""

# A second target whose repository is on GitHub: `other#12` in the message links to it.
EXTRA = """\
reviewers = ["@SunMarc"]

[targets.other]
package = "other"
version = "1.0"
sha256 = "%s"
git_url = "https://github.com/huggingface/other.git"
tests = "tests/"
patches = []
""" % ("0" * 64)


def _pr(fake, *args):
    proc = fake.ok("pr", *args)
    title, blank, *body = proc.stdout.rstrip("\n").split("\n")
    assert blank == ""
    return title, "\n".join(body), proc.stderr


def test_pr_title_and_body(fake, test_python):
    names = fake.build_series((*GOOD, MESSAGE), extra=EXTRA)
    title, body, err = _pr(fake, "0001")
    assert title == "core: make add() add"
    sections = [line for line in body.splitlines() if line.startswith("#")]
    assert sections == ["# What does this PR do?", "## Tests", "## Before submitting", "## Who can review?"]
    # Paragraphs and list items are unwrapped (GitHub shows every newline), the table keeps its layout.
    assert "\nadd() subtracted its arguments. Measured on fakepkg 1.0:\n" in body
    assert "\n```\n               result\nadd(2, 3)      -1\nadd(0, 0)      0\n```\n" in body
    assert "\n- it now adds, as its docstring says;\n- nothing else changes (seen with " in body
    assert "(seen with huggingface/other#12 and huggingface/trl#7)." in body
    # The Fixes line moves after the description, once.
    assert body.count("Fixes #123") == 1
    assert body.index("checks both calls.\n\nFixes #123\n\n## Tests") > 0
    assert "\n```bash\npython -m pytest -v tests/regress/test_add.py\n```\n" in body
    assert "- [x] Was this discussed/approved via a GitHub issue" in body
    assert "- [x] Did you write any new necessary tests?" in body
    assert "- [ ] Did you read the [contributor guideline](https://example.invalid/fakepkg/blob/main/" in body
    assert body.endswith("## Who can review?\n\n@SunMarc")
    assert "Checked on" not in body and "no verify result for " + names[0] in err

    # After a verify run, its result for the patch goes into the Tests section.
    fake.ok("verify", "--python", test_python, "--target", "fake")
    _, body, err = _pr(fake, names[0])
    assert "\nChecked on the fakepkg 1.0 release, CPU, torch " in body
    assert (
        ": without the code change 1 of 2 new tests fail; with it 2 pass; `ruff check` and "
        "`ruff format --check` are clean on the changed files.\n\n## Before submitting" in body
    )
    assert err == ""

    # A result for another version of the patch is not used.
    patch = fake.patches_dir / "fake" / names[0]
    patch.write_text(patch.read_text(encoding="utf-8").replace("Measured on", "Seen on"), encoding="utf-8")
    _, body, err = _pr(fake, "0001-core-make-add-add")
    assert "Checked on" not in body and "is for another version of the patch" in err


def test_pr_without_fixes_or_reviewers(fake):
    fake.build_series(GOOD)
    _, body, _ = _pr(fake, "0001")
    assert "Fixes" not in body and "## Who can review?" not in body
    assert "- [ ] Was this discussed/approved via a GitHub issue" in body
    assert body.endswith("- [x] Did you write any new necessary tests?")


def test_unknown_patch_is_one_error_line(fake):
    fake.build_series(GOOD)
    assert "unknown patch '0002' for fake" in one_error_line(fake.run("pr", "0002"))
    assert "unknown target 'nope'" in one_error_line(fake.run("pr", "0001", "--target", "nope"))
    assert "the following arguments are required: NAME" in one_error_line(fake.run("pr"))


def test_markdown_of_a_commit_message():
    text = "One\ntwo.\n\n1. first\n   item\n2. second\n\n    $ cmd --flag\n    output\n\nSee other#3."
    assert pr.to_markdown(text, {"other": "org/other"}) == (
        "One two.\n\n1. first item\n2. second\n\n```\n$ cmd --flag\noutput\n```\n\nSee org/other#3."
    )
    assert pr.split_fixes("Body.\n\nFixes #1\nCloses: org/x#2\n") == ("Body.", ["#1", "org/x#2"])
    assert pr.github_repo("https://github.com/huggingface/transformers.git") == "huggingface/transformers"
    assert pr.github_repo("https://example.invalid/x.git") is None
