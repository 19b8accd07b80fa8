"""progress.py: the heartbeat prints at its interval with the right text, stops when the wait ends (and leaves no
thread behind), says nothing for a quick process; how far a pytest run, pip and a download got; and run_pytest's
progress lines, which change nothing of its outcome."""

import hashlib
import re
import stat
import sys
import threading
import time

import pytest
from seriestool import progress, runners
from seriestool.statuses import RunStatus

from .conftest import commit


# pytest's own output at default verbosity (what run_pytest's log holds), cut while the run is still going
PYTEST_RUNNING = """\
============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-9.2.0, pluggy-1.7.0
rootdir: /tmp/checkout
plugins: anyio-4.16.0, hypothesis-6.170.17
collected 13 items

tests/trainer/test_a.py ..F.s                                            [ 38%]
tests/trainer/test_b.py ....xX."""

PYTEST_DONE = """\
============================= test session starts ==============================
collected 121 items

test_x.py .....F........................................................ [ 51%]
..........................................................s              [100%]

=================================== FAILURES ===================================
__________________________________ test_a[5] ___________________________________
E   assert 5 != 5
test_x.py:4: AssertionError
=========================== short test summary info ============================
FAILED test_x.py::test_a[5] - assert 5 != 5
=================== 1 failed, 119 passed, 1 skipped in 0.30s ===================
"""

PIP_LOG = """\
Collecting torch==2.13.0 (from -r requirements-test.txt (line 3))
  Downloading torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl (900.1 MB)
Collecting pytest==9.2.0 (from -r requirements-test.txt (line 4))
  Using cached pytest-9.2.0-py3-none-any.whl.metadata (7.5 kB)
Requirement already satisfied: setuptools in ./lib/python3.11/site-packages
"""


def test_a_slow_wait_gets_a_line_per_interval_with_its_detail():
    said = []
    with progress.heartbeat(said.append, lambda: "3/13 tests done", every=0.05):
        time.sleep(0.28)
    assert 2 <= len(said) <= 6, said  # 5 on an idle machine
    assert all(line.startswith("still running, ") and line.endswith(" s, 3/13 tests done") for line in said)
    seconds = [float(line.split(", ")[1].removesuffix(" s")) for line in said]
    assert seconds == sorted(seconds)


def test_the_heartbeat_stops_with_the_wait_and_leaves_no_thread():
    said = []
    with progress.heartbeat(said.append, every=0.02):
        time.sleep(0.1)
        assert any(t.name == "series-heartbeat" for t in threading.enumerate())
    count = len(said)
    assert count and said[0] == "still running, 0 s"  # no detail: no comma
    time.sleep(0.1)
    assert len(said) == count
    assert not any(t.name == "series-heartbeat" for t in threading.enumerate())


def test_an_interrupted_wait_stops_the_heartbeat_too():
    said = []
    with pytest.raises(KeyboardInterrupt), progress.heartbeat(said.append, every=0.02):
        time.sleep(0.05)
        raise KeyboardInterrupt
    count = len(said)
    time.sleep(0.06)
    assert len(said) == count
    assert not any(t.name == "series-heartbeat" for t in threading.enumerate())


def test_a_quick_wait_says_nothing_and_a_failing_detail_is_left_out():
    said = []
    with progress.heartbeat(said.append, every=5):
        pass
    assert said == []

    def broken():
        raise OSError("gone")

    with progress.heartbeat(said.append, broken, every=0.02):
        time.sleep(0.05)
    assert said and set(said) <= {"still running, 0 s"}


def test_the_interval_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(progress.ENV, raising=False)
    assert progress.interval() == 30
    monkeypatch.setenv(progress.ENV, "2.5")
    assert progress.interval() == 2.5
    monkeypatch.setenv(progress.ENV, "often")
    assert progress.interval() == 30
    monkeypatch.setenv(progress.ENV, "0")
    said = []
    with progress.heartbeat(said.append):
        assert not any(t.name == "series-heartbeat" for t in threading.enumerate())
    with progress.heartbeat(None, every=0.01):
        time.sleep(0.03)
    assert said == []


