"""`checkout`: a git work tree of the base with the series applied, one commit per patch."""

import argparse
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from .. import base as base_mod
from .. import patchfile, reports
from ..am import am_series, check_patches
from ..context import Context
from ..cuts import CUT_BASE_REF, cut_checkout_dir
from ..errors import SeriesError
from ..git import FORMAT_PATCH_ARGS, Repo
from ..manifest import Target, find_patch
from ..placement import Placement, blocked_by, blocked_text, declared_backport, landed, place
from ..preimages import loader
from ..statuses import BaseStatus


NAME = "checkout"
HELP = "make DIR a git checkout of the base with the series applied, one commit per patch"
DESCRIPTION = f"""\
{HELP}.

The base is the pinned sdist (default), the sdist of another release (sdist:VERSION), a clone's HEAD
(path:DIR) or a git ref (git:URL@REF); it is tagged series/base, and each patch is one commit on the
branch `patches`. On any base but the pinned sdist the patches go in as `verify` places them: one the
base already holds is left out, and so is one that the last `verify` on that base found fixed upstream
differently; each left out is named. The checkout is built in a staging folder and renamed into place,
so DIR is either the old or the new one. --replace refuses a checkout with work that was never exported
(a commit whose patch is not in patches/<target>, or uncommitted changes): export it first, or pass
--discard-unexported to throw it away.

example:
  python3 scripts/series.py checkout --replace
  python3 scripts/series.py checkout --base sdist:5.23.0 --dir /tmp/tf-5.23.0
  python3 scripts/series.py checkout --target accelerate --base git:https://github.com/huggingface/accelerate.git@main

exit status: 0 checkout made; 1 --stop-at-conflict and git am stopped at a patch (DIR holds it);
2 bad input (a patch does not apply, DIR not empty without --replace, unexported work in DIR, ...):
nothing changed."""
NEEDS_GIT = True
NEEDS_WORK = True
LOCKS_WORK = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", help="target in the manifest (default: the first)")
    p.add_argument("--dir", help="destination (default: <work>/checkouts/<target>)")
    p.add_argument(
        "--base", metavar="SPEC", help="sdist (default), sdist:VERSION, path:DIR (a clone's HEAD) or git:URL@REF"
    )
    p.add_argument("--replace", action="store_true", help="replace an existing non-empty DIR")
    p.add_argument(
        "--discard-unexported",
        action="store_true",
        help="with --replace: throw away commits and changes in DIR that were never exported",
    )
    p.add_argument(
        "--stop-at-conflict",
        action="store_true",
        help="when a patch does not apply, keep DIR with `git am` stopped there (exit 1) to resolve it by hand",
    )
    p.add_argument(
        "--cut",
        metavar="NNNN",
        help="the pull request's cut of an upstream-tier patch ([targets.<t>.cuts]): the pinned base, the patches it "
        "needs and the cut (default DIR: <work>/checkouts/<target>-cut-NNNN); without a cut file yet, `git am` stops "
        "at the series patch for you to resolve the overlap (exit 1); then `export --cut NNNN`",
    )


def check_destination(dest: Path, replace: bool) -> None:
    if dest.exists() and not dest.is_dir():
        raise SeriesError(f"{dest} exists and is not a folder")
    if dest.is_dir() and any(dest.iterdir()) and not replace:
        raise SeriesError(f"{dest} exists and is not empty; pass --replace to rebuild it")


# The commit `checkout` left the checkout at: the commits up to it are the patches, those after it are the user's.
MADE_REF = "refs/series/checkout"


def unexported_work(dest: Path, patch_dir: Path) -> list[str]:
    """What replacing the checkout `dest` would throw away that patches/ does not hold: one line per commit (on
    any branch or HEAD) that `checkout` did not make and whose patch (`export`'s bytes, `index` lines aside) is
    not a file in `patch_dir`, then uncommitted changes to tracked files (outside a stopped `git am` or
    rebase, whose conflicts are expected). Empty for a folder that is not a checkout made by `checkout`."""
    repo = Repo(dest, isolated=True)
    if not (dest / ".git").is_dir() or not repo.is_work_tree() or repo.rev(base_mod.BASE_TAG) is None:
        return []
    made = [MADE_REF] if repo.rev(MADE_REF) else []  # a checkout from before the ref: every commit after the base
    tips = ["--branches"] + (["HEAD"] if repo.rev("HEAD") else [])
    commits = repo.out("rev-list", "--reverse", *tips, "--not", base_mod.BASE_TAG, *made).split()
    exported = {
        patchfile.without_index_lines(path.read_text(encoding="utf-8", errors="replace"))
        for path in patch_dir.glob("*.patch")
    }
    found = []
    for commit in commits:
        text = repo.run("format-patch", *FORMAT_PATCH_ARGS, "--stdout", "-1", commit).stdout
        if patchfile.without_index_lines(text) not in exported:
            found.append(f"commit {commit[:12]} {repo.out('log', '-1', '--format=%s', commit)}")
    if not repo.operation_in_progress():
        dirty = [line[3:] for line in repo.status() if not line.startswith("??")]
        if dirty:
            found.append(f"uncommitted changes ({dirty[0]}{f', {len(dirty)} files' if len(dirty) > 1 else ''})")
    return found


