"""Ctrl-C (SIGINT) or SIGTERM: nothing keeps running and nothing is left half-made."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from seriesfixtures import SERIES, apply_changes, git


SLOW = 'def slow(a, b):\n    """Slowly multiply."""\n    return a * b\n\n\n'
# A patch whose test blocks (while a file exists), after writing its process id and process group.
BLOCKING = (
    "core: add slow()",
    {
        "src/fakepkg/core.py": ("def mul(a, b):", SLOW + "def mul(a, b):"),
        "tests/regress/test_slow.py": textwrap.dedent(
            """\
            import os
            import pathlib
            import time

            from fakepkg import core


            def test_slow():
                marker = os.environ.get("SERIES_TEST_PIDFILE")
                if marker and os.path.exists(marker + ".block"):
                    tmp = marker + ".tmp"
                    pathlib.Path(tmp).write_text(f"{os.getpid()} {os.getpgid(0)}", encoding="utf-8")
                    os.replace(tmp, marker)
                    time.sleep(120)
                assert hasattr(core, "slow")
            """
        ),
    },
)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purposes
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _group_alive(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_verify_stops_its_pytest_and_the_next_run_is_clean(fake, test_python, signum):
    fake.build_series(BLOCKING)
    pidfile = fake.root / "pytest.pid"
    (fake.root / "pytest.pid.block").write_text("", encoding="utf-8")
    env = fake.env(SERIES_TEST_PIDFILE=str(pidfile))
    cmd = [sys.executable, str(SERIES), "--work", str(fake.work), "--manifest", str(fake.manifest)]
    cmd += ["verify", "--python", test_python, "--no-cache"]
    tool = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not pidfile.exists():
            assert tool.poll() is None, tool.communicate()
            assert time.monotonic() < deadline, "the blocking test never started"
            time.sleep(0.1)
        pid, pgid = map(int, pidfile.read_text(encoding="utf-8").split())
        assert pgid != os.getpgid(tool.pid)  # pytest runs in its own session: Ctrl-C at a terminal misses it
        tool.send_signal(signum)
        out, err = tool.communicate(timeout=60)
    finally:
        if tool.poll() is None:
            tool.kill()
    assert tool.returncode == 130, (out, err)
    assert err.strip().splitlines()[-1] == "series: error: interrupted"
    deadline = time.monotonic() + 10
    while (_alive(pid) or _group_alive(pgid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "the pytest process outlived the tool"
    assert not _group_alive(pgid), "a process of pytest's group outlived the tool"
    # Nothing half-made: no staging folders, and the next run starts from a clean scratch checkout.
    assert not [p for p in (fake.work / "verify").iterdir() if p.name.startswith(".")]
    (fake.root / "pytest.pid.block").unlink()
    apply_changes(fake.work / "verify" / "fake", {"src/fakepkg/stray.py": "x = 1\n"})
    proc = fake.run("verify", "--python", test_python, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert git(fake.work / "verify" / "fake", "status", "--porcelain") == ""
