"""`git am` of a series: one run for many patches, and what to say when a patch does not go in."""

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from . import patchfile
from .errors import SeriesError
from .git import Repo, StrPath
from .manifest import Target, check_patch_files


def am_series(
    repo: Repo, target: Target, patch_names: Sequence[str], *, keep: bool = False
) -> tuple[str, list[str]] | tuple[None, None]:
    """`git am` the patches in one run, one commit each.

    Returns (None, None), or (name of the failed patch, paths that conflict or do not apply). The
    failed `git am` is aborted unless `keep`, which leaves it stopped at that patch.
    """
    if not patch_names:
        return None, None
    start = repo.head()
    paths = [target.patch_path(name) for name in patch_names]
    proc = repo.am(paths, three_way=True, committer_date_is_author_date=True)
    if proc.returncode == 0:
        return None, None
    done = len(repo.commits(f"{start}..HEAD"))
    return patch_names[done], am_failure(repo, paths[done], proc, abort=not keep)


_FAILED_PATH = [
    re.compile(r"^error: patch failed: (.+):\d+$"),
    re.compile(r"^error: (.+): (?:does not exist in index|patch does not apply|already exists in .+)$"),
    re.compile(r"sha1 information is lacking or useless \((.+)\)\.$"),
    re.compile(r"^error: invalid object [0-7]+ [0-9a-f]+ for '(.+)'$"),
    re.compile(r"^CONFLICT \(.+\): Merge conflict in (.+)$"),
]


def am_failure(repo: Repo, patch: StrPath, proc: subprocess.CompletedProcess[str], *, abort: bool = True) -> list[str]:
    """After a failed `git am`: the paths that conflict or do not apply; then abort it (unless told not to)."""
    files = repo.unmerged_paths() or repo.failing_paths(patch) or _failed_paths(proc.stdout + proc.stderr)
    if abort:
        repo.am_abort()
    return files


def _failed_paths(output: str) -> list[str]:
    """Paths named by git am / git apply failure messages, in order."""
    paths: list[str] = []
    for line in output.splitlines():
        for pattern in _FAILED_PATH:
            match = pattern.search(line.strip())
            if match and match.group(1) not in paths:
                paths.append(match.group(1))
                break
    return paths


def check_patches(target: Target) -> None:
    """Error out when a listed patch file is missing or corrupt (truncated, cut, not a patch), before any git am
    could report it as a patch that does not apply."""
    check_patch_files(target)
    for name in target.patches:
        check_patch(target, name)


def check_patch(target: Target, name: str) -> None:
    """Error out when the patch file `name` of `target` is missing, cut short or not a patch at all."""
    path = Path(target.patch_path(name)).resolve()
    if not path.is_file():
        raise SeriesError(f"patch {name} of {target.name} is listed but {path} is missing")
    why: list[str] = []
    try:
        why = patchfile.problems(patchfile.read(path))
    except (UnicodeDecodeError, ValueError) as exc:
        why = [f"it cannot be read ({exc})"]
    if not why:
        proc = Repo(path.parent).run("apply", "--numstat", "--", str(path), check=False)
        if proc.returncode != 0:
            lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
            why = [("; ".join(lines) or f"git apply exit {proc.returncode}").removeprefix("error: ")]
    if why:
        raise SeriesError(
            f"corrupt patch {name} of {target.name}: {'; '.join(why)} ({path}); restore it from git or export it again"
        )