def check_unexported(dest: Path, target: Target, discard: bool, log: Callable[[str], None]) -> None:
    """Bad input when replacing `dest` would throw away work that was never exported, unless `discard`."""
    lost = unexported_work(dest, target.patch_dir)
    if not lost:
        return
    if discard:
        log(f"--discard-unexported: throwing away {'; '.join(lost)}")
        return
    more = f" and {len(lost) - 1} more" if len(lost) > 1 else ""
    raise SeriesError(
        f"{dest} holds work that is not in {target.patch_dir} ({lost[0]}{more}): export it first "
        f"(series.py export --target {target.name}), or pass --discard-unexported to throw it away; nothing changed"
    )


def make_staging(dest: Path) -> Path:
    """The staging folder beside `dest` (the checkout is built there, then renamed into place); bad input, in one
    line, when the folder of `dest` cannot be made or written (a read-only place)."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    except OSError as exc:
        where = exc.filename or dest.parent
        raise SeriesError(
            f"cannot make the checkout {dest}: {exc.strerror or exc} ({where}); pick another --dir"
        ) from None


def clean_leftovers(dest: Path, log: Callable[[str], None]) -> None:
    """Remove what an interrupted run left beside `dest`: its staging folder `.<name>.XXXXXXXX` and the old
    checkout moved aside by --replace, `.<name>.old.XXXXXXXX`. An old checkout whose replacement never
    arrived (interrupted between the two renames) is put back instead."""
    if not dest.parent.is_dir():
        return
    pattern = re.compile(rf"^\.{re.escape(dest.name)}\.(old\.)?[A-Za-z0-9_]{{8}}$")
    for path in sorted(dest.parent.iterdir()):
        match = pattern.match(path.name)
        if not match or not path.is_dir() or path.is_symlink():
            continue
        old = path / "old"
        if match.group(1) and old.is_dir() and not dest.exists():
            os.rename(old, dest)
            log(f"put back {dest}, moved aside by an interrupted `checkout --replace`")
        else:
            log(f"removing {path.name}, left beside {dest} by an interrupted checkout")
        shutil.rmtree(path, ignore_errors=True)


def run(args: argparse.Namespace, ctx: Context) -> int:
    target = ctx.manifest.default_target(args.target)
    check_patches(target)
    if getattr(args, "cut", None) is not None:
        return _checkout_cut(args, ctx, target)
    spec = base_mod.parse_spec(args.base, target)
    base_mod.check_spec(spec)
    dest = Path(args.dir).resolve() if args.dir else ctx.checkout_dir(target)
    clean_leftovers(dest, ctx.log)
    check_destination(dest, args.replace)
    if args.replace:
        check_unexported(dest, target, args.discard_unexported, ctx.log)
    # The sdist of a release the manifest does not list is downloaded (and its sha256 recorded) before anything is made
    spec = base_mod.resolve(spec, target, ctx.downloads, ctx.log)
    staging = make_staging(dest)
    try:
        repo_dir = staging / "repo"
        base = base_mod.create(target, spec, repo_dir, downloads=ctx.downloads, log=ctx.log)
        repo = Repo(repo_dir, isolated=True)
        repo.run("config", "series.base", args.base if spec.moved else "sdist")
        names: list[str] = list(target.patches)
        left_out: list[tuple[str, str]] = []
        if spec.moved and target.patches:
            names, left_out, failed, files = place_as_verify(ctx, target, repo, base, keep=args.stop_at_conflict)
            for name, why in left_out:
                ctx.log(f"left out {name}: {why}")
        else:
            failed, files = am_series(repo, target, names)
            if failed:
                # A moved pin: the 3-way merge needs the blobs the patches were made against (an earlier sdist).
                loader(repo, target, ctx.downloads, ctx.log)()
                failed, files = am_series(repo, target, names, keep=args.stop_at_conflict)
        repo.run("update-ref", MADE_REF, "HEAD")
        markers = bool(failed) and bool(repo.unmerged_paths())
        where = f" ({', '.join(files)})" if files else ""
        if failed and not args.stop_at_conflict:
            hint = ""
            if spec.moved:
                # What the verify on this base found about the conflict; a verify suggested only where it has not run.
                verify = f"verify --target {target.name} --base {args.base}"
                judged = reports.judged(ctx.work, target, base)
                hint = "; " + reports.conflict_hint(judged, [failed], verify, "checkout then leaves it out")
            raise SeriesError(
                f"patch {failed} does not apply on {spec.describe(target)}{where}; no checkout was made{hint}"
            )
        check_destination(dest, args.replace)
        trash = None
        if dest.exists():
            trash = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=dest.parent))
            os.rename(dest, trash / "old")
        try:
            os.rename(repo_dir, dest)
        except BaseException:
            if trash is not None:
                os.rename(trash / "old", dest)
            raise
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    if failed and markers:
        ctx.out(
            f"{dest}: git am stopped at {failed}{where}, with conflict markers. Resolve the conflicts there, "
            "`git add` the files and run `git am --continue` (it applies the remaining patches), then export."
        )
        return 1
    if failed:
        # No 3-way merge was possible (the blobs the patch was made against are missing): no markers.
        ctx.out(
            f"{dest}: git am stopped at {failed}{where}, without conflict markers: the blobs it was made against "
            "are not in the download cache (check out the previous pin once to get its sdist, then run this "
            "again). Or apply what applies and get the rest as .rej files:\n"
            f"  cd {dest} && git am --show-current-patch=diff | git apply --reject --whitespace=nowarn -\n"
            "then fix the files by hand from each .rej, delete the .rej files, `git add` the files and run "
            "`git am --continue`; then export."
        )
        return 1
    left = f"; left out: {', '.join(f'{name[:4]} ({why})' for name, why in left_out)}" if left_out else ""
    ctx.out(
        f"{dest}: {spec.describe(target)} (tag {base_mod.BASE_TAG} = {base[:12]}) "
        f"+ {len(names)} patch(es) on branch {base_mod.BRANCH}{left}"
    )
    return 0


def place_as_verify(
    ctx: Context, target: Target, repo: Repo, base: str, *, keep: bool
) -> tuple[list[str], list[tuple[str, str]], str | None, list[str] | None]:
    """Put the patches on a base other than the pinned sdist one by one, the way `verify` judges them
    (placement.py): a patch the base already holds is left out, one that applies goes in (with a 3-way merge
    where needed), and one that conflicts is left out when the last `verify` on this base found that upstream
    fixed it differently (its tests pass without it), or when the manifest declares that it needs a backport to the
    base's release (`backports`). One that depends on a conflicting one is blocked: left out,
    not tried. Any other conflict stops: with `keep`, `git am` is left stopped at that patch with the rest queued.

    Returns (the patches that went in, [(patch, why)] left out, the patch that failed or None, its files)."""
    judged = reports.judged(ctx.work, target, base)
    present = landed(repo, base, target.patch_paths(), ctx.work_dir())
    preimages = loader(repo, target, ctx.downloads, ctx.log)
    version = base_mod.version_of(repo, base, target)

    went_in: list[str] = []
    left_out: list[tuple[str, str]] = []
    failed: tuple[str, list[str]] | None = None
    statuses: dict[str, str] = {}  # patch -> its base status here, for the patches that depend on it
    for index, name in enumerate(target.patches):
        patch = target.patch_path(name)
        blockers = [] if patch in present else blocked_by(target, name, statuses)
        if blockers:
            statuses[name] = BaseStatus.BLOCKED
            left_out.append((name, blocked_text(blockers, statuses)))
            continue
        placed = (
            Placement(BaseStatus.ALREADY_UPSTREAM) if patch in present else place(repo, patch, preimages=preimages)
        )
        statuses[name] = placed.status
        if placed.status.went_in:
            ctx.log(f"placed {name}: {placed.status}")
            went_in.append(name)
            continue
        if placed.status == BaseStatus.ALREADY_UPSTREAM:
            left_out.append((name, "already upstream"))
            continue
        verdict = judged.get(name)
        if verdict is not None and verdict.base_status == BaseStatus.FIXED_DIFFERENTLY:
            statuses[name] = BaseStatus.FIXED_DIFFERENTLY
            left_out.append((name, f"fixed upstream differently, as the verify of {verdict.date} found"))
            continue
        backport = declared_backport(target, version, name)
        if backport is not None:
            # A release older than the pin, where the manifest says it needs a backport: left out, with the patches
            # that need it (blocked), as verify reports them
            left_out.append((name, backport))
            continue
        files = [conflict.file for conflict in placed.conflicts]
        ctx.log(
            f"conflict {name}: {', '.join(conflict.describe() for conflict in placed.conflicts) or 'git am failed'}"
        )
        if keep:
            preimages()
            rest = [later for later in target.patches[index:] if target.patch_path(later) not in present]
            stopped, stopped_files = am_series(repo, target, rest, keep=True)
            return went_in, left_out, stopped, stopped_files
        # No checkout is made; the later patches are still placed (without it), so that the output says where
        # each one stands, as verify and apply do.
        failed = failed or (name, files)
    if failed is not None:
        return went_in, left_out, failed[0], failed[1]
    return went_in, left_out, None, None


def _checkout_cut(args: argparse.Namespace, ctx: Context, target: Target) -> int:
    """A checkout to make or edit the cut of one upstream-tier patch: the pinned sdist, the patches the cut needs
    (one commit each), then the cut (its file), or, while it has none, the series patch stopped where it does not go
    in without the rest of the series (`git am --3way`, conflict markers to resolve)."""
    name = find_patch(target, args.cut)
    if name not in target.cuts:
        raise SeriesError(
            f"{name} has no cut declared: add it to [targets.{target.name}.cuts] in {ctx.manifest.path.name} "
            '(needs = [the patches whose code it needs], reason = "...") first'
        )
    if args.base not in (None, "sdist"):
        raise SeriesError("--cut is made on the pinned sdist only: leave --base out")
    dest = Path(args.dir).resolve() if args.dir else cut_checkout_dir(ctx, target, name)
    clean_leftovers(dest, ctx.log)
    check_destination(dest, args.replace)
    if args.replace:
        check_unexported_cut(dest, target, name, args.discard_unexported)
    spec = base_mod.parse_spec(None, target)
    staging = make_staging(dest)
    try:
        repo_dir = staging / "repo"
        base_mod.create(target, spec, repo_dir, downloads=ctx.downloads, log=ctx.log)
        repo = Repo(repo_dir, isolated=True)
        repo.run("config", "series.cut", name)
        preimages = loader(repo, target, ctx.downloads, ctx.log)
        for need in target.pr_needs(name):
            # as `branches` puts them under the cut: cleanly, or 3-way with the blobs they were made against
            placed = place(repo, target.patch_path(need), preimages=preimages)
            if not placed.status.went_in:
                raise SeriesError(
                    f"{need}, which the cut of {name[:4]} needs, does not go in under it ({placed.status})"
                )
        repo.run("update-ref", CUT_BASE_REF, "HEAD")
        cut = target.cut_path(name)
        stopped = False
        if cut.is_file():
            proc = repo.am([cut], committer_date_is_author_date=True)
            if proc.returncode != 0:
                repo.am_abort()
                raise SeriesError(f"the cut {cut} does not apply on the pinned base and the patches it needs")
        else:
            preimages()
            proc = repo.am([target.patch_path(name)], three_way=True, committer_date_is_author_date=True)
            stopped = proc.returncode != 0
        repo.run("update-ref", MADE_REF, "HEAD")
        if dest.exists():
            shutil.rmtree(dest)
        os.rename(repo_dir, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    needs = ", ".join(n[:4] for n in target.pr_needs(name)) or "nothing"
    if stopped:
        ctx.out(
            f"{dest}: the pinned base + {needs}; git am stopped at {name} (it does not go in without the rest of the "
            "series). Resolve the conflicts so that the commit works on its own (what it needs of another patch's "
            f"code, it carries), `git add` the files, `git am --continue`, then `series.py export --cut {name[:4]}`."
        )
        return 1
    ctx.out(f"{dest}: the pinned base + {needs} + the cut of {name[:4]} ({cut.name}); edit it, then export --cut")
    return 0


def check_unexported_cut(dest: Path, target: Target, name: str, discard: bool) -> None:
    """--replace on a cut checkout: refuse to throw away a cut commit that differs from the exported cut file."""
    repo = Repo(dest, isolated=True)
    if discard or not (dest / ".git").is_dir() or repo.rev(CUT_BASE_REF) is None:
        return
    commits = repo.commits(f"{CUT_BASE_REF}..HEAD")
    cut = target.cut_path(name)
    if repo.operation_in_progress() or [line for line in repo.status() if not line.startswith("??")]:
        raise SeriesError(f"{dest} holds uncommitted work on the cut; export it, or pass --discard-unexported")
    if commits and (not cut.is_file() or patch_id(repo, repo.out("show", "HEAD")) != patch_id(repo, _read(cut))):
        raise SeriesError(f"{dest} holds a cut that was never exported; export it, or pass --discard-unexported")


def patch_id(repo: Repo, text: str) -> str:
    """`git patch-id --stable` of a patch or `git show` text: the same for the same change, whatever its message."""
    return (repo.run("patch-id", "--stable", input=text).stdout.split() or [""])[0]


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")
