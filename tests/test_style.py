"""The project's own code is ruff-clean (ruff 0.14.10, config in pyproject.toml)."""

import subprocess
import sys

from seriesfixtures import REPO_ROOT


def test_ruff_check_and_format(test_python):
    paths = ["scripts", "tests", "repro", ".ci"]
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
