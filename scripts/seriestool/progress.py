"""Progress lines while a long subprocess runs: a heartbeat thread that says, every `interval()` seconds, how long
the wait has lasted and how far it got (tests done of a pytest run, pip's last step, bytes of a download).

The lines go where the caller's `say` sends them (`Context.log`: `series: ...` on stderr), plain lines, no
terminal tricks, so a CI log shows them as a terminal does. The heartbeat never touches the subprocess: the
caller still waits for it and judges it, so no verdict, report or exit code depends on it; it is stopped and
joined when the wait ends, however it ends (Ctrl-C and SIGTERM included).
"""

import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


ENV = "SERIES_PROGRESS_INTERVAL"
DEFAULT_INTERVAL = 30.0
TAIL_BYTES = 64 * 1024
LINE_LIMIT = 100

Say = Callable[[str], None]
Detail = Callable[[], str]


def interval() -> float:
    """Seconds between two progress lines: $SERIES_PROGRESS_INTERVAL (0 turns them off), else 30."""
    try:
        return float(os.environ.get(ENV, DEFAULT_INTERVAL))
    except ValueError:
        return DEFAULT_INTERVAL


@contextmanager
def heartbeat(say: Say | None, detail: Detail | None = None, *, every: float | None = None) -> Iterator[None]:
    """While the block runs, `say("still running, 60 s, <detail()>")` every `every` seconds (default
    `interval()`); nothing for a block that ends sooner, nothing when `say` is None or `every` <= 0."""
    every = interval() if every is None else every
    if say is None or every <= 0:
        yield
        return
    stop = threading.Event()
    start = time.monotonic()

    def beat() -> None:
        while not stop.wait(every):
            text = f"still running, {time.monotonic() - start:.0f} s"
            try:
                extra = detail() if detail is not None else ""
            except Exception:  # a progress line is never worth a failed run
                extra = ""
            if stop.is_set():
                return
            say(f"{text}, {extra}" if extra else text)

    thread = threading.Thread(target=beat, name="series-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def prefixed(say: Say, what: str) -> Say:
    """`say` with `what: ` before each line: `[transformers 10/15] red: still running, 60 s, 12/13 tests done`."""

    def said(message: str) -> None:
        say(f"{what}: {message}")

    return said


def _tail(path: str | Path, size: int = TAIL_BYTES) -> str:
    """The last `size` bytes of a file, as text ("" when it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(fh.tell() - size, 0))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _short(line: str, limit: int = LINE_LIMIT) -> str:
    line = " ".join(line.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


_COLLECTED = re.compile(r"^collected (\d+) items?\b")
# a line of pytest's progress (default verbosity): `tests/test_a.py ..F.s   [ 40%]`, or its continuation
_PROGRESS = re.compile(r"^(?:\S+\.py )?([.FEsxX]+)\s*(?:\[\s*\d+%\])?$")
# a test's outcome at `-v` (upstream's pyproject asks for it): `tests/test_a.py::test_b PASSED [ 40%]`, or the outcome
# alone on a line of its own after the test's live log
_VERBOSE = re.compile(r"(?:^|\s)(?:PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b.*\[\s*\d+%\]$")


def pytest_counts(text: str) -> tuple[int, int] | None:
    """(tests done, tests collected) from the output of a pytest run at default verbosity or `-v`, None before
    pytest has collected. An outcome letter counts once (a teardown error after a pass can count twice: capped)."""
    total, done, seen = None, 0, False
    for line in text.splitlines():
        line = line.rstrip()
        if total is None:
            match = _COLLECTED.match(line)
            if match:
                total = int(match.group(1))
            continue
        if line.startswith("="):  # the sections after the run (FAILURES, short test summary)
            if seen:
                break
            continue
        match = _PROGRESS.match(line)
        if match:
            seen = True
            done += len(match.group(1))
        elif _VERBOSE.search(line):
            seen = True
            done += 1
    if total is None:
        return None
    return min(done, total), total


def pytest_detail(log_path: str | Path) -> Detail:
    """How far the pytest run writing `log_path` got: `12/13 tests done` (or `collecting tests`)."""

    def detail() -> str:
        try:
            text = Path(log_path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        counts = pytest_counts(text)
        if counts is None:
            return "collecting tests"
        return f"{counts[0]}/{counts[1]} tests done"

    return detail


PIP_STEPS = ("Collecting ", "Downloading ", "Installing ", "Building ", "Using cached ", "Processing ", "Preparing ")


def pip_step(text: str) -> str:
    """pip's last step in its output: the last `Collecting`/`Downloading`/`Installing`/... line, shortened."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith(PIP_STEPS):
            return _short(line)
    return ""


def pip_detail(log_path: str | Path) -> Detail:
    """pip's last step in the log it writes to `log_path`: `last: Downloading torch-... (900.1 MB)`."""

    def detail() -> str:
        step = pip_step(_tail(log_path))
        return f"last: {step}" if step else ""

    return detail


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def download_detail(log_path: str | Path, tmp_dir: str | Path) -> Detail:
    """A `pip download` whose output goes to `log_path` and whose TMPDIR is `tmp_dir`: pip's last step and the
    bytes it has saved so far (pip writes a download into `pip-unpack-*` below TMPDIR)."""
    pip = pip_detail(log_path)

    def detail() -> str:
        parts = [pip()]
        size = 0
        for part in Path(tmp_dir).glob("pip-unpack-*/*"):
            try:
                size += part.stat().st_size
            except OSError:
                pass
        if size:
            parts.append(f"{_mb(size)} so far")
        return ", ".join(part for part in parts if part)

    return detail
