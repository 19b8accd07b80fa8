"""Where a patch stands on a base: applies cleanly, needs a 3-way merge, conflicts, or is already there.

`verify` asks this (`Placing`) for every patch, in order, on the base plus the earlier patches that
went in. A patch that does not go in is left out and the later ones are tried without it. A patch
that conflicts but whose own tests pass on the base without it is "fixed upstream differently".
A patch that depends (the manifest's `depends`) on one that conflicts is "blocked": left out with it, and not
tried or tested without it. Statuses, in the JSON report's `base_status`: clean, 3-way, conflict,
already-upstream, fixed-differently, blocked; already-upstream and fixed-differently are news, not failures.
"""

import contextlib
import os
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import patchfile
from .am import am_failure
from .context import Context
from .digests import sha256_file
from .git import Repo, StrPath
from .manifest import Target
from .preimages import loader
from .results import PatchResult, PytestRun
from .statuses import BaseStatus, RunStatus


@dataclass
class Conflict:
    """One file of a patch that does not go in."""

    file: str
    reason: str  # "missing in the base", "already exists in the base" or "content differs"
    hunks: list[dict[str, Any]] = field(default_factory=list)  # {"index", "of", "header"} of hunks that do not apply
    regions: list[list[int]] = field(default_factory=list)  # [first, last] base lines of each 3-way conflict

    def describe(self) -> str:
        parts = [self.reason]
        if self.hunks:
            many = len(self.hunks) > 1
            listed = ", ".join(f"{h['index']}/{h['of']} ({h['header']})" for h in self.hunks)
            parts.append(f"{'hunks' if many else 'hunk'} {listed} {'do' if many else 'does'} not apply")
        if self.regions:
            lines = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in self.regions)
            parts.append(f"3-way merge conflict at base line {lines}")
        return f"{self.file}: {'; '.join(parts)}"


@dataclass
class Placement:
    status: BaseStatus
    conflicts: list[Conflict] = field(default_factory=list)  # for CONFLICT


def place(repo: Repo, patch: StrPath, *, preimages: Callable[[], None] | None = None) -> Placement:
    """Put `patch` on the work tree at HEAD (clean, HEAD = the base plus the earlier patches).

    Returns a Placement. For CLEAN and THREE_WAY the patch is committed on top of HEAD; otherwise
    HEAD, index and work tree are left as they were. `preimages` is called once before a 3-way
    merge is tried, to make the blobs the patch was made against available.
    """
    if repo.apply_check(patch, reverse=True):
        return Placement(BaseStatus.ALREADY_UPSTREAM)
    if repo.apply_check(patch):
        proc = repo.am([patch], committer_date_is_author_date=True)
        if proc.returncode == 0:
            return Placement(BaseStatus.CLEAN)
        repo.am_abort()
    if preimages is not None:
        preimages()
    proc = repo.am([patch], three_way=True, committer_date_is_author_date=True)
    if proc.returncode == 0:
        return Placement(BaseStatus.THREE_WAY)
    return Placement(BaseStatus.CONFLICT, conflicts=_conflicts(repo, patch, proc))


def blocked_by(target: Target, name: str, statuses: Mapping[str, str]) -> list[str]:
    """The patches `name` depends on (the manifest's `depends`, with theirs) that conflict on the base, given the
    status each earlier patch got there (`statuses`): when there is one, `name` is blocked, and every command leaves
    it out without trying it (it needs that patch to work, even where it would go in without it). A dependency
    already upstream or fixed upstream differently blocks nothing. Empty when `name` is not blocked."""
    needs = target.depends_on(name)
    found = [dep for dep in needs if statuses.get(dep) == BaseStatus.CONFLICT]
    # `depends_on` holds the dependencies' own, so a blocked one's conflict is there too; kept for a partial map
    return found or [dep for dep in needs if statuses.get(dep) == BaseStatus.BLOCKED]


def declared_backport(target: Target, version: str | None, name: str) -> str | None:
    """Why `name` is left out on a base of release `version` when it conflicts there: the manifest declares that it
    needs a backport to that release (`[targets.<t>.backports]`); None when it declares nothing for it."""
    reason = target.backports.get(version or "", {}).get(name)
    return None if reason is None else f"needs a backport to {target.package} {version} (declared: {reason})"


def blocked_text(blockers: list[str], statuses: Mapping[str, str]) -> str:
    """`blocked by 0015 (conflict)`: how every command names a blocked patch's status (`blockers` from
    `blocked_by`)."""
    return f"blocked by {', '.join(dep[:4] for dep in blockers)} ({statuses.get(blockers[0], BaseStatus.CONFLICT)})"


