"""`checkout`: a git work tree of the base with the series applied, one commit per patch."""

import os
import re
import shutil
import tempfile
from pathlib import Path

from . import base as base_mod
from .errors import SeriesError
from .git import Repo
from .manifest import check_patch_files


def default_dir(ctx, target):
    return ctx.work / "checkouts" / target.name


def check_destination(dest, replace):
    if dest.exists() and not dest.is_dir():
        raise SeriesError(f"{dest} exists and is not a folder")
    if dest.is_dir() and any(dest.iterdir()) and not replace:
        raise SeriesError(f"{dest} exists and is not empty; pass --replace to rebuild it")


def am_series(repo, target, patch_names, *, keep=False):
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


def am_failure(repo, patch, proc, *, abort=True):
    """After a failed `git am`: the paths that conflict or do not apply; then abort it (unless told not to)."""
    files = repo.unmerged_paths() or repo.failing_paths(patch) or _failed_paths(proc.stdout + proc.stderr)
    if abort:
        repo.am_abort()
    return files


def _failed_paths(output):
    """Paths named by git am / git apply failure messages, in order."""
    paths = []
    for line in output.splitlines():
        for pattern in _FAILED_PATH:
            match = pattern.search(line.strip())
            if match and match.group(1) not in paths:
                paths.append(match.group(1))
                break
    return paths


def run(ctx, args):
    target = ctx.manifest.default_target(args.target)
    check_patch_files(target)
    spec = base_mod.parse_spec(args.base)
    dest = Path(args.dir).resolve() if args.dir else default_dir(ctx, target)
    check_destination(dest, args.replace)
    dest.parent.mkdir(parents=True, exist_ok=True)

    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        repo_dir = staging / "repo"
        base = base_mod.create(target, spec, repo_dir, downloads=ctx.downloads, log=ctx.log)
        repo = Repo(repo_dir, isolated=True)
        repo.run("config", "series.base", args.base or "sdist")
        names = list(target.patches)
        if spec.kind != "sdist" and target.patches:
            from .upstream import landed, load_preimages  # (upstream imports this module)

            present = landed(repo, base, target.patch_paths(), ctx.work_dir())
            names = [name for name in target.patches if target.patch_path(name) not in present]
            if present:
                ctx.log(
                    f"{len(present)} patch(es) already in the base, left out: "
                    + ", ".join(name for name in target.patches if name not in names)
                )
            problem = load_preimages(repo, target, ctx.downloads, ctx.log)
            if problem:
                ctx.log(problem)
        failed, files = am_series(repo, target, names, keep=args.stop_at_conflict)
        where = f" ({', '.join(files)})" if files else ""
        if failed and not args.stop_at_conflict:
            raise SeriesError(f"patch {failed} does not apply on {spec.describe(target)}{where}; no checkout was made")
        check_destination(dest, args.replace)
        trash = None
        if dest.exists():
            trash = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=dest.parent))
            os.rename(dest, trash / "old")
        os.rename(repo_dir, dest)
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    if failed:
        ctx.out(
            f"{dest}: git am stopped at {failed}{where}. Resolve the conflicts there, `git add` the files and run "
            "`git am --continue` (it applies the remaining patches), then export."
        )
        return 1
    ctx.out(
        f"{dest}: {spec.describe(target)} (tag {base_mod.BASE_TAG} = {base[:12]}) "
        f"+ {len(names)} patch(es) on branch {base_mod.BRANCH}"
    )
    return 0
