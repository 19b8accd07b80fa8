"""`branches`: one branch per patch in the user's clone, each ready to push as one pull request.

A branch holds its patch alone on the base, or on top of the patches it depends on (the manifest's
`depends`). Each patch is placed the way `verify` places it (placement.py): it goes in cleanly or with a 3-way
merge, or it is left out because the base already holds it, or because the last `verify` on this base found
it fixed upstream differently; one that conflicts, or depends on one that does (blocked), gets no branch.
When the clone's base holds upstream's tests (a home file of [targets.<t>.test_homes]), each commit of an
upstream-tier branch carries its tests moved into their homes, as `homes` moves them (testhomes.py), instead of
the new test files the patch adds; a clone without them gets the new files, and the report says so. The commit of a
patch that declares repository checks ([targets.<t>.repo_checks]) also adds the line that runs each to its target
of the clone's root Makefile and the step that runs it to the CI's repository-consistency job (repochecks.py: the
sdist has neither file, so no patch carries them); a clone without them gets the commit as it is, and the report and
the record say so (for `pr`).
Everything is built in a scratch clone; the clone's branches are created or
moved at the end, in one ref transaction, so a failure leaves them all as they were.
"""

import argparse
import shlex
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import prtemplate, pyenv, repochecks, reports, testhomes
from ..am import check_patches
from ..clone import author_identity, blocking_branch, committer_identity, open_clean_clone, reauthor
from ..context import Context
from ..errors import SeriesError
from ..git import GitError, Repo
from ..manifest import FORK_TIER, Target
from ..placement import Placement, blocked_by, blocked_text, landed, place
from ..preimages import loader
from ..reports import Judgement
from ..statuses import BaseStatus, Verdict


NAME = "branches"
HELP = "make one branch per patch in a clone, each to push as one pull request"
DESCRIPTION = f"""\
{HELP}.

In the clone (clean work tree; its HEAD, files and other branches are left alone), each patch gets a
branch named from its subject ({prtemplate.BRANCH_PREFIX}<subject>) holding only that patch on the base
(--base-ref, default the clone's HEAD), or on top of the patches it depends on (the manifest's `depends`).
Patches go in as `verify` places them: cleanly or with a 3-way merge; a patch the base already holds is
left out, and so is one the last `verify` on this base found fixed upstream differently; one that conflicts
gets no branch, and is listed with its conflict, and so does one that depends on it (blocked by it), while
every other branch is made. Running it again
moves the branches it made to the new result; a branch of that name that it did not make, or that has
commits of yours since, is not touched (bad input). Nothing is pushed: it prints the `git push` and
`gh pr create` commands. When the clone holds upstream's tests (a home file of the manifest's `test_homes`),
each commit of a pull request's branch carries its tests moved into upstream's topic files (as `homes` writes
them, with the manifest's `shared_helpers`) instead of the new test files; otherwise the branches add the new
files, and it says so. The commit of a patch with repository checks ([targets.<target>.repo_checks]) adds
the line that runs each to its target of the clone's root Makefile (`check-repo`), in the style of the target's
`utils/check_*.py` lines, and a `- run:` step after the last such step of the CI config (.circleci/config.yml, the
gate); without them it is left as it is, and the output says so. A
fork-tier patch ([targets.<target>.fork]: carried for forks) gets a branch {prtemplate.FORK_BRANCH_PREFIX}<subject>
and a `gh issue create` (its issue text) instead of a pull request.
Every commit is authored by you: --author "Name <email>", else the clone's git config user.name and
user.email (neither: bad input); the patch's author date is kept, so a rerun makes the same commits.

example:
  python3 scripts/series.py branches --repo ~/src/transformers --base-ref upstream/main

exit status: 0 branches made; 1 the branches that could be made are made, but a patch conflicts (listed, with
the patches blocked by it);
2 bad input (dirty clone, unknown ref, a branch that is not ours, no author): no branch made or moved."""
NEEDS_GIT = True
NEEDS_WORK = True
LOCKS_WORK = True