def landed(repo: Repo, commit: str, patch_files: Iterable[Path], scratch_dir: StrPath) -> set[Path]:
    """The patches (of `patch_files`, in series order) that the tree of `commit` already holds.

    Each patch is reverse-applied from the newest backwards, on a scratch index that starts as `commit`'s
    tree: a patch that reverse-applies there is already in, and is taken out before the earlier ones are
    tried. So a base holding patches 1..k is recognised even when later patches of the series rewrote
    lines that earlier ones added (then the earlier ones no longer reverse-apply alone). Returns the set
    of the paths given that are in.
    """
    index = Path(scratch_dir) / f"index-landed-{os.getpid()}"
    env = {"GIT_INDEX_FILE": str(index)}
    found: set[Path] = set()
    try:
        repo.run("read-tree", commit, env=env)
        for patch in reversed(list(patch_files)):
            # `git apply` is all or nothing: a patch that does not reverse-apply leaves the index alone.
            if repo.ok("apply", "--cached", "--reverse", str(Path(patch).resolve()), env=env):
                found.add(patch)
    finally:
        index.unlink(missing_ok=True)
    return found


def goes_in(
    repo: Repo, commit: str, patches: Iterable[StrPath], *, preimages: Callable[[], None] | None = None
) -> bool:
    """Whether `patches`, in order, all go in on `commit` through `place` (cleanly or with a 3-way merge): the same
    merge every command uses. Tried in `repo`'s work tree (clean), which is left at the commit, branch and files it
    had."""
    with _at(repo, commit):
        return all(place(repo, patch, preimages=preimages).status.went_in for patch in patches)


@contextlib.contextmanager
def _at(repo: Repo, commit: str) -> Iterator[None]:
    """`repo`'s work tree (clean) at `commit` for the block, then back at the commit, branch and files it had (an
    unfinished `git am` aborted)."""
    head, branch = repo.head(), repo.current_branch()
    try:
        repo.reset_hard(commit)
        yield
    finally:
        if repo.operation_in_progress():
            repo.am_abort()
        if head is not None:
            repo.reset_hard(head)
            if branch is not None:
                repo.run("checkout", "--quiet", "--force", branch)


def stack(
    repo: Repo,
    commit: str,
    patches: Iterable[StrPath],
    scratch_dir: StrPath,
    *,
    preimages: Callable[[], None] | None = None,
) -> dict[str, Placement]:
    """Where each of `patches` stands when they are put on `commit` as a stack, in order, and nothing else (verify's
    check of the upstream tier without the fork tier): {file name: its Placement}; a patch that does not go in is
    left out and the later ones are tried without it.

    A plain `git apply` of them all on a scratch index is tried first (no work tree touched: every one is then
    `clean`); when one fails, each goes in through `place`, the merge of every command (3-way, with the blobs
    `preimages` loads). The work tree is left at the commit, branch and files it had."""
    paths = [Path(patch) for patch in patches]
    index = Path(scratch_dir) / f"index-stack-{os.getpid()}"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        repo.run("read-tree", commit, env=env)
        if all(repo.ok("apply", "--cached", str(path.resolve()), env=env) for path in paths):
            return {path.name: Placement(BaseStatus.CLEAN) for path in paths}
    finally:
        index.unlink(missing_ok=True)
    with _at(repo, commit):
        return {path.name: place(repo, path, preimages=preimages) for path in paths}


def applies_with(
    repo: Repo,
    commit: str,
    patch: StrPath,
    needs: Iterable[StrPath],
    scratch_dir: StrPath,
    *,
    preimages: Callable[[], None] | None = None,
) -> bool:
    """Whether `patch` goes in on `commit`'s tree with the patches `needs` (in order) put there first.

    A plain `git apply` of them all on a scratch index is tried first (no work tree touched); when that fails, the
    answer is `goes_in`'s, the merge engine of every command (3-way, with the blobs `preimages` loads): a patch
    whose context moved on a fork is not a missing dependency."""
    needs = list(needs)
    index = Path(scratch_dir) / f"index-with-{os.getpid()}"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        repo.run("read-tree", commit, env=env)
        plain = all(repo.ok("apply", "--cached", str(Path(need).resolve()), env=env) for need in needs)
        if plain and repo.ok("apply", "--cached", "--check", str(Path(patch).resolve()), env=env):
            return True
    finally:
        index.unlink(missing_ok=True)
    return goes_in(repo, commit, [*needs, patch], preimages=preimages)


