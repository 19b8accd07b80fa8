"""Where things live for one invocation of the tool, and how it talks to the user."""

import argparse
import fcntl
import os
import sys
import tempfile
import time
from pathlib import Path

from . import manifest as manifest_mod
from .errors import SeriesError


REPO_ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = REPO_ROOT / "scripts" / "requirements-test.txt"


class Context:
    """The work folder, the manifest, the download cache and the pinned requirements of one run."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.repo_root = REPO_ROOT
        work = getattr(args, "work", None)
        self.work = Path(work or os.environ.get("SERIES_WORK") or REPO_ROOT / ".work").resolve()
        manifest = getattr(args, "manifest", None) or os.environ.get("SERIES_MANIFEST")
        self.manifest_path = Path(manifest or REPO_ROOT / "patches" / "series.toml").resolve()
        downloads = os.environ.get("SERIES_DOWNLOADS")
        self.downloads = Path(downloads).resolve() if downloads else self.work / "downloads"
        self.requirements = Path(os.environ.get("SERIES_REQUIREMENTS") or REQUIREMENTS).resolve()
        self._manifest: manifest_mod.Manifest | None = None
        self._work_ok = False
        self._lock: int | None = None

    @property
    def manifest(self) -> manifest_mod.Manifest:
        if self._manifest is None:
            self._manifest = manifest_mod.load(self.manifest_path)
        return self._manifest

    def work_dir(self) -> Path:
        """The work folder, made when missing; a SeriesError (one line) when it cannot be made or written."""
        if not self._work_ok:
            try:
                self.work.mkdir(parents=True, exist_ok=True)
                fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=self.work)
                os.close(fd)
                os.unlink(probe)
            except OSError as exc:
                why = exc.strerror or str(exc)
                where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(self.work) else ""
                raise SeriesError(
                    f"cannot use the work folder {self.work}: {why}{where}; pick another with --work or $SERIES_WORK"
                ) from None
            self._work_ok = True
        return self.work

    def lock_work(self, command: str) -> None:
        """Hold `<work>/.lock` (flock, exclusive) until `unlock_work` or the process ends: a second run of a command
        that writes the work folder's shared state (scratch checkouts, logs, reports, the venv) stops at once, in
        one line naming the run that holds it, instead of writing the same files."""
        path = self.work_dir() / ".lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 200).decode("utf-8", "replace").strip() or "pid unknown"
            os.close(fd)
            raise SeriesError(
                f"the work folder {self.work} is in use by another series.py run ({holder}); wait for it to end, "
                "or give this run its own work folder with --work DIR (or $SERIES_WORK)"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{command}, pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}".encode())
        self._lock = fd

    def unlock_work(self) -> None:
        if self._lock is not None:
            os.close(self._lock)  # closing the file drops the lock
            self._lock = None

    def checkout_dir(self, target: manifest_mod.Target) -> Path:
        """The default checkout of `target` (`checkout`, `export`, `python`)."""
        return self.work / "checkouts" / target.name

    def out(self, message: str) -> None:
        print(message, flush=True)

    def log(self, message: str) -> None:
        # one write per line: a progress line from another thread (progress.py) never splits one of these
        sys.stderr.write(f"series: {message}\n")
        sys.stderr.flush()