def test_prefixed_names_what_runs():
    said = []
    progress.prefixed(said.append, "[transformers 10/15] red")("still running, 60 s")
    assert said == ["[transformers 10/15] red: still running, 60 s"]


def test_tests_done_are_counted_from_pytests_output():
    assert progress.pytest_counts(PYTEST_RUNNING) == (12, 13)
    assert progress.pytest_counts(PYTEST_DONE) == (121, 121)
    assert progress.pytest_counts("=== test session starts ===\nplatform linux\n") is None
    assert progress.pytest_counts("collected 1 item\n\ntests/test_a.py .") == (1, 1)
    assert progress.pytest_counts("collected 0 items / 1 error\n\n=== ERRORS ===\n") == (0, 0)
    assert progress.pytest_counts("collected 2 items\n\ntests/test_a.py .E") == (2, 2)
    assert progress.pytest_counts("collected 3 items\n\ntests/test_a.py .EE") == (3, 3)  # capped
    assert progress.pytest_counts("collected 3 items\n\ntests/test_a.py .E.E") == (3, 3)


def test_tests_done_are_counted_at_verbosity_one():
    # upstream transformers' pyproject runs pytest with -v and live logs: an outcome per line, at times alone
    verbose = (
        "collected 4 items\n\n"
        "tests/trainer/test_a.py::T::test_one PASSED [ 25%]\n"
        "tests/trainer/test_a.py::T::test_two \n"
        "-------------------------------- live log call ---------------------------------\n"
        "WARNING  transformers:logging.py:340 a warning [with brackets]\n"
        "PASSED                                                                   [ 50%]\n"
        "tests/trainer/test_a.py::T::test_three SKIPPED (needs a GPU)             [ 75%]\n"
    )
    assert progress.pytest_counts(verbose) == (3, 4)
    done = (
        verbose + "tests/trainer/test_a.py::T::test_four FAILED [100%]\n\n=== FAILURES ===\nE   assert 1 == 2 [ 1%]\n"
    )
    assert progress.pytest_counts(done) == (4, 4)


def test_the_details_read_the_logs(tmp_path):
    log = tmp_path / "run.log"
    detail = progress.pytest_detail(log)
    assert detail() == ""  # not there yet
    log.write_text("=== test session starts ===\n", encoding="utf-8")
    assert detail() == "collecting tests"
    log.write_text(PYTEST_RUNNING, encoding="utf-8")
    assert detail() == "12/13 tests done"

    pip = tmp_path / "pip.log"
    pip.write_text(PIP_LOG, encoding="utf-8")
    assert progress.pip_detail(pip)() == "last: Using cached pytest-9.2.0-py3-none-any.whl.metadata (7.5 kB)"
    assert progress.pip_step("Installing collected packages: " + ", ".join(["pkg"] * 40)).endswith("...")
    assert len(progress.pip_step("Installing collected packages: " + ", ".join(["pkg"] * 40))) == 100
    assert progress.pip_detail(tmp_path / "none.log")() == ""

    out = tmp_path / "pip.out"
    out.write_text("Collecting transformers==5.24.0\n  Downloading transformers-5.24.0.tar.gz (10.3 MB)\n")
    pip_tmp = tmp_path / "pip-tmp"
    download = progress.download_detail(out, pip_tmp)
    assert download() == "last: Downloading transformers-5.24.0.tar.gz (10.3 MB)"
    (pip_tmp / "pip-unpack-abc").mkdir(parents=True)
    (pip_tmp / "pip-unpack-abc" / "transformers-5.24.0.tar.gz").write_bytes(b"x" * 4_200_000)
    (pip_tmp / "pip-build-env-x").mkdir()
    (pip_tmp / "pip-build-env-x" / "other").write_bytes(b"x" * 1_000_000)
    assert download() == "last: Downloading transformers-5.24.0.tar.gz (10.3 MB), 4.2 MB so far"


SLOW_PYTEST = """\
#!/bin/sh
echo "collected 3 items"
echo ""
printf "tests/test_a.py ."
sleep 0.4
printf "F"
sleep 0.4
exit 1
"""