def _conflict_regions(path: Path) -> list[list[int]]:
    """[first, last] line numbers, on the base's side, of each conflict left in a merged file."""
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    regions: list[list[int]] = []
    ours, start = 0, 0
    side: str | None = None
    for line in lines:
        if line.startswith("<<<<<<<"):
            side, start = "ours", ours + 1
        elif side == "ours" and (line.startswith("|||||||") or line == "======="):
            regions.append([start, max(start, ours)])
            side = "theirs"
        elif side == "theirs" and line.startswith(">>>>>>>"):
            side = None
        elif side in (None, "ours"):
            ours += 1
    return regions


def _conflicts(repo: Repo, patch: StrPath, proc: subprocess.CompletedProcess[str]) -> list[Conflict]:
    """After a failed `git am --3way`: which files and hunks conflict. Aborts the `git am`."""
    regions = {path: _conflict_regions(repo.path / path) for path in repo.unmerged_paths()}
    files = am_failure(repo, patch, proc)
    parsed = patchfile.read(patch)
    result = []
    for path in files:
        diff = parsed.file(path)
        present = repo.ok("cat-file", "-e", f"HEAD:{path}")
        if diff is not None and diff.status == "A":
            reason = "already exists in the base" if present else "content differs"
        else:
            reason = "content differs" if present else "missing in the base"
        conflict = Conflict(file=path, reason=reason, regions=regions.get(path, []))
        if diff is not None and diff.status != "A" and present:
            for number, hunk in enumerate(diff.hunks, start=1):
                if not repo.ok("apply", "--check", "-", input=diff.one_hunk_patch(hunk)):
                    conflict.hunks.append({"index": number, "of": len(diff.hunks), "header": hunk.header})
        result.append(conflict)
    return result


def put_added_files(repo: Repo, patch: StrPath, paths: list[str]) -> bool:
    """Write the files `patch` adds at `paths` into the work tree (replacing what is there), nothing else."""
    for path in paths:
        (repo.path / path).unlink(missing_ok=True)
    includes = [f"--include={path}" for path in paths]
    proc = repo.run("apply", *includes, str(Path(patch).resolve()), check=False)
    return proc.returncode == 0


def added_files(patch: StrPath, prefix: str) -> list[str]:
    """Files `patch` adds below `prefix`."""
    return patchfile.read(patch).added(prefix)


