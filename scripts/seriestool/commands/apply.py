"""`apply`: put the series onto a user's clone on a new branch, all or nothing."""

import argparse

from .. import base as base_mod
from .. import prtemplate, reports
from ..am import check_patches
from ..clone import blocking_branch, open_clean_clone
from ..context import Context
from ..errors import SeriesError
from ..git import Repo
from ..placement import Placement, blocked_by, blocked_text, declared_backport, landed, place
from ..preimages import PREIMAGES_REF, loader
from ..statuses import BaseStatus


NAME = "apply"
HELP = "apply the series to an existing clone on a new branch (all or nothing)"
DESCRIPTION = f"""\
{HELP}.

The clone must have a clean work tree. Patches its HEAD already holds (landed upstream) are skipped;
the others go in as `verify` places them (cleanly, or with `git am --3way` and the blobs the patches
were made against), one commit each, on a new branch. A patch that does not apply is left out when the
last `verify` on this HEAD (`verify --base path:CLONE`) found it fixed upstream differently, as
`checkout` and `branches` do, or when the manifest declares that it needs a backport to the clone's
release (`backports`: a fork of 5.24.0 gets every other patch). When another one does not apply, every
patch is still tried and its status printed (one that depends on it is `blocked by` it, and not tried),
and the clone is left exactly as it was (branch deleted, original branch checked out). With
--leave-out-conflicts, such a patch is left out instead (nothing of it is kept), with the patches that
depend on it, each named with why, and the branch holds the rest.

examples:
  python3 scripts/series.py apply --repo ~/src/transformers --branch my-series
  python3 scripts/series.py apply --repo ~/src/my-fork --leave-out-conflicts

exit status: 0 branch made (with --leave-out-conflicts, also when it left patches out); 2 bad input (dirty
clone, existing branch, a patch that does not apply): nothing changed."""
NEEDS_GIT = True
NEEDS_WORK = True
LOCKS_WORK = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repo", required=True, metavar="PATH", help="the clone (clean work tree)")
    p.add_argument("--branch", metavar="NAME", help="new branch (default: series/<target>)")
    p.add_argument("--target", help="target in the manifest (default: the first)")
    p.add_argument(
        "--leave-out-conflicts",
        action="store_true",
        help="leave a patch that does not apply out (with the patches that depend on it) and apply the rest",
    )