def test_run_pytest_says_how_far_it_got_and_judges_as_before(tmp_path, repo, monkeypatch):
    python = tmp_path / "python"
    python.write_text(SLOW_PYTEST, encoding="utf-8")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    commit(repo, {"src/pkg/__init__.py": ""})
    monkeypatch.setenv(progress.ENV, "0.3")
    said = []
    kwargs = {
        "python": python,
        "repo_dir": repo.path,
        "source_dir": "src",
        "files": ["tests/test_a.py"],
        "device": "cpu",
    }
    run = runners.run_pytest(
        **kwargs, log_stem=tmp_path / "a", timeout=60, expect=RunStatus.RED, say=progress.prefixed(said.append, "red")
    )
    quiet = runners.run_pytest(**kwargs, log_stem=tmp_path / "b", timeout=60, expect=RunStatus.RED)
    assert said and all(
        re.fullmatch(r"red: still running, \d+ s, (collecting tests|\d/3 tests done)", s) for s in said
    )
    assert any(line.endswith("2/3 tests done") or line.endswith("1/3 tests done") for line in said)
    assert run.status == quiet.status and run.exit_code == quiet.exit_code == 1
    assert (tmp_path / "a.log").read_text() == (tmp_path / "b.log").read_text()
    assert not any(t.name == "series-heartbeat" for t in threading.enumerate())


FAKE_PIP = """\
import os, sys, time
print("Collecting pkg==1.0", flush=True)
print("  Downloading pkg-1.0.tar.gz (1.0 MB)", flush=True)
if "download" in sys.argv:
    unpack = os.path.join(os.environ["TMPDIR"], "pip-unpack-1")
    os.makedirs(unpack)
    with open(os.path.join(unpack, "pkg-1.0.tar.gz"), "wb") as fh:
        fh.write(b"x" * 300_000)
time.sleep(0.5)
if "download" in sys.argv:
    out = sys.argv[sys.argv.index("-d") + 1]
    os.makedirs(out)
    with open(os.path.join(out, "pkg-1.0.tar.gz"), "wb") as fh:
        fh.write(b"sdist")
"""


@pytest.fixture
def fake_pip(tmp_path, monkeypatch):
    """An interpreter whose `-m pip` says what pip says, takes 0.5 s and, for `download`, saves a file."""
    python = tmp_path / "fake-python"
    python.write_text(f"#!{sys.executable}\n{FAKE_PIP}", encoding="utf-8")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv(progress.ENV, "0.2")
    return python


def test_a_downstream_pip_install_says_its_last_step(tmp_path, fake_pip):
    from seriestool import downstream

    log_path = tmp_path / "pip.log"
    (tmp_path / "req.txt").write_text("pkg==1.0\n", encoding="utf-8")
    said = []
    downstream._pip_install(fake_pip, tmp_path / "req.txt", tmp_path / "site", log_path, said.append)
    assert said and all(re.fullmatch(r"downstream: pip still running, \d+ s(, last: .*)?", line) for line in said)
    assert any(line.endswith("last: Downloading pkg-1.0.tar.gz (1.0 MB)") for line in said)
    assert "Collecting pkg==1.0" in log_path.read_text(encoding="utf-8")  # the log is as before


def test_an_sdist_download_says_the_bytes_so_far(tmp_path, fake_pip):
    from seriestool import fetch

    said = []
    sha = hashlib.sha256(b"sdist").hexdigest()
    got = fetch.fetch_sdist("pkg", "1.0", sha, tmp_path / "cache", python=str(fake_pip), log=said.append)
    assert got.read_bytes() == b"sdist"
    assert said[0] == "downloading pkg==1.0 sdist with pip"
    beats = said[1:]
    assert beats and all(
        re.fullmatch(r"downloading pkg==1.0 sdist: still running, \d+ s(, last: .*)?", b) for b in beats
    )
    assert any(b.endswith("last: Downloading pkg-1.0.tar.gz (1.0 MB), 0.3 MB so far") for b in beats)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [sha]  # the temporary folder is gone
