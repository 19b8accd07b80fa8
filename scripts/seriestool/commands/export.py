"""`export`: regenerate a target's patch files and manifest list from a checkout's commits."""

import argparse
import shutil
import tempfile
from pathlib import Path

from .. import manifest as manifest_mod
from .. import patchfile
from ..base import BASE_TAG
from ..context import Context
from ..cuts import CUT_BASE_REF, cut_checkout_dir
from ..errors import SeriesError
from ..git import Repo
from ..manifest import find_patch


NAME = "export"
HELP = "regenerate patches/<target>/*.patch and the manifest list from a checkout"
DESCRIPTION = f"""\
{HELP}.

One `git format-patch` file per commit of series/base..HEAD, with fixed options, so an unchanged
commit gives the same bytes; files of commits that are gone are removed, and the target's
`patches = [...]` list in the manifest is rewritten in place. A later patch that touches a file an
edited one changes gets new `index` lines (the blobs it applies to, which `git am --3way` needs) and
nothing else: the output counts those, and `git diff -I '^index ' patches/` shows only the edit.
Refuses a checkout with uncommitted changes, merges or an unfinished git am/rebase.

example:
  python3 scripts/series.py export --target transformers

exit status: 0 exported; 2 bad input (not a checkout made by `checkout`, uncommitted changes, ...)."""
NEEDS_GIT = True
NEEDS_WORK = True
LOCKS_WORK = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", help="target (default: the one the checkout was made for, else the first)")
    p.add_argument("--dir", help="the checkout (default: <work>/checkouts/<target>)")
    p.add_argument(
        "--cut",
        metavar="NNNN",
        help="write the cut of this patch (patches/<target>/cuts/) from its cut checkout (`checkout --cut NNNN`)",
    )


def run(args: argparse.Namespace, ctx: Context) -> int:
    if getattr(args, "cut", None) is not None:
        return _export_cut(args, ctx)
    dest = Path(args.dir).resolve() if args.dir else None
    if dest is not None and args.target is None and Repo(dest).is_work_tree():
        recorded = Repo(dest).config("series.target")
        target = ctx.manifest.target(recorded) if recorded else ctx.manifest.default_target()
    else:
        target = ctx.manifest.default_target(args.target)
    dest = dest or ctx.checkout_dir(target)
    repo = Repo(dest, isolated=True)
    if not dest.is_dir() or not repo.is_work_tree():
        raise SeriesError(f"{dest} is not a git checkout; make one with `series.py checkout --target {target.name}`")
    recorded = repo.config("series.target")
    if recorded and recorded != target.name:
        raise SeriesError(f"{dest} is a checkout of {recorded}, not {target.name}")
    base = repo.rev(BASE_TAG)
    if base is None:
        raise SeriesError(f"{dest} has no {BASE_TAG} tag; it was not made by `series.py checkout`")
    _check_settled(repo, dest)
    head = repo.out("rev-parse", "HEAD")
    if not repo.is_ancestor(base, head):
        raise SeriesError(f"HEAD of {dest} does not descend from {BASE_TAG}")
    commits = repo.commits(f"{BASE_TAG}..HEAD")
    for commit in commits:
        if len(repo.parents(commit)) != 1:
            raise SeriesError(f"commit {commit[:12]} in {dest} is a merge; the series must be linear")
        if not repo.changes(f"{commit}^", commit):
            raise SeriesError(f"commit {commit[:12]} in {dest} changes nothing; drop it")
    untracked = [line[3:] for line in repo.status() if line.startswith("??")]
    if untracked:
        ctx.log(f"note: {len(untracked)} untracked file(s) in {dest} are not exported (first: {untracked[0]})")

    out_dir = target.patch_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=ctx.work_dir()))
    try:
        produced = repo.format_patch(f"{BASE_TAG}..HEAD", tmp) if commits else []
        names = [p.name for p in produced]
        changed = removed = 0
        index_only: list[str] = []
        for path in produced:
            new = path.read_bytes()
            old_path = out_dir / path.name
            if not old_path.is_file() or old_path.read_bytes() != new:
                if old_path.is_file() and _same_but_index(old_path.read_bytes(), new):
                    index_only.append(path.name[:4])
                shutil.copyfile(path, old_path)
                changed += 1
        for stale in sorted(out_dir.glob("*.patch")):
            if stale.name not in names:
                stale.unlink()
                removed += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    listed = manifest_mod.rewrite_patch_list(ctx.manifest, target.name, names)
    # The tables edited by hand that name patches are kept as they are: a rename is the user's to follow there.
    named = {
        "depends": [n for key, needs in target.depends.items() for n in [key, *needs]],
        "fork": list(target.fork),
    }
    for table, listed_names in named.items():
        gone = sorted({n for n in listed_names if n not in names})
        if gone:
            ctx.log(
                f"warning: [targets.{target.name}.{table}] in {ctx.manifest.path.name} names patches export no longer "
                f"produced ({', '.join(gone)}): rename them there by hand (the manifest does not load until then)"
            )
    only = (
        f" ({len(index_only)} of them only in their `index` lines: {', '.join(index_only)} apply to blobs an earlier "
        "patch changed; `git diff -I '^index ' patches/` leaves them out)"
        if index_only
        else ""
    )
    ctx.out(
        f"exported {len(names)} patch(es) of {target.name} to {out_dir}: {changed} written{only}, "
        f"{len(names) - changed} unchanged, {removed} removed; manifest {'updated' if listed else 'unchanged'}"
    )
    return 0