def run(args: argparse.Namespace, ctx: Context) -> int:
    target = ctx.manifest.default_target(args.target)
    check_patches(target)
    repo = open_clean_clone(args.repo, NAME)
    head = repo.out("rev-parse", "HEAD")
    if not target.patches:
        ctx.out(f"no patches for {target.name}: nothing to apply")
        return 0
    branch = args.branch or f"series/{target.name}"
    if not repo.ok("check-ref-format", "--branch", branch):
        raise SeriesError(f"{branch!r} is not a valid branch name")
    if repo.branch_exists(branch):
        raise SeriesError(f"branch {branch} already exists in {repo.path}; pick another with --branch")
    blocker = blocking_branch(repo, branch)
    if blocker is not None:
        raise SeriesError(
            f"branch {blocker} in {repo.path} keeps {branch} from being made (git cannot have both a branch and a "
            "folder of that name); pick another with --branch"
        )
    if branch == prtemplate.BRANCH_PREFIX.rstrip("/") or branch.startswith(prtemplate.BRANCH_PREFIX):
        raise SeriesError(
            f"branch {branch} would collide with the branches `branches` makes ({prtemplate.BRANCH_PREFIX}...); "
            "pick another with --branch"
        )
    if not repo.ok("var", "GIT_COMMITTER_IDENT"):
        raise SeriesError(f"git has no committer identity in {repo.path}; set user.name and user.email")

    # What the clone already holds, as a stack: after k pull requests landed upstream, patches 1..k are
    # there even where later patches rewrote lines that earlier ones added.
    present = landed(repo, head, target.patch_paths(), ctx.work_dir())
    # What the last verify on this HEAD found, as `checkout` and `branches` read it.
    judged = reports.judged(ctx.work, target, head)
    # The merge every command uses (placement.place), with the blobs the patches were made against: a fork whose
    # files moved lacks the versions between two patches, which only the series' own commits hold.
    had_preimages = repo.rev(PREIMAGES_REF) is not None
    preimages = loader(repo, target, ctx.downloads, ctx.log)
    version = base_mod.version_of(repo, head, target)
    original = repo.current_branch() or head
    repo.run("checkout", "--quiet", "-b", branch)
    results: list[tuple[str, str, list[str]]] = []
    failed: list[str] = []
    statuses: dict[str, str] = {}  # patch -> its base status here, for the patches that depend on it
    try:
        for name in target.patches:
            patch = target.patch_path(name)
            blockers = [] if patch in present else blocked_by(target, name, statuses)
            if blockers:
                # Left out with the patch it needs, not tried without it (as verify judges it).
                statuses[name] = BaseStatus.BLOCKED
                results.append((name, blocked_text(blockers, statuses), []))
                continue
            placed = (
                Placement(BaseStatus.ALREADY_UPSTREAM) if patch in present else place(repo, patch, preimages=preimages)
            )
            statuses[name] = placed.status
            if placed.status == BaseStatus.ALREADY_UPSTREAM:
                results.append((name, "already present", []))
            elif placed.status.went_in:
                results.append((name, "applied" if placed.status == BaseStatus.CLEAN else "applied (3-way)", []))
            elif (verdict := judged.get(name)) is not None and verdict.base_status == BaseStatus.FIXED_DIFFERENTLY:
                statuses[name] = BaseStatus.FIXED_DIFFERENTLY
                results.append(
                    (name, f"left out: fixed upstream differently, as the verify of {verdict.date} found", [])
                )
            elif (backport := declared_backport(target, version, name)) is not None:
                results.append((name, f"left out: {backport}", []))
            elif getattr(args, "leave_out_conflicts", False):
                files = [conflict.file for conflict in placed.conflicts]
                results.append((name, "left out: conflict", files))
            else:
                # Left out; the later patches are still tried (without it), so that the output says where each
                # one stands, as verify does. Nothing is kept.
                results.append((name, "conflict", [conflict.file for conflict in placed.conflicts]))
                failed.append(name)
    except BaseException:
        _rollback(repo, original, branch)
        raise
    finally:
        if not had_preimages:
            _forget_preimages(repo)
    if failed:
        _rollback(repo, original, branch)
    width = max(len(name) for name, _, _ in results)
    for name, state, files in results:
        extra = f" ({', '.join(files)})" if files else ""
        ctx.out(f"{name:<{width}}  {state}{extra}")
    if failed:
        more = f" (and {len(failed) - 1} more: {', '.join(n[:4] for n in failed[1:])})" if len(failed) > 1 else ""
        # What the verify on this HEAD found about each conflict; a verify suggested only where it has not run.
        verify = f"verify --target {target.name} --base path:{repo.path}"
        hint = reports.conflict_hint(judged, failed, verify, "apply then leaves it out")
        raise SeriesError(
            f"patch {failed[0]} does not apply to {repo.path}{more}; nothing was changed (still on {original}); {hint}"
        )
    applied = sum(1 for _, state, _ in results if state.startswith("applied"))
    present_count = sum(1 for _, state, _ in results if state == "already present")
    left = len(results) - applied - present_count
    left_out = f", {left} left out (named above)" if left else ""
    ctx.out(f"branch {branch}: {applied} applied, {present_count} already present{left_out}")
    return 0


def _forget_preimages(repo: Repo) -> None:
    """Drop the ref and the key the blobs for 3-way merges were stored under: the clone keeps no ref of ours."""
    repo.run("update-ref", "-d", PREIMAGES_REF, check=False)
    repo.run("config", "--unset", "series.preimages", check=False)


def _rollback(repo: Repo, original: str, branch: str) -> None:
    if repo.operation_in_progress():
        repo.am_abort()
    repo.run("reset", "--quiet", "--hard", "HEAD", check=False)
    repo.switch(original)
    repo.delete_branch(branch)
