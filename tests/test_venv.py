"""The pinned test environment: built once, reused, rebuilt when half-made."""

import subprocess
import sys
from pathlib import Path

import pytest


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from seriestool import pyenv  # noqa: E402
from seriestool.errors import SeriesError  # noqa: E402


def test_venv_is_built_once_and_rebuilt_when_incomplete(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# nothing to install\n", encoding="utf-8")
    messages = []
    python = pyenv.ensure_venv(tmp_path / "work", requirements, log=messages.append)
    venv = python.parents[1]
    assert venv.name == f"venv-{pyenv.venv_key(requirements)}"
    assert (venv / pyenv.MARKER).is_file()
    assert subprocess.run([str(python), "-c", "import sys; print(sys.prefix)"], capture_output=True).returncode == 0
    sentinel = venv / "sentinel"
    sentinel.write_text("still here", encoding="utf-8")

    messages.clear()
    assert pyenv.ensure_venv(tmp_path / "work", requirements, log=messages.append) == python
    assert messages == [] and sentinel.exists()

    # A venv without the marker (an interrupted or failed install) is removed and built again.
    (venv / pyenv.MARKER).unlink()
    assert pyenv.ensure_venv(tmp_path / "work", requirements, log=messages.append) == python
    assert not sentinel.exists() and (venv / pyenv.MARKER).is_file()
    assert any("removing incomplete virtualenv" in m for m in messages)


def test_failed_install_leaves_no_marker(tmp_path):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"{tmp_path / 'no-such-package.tar.gz'}\n", encoding="utf-8")
    with pytest.raises(SeriesError, match="it is rebuilt on the next run"):
        pyenv.ensure_venv(tmp_path / "work", requirements, log=lambda message: None)
    venv = tmp_path / "work" / f"venv-{pyenv.venv_key(requirements)}"
    assert not (venv / pyenv.MARKER).exists()


def test_key_follows_the_requirements(tmp_path):
    first = tmp_path / "a.txt"
    second = tmp_path / "b.txt"
    first.write_text("torch==2.13.0\n", encoding="utf-8")
    second.write_text("torch==2.13.1\n", encoding="utf-8")
    assert pyenv.venv_key(first) != pyenv.venv_key(second)
    assert pyenv.venv_key(first) == pyenv.venv_key(first)


def test_pip_output_goes_to_a_log_and_the_console_gets_one_line_per_stage(tmp_path, capfd):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"# comment\n{tmp_path / 'no-such-package.tar.gz'}\n", encoding="utf-8")
    messages = []
    with pytest.raises(SeriesError) as failure:
        pyenv.ensure_venv(tmp_path / "work", requirements, log=messages.append)
    out, err = capfd.readouterr()
    assert out == "" and err == "", "pip wrote to the console"
    assert [m.split(":")[0] for m in messages] == ["venv", "venv"], messages
    log = tmp_path / "work" / "logs" / f"pip-{pyenv.venv_key(requirements)}.log"
    assert log.is_file() and "no-such-package" in log.read_text(encoding="utf-8")
    assert f"full log {log}" in str(failure.value) and "\n" not in str(failure.value)
    assert "ERROR:" in str(failure.value)


def test_pinned_count():
    assert pyenv.pinned_count(pyenv.Path(__file__).resolve().parents[1] / "scripts" / "requirements-test.txt") > 40