def _check_settled(repo: Repo, dest: Path) -> None:
    """Bad input unless the checkout at `dest` is between operations, with every change committed."""
    busy = repo.operation_in_progress()
    if busy:
        raise SeriesError(f"{dest} has an unfinished {busy}; finish or abort it first")
    dirty = [line for line in repo.status() if not line.startswith("??")]
    if dirty:
        raise SeriesError(f"{dest} has uncommitted changes ({dirty[0][3:]}); commit them first")


def _same_but_index(old: bytes, new: bytes) -> bool:
    """Whether two patch files differ only in their `index <blob>..<blob>` lines: the patch is the same, the blobs
    it applies to are not (an earlier patch changed the file). They are rewritten all the same: `git am --3way`
    finds the blobs to merge with by those lines."""

    def text(data: bytes) -> str:
        return patchfile.without_index_lines(data.decode("utf-8", "replace"))

    return text(old) == text(new)


def _export_cut(args: argparse.Namespace, ctx: Context) -> int:
    """Write the one commit a cut checkout holds on top of the patches its cut needs as the cut's file."""
    target = ctx.manifest.default_target(args.target)
    name = find_patch(target, args.cut)
    if name not in target.cuts:
        raise SeriesError(f"{name} has no cut declared in [targets.{target.name}.cuts]")
    dest = Path(args.dir).resolve() if args.dir else cut_checkout_dir(ctx, target, name)
    repo = Repo(dest, isolated=True)
    if not dest.is_dir() or not repo.is_work_tree() or repo.rev(CUT_BASE_REF) is None:
        raise SeriesError(f"{dest} is not a cut checkout; make one with `series.py checkout --cut {name[:4]}`")
    if repo.config("series.cut") != name:
        raise SeriesError(f"{dest} is the cut checkout of {repo.config('series.cut')}, not of {name}")
    _check_settled(repo, dest)
    commits = repo.commits(f"{CUT_BASE_REF}..HEAD")
    if len(commits) != 1:
        raise SeriesError(f"{dest} holds {len(commits)} commits on top of what the cut needs: the cut is one commit")
    out = target.cut_path(name)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=ctx.work_dir()))
    try:
        produced = repo.format_patch(f"{CUT_BASE_REF}..HEAD", tmp)
        new = produced[0].read_bytes()
        changed = not out.is_file() or out.read_bytes() != new
        if changed:
            out.write_bytes(new)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ctx.out(f"exported the cut of {name[:4]} to {out}: {'written' if changed else 'unchanged'}")
    return 0