REFLOG_MESSAGE = "series.py branches"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repo", required=True, metavar="FORK", help="your clone of the upstream repository")
    p.add_argument("--target", help="target in the manifest (default: the first)")
    p.add_argument("--base-ref", metavar="REF", help="the commit the branches start from (default: HEAD)")
    p.add_argument(
        "--author",
        metavar='"NAME <EMAIL>"',
        help="who the commits are authored by (default: the clone's git config user.name and user.email)",
    )


class _Branch:
    def __init__(self, patch: str, branch: str) -> None:
        self.patch, self.branch = patch, branch
        self.tip: str | None = None  # the commit the branch gets, or None when the patch is left out
        self.holds: list[str] = []  # the patches it depends on, under it
        self.without: list[str] = []  # the patches it depends on that are left out
        self.status: BaseStatus | None = None
        self.why = ""  # why it is left out
        self.moved: list[str] = []  # the homes its commits carry its tests in (none: the new test files)
        self.tests_stay = ""  # why its tests stay new files though the clone holds upstream's tests
        self.checks: list[dict[str, Any]] = []  # what became of the lines of its repository checks (`_wire_checks`)


def run(args: argparse.Namespace, ctx: Context) -> int:
    target = ctx.manifest.default_target(args.target)
    check_patches(target)
    repo = open_clean_clone(args.repo, NAME)
    author = author_identity(repo, args.author)
    identity = committer_identity(repo, fallback=author)
    ref = args.base_ref or "HEAD"
    base = repo.rev(ref)
    if base is None:
        raise SeriesError(f"{ref!r} is not a commit in {repo.path}")
    if not target.patches:
        ctx.out(f"no patches for {target.name}: no branches")
        return 0
    names = prtemplate.branches_of(target)
    for branch in names.values():
        if not repo.ok("check-ref-format", "--branch", branch):
            raise SeriesError(f"{branch!r} is not a valid branch name")
        blocker = blocking_branch(repo, branch)
        if blocker is not None:
            raise SeriesError(
                f"branch {blocker} in {repo.path} keeps {branch} from being made (git cannot have both a branch "
                f"and a folder of that name): rename it (git branch -m {blocker} <new name>), then run again "
                "(no branch was made or moved)"
            )
    _check_base_is_not_ours(repo, ref, base, names)
    judged = reports.judged(ctx.work, target, base)

    folder = ctx.work_dir() / "branches"
    folder.mkdir(exist_ok=True)
    for left in folder.glob(f".{target.name}.*"):  # the scratch clone of a run that was killed
        shutil.rmtree(left, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=folder))
    homes = sorted(set(target.test_homes.values()))
    homes_in_base = [home for home in homes if repo.ok("cat-file", "-e", f"{base}:{home}")]
    try:
        ruff = _ruff(ctx) if homes_in_base else None
        moving = bool(homes_in_base)
        plan = _build(ctx, target, repo, base, ref, identity, author, tmp / "repo", names, judged, moving, ruff)
        moves = _check_moves(repo, plan)
        if moves:
            _publish(repo, tmp / "repo", moves)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _report(ctx, target, repo, base, ref, plan, moves, judged, homes_in_base)
    _record(ctx, target, repo, base, ref, plan)
    conflicts = [entry.patch for entry in plan.values() if entry.status == BaseStatus.CONFLICT]
    if conflicts:
        # What the verify on this base found about each conflict; a verify suggested only for those it did not judge.
        unjudged = []
        for name in conflicts:
            advice = reports.conflict_advice(judged.get(name))
            if advice:
                ctx.out(f"no branch for {name[:4]} (conflict): {advice}")
            else:
                unjudged.append(name)
        if unjudged:
            ctx.out(
                f"no branch for {', '.join(name[:4] for name in unjudged)} (conflict): `verify --target "
                f"{target.name} --base path:{repo.path}` (for HEAD) tells whether upstream fixed it differently; "
                "then it is left out"
            )
        return 1
    return 0


