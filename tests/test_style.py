"""The project's own code is ruff-clean (ruff 0.14.10, config in pyproject.toml)."""

import subprocess
import sys

import pytest
from seriesfixtures import REPO_ROOT


LINT_SCOPE = ["scripts", "tests", "repro", ".ci"]  # the folders of the project's own code


@pytest.mark.quick
def test_ruff_check_and_format(test_python):
    paths = LINT_SCOPE
    check = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", *paths], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    fmt = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", *paths],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


@pytest.mark.quick
def test_one_lint_scope_everywhere():
    """tox, CI, CONTRIBUTING and the CI docs name the folders this test lints, no more, no fewer."""
    folders = " ".join(LINT_SCOPE)
    for path in ("tox.ini", ".github/workflows/ci.yml"):
        text = (REPO_ROOT / path).read_text(encoding="utf-8")
        assert f"ruff check {folders}\n" in text and f"ruff format --check {folders}\n" in text, path
        assert text.count("ruff check ") == 1 and text.count("ruff format ") == 1, path
    listed = ", ".join(f"`{name}/`" for name in LINT_SCOPE[:-1]) + f" and `{LINT_SCOPE[-1]}/`"
    for path in ("CONTRIBUTING.md", "docs/reviewer-ci.md"):
        text = " ".join((REPO_ROOT / path).read_text(encoding="utf-8").split())
        assert listed in text, (path, listed)
