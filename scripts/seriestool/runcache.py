"""Outcomes of earlier pytest runs of `verify`, reused while nothing they depend on has changed."""

import hashlib
import json
import os
import shutil
from pathlib import Path


VERSION = 1
KEEP = 500  # entries; the oldest ones go first


def file_digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def tool_digest():
    """The tool's own code: a change to any of its modules may change an outcome."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        digest.update(f"{path.relative_to(package)}\0{file_digest(path)}\0".encode())
    return digest.hexdigest()


class RunCache:
    """A folder of pytest outcomes keyed by everything that decides them.

    The key covers the git trees tested (every source and test file of the checkout, and of the
    companion checkouts on PYTHONPATH), the test files run, the source folder and `identity`: the
    interpreter, its installed packages, the device and the tool's own code. Only expected outcomes
    are stored (`verify` stores red without the fix and green with it), so anything else - a failure,
    a timeout - runs again the next time.
    """

    def __init__(self, folder, identity):
        self.folder = Path(folder)
        self.identity = identity

    def key(self, *, trees, expect, files, source_dir):
        material = {
            "version": VERSION,
            "identity": self.identity,
            "trees": trees,
            "expect": expect,
            "files": sorted(files),
            "source_dir": source_dir,
        }
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()

    def get(self, key, log_path):
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

    def put(self, key, outcome):
        self.folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(outcome["log"], self.folder / f"{key}.log")
        tmp = self.folder / f".{key}.json.tmp"
        tmp.write_text(json.dumps(outcome, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, self.folder / f"{key}.json")
        self._prune()

    def _prune(self):
        entries = sorted(self.folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
        for entry in entries[: max(len(entries) - KEEP, 0)]:
            entry.unlink(missing_ok=True)
            entry.with_suffix(".log").unlink(missing_ok=True)
