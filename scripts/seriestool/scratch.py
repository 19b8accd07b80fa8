"""The scratch repository `verify` puts the patches on: a tool-owned checkout of the base, reused between runs."""

import os
import shutil
import tempfile
from pathlib import Path

from . import base as base_mod
from .context import Context
from .git import Repo
from .manifest import Target


def prepare_scratch(ctx: Context, target: Target, spec: base_mod.BaseSpec, folder: str = "verify") -> tuple[Repo, str]:
    """A tool-owned checkout of the base under <work>/<folder>/<target> (`verify`'s, or `bundle`'s), reused between
    runs."""
    path = ctx.work / folder / target.name
    spec = base_mod.resolve(spec, target, ctx.downloads, ctx.log)  # an sdist's key holds its sha256
    key = spec.key(target)
    clean_leftovers(ctx, target, folder)
    repo = Repo(path, isolated=True)
    if path.is_dir() and repo.is_work_tree() and repo.config("series.basekey") == key:
        if repo.operation_in_progress():
            repo.am_abort()
        base = base_mod.fetch_into(repo, spec) if spec.kind != "sdist" else repo.rev(base_mod.BASE_TAG)
        if base is not None:
            repo.run("tag", "-f", base_mod.BASE_TAG, base)
            repo.reset_hard(base)
            return repo, base
    # Made beside the old one, which is replaced only once the new one is whole: a base that cannot be made
    # (no such path, an unreachable URL) leaves the old scratch checkout as it was.
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=path.parent))
    try:
        base = base_mod.create(target, spec, staging / "repo", downloads=ctx.downloads, log=ctx.log)
        Repo(staging / "repo", isolated=True).run("config", "series.basekey", key)
        if path.exists() or path.is_symlink():
            os.rename(path, staging / "old")
        os.rename(staging / "repo", path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Repo(path, isolated=True), base


def clean_leftovers(ctx: Context, target: Target, folder: str = "verify") -> None:
    """Staging folders of an interrupted run beside the scratch checkout of `target`."""
    parent = ctx.work / folder
    if parent.is_dir():
        for path in parent.glob(f".{target.name}.*"):
            shutil.rmtree(path, ignore_errors=True)
