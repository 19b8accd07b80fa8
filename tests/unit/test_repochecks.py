"""repochecks.py: the line that runs a repository check, placed in its target of a Makefile in its neighbours'
style, or why it cannot be."""

import pytest
from seriestool import repochecks


# The shape of upstream's root Makefile around its `check-repo` target (a few of its lines).
MAKEFILE = (
    ".PHONY: style check-repo fix-repo\n"
    "\n"
    "check_dirs := examples tests src utils\n"
    "\n"
    "# Check that the repo is in a good state\n"
    "check-repo:\n"
    "\truff check $(check_dirs) setup.py conftest.py\n"
    "\t-python utils/custom_init_isort.py --check_only\n"
    "\t-python utils/check_copies.py\n"
    "\t-python utils/check_repo.py\n"
    "\t-python utils/check_docstrings.py \n"
    "\t-python utils/add_dates.py --check-only \n"
    "\n"
    "\n"
    "fix-repo: style\n"
    "\t-python utils/check_copies.py --fix_and_overwrite\n"
)
COMMAND = "python utils/check_loss.py"


def _added(before, after):
    """The lines of `after` that `before` lacks, with their index."""
    old, new = before.splitlines(), after.splitlines()
    assert len(new) == len(old) + 1
    index = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), len(old))
    assert new[:index] + new[index + 1 :] == old
    return index, new[index]


def test_the_line_goes_after_the_target_s_last_check_line_with_its_prefix():
    placed = repochecks.place(MAKEFILE, "check-repo", COMMAND)
    assert placed.placed and not placed.present and not placed.why
    assert placed.line == "-python utils/check_loss.py"
    assert placed.after == "-python utils/check_docstrings.py"
    index, line = _added(MAKEFILE, placed.text)
    assert line == "\t-python utils/check_loss.py"
    assert MAKEFILE.splitlines()[index - 1] == "\t-python utils/check_docstrings.py "  # not after add_dates.py
    # once there, with any prefix, nothing is added
    again = repochecks.place(placed.text, "check-repo", COMMAND)
    assert again.present and again.text is None and again.line == "-python utils/check_loss.py"
    silent = MAKEFILE.replace("-python utils/check_repo.py", "@" + COMMAND)
    assert repochecks.place(silent, "check-repo", COMMAND).present


def test_another_target_takes_its_own_neighbours():
    placed = repochecks.place(MAKEFILE, "fix-repo", COMMAND)
    index, line = _added(MAKEFILE, placed.text)
    assert line == "\t-python utils/check_loss.py" and index == len(MAKEFILE.splitlines())
    # a target without such lines: after its last recipe line, in that line's style
    text = "lint:\n\t@ruff check src\n\nother:\n\techo\n"
    placed = repochecks.place(text, "lint", COMMAND)
    assert placed.text == "lint:\n\t@ruff check src\n\t@python utils/check_loss.py\n\nother:\n\techo\n"
    # a target without a recipe, last in a file without a final newline
    assert repochecks.place("lint: deps", "lint", COMMAND).text == "lint: deps\n\tpython utils/check_loss.py\n"


def test_a_continued_line_and_crlf_are_kept_whole():
    text = "check-repo:\r\n\t-python utils/check_a.py \\\r\n\t\t--flag\r\n\techo done\r\n"
    placed = repochecks.place(text, "check-repo", COMMAND)
    assert placed.text == (
        "check-repo:\r\n\t-python utils/check_a.py \\\r\n\t\t--flag\r\n"
        "\t-python utils/check_loss.py\r\n\techo done\r\n"
    )


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (None, "the clone has no Makefile at its root"),
        (MAKEFILE.replace("check-repo:", "check-all:"), "its Makefile has no `check-repo:` target"),
        ("check-repo := x\n.PHONY: check-repo\n", "its Makefile has no `check-repo:` target"),
    ],
)
def test_no_makefile_or_no_target_is_a_reason_and_the_line_to_add(text, why):
    placed = repochecks.place(text, "check-repo", COMMAND)
    assert (placed.text, placed.present, placed.placed, placed.why) == (None, False, False, why)
    assert placed.line == "-python utils/check_loss.py"  # the line `pr` asks for by hand


CI_CONFIG = (
    "jobs:\n"
    "    check_repository_consistency:\n"
    "        steps:\n"
    "            - run: python utils/check_copies.py\n"
    "            - run: python utils/check_repo.py\n"
    "            - run: python utils/update_metadata.py --check-only\n"
)


def test_the_ci_step_goes_after_the_last_check_step_at_its_indentation():
    placed = repochecks.place_ci(CI_CONFIG, COMMAND)
    index, line = _added(CI_CONFIG, placed.text)
    assert (index, line) == (5, "            - run: python utils/check_loss.py")
    assert placed.after == "- run: python utils/check_repo.py"
    again = repochecks.place_ci(placed.text, COMMAND)
    assert again.present and again.text is None


@pytest.mark.parametrize(
    ("text", "why"),
    [(None, "the clone has no .circleci/config.yml"), ("jobs: {}\n", "has no `- run: python utils/check_*.py` step")],
)
def test_no_ci_config_or_no_check_step_is_a_reason_and_the_step_to_add(text, why):
    placed = repochecks.place_ci(text, COMMAND)
    assert placed.text is None and not placed.present and why in placed.why
    assert placed.line == "- run: python utils/check_loss.py"
