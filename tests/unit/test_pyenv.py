"""pyenv.py without building a venv: the one interpreter probe, its checks, the venv key and pip's error line."""

import fcntl
import json
import stat
import sys
import threading

import pytest
from seriestool import pyenv
from seriestool.errors import SeriesError


def _python(tmp_path, script, name="python"):
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{script}\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _answering(tmp_path, **info):
    answer = {"python": "3.11.4", "pytest": "9.2.0", "ruff": pyenv.RUFF_VERSION, "torch": "2.13.0", "cuda": False}
    answer.update(info)
    return _python(tmp_path, f"echo 'noise'\necho '{json.dumps(answer)}'")


def test_describe_a_real_interpreter():
    info = pyenv.describe(sys.executable)
    assert info["python"] == sys.version.split()[0] and info["version"] == sys.version
    assert info["prefix"] == sys.prefix and len(info["packages"]) == 64
    assert set(info) >= {"pytest", "torch", "cuda", "ruff"}


def test_describe_reads_the_last_line(tmp_path):
    assert pyenv.describe(_answering(tmp_path, torch=None))["torch"] is None


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("echo 'boom' >&2\nexit 3", "cannot probe {python}: boom"),
        ("exit 3", "cannot probe {python}: no output"),
        ("exit 0", "cannot probe {python}: no answer"),
        ("echo '[1, 2]'", "cannot probe {python}: no answer"),
        ("echo '{'", "cannot probe {python}: no answer"),
    ],
)
def test_an_interpreter_that_cannot_be_asked(tmp_path, script, message):
    python = _python(tmp_path, script)
    with pytest.raises(SeriesError) as info:
        pyenv.describe(python)
    assert str(info.value) == message.format(python=python)


def test_describe_a_missing_interpreter(tmp_path):
    with pytest.raises(SeriesError) as info:
        pyenv.describe(tmp_path / "missing")
    assert str(info.value).startswith(f"cannot run {tmp_path / 'missing'}: ")


def test_probe_checks_pytest_ruff_and_cuda(tmp_path):
    assert pyenv.probe(_answering(tmp_path))["torch"] == "2.13.0"
    cases = [
        ({"pytest": None}, "cuda", "{python} has no pytest; use the tool's own environment (omit --python)"),
        ({"ruff": None}, "cpu", f"{{python}} needs ruff=={pyenv.RUFF_VERSION} (found none)"),
        ({"ruff": "0.1.0"}, "cpu", f"{{python}} needs ruff=={pyenv.RUFF_VERSION} (found 0.1.0)"),
        ({}, "cuda", "--device cuda needs a CUDA build of torch, but {python} has torch 2.13.0 without CUDA"),
        ({"torch": None, "cuda": None}, "cuda", "--device cuda needs a CUDA build of torch, but {python} has torch "
         "missing without CUDA"),
    ]  # fmt: skip
    for number, (info, device, message) in enumerate(cases):
        (tmp_path / str(number)).mkdir()
        python = _answering(tmp_path / str(number), **info)
        with pytest.raises(SeriesError) as raised:
            pyenv.probe(python, device=device)
        assert str(raised.value) == message.format(python=python)
    (tmp_path / "gpu").mkdir()
    assert pyenv.probe(_answering(tmp_path / "gpu", cuda=True), device="cuda")["cuda"] is True


def test_venv_key_and_pinned_count(tmp_path, monkeypatch):
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# pins\npytest==9.2.0\nrich[jupyter] == 15.0\n-e .\nruff>=1\n", encoding="utf-8")
    assert pyenv.pinned_count(requirements) == 2
    key = pyenv.venv_key(requirements)
    assert len(key) == 16 and int(key, 16) >= 0 and pyenv.venv_key(str(requirements)) == key
    monkeypatch.setattr(pyenv.platform, "python_version", lambda: "3.99.0")
    assert pyenv.venv_key(requirements) != key  # another Python, another venv
    monkeypatch.undo()
    requirements.write_text("pytest==9.2.1\n", encoding="utf-8")
    assert pyenv.venv_key(requirements) != key
    assert pyenv.venv_python(tmp_path / "v") == tmp_path / "v" / "bin" / "python"