def _numstat(repo: Repo, tip: str) -> dict[str, list[int]]:
    """The lines the branch's own commit adds and removes per file: its moved tests as they are in their homes, which
    `pr` quotes instead of the patch's new files (cold reviews: the notes counted a new file's header and helpers)."""
    counts = {}
    for line in repo.out("diff", "--numstat", f"{tip}~1", tip).splitlines():
        added, removed, path = line.split("\t", 2)
        if added != "-":  # a binary file
            counts[path] = [int(added), int(removed)]
    return counts


def _record(ctx: Context, target: Target, repo: Repo, base: str, ref: str, plan: dict[str, _Branch]) -> None:
    """Keep which base each branch was made on, for `pr`: it quotes the verify made on that base."""
    reports.save_branches(
        ctx.work,
        target.name,
        {
            "repo": str(repo.path),
            "ref": ref,
            "base": base,
            "tree": repo.out("rev-parse", f"{base}^{{tree}}"),
            "branches": {
                entry.patch: {
                    "branch": entry.branch,
                    "tip": entry.tip,
                    "status": str(entry.status),
                    "repo_checks": entry.checks,
                    "numstat": _numstat(repo, entry.tip),
                }
                for entry in plan.values()
                if entry.tip is not None
            },
        },
    )


def _check_base_is_not_ours(repo: Repo, ref: str, base: str, names: dict[str, str]) -> None:
    """Bad input when the base is one of the branches `branches` makes (the clone left on a PR branch): every
    other branch would be stacked on that patch and the patch itself called already upstream."""
    current = repo.current_branch() if ref == "HEAD" else None
    for patch, branch in names.items():
        if branch == current or (repo.rev(f"refs/heads/{branch}") == base and _made_by_us(repo, branch)):
            raise SeriesError(
                f"the base {ref} of {repo.path} is {branch}, the branch of {patch[:4]}: the others would be "
                "stacked on it; switch to the upstream branch (git switch main) or pass --base-ref "
                "(no branch was made or moved)"
            )


def _made_by_us(repo: Repo, branch: str) -> bool:
    last = repo.run("reflog", "show", "--format=%gs", "-n", "1", f"refs/heads/{branch}", check=False)
    return last.stdout.startswith(REFLOG_MESSAGE)