class Placing:
    """Puts each patch on the base plus the earlier patches that went in, and judges those that do not."""

    def __init__(
        self,
        ctx: Context,
        target: Target,
        repo: Repo,
        *,
        moved: bool,
        notes: list[str] | None,
        run_red: Callable[[list[str], Path], PytestRun],
        is_test: Callable[[str], bool],
        on_release: Callable[[str], set[str] | None] | None = None,
    ) -> None:
        self.ctx, self.target, self.repo = ctx, target, repo
        self.moved = moved  # the base is not the pinned sdist
        self.notes = notes  # the target's notes in the report
        self.run_red = run_red  # (test files, log stem) -> the pytest run on the base without the patch
        self.is_test = is_test
        # patch name -> the tests of it that failed without it on the pinned release (its last verify there), or None
        self.on_release = on_release
        self.left_out: list[str] = []  # patches that did not go in (they conflict, or are blocked), in order
        self.statuses: dict[str, str] = {}  # patch -> the base status it got (for the patches that depend on it)
        self.preimages = loader(repo, target, ctx.downloads, ctx.log, report=self._preimage_problem)

    def _preimage_problem(self, problem: str) -> None:
        # A moved base (or a moved pin) lacks the blobs a 3-way merge needs; they are loaded once, when a patch
        # first needs them, and what went wrong is said in the log and the notes.
        self.ctx.log(problem)
        if self.notes is not None:
            self.notes.append(problem)

    def place(self, res: PatchResult, patch: Path, *, checked: bool, stem: Path, in_base: bool = False) -> bool:
        """Fill in `res` (a results.PatchResult) for `patch`, put on HEAD (clean work tree).

        `in_base`: the base already holds it (see `landed`). Returns True when the patch went in
        (committed on top of HEAD). Otherwise the work tree may hold the patch's test files: reset it.
        """
        went_in = self._place(res, patch, checked=checked, stem=stem, in_base=in_base)
        self.statuses[res.name] = res.base_status or BaseStatus.CONFLICT
        return went_in

    def _place(self, res: PatchResult, patch: Path, *, checked: bool, stem: Path, in_base: bool) -> bool:
        res.sha256 = sha256_file(patch)
        res.skipped_before = list(self.left_out)
        blockers = [] if in_base else blocked_by(self.target, res.name, self.statuses)
        if blockers:
            # Not tried: it needs a patch that does not go in, and its tests without that one would judge a
            # combination nobody submits. It is judged once that one goes in (resolved, or fixed upstream).
            res.base_status = BaseStatus.BLOCKED
            res.blocked_by = blockers
            res.test_files = [p for p in added_files(patch, self.target.tests) if self.is_test(p)]
            needs = ", ".join(dep[:4] for dep in blockers)
            many = len(blockers) > 1
            res.problems.append(
                f"{blocked_text(blockers, self.statuses)}: it needs {needs} ([targets.{self.target.name}.depends]), "
                f"which {'do' if many else 'does'} not go in on this base; left out, its tests not run without "
                f"{'them' if many else 'it'}"
            )
            self.left_out.append(res.name)
            return False
        placement = (
            Placement(BaseStatus.ALREADY_UPSTREAM) if in_base else place(self.repo, patch, preimages=self.preimages)
        )
        res.base_status = placement.status
        res.conflicts = placement.conflicts
        res.conflict_files = [c.file for c in placement.conflicts]
        if placement.status.went_in:
            if res.skipped_before:
                res.notes.append(f"checked without {', '.join(res.skipped_before)}, which did not go in")
            return True
        if placement.status == BaseStatus.ALREADY_UPSTREAM:
            res.notes.append("already upstream (the base has the whole patch): drop it from the series")
            return False
        self.left_out.append(res.name)
        self._judge_conflict(res, patch, checked=checked, stem=stem)
        return False

    def _judge_conflict(self, res: PatchResult, patch: Path, *, checked: bool, stem: Path) -> None:
        """A patch that does not apply: do its tests pass without it (fixed upstream differently)?"""
        added = added_files(patch, self.target.tests)
        res.test_files = [p for p in added if self.is_test(p)]
        where = "; ".join(c.describe() for c in res.conflicts) or "git am failed"
        tried = f" (tried without {', '.join(res.skipped_before)})" if res.skipped_before else ""
        if not checked:
            res.checked = False
            tests = "not tested whether it is fixed upstream (--patch)"
        elif not res.test_files:
            tests = f"it adds no test files under {self.target.tests}"
        elif not put_added_files(self.repo, patch, added):
            tests = "its test files could not be put on the base"
        else:
            res.red = self.run_red(res.test_files, stem)
            if res.red.status == RunStatus.NOT_RED:
                res.base_status = BaseStatus.FIXED_DIFFERENTLY
                res.notes.append(
                    f"fixed upstream differently: it conflicts ({where}) but its tests pass without it; "
                    "drop it from the series once upstream's fix is checked"
                )
                return
            partly = self._fixed_in_part(res)
            if partly:
                res.base_status = BaseStatus.FIXED_DIFFERENTLY
                res.notes.append(
                    f"fixed upstream differently: it conflicts ({where}), and {partly}; "
                    "drop it from the series once upstream's fix is checked"
                )
                return
            tests = (
                "its tests still fail without it"
                if res.red.status == RunStatus.RED
                else f"its tests are {res.red.status}"
            )
        later = "; left out, later patches tried without it" if res.index < len(self.target.patches) else ""
        res.problems.append(f"conflicts with the base{tried}: {where}; {tests}{later}")

    def _fixed_in_part(self, res: PatchResult) -> str:
        """When the base without the patch passes some of the patch's tests that fail without it on the pinned
        release, and fails only tests that failed there too: upstream fixed the bug its own way, and the tests that
        still fail check what only the patch does (most often the exact text of its warning). Says so, or ""."""
        if self.on_release is None or res.red is None or res.red.status != RunStatus.RED:
            return ""
        before = self.on_release(res.name)
        failing = set(res.red.failing)
        if not before or not failing or not failing <= before or not before - failing:
            return ""
        fixed = len(before - failing)
        still = ", ".join(test.rsplit("::", 1)[-1] for test in sorted(failing))
        return (
            f"{fixed} of the {len(before)} tests that fail without it on the {self.target.version} release pass here; "
            f"the others ({still}) still fail: check that they assert only what the patch words its own way "
            "(a warning's text)"
        )
