import subprocess
import sys
from pathlib import Path

import pytest
from seriesfixtures import Fake


UNIT = Path(__file__).resolve().parent / "unit"


def pytest_collection_modifyitems(config, items):
    """Everything outside tests/unit/ runs the tool end to end (subprocesses, the venv): marked `e2e`."""
    for item in items:
        if not Path(item.path).resolve().is_relative_to(UNIT):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def fake(tmp_path):
    return Fake(tmp_path)


@pytest.fixture(scope="session")
def test_python():
    """The interpreter verify runs the fixture tests with: this one, when it has pytest and ruff 0.14.10."""
    proc = subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True, text=True)
    if proc.returncode != 0 or proc.stdout.split()[-1] != "0.14.10":
        pytest.skip("needs ruff 0.14.10 in the test interpreter (run `python3 scripts/series.py selftest`)")
    return sys.executable