def _build(
    ctx: Context,
    target: Target,
    repo: Repo,
    base: str,
    ref: str,
    identity: dict[str, str],
    author: tuple[str, str],
    path: Path,
    names: dict[str, str],
    judged: dict[str, Judgement],
    move_tests: bool = False,
    ruff: list[str] | None = None,
) -> dict[str, _Branch]:
    """Every patch's branch, built in a scratch clone that shares the clone's objects; each commit authored by
    `author` (the submitter), committed by `identity`. `move_tests`: the base holds upstream's tests, so each
    upstream-tier branch's commits carry their tests moved home (`_move_tests`, formatted with `ruff`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Repo(path.parent, isolated=True).run("clone", "--quiet", "--shared", "--no-checkout", str(repo.path), str(path))
    scratch = Repo(path, isolated=True, env=identity)
    present = landed(scratch, base, target.patch_paths(), ctx.work_dir())
    preimages = loader(scratch, target, ctx.downloads, ctx.log)

    plan: dict[str, _Branch] = {}
    for name in target.patches:
        entry = plan[name] = _Branch(name, names[name])
        patch = target.patch_path(name)
        if patch in present:
            entry.status, entry.why = BaseStatus.ALREADY_UPSTREAM, "already upstream (the base holds the whole patch)"
            continue
        # the patches its pull request holds under it: those its cut needs where it has one ([targets.<t>.cuts])
        needs = target.pr_needs(name)
        statuses = {dep: str(plan[dep].status) for dep in needs}
        blockers = blocked_by(target, name, statuses)
        if blockers:
            # It needs a patch that gets no branch here: no branch for it either (its pull request would not work
            # without that one), and it is not tried without it.
            entry.status, entry.why = BaseStatus.BLOCKED, blocked_text(blockers, statuses)
            continue
        entry.holds = [dep for dep in needs if plan[dep].tip is not None]
        entry.without = [dep for dep in needs if plan[dep].tip is None]
        scratch.reset_hard(base)
        chain: list[tuple[str, str]] = []  # (patch, commit) of the branch, in order
        for dep in entry.holds:
            under = place(scratch, target.patch_path(dep), preimages=preimages)
            if not under.status.went_in:
                entry.status = BaseStatus.CONFLICT
                entry.why = f"conflict: {dep[:4]}, which it depends on, does not go in under it ({_files(under)})"
                break
            reauthor(scratch, author)
            _wire_checks(scratch, target, dep)  # its commit as on its own branch
            chain.append((dep, scratch.out("rev-parse", "HEAD")))
        if entry.status == BaseStatus.CONFLICT:
            continue
        cut = target.cut_path(name)
        placed = place(scratch, cut if name in target.cuts and cut.is_file() else patch, preimages=preimages)
        entry.status = placed.status
        if placed.status.went_in:
            reauthor(scratch, author)
            entry.checks = _wire_checks(scratch, target, name)
            entry.tip = scratch.out("rev-parse", "HEAD")
            if move_tests and target.tier(name) != FORK_TIER:
                chain.append((name, entry.tip))
                try:
                    entry.tip, entry.moved = _move_tests(scratch, target, base, chain, ruff, ctx.manifest.path.parent)
                except SeriesError as exc:
                    entry.tests_stay = str(exc)
            continue
        if placed.status == BaseStatus.ALREADY_UPSTREAM:
            entry.why = "already upstream (the base holds the whole patch)"
            continue
        verdict = judged.get(name)
        if verdict is not None and verdict.base_status == BaseStatus.FIXED_DIFFERENTLY:
            entry.status = BaseStatus.FIXED_DIFFERENTLY
            entry.why = f"fixed upstream differently, as the verify of {verdict.date} on this base found"
            continue
        # No branch for it; the others are made all the same (one conflict must not block every pull request).
        on_top = f" on top of {', '.join(dep[:4] for dep in entry.holds)}" if entry.holds else ""
        entry.why = f"conflict{on_top}: {_files(placed)}"
    return plan


def _wire_checks(scratch: Repo, target: Target, patch: str) -> list[dict[str, Any]]:
    """Add to HEAD, the commit of `patch`, the line that runs each of its repository checks ([targets.<t>.repo_checks])
    in its target of the root Makefile (`repochecks.place`: after the target's last `utils/check_*.py` line, with its
    prefix), amended into that commit: its message, author and author date kept, its committer date its author date,
    as `reauthor` makes it (a rerun makes the same commit). A line that cannot be placed (no Makefile, no such target)
    leaves the commit as it is. Returns what became of each line, for the report and the record `pr` reads."""
    makefile = scratch.path / repochecks.MAKEFILE
    ci_config = scratch.path / repochecks.CI_CONFIG
    found: list[dict[str, Any]] = []
    for check in target.repo_checks.get(patch, []):
        text = makefile.read_bytes().decode("utf-8", "surrogateescape") if makefile.is_file() else None
        placed = repochecks.place(text, check["make_target"], check["command"])
        if placed.text is not None:
            makefile.write_bytes(placed.text.encode("utf-8", "surrogateescape"))
        # the CI's repository-consistency job: the gate (the Makefile's check lines go on after a failure)
        text = ci_config.read_bytes().decode("utf-8", "surrogateescape") if ci_config.is_file() else None
        step = repochecks.place_ci(text, check["command"])
        if step.text is not None:
            ci_config.write_bytes(step.text.encode("utf-8", "surrogateescape"))
        found.append(
            {
                **check,
                "line": placed.line,
                "added": placed.text is not None,
                "present": placed.present,
                "after": placed.after,
                "why": placed.why,
                "ci": {
                    "line": step.line,
                    "added": step.text is not None,
                    "present": step.present,
                    "after": step.after,
                    "why": step.why,
                },
            }
        )
    changed = [
        path
        for path, added in (
            (repochecks.MAKEFILE, any(check["added"] for check in found)),
            (repochecks.CI_CONFIG, any(check["ci"]["added"] for check in found)),
        )
        if added
    ]
    if changed:
        date = scratch.out("log", "-1", "--format=%ad", "--date=raw", "HEAD")
        scratch.run("add", "--", *changed)
        scratch.run(
            "commit",
            "--amend",
            "--quiet",
            "--no-edit",
            "--no-verify",
            "--cleanup=verbatim",
            env={"GIT_COMMITTER_DATE": date},
        )
    return found


def _ruff(ctx: Context) -> list[str]:
    """The ruff that formats the moved tests: the pinned one (`scripts/requirements-test.txt`), from the pinned venv
    when it is built, else installed on its own (the branches are never left with unformatted tests)."""
    return pyenv.ensure_ruff(ctx.work, ctx.requirements, log=ctx.log)


def _change_upstream_tests(scratch: Repo, target: Target, patch: str, folder: Path) -> list[str]:
    """Apply to the scratch work tree the changes of upstream's tests that `patch` declares
    ([targets.<t>.upstream_tests_changed], each `diff` below `folder`, the manifest's): upstream's CI runs those tests
    on the pull request's branch. Returns the files changed. A diff that does not apply is a SeriesError."""
    changed = []
    for entry in target.upstream_tests_changed.get(patch, []):
        if not entry.get("diff"):
            continue
        diff = folder / entry["diff"]
        proc = scratch.run("apply", "--recount", str(diff), check=False)
        if proc.returncode != 0:
            raise SeriesError(
                f"{diff.name}, the change {patch[:4]} declares to {entry['test']}, does not apply to the branch: "
                f"{(proc.stderr or proc.stdout).strip().splitlines()[-1:]}"
            )
        numstat = scratch.out("apply", "--numstat", "--recount", "-R", str(diff)).splitlines()
        changed += [line.split("\t")[-1] for line in numstat if line.strip()]
    return changed


def _move_tests(
    scratch: Repo,
    target: Target,
    base: str,
    chain: list[tuple[str, str]],
    ruff: list[str] | None,
    folder: Path,
) -> tuple[str, list[str]]:
    """Make the commits of `chain` (patch, commit) again on `base`, each carrying the new test files of the patches
    so far moved into their homes (testhomes.plan_chain, what `homes` writes) instead of the files themselves; each
    commit keeps its message and author, its committer date its author date, and carries the changes to upstream's
    tests that its patches declare (`_change_upstream_tests`). Returns the new tip and the homes of the last patch's
    tests. A SeriesError (a test class without a home) leaves HEAD as it was, at the last commit."""

    def reader(commit: str) -> Callable[[str], str | None]:
        def read(path: str) -> str | None:
            proc = scratch.run("show", f"{commit}:{path}", check=False)
            return proc.stdout if proc.returncode == 0 else None

        return read

    names = [patch for patch, _ in chain]
    moved = [testhomes.plan_chain(target, names[: i + 1], reader(base), reader(c)) for i, (_, c) in enumerate(chain)]
    scratch.reset_hard(base)
    for i, ((_, commit), found) in enumerate(zip(chain, moved, strict=True)):
        if ruff is not None:
            testhomes.format_moved(found, ruff, scratch.path)
        scratch.run("read-tree", "--reset", "-u", commit)
        for source in found.sources:
            (scratch.path / source).unlink(missing_ok=True)
        for home, text in found.after.items():
            (scratch.path / home).parent.mkdir(parents=True, exist_ok=True)
            (scratch.path / home).write_text(text, encoding="utf-8")
        changed = [path for patch in names[: i + 1] for path in _change_upstream_tests(scratch, target, patch, folder)]
        scratch.run("add", "--all", "--", *sorted({*found.sources, *found.after, *changed}))
        date = scratch.out("log", "-1", "--format=%ad", "--date=raw", commit)
        scratch.run(
            "commit",
            "--quiet",
            "--no-verify",
            "--allow-empty",
            "--cleanup=verbatim",
            "-C",
            commit,
            env={"GIT_COMMITTER_DATE": date},
        )
        # the message names the new test files: on the branch they are classes of their homes
        message = scratch.out("log", "-1", "--format=%B", commit)
        moved_message = _name_homes(message, found.moves)
        if moved_message != message:
            scratch.run(
                "commit",
                "--quiet",
                "--no-verify",
                "--allow-empty",
                "--amend",
                "--cleanup=verbatim",
                "-F",
                "-",
                input=moved_message + "\n",
                env={"GIT_COMMITTER_DATE": date},
            )
    own = set(moved[-1].sources) - (set(moved[-2].sources) if len(moved) > 1 else set())
    homes = list(dict.fromkeys(m.home for m in moved[-1].moves if m.source in own))
    return scratch.out("rev-parse", "HEAD"), homes


def _name_homes(message: str, moves: list[testhomes.Moved]) -> str:
    """`message` with each moved test file's path replaced by the home file it moved into (`homes` names the home's
    classes in the pull request's notes)."""
    for move in moves:
        if move.source and move.source != move.home:
            message = message.replace(move.source, move.home)
    return message


def _files(placed: Placement) -> str:
    return ", ".join(conflict.describe() for conflict in placed.conflicts) or "git am failed"


def _check_moves(repo: Repo, plan: dict[str, _Branch]) -> list[tuple[str, str, str | None]]:
    """[(branch, new commit, old commit or None)] to make; bad input when a branch to move is not ours or is
    checked out."""
    checked_out = _checked_out(repo)
    moves: list[tuple[str, str, str | None]] = []
    for entry in plan.values():
        if entry.tip is None:
            continue
        old = repo.rev(f"refs/heads/{entry.branch}")
        if old == entry.tip:
            continue
        if old is not None:
            last = repo.run("reflog", "show", "--format=%gs", "-n", "1", f"refs/heads/{entry.branch}", check=False)
            if not last.stdout.startswith(REFLOG_MESSAGE):
                what = f"its last change: {last.stdout.strip()!r}" if last.stdout.strip() else "it has no reflog"
                raise SeriesError(
                    f"branch {entry.branch} in {repo.path} was not made by `branches`, or has changed since "
                    f"({what}); rename or delete it, then run again (no branch was made or moved)"
                )
            if entry.branch in checked_out:
                raise SeriesError(
                    f"branch {entry.branch} is checked out in {checked_out[entry.branch]}; switch to another "
                    "branch there, then run again (no branch was made or moved)"
                )
        moves.append((entry.branch, entry.tip, old))
    return moves


def _checked_out(repo: Repo) -> dict[str, str | None]:
    """{branch: work tree} of every work tree of the clone."""
    found: dict[str, str | None] = {}
    tree: str | None = None
    for line in repo.out("worktree", "list", "--porcelain").splitlines():
        if line.startswith("worktree "):
            tree = line.split(" ", 1)[1]
        elif line.startswith("branch refs/heads/"):
            found[line.removeprefix("branch refs/heads/")] = tree
    return found


def _publish(repo: Repo, scratch_path: Path, moves: list[tuple[str, str, str | None]]) -> None:
    """Copy the new commits into the clone, then create or move every branch in one transaction."""
    scratch = Repo(scratch_path, isolated=True)
    refs = []
    for index, (_, tip, _) in enumerate(moves):
        ref = f"refs/series/branch-{index}"
        scratch.run("update-ref", ref, tip)
        refs.append(ref)
    try:
        repo.run("fetch", "--quiet", "--no-tags", "--no-write-fetch-head", str(scratch_path), *refs)
    except GitError as exc:
        raise SeriesError(
            f"cannot copy the new commits into {repo.path}: {exc}; no branch was made or moved"
        ) from None
    zero = "0" * len(moves[0][1])
    lines = ["start"]
    lines += [f"update refs/heads/{branch} {tip} {old or zero}" for branch, tip, old in moves]
    lines += ["prepare", "commit", ""]
    proc = repo.run(
        "update-ref", "-m", REFLOG_MESSAGE, "--create-reflog", "--stdin", input="\n".join(lines), check=False
    )
    if proc.returncode != 0:
        why = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
        raise SeriesError(f"cannot update the branches in {repo.path} ({why}); no branch was made or moved")


def _report(
    ctx: Context,
    target: Target,
    repo: Repo,
    base: str,
    ref: str,
    plan: dict[str, _Branch],
    moves: list[tuple[str, str, str | None]],
    judged: dict[str, Judgement],
    homes_in_base: list[str],
) -> None:
    moved = {branch: old for branch, _, old in moves}
    made = [entry for entry in plan.values() if entry.tip is not None]
    ctx.out(
        f"branches of {target.name} in {repo.path}, on {ref} ({base[:12]}): "
        f"{sum(1 for e in made if e.branch in moved and moved[e.branch] is None)} made, "
        f"{sum(1 for e in made if moved.get(e.branch))} moved, "
        f"{sum(1 for e in made if e.branch not in moved)} unchanged"
    )
    rows = [("patch", "branch", "commits", "applies", "verify on this base")]
    for entry in made:
        verdict = judged.get(entry.patch)
        if verdict is None:
            checked = "not verified"
        elif verdict.verdict == Verdict.OK:
            checked = f"ok ({verdict.date})"
        else:
            checked = f"{verdict.verdict.upper()} ({verdict.date})"
        commits = str(len(entry.holds) + 1)
        rows.append((entry.patch[:4], entry.branch, commits, str(entry.status), checked))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        ctx.out("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    for entry in plan.values():
        if entry.tip is None:
            what = "no branch for" if entry.status in (BaseStatus.CONFLICT, BaseStatus.BLOCKED) else "left out"
            ctx.out(f"{what} {entry.patch}: {entry.why}")
    for entry in made:
        if entry.without:
            ctx.out(f"{entry.branch}: made without {', '.join(entry.without)}, which it depends on (left out)")
        if entry.holds and target.tier(entry.patch) == FORK_TIER:
            held = ", ".join(dep[:4] for dep in entry.holds)
            ctx.out(f"{entry.branch} holds {held} under {entry.patch[:4]} (depends)")
        elif entry.holds:
            ctx.out(
                f"{entry.branch} holds {', '.join(dep[:4] for dep in entry.holds)} under {entry.patch[:4]} (depends): "
                "its pull request is opened as a draft (below) until theirs are merged"
            )
    prs_made = [entry for entry in made if target.tier(entry.patch) != FORK_TIER]
    if target.test_homes and prs_made and not homes_in_base:
        ctx.out(
            f"tests: {ref} of {repo.path} holds none of upstream's test files that [targets.{target.name}.test_homes] "
            "names: the branches add the new test files as they are (a clone of upstream moves them home)"
        )
    for entry in prs_made if homes_in_base else []:
        if entry.moved:
            ctx.out(f"{entry.branch}: its tests moved into {', '.join(entry.moved)} (as `homes` writes them)")
        elif entry.tests_stay:
            ctx.out(f"{entry.branch}: its tests stay new files: {entry.tests_stay}")
    for entry in made:
        for check in entry.checks:
            where = f"the {check['make_target']} target of the Makefile"
            if check["added"]:
                after = f'after "{check["after"]}"' if check["after"] else "the first line of its recipe"
                ctx.out(f'{entry.branch}: its commit adds "{check["line"]}" to {where} ({after})')
            elif check["present"]:
                ctx.out(f'{entry.branch}: {where} already runs "{check["line"]}"')
            else:
                ctx.out(
                    f'{entry.branch}: "{check["line"]}" is not in {where}: {check["why"]} (`pr {entry.patch[:4]}` '
                    "says where to add it by hand)"
                )
            ci = check.get("ci") or {}
            where = f"the CI's repository checks ({repochecks.CI_CONFIG})"
            if ci.get("added"):
                ctx.out(f'{entry.branch}: its commit adds "{ci["line"]}" to {where}, after "{ci["after"]}"')
            elif ci.get("present"):
                ctx.out(f'{entry.branch}: {where} already runs "{ci["line"]}"')
            elif ci:
                ctx.out(
                    f'{entry.branch}: "{ci["line"]}" is not in {where}: {ci["why"]} (`pr {entry.patch[:4]}` says '
                    "where to add it by hand)"
                )
    if not judged:
        ctx.out(
            f"not verified on this base: `python3 scripts/series.py verify --target {target.name} --base "
            f"path:{repo.path}` checks the patches on the clone's HEAD"
        )
    elif any(judged.get(e.patch) is None or judged[e.patch].verdict != Verdict.OK for e in made):
        ctx.out("some branches hold a patch the last verify on this base did not pass: check them before you push")
    if not made:
        return
    upstream = prtemplate.github_repo(target.git_url) or target.git_url
    ctx.out(f"nothing was pushed. To submit (origin: your fork of {upstream}; <you>: your GitHub user):")
    ctx.out(f"  git -C {repo.path} push --force-with-lease origin " + " ".join(entry.branch for entry in made))
    prs = [entry for entry in made if target.tier(entry.patch) != FORK_TIER]
    forks = [entry for entry in made if target.tier(entry.patch) == FORK_TIER]
    if prs:
        ctx.out("then for each pull request, write its description in the file yourself (docs/user.md, submitting):")
    for entry in prs:
        text = f"/tmp/pr-{target.name}-{entry.patch[:4]}.md"
        ctx.out(f"  python3 scripts/series.py pr {entry.patch[:4]} --target {target.name} > {text}")
        if entry.holds:
            # It carries the commits of the pull requests it depends on: a draft until they are merged.
            first = ", ".join(plan[dep].branch for dep in entry.holds)
            ctx.out(f"  # a draft: {entry.branch} carries the commits of {first}; mark it ready once they are merged")
        draft = " --draft" if entry.holds else ""
        ctx.out(
            f"  gh pr create --repo {upstream}{draft} --head <you>:{entry.branch} "
            f'--title "$(head -n 1 {text})" --body "$(tail -n +3 {text})"'
        )
    if forks:
        ctx.out(
            "the fork-tier patches are carried for forks, not submitted as pull requests: propose each upstream as an "
            "issue first (read the text, make it yours; name the branch in it):"
        )
    opened: dict[str, str] = {}  # issue text -> the patch whose command opens it
    for entry in forks:
        ctx.out(f"  # {entry.patch[:4]} ({entry.branch}): {target.fork[entry.patch]}")
        issue = target.issues[entry.patch]
        if issue.get("issue"):
            ctx.out(f"  # its issue is open: {issue['issue']} ({upstream}): link the branch there")
            continue
        text = issue["text"]
        if text in opened:
            ctx.out(f"  # the same issue as {opened[text]} ({text}): link the branch there")
            continue
        opened[text] = entry.patch[:4]
        title = (ctx.manifest.path.parent / text).read_text(encoding="utf-8").splitlines()[0].strip()
        body = f"/tmp/issue-{target.name}-{entry.patch[:4]}.md"
        command = f"python3 scripts/series.py pr {entry.patch[:4]} --target {target.name} --issue"
        ctx.out(f"  {command} | tail -n +3 > {body}")
        ctx.out(f"  gh issue create --repo {upstream} --title {shlex.quote(title)} --body-file {body}")
