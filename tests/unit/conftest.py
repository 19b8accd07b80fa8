"""Fast in-process tests of the library modules (`scripts/seriestool/*.py`): no venv, no network, no pytest in a
subprocess. Git repositories they need are made in tmp folders."""

import sys
from pathlib import Path

import pytest


SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

from seriestool.git import Repo  # noqa: E402


@pytest.fixture
def repo(tmp_path):
    """An empty tool-owned git repository (isolated from the user's git config)."""
    return Repo.init(tmp_path / "repo")


def write(root, files):
    """Write {relative path: text, or None to delete} below `root`."""
    for name, text in files.items():
        path = Path(root) / name
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def commit(repo, files, message="change"):
    """Write `files` into the work tree of `repo` and commit everything; returns the commit id."""
    write(repo.path, files)
    return repo.commit_all(message, date="2001-01-01T00:00:00+0000")


def make_patch(repo, files, subject, out_dir):
    """A format-patch file of one commit on top of HEAD that writes `files`; HEAD is back where it was."""
    start = repo.head()
    commit(repo, files, subject)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (path,) = repo.format_patch(f"{start}..HEAD", out_dir)
    repo.reset_hard(start)
    return path
