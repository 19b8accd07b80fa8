"""Where things live for one invocation of the tool, and how it talks to the user."""

import argparse
import os
import sys
import tempfile
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

    def checkout_dir(self, target: manifest_mod.Target) -> Path:
        """The default checkout of `target` (`checkout`, `export`, `python`)."""
        return self.work / "checkouts" / target.name

    def out(self, message: str) -> None:
        print(message, flush=True)

    def log(self, message: str) -> None:
        print(f"series: {message}", file=sys.stderr, flush=True)