def test_pip_error_line(tmp_path):
    log = tmp_path / "pip.log"
    assert pyenv._pip_error(log) == "no log"
    log.write_text("Collecting x\n  \nERROR: no such version\nERROR: second\ntail\n", encoding="utf-8")
    assert pyenv._pip_error(log) == "ERROR: no such version"
    log.write_text("Collecting x\nlast words\n\n", encoding="utf-8")
    assert pyenv._pip_error(log) == "last words"
    log.write_text("\n", encoding="utf-8")
    assert pyenv._pip_error(log) == "no output"


def test_interpreter_given(tmp_path):
    assert pyenv.interpreter(tmp_path, tmp_path / "r.txt", sys.executable) == type(tmp_path)(sys.executable)
    with pytest.raises(SeriesError) as info:
        pyenv.interpreter(tmp_path, tmp_path / "r.txt", str(tmp_path / "nope"))
    assert str(info.value) == f"--python {tmp_path / 'nope'} does not exist"


def test_a_second_run_waits_for_the_venv_another_one_is_building(tmp_path, monkeypatch):
    # before: a run that found the venv without its marker removed it while the other run was installing it;
    # after: it waits for that run, then uses the venv it built.
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("pytest==9.2.0\n", encoding="utf-8")
    key = pyenv.venv_key(requirements)
    venv = tmp_path / f"venv-{key}"
    built = []
    monkeypatch.setattr(pyenv, "_build_venv", lambda *args: built.append(args))
    logged, got = [], []
    with open(tmp_path / f".venv-{key}.lock", "ab") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # the first run, installing
        waiter = threading.Thread(
            target=lambda: got.append(pyenv.ensure_venv(tmp_path, requirements, log=logged.append))
        )
        waiter.start()
        for _ in range(200):
            if logged:
                break
            threading.Event().wait(0.01)
        assert logged == [f"venv: another run is building {venv}; waiting for it"] and not got
        pyenv.venv_python(venv).parent.mkdir(parents=True)
        pyenv.venv_python(venv).write_text("", encoding="utf-8")
        (venv / pyenv.MARKER).write_text("{}", encoding="utf-8")
    waiter.join(10)
    assert got == [pyenv.venv_python(venv)] and built == []


def test_built_venv_is_only_a_whole_one(tmp_path):
    requirements = tmp_path / "req.txt"
    requirements.write_text("x==1\n", encoding="utf-8")
    venv = tmp_path / f"venv-{pyenv.venv_key(requirements)}"
    assert pyenv.built_venv(tmp_path, requirements) is None
    python = pyenv.venv_python(venv)
    python.parent.mkdir(parents=True)
    python.write_text("", encoding="utf-8")
    assert pyenv.built_venv(tmp_path, requirements) is None  # half-built: no marker
    (venv / pyenv.MARKER).write_text("", encoding="utf-8")
    assert pyenv.built_venv(tmp_path, requirements) == python


def test_ensure_ruff_takes_the_pinned_ruff_it_finds_and_never_another(tmp_path):
    """Before: `branches` used any ruff on PATH, or none (the moved tests left unformatted). Now it takes the ruff
    of the pinned version only: the one this interpreter has (here, in the pinned venv), else one it installs."""
    found = pyenv._ruff_version([sys.executable, "-m", "ruff"])
    if found is None:
        pytest.skip("this interpreter has no ruff")
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"pytest==8.0\nruff=={found}  # the pin\n", encoding="utf-8")
    assert pyenv.ensure_ruff(tmp_path / "work", requirements) == [sys.executable, "-m", "ruff"]
    requirements.write_text("pytest==8.0\n", encoding="utf-8")
    with pytest.raises(SeriesError, match="pins no ruff"):
        pyenv.ensure_ruff(tmp_path / "work", requirements)
