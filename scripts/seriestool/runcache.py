"""Outcomes of earlier pytest runs of `verify`, reused while nothing they depend on has changed."""

import json
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from . import pyenv
from .digests import sha256_file, sha256_of
from .errors import SeriesError


VERSION = 2
KEEP = 500  # entries; the oldest ones go first
# What of an interpreter's answer (pyenv.describe) an outcome depends on: its version and build, where it lives,
# and every installed distribution with its version.
ENVIRONMENT = ("version", "prefix", "packages")


def tool_digest() -> str:
    """The tool's own code: a change to any of its modules may change an outcome."""
    package = Path(__file__).resolve().parent
    return sha256_of(
        *(f"{path.relative_to(package)}\0{sha256_file(path)}\0" for path in sorted(package.rglob("*.py")))
    )


def for_verify(work: str | Path, python: str | Path, info: dict[str, Any], device: str) -> "RunCache":
    """`verify`'s cache (<work>/cache/verify): its identity is the interpreter with what `pyenv.probe` answered
    (`info`), the device (and the GPUs it may see) and the tool's own code."""
    identity: dict[str, Any] = {"python": str(python), "probe": info, "device": device, "tool": tool_digest()}
    if device == "cuda":
        identity["visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    cache = RunCache(Path(work) / "cache" / "verify", identity)
    cache.remember(python, info)
    return cache


class RunCache:
    """A folder of pytest outcomes keyed by everything that decides them.

    The key covers the git trees tested (every source and test file of the checkout, and of the
    companion checkouts on PYTHONPATH), the test files run, the source folder, the interpreter that
    runs them (its path, version and installed packages, asked once per interpreter), the device, the
    extra environment variables and `identity` (what else the caller knows: the tool's own code, the
    GPUs). Only expected outcomes are stored (`verify` stores red without the fix and green with it), so
    anything else - a failure, a timeout - runs again the next time.
    """

    def __init__(self, folder: str | Path, identity: dict[str, Any]) -> None:
        self.folder = Path(folder)
        self.identity = identity
        self._environments: dict[str, str | None] = {}

    def environment(self, python: str | Path) -> str | None:
        """A digest of the version and the installed packages of `python`, or None when it cannot be asked."""
        python = str(python)
        if python not in self._environments:
            try:
                info = pyenv.describe(python)
            except SeriesError:
                self._environments[python] = None
            else:
                self.remember(python, info)
        return self._environments[python]

    def remember(self, python: str | Path, info: dict[str, Any]) -> None:
        """What `pyenv.describe(python)` answered in this run (verify asks it first): not asked again."""
        answer = json.dumps({name: info.get(name) for name in ENVIRONMENT}, sort_keys=True)
        self._environments[str(python)] = sha256_of(answer)

    def key(
        self,
        *,
        trees: Any,
        expect: str,
        files: Iterable[str],
        source_dir: str,
        python: str | Path,
        device: str,
        env: Mapping[str, str] | None = None,
    ) -> str | None:
        """The key of a pytest run, or None when the interpreter cannot be asked what it holds (no reuse)."""
        environment = self.environment(python)
        if environment is None:
            return None
        material = {
            "version": VERSION,
            "identity": self.identity,
            "trees": trees,
            "expect": expect,
            "files": sorted(files),
            "source_dir": source_dir,
            "python": str(python),
            "environment": environment,
            "device": device,
            "env": dict(env or {}),
        }
        return sha256_of(json.dumps(material, sort_keys=True))

    def get(self, key: str, log_path: str | Path) -> dict[str, Any] | None:
        """The stored outcome (a dict) with its log copied to `log_path`, or None."""
        entry, log = self.folder / f"{key}.json", self.folder / f"{key}.log"
        try:
            outcome = json.loads(entry.read_text(encoding="utf-8"))
            shutil.copyfile(log, log_path)
        except (OSError, ValueError):
            return None
        os.utime(entry)  # recently used: pruned last
        outcome["log"] = str(log_path)
        return outcome

    def put(self, key: str, outcome: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(outcome["log"], self.folder / f"{key}.log")
        tmp = self.folder / f".{key}.json.tmp"
        tmp.write_text(json.dumps(outcome, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, self.folder / f"{key}.json")
        self._prune()

    def _prune(self) -> None:
        entries = sorted(self.folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
        for entry in entries[: max(len(entries) - KEEP, 0)]:
            entry.unlink(missing_ok=True)
            entry.with_suffix(".log").unlink(missing_ok=True)
