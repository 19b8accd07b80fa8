"""The tool's own code type-checks: mypy (pinned in scripts/requirements-test.txt, configured in pyproject.toml:
every function of scripts/ annotated and checked; scripts/downstream_scenarios.py left out for now), the same
command in tox, CI and here."""

import subprocess
import sys

import pytest
from seriesfixtures import REPO_ROOT


MYPY = "2.4.1"


def test_mypy_is_clean():
    pytest.importorskip("mypy", reason="needs mypy: run it with `python3 scripts/series.py selftest`")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=REPO_ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("Success: no issues found"), proc.stdout


def test_one_mypy_everywhere():
    """The pin of the requirements is the one tox and CI install, and both run mypy with the project's config."""
    requirements = (REPO_ROOT / "scripts" / "requirements-test.txt").read_text(encoding="utf-8").splitlines()
    assert f"mypy=={MYPY}" in requirements
    tox = (REPO_ROOT / "tox.ini").read_text(encoding="utf-8")
    assert f"    mypy=={MYPY}\n" in tox and "\n    mypy\n" in tox
    ci = (REPO_ROOT / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8")
    assert f"mypy=={MYPY}" in ci and "      - run: mypy\n" in ci
