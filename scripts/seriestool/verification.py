"""`verify`'s work: each patch of a target on the scratch repository (where it stands on the base, red without
its fix, green with it, ruff-clean), then the target's tests with its companions' patched sources, then
upstream's own tests; what it prints and the JSON report."""

import datetime
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import base as base_mod
from . import companions as companions_mod
from . import cuts as cuts_mod
from . import patchfile, placement, reports, upstream_tests
from .am import am_series
from .base import BaseSpec
from .context import Context
from .errors import SeriesError
from .git import Repo
from .manifest import UPSTREAM_TIER, Target
from .progress import prefixed
from .render import STACK_PROBLEM, problem_lines, shown_path, table
from .results import SCHEMA_VERSION, CompanionResult, PatchResult, PytestRun, UpstreamTestsResult, is_test_file
from .runcache import RunCache
from .runners import cached_pytest, repeated_pytest, run_pytest, run_style
from .scratch import prepare_scratch
from .statuses import BaseStatus, RunStatus, Verdict


@dataclass
class Runs:
    """How the pytest runs of `verify` go: the interpreter, the device, the limit per run, the outcome cache
    (None: run everything) and how many times each green stage runs (`--repeat`)."""

    python: Path
    device: str
    timeout: int
    cache: RunCache | None = None
    repeat: int = 1
    # the released companions' sources, first on PYTHONPATH after the target's own (companions.py)
    paths: tuple[Path, ...] = ()


@dataclass
class Verification:
    """What `verify` found: each target's entry of the report, the patches' results, the companion stages and
    upstream's own tests."""

    targets: list[dict[str, Any]] = field(default_factory=list)
    results: list[PatchResult] = field(default_factory=list)
    companions: list[CompanionResult] = field(default_factory=list)
    upstream_tests: list[UpstreamTestsResult] = field(default_factory=list)
    # target name -> the companions its patches were judged with
    environment: dict[str, list[companions_mod.CompanionTrees]] = field(default_factory=dict)
    # what every run of the verdict used: pyenv.describe's answer (python, torch, ...)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Conflicts and failed checks need a maintainer; a patch already upstream is only news."""
        return (
            all(Verdict(res.verdict).passed for res in self.results)
            and all(companion.green for companion in self.companions)
            and all(part.ok for part in self.upstream_tests)
        )


def verify_all(
    ctx: Context,
    targets: list[Target],
    spec: BaseSpec,
    runs: Runs,
    *,
    spec_text: str,
    only: set[str] | None = None,
    upstream: tuple[Target, str] | None = None,
    chosen: dict[str, str] | None = None,
    info: dict[str, Any] | None = None,
    hashes: dict[tuple[str, str], str] | None = None,
) -> Verification:
    """Each target's patches on the base `spec` (written `spec_text`), in a scratch checkout each, with the released
    companions its users get (`chosen`: the versions --with names); then, when every patch was checked (`only`
    None), each target with its companions' patches; then upstream's tests (`upstream`: the target and its
    `--upstream-tests` spec, or None). `info`: pyenv.describe's answer for the interpreter, named in the verdict."""
    found = Verification(info=dict(info or {}))
    scratch: dict[str, tuple[Repo, str]] = {}
    tops: dict[str, str] = {}
    target_runs: dict[str, Runs] = {}
    for target in targets:
        repo, base = prepare_scratch(ctx, target, spec)
        scratch[target.name] = (repo, base)
        notes: list[str] = []
        version = base_mod.version_of(repo, base, target)
        older = base_mod.older_than(version, target.version)
        found.targets.append(
            {
                "name": target.name,
                "version": target.version,
                "base": {
                    "spec": spec_text,
                    "describe": spec.describe(target),
                    "commit": base,
                    "tree": repo.out("rev-parse", f"{base}^{{tree}}"),
                    "version": version,
                    "older_than_pin": older,
                    **spec.report_fields(target),  # an sdist's version and sha256
                },
                "patches": len(target.patches),
                "notes": notes,
            }
        )
        trees = environment(ctx, target, version, chosen or {}, runs, hashes or {})
        found.environment[target.name] = trees
        entry = found.targets[-1]
        entry["with"] = [tree.to_json() for tree in trees]
        target_runs[target.name] = replace(runs, paths=tuple(tree.released for tree in trees))
        # The first line: the world the verdict is about (the base, its companions, torch and Python).
        ctx.out(first_line(target, spec, base, version, trees, found.info))
        if spec.moved:
            if older:
                line = (
                    f"the base is {target.package} {version}, older than the pinned {target.version}: the series was "
                    "made on newer code, so a conflict here may only mean that the base has not caught up with it"
                )
                ctx.out(f"note: {line}")
                notes.append(line)
            check_base_imports(ctx, target, repo, base, target_runs[target.name])
        if not target.patches:
            ctx.out(f"no patches for {target.name}: nothing to verify")
            continue
        results = verify_target(ctx, target, repo, base, target_runs[target.name], only=only, spec=spec, notes=notes)
        if spec.moved and version in target.backports:
            apply_backports(target, version, results)
        found.results += results
        tops[target.name] = repo.out("rev-parse", "HEAD")
    if only is None:
        for target in targets:
            companion = verify_with_companions(
                ctx, target, found.results, scratch, runs, found.environment.get(target.name, [])
            )
            if companion is not None:
                found.companions.append(companion)
    if upstream is not None:
        target, text = upstream
        repo, base = scratch[target.name]
        commits = {"base": base, "series": tops.get(target.name, base)}
        own = target_runs.get(target.name, runs)
        common: dict[str, Any] = {"python": own.python, "device": own.device, "timeout": own.timeout}
        common["extra_paths"] = own.paths
        # Only the declarations of patches that went in count: a patch left out (a conflict, already upstream)
        # changes no test.
        applied = [res.name for res in found.results if res.target == target.name and res.applies]
        common["declared"] = upstream_tests.declarations(target, applied)
        found.upstream_tests.append(upstream_tests.run(ctx, target, repo, commits, text, **common))
    return found


def verify_target(
    ctx: Context,
    target: Target,
    repo: Repo,
    base: str,
    runs: Runs,
    *,
    only: set[str] | None = None,
    spec: BaseSpec | None = None,
    notes: list[str] | None = None,
) -> list[PatchResult]:
    """The results of `target`'s patches; with `runs.repeat` > 1 each green stage runs that many times (flakes)."""
    python, device, timeout, cache, repeat = runs.python, runs.device, runs.timeout, runs.cache, runs.repeat
    results = []
    logs = ctx.work / "logs" / "verify" / target.name
    if logs.exists():
        shutil.rmtree(logs)
    logs.mkdir(parents=True)
    moved = spec is not None and spec.moved

    def run_red(files: list[str], stem: Path) -> PytestRun:
        common: dict[str, Any] = {"python": python, "repo_dir": repo.path, "source_dir": target.source_dir}
        common["extra_paths"] = runs.paths
        common.update(files=files, device=device, timeout=timeout, say=prefixed(ctx.log, f"{where} red"))
        return run_pytest(log_stem=Path(f"{stem}.red"), expect=RunStatus.RED, **common)

    def on_release(name: str) -> set[str] | None:
        known = reports.on_release(ctx.work, target).get(name)
        return known if known is not None else release_red(ctx, target, name, runs, logs)

    placing = placement.Placing(
        ctx,
        target,
        repo,
        moved=moved,
        notes=notes,
        run_red=run_red,
        is_test=is_test_file,
        on_release=on_release if moved else None,
    )
    # The patches the base already holds, found as a stack (a base with patches 1..k, e.g. upstream main
    # after k pull requests landed), and those that went in on top of it.
    in_base = placement.landed(repo, base, target.patch_paths(), ctx.work_dir())
    went_in = set()
    prev = base
    where = f"[{target.name}]"  # the patch's, in the loop (run_red's progress lines name it)
    for index, name in enumerate(target.patches, start=1):
        res = PatchResult(name=name, target=target.name, index=index, depends_on=target.depends.get(name, []))
        res.tier = target.tier(name)
        res.subject = patchfile.read(target.patch_path(name)).subject
        results.append(res)
        patch = target.patch_path(name)
        where = f"[{target.name} {index}/{len(target.patches)}]"
        ctx.log(f"{where} {name}")
        repo.reset_hard(prev)
        if not placing.place(
            res,
            patch,
            checked=only is None or name in only,
            stem=logs / name.removesuffix(".patch"),
            in_base=patch in in_base,
        ):
            repo.reset_hard(prev)
            res.decide()
            continue
        res.applies = True
        went_in.add(name)
        commit = repo.out("rev-parse", "HEAD")
        # Alone and with its dependencies, a patch goes in through the same merge as in the series (placement.py):
        # cleanly, or 3-way with the blobs it was made against.
        res.applies_alone = placement.applies_with(repo, base, patch, [], ctx.work, preimages=placing.preimages)
        if not res.applies_alone:
            _check_dependencies(ctx, target, repo, base, res, patch, went_in, placing.preimages)
        if only is not None and name not in only:
            res.checked = False
            res.decide()
            prev = commit
            continue
        changes = repo.changes(prev, commit)
        added = [c.path for c in changes if c.status == "A" and c.path.startswith(target.tests)]
        res.test_files = [p for p in added if is_test_file(p)]
        touched_py = [c.path for c in changes if c.status != "D" and c.path.endswith(".py")]
        stem = logs / name.removesuffix(".patch")
        if not res.test_files:
            res.red = PytestRun(status=RunStatus.NO_TESTS)
            res.green = PytestRun(status=RunStatus.NO_TESTS)
            res.problems.append(f"adds no test files under {target.tests}")
        else:
            repo.reset_hard(prev)
            repo.run("checkout", commit, "--", *added)
            common = {"python": python, "repo_dir": repo.path, "source_dir": target.source_dir}
            common.update(files=res.test_files, device=device, timeout=timeout, extra_paths=runs.paths)
            red_say = prefixed(ctx.log, f"{where} red")
            res.red = cached_pytest(cache, log_stem=Path(f"{stem}.red"), expect=RunStatus.RED, say=red_say, **common)
            ctx.log(f"{where} red: {_progress(res.red, 'failed', 'total')}")
            repo.reset_hard(commit)
            res.green = repeated_pytest(
                cache,
                repeat,
                progress=_run_progress(ctx, f"{where} green", repeat),
                log_stem=Path(f"{stem}.green"),
                expect=RunStatus.GREEN,
                say=prefixed(ctx.log, f"{where} green"),
                **common,
            )
            ctx.log(f"{where} green: {_progress(res.green, 'passed', 'skipped')}")
            if not res.red_without_fix:
                res.problems.append(f"without its fix the tests are {res.red.status}, not red{run_detail(res.red)}")
                if moved and res.red.status == RunStatus.NOT_RED:
                    res.notes.append("its tests pass on this base without it: fixed upstream in another way?")
            if res.green.status == RunStatus.FLAKY:
                res.problems.append(f"with the patch the tests are flaky{run_detail(res.green)}")
            elif not res.green_with_fix:
                res.problems.append(
                    f"with the patch the tests are {res.green.status}, not green{run_detail(res.green)}"
                )
        repo.reset_hard(commit)
        res.style = run_style(python, repo.path, touched_py, base=prev)
        ctx.log(f"{where} style: {'clean' if res.style.clean else 'NOT CLEAN'} ({len(touched_py)} file(s))")
        if not res.style.clean:
            first = (res.style.check_output if res.style.check_exit else res.style.format_output).splitlines()
            res.problems.append(
                "ruff check / ruff format --check not clean" + (f": {first[0].strip()}" if first else "")
            )
        res.decide()
        prev = commit
    if not moved:
        for res in results:
            if res.name in target.cuts and res.applies and res.checked:
                stem = logs / f"cut-{res.name.removesuffix('.patch')}"
                verify_cut(ctx, target, repo, base, res, runs, stem, placing.preimages)
                res.decide()
        repo.reset_hard(prev)  # the series again, for what comes after (the companions' stage)
    check_upstream_stack(ctx, target, repo, base, results, placing.preimages)
    return results


def verify_cut(
    ctx: Context,
    target: Target,
    repo: Repo,
    base: str,
    res: PatchResult,
    runs: Runs,
    stem: Path,
    preimages: Callable[[], Any] | None = None,
) -> None:
    """The cut of `res`'s patch ([targets.<t>.cuts], its pull request's branch) on the pinned base: it goes in on the
    patches it needs alone, makes the series patch's change (cuts.differences), and its tests are red without it and
    green with it, ruff-clean. `res.cut` says what was found; a problem fails the patch."""
    name, where = res.name, f"[{target.name} cut {res.name[:4]}]"
    cut = target.cut_path(name)
    needs = target.pr_needs(name)
    found: dict[str, Any] = {"file": f"cuts/{name}", "needs": needs, "applies": False, "ok": False}
    res.cut = found
    if not cut.is_file():
        res.problems.append(
            f"its cut {found['file']} does not exist: `series.py checkout --cut {name[:4]}`, then `export --cut "
            f"{name[:4]}`"
        )
        return
    repo.reset_hard(base)
    for need in needs:
        # as `branches` puts them under the cut
        placed = placement.place(repo, target.patch_path(need), preimages=preimages)
        if not placed.status.went_in:
            res.problems.append(f"its cut needs {need[:4]}, which does not go in under it ({placed.status})")
            return
    under = repo.out("rev-parse", "HEAD")
    proc = repo.am([cut], committer_date_is_author_date=True)
    if proc.returncode != 0:
        repo.am_abort()
        res.problems.append(f"its cut does not apply on the pinned base{' and ' if needs else ''}{_names(needs)}")
        return
    found["applies"] = True
    commit = repo.out("rev-parse", "HEAD")
    others = {other: target.patch_path(other).read_text(encoding="utf-8") for other in cuts_mod.left_out(target, name)}
    missing, extra, carried = cuts_mod.differences(
        target.patch_path(name).read_text(encoding="utf-8"), cut.read_text(encoding="utf-8"), others
    )
    own = target.cuts[name]["own"]
    missing, extra, stale = cuts_mod.own_lines(missing, extra, own["lines"])
    found["same_change"] = not missing and not extra and not stale
    found["carried"] = carried
    found["own"] = len(own["lines"]) - len(stale)
    res.problems += [f"its cut declares a line its own that is no difference: {line}" for line in stale[:3]]
    res.problems += [f"its cut lacks a line of the patch: {line}" for line in missing[:3]]
    res.problems += [f"its cut adds a line that no patch it leaves out adds: {line}" for line in extra[:3]]
    changes = repo.changes(under, commit)
    added = [c.path for c in changes if c.status == "A" and c.path.startswith(target.tests)]
    tests = [p for p in added if is_test_file(p)]
    touched_py = [c.path for c in changes if c.status != "D" and c.path.endswith(".py")]
    common: dict[str, Any] = {"python": runs.python, "repo_dir": repo.path, "source_dir": target.source_dir}
    common.update(files=tests, device=runs.device, timeout=runs.timeout, extra_paths=runs.paths)
    runs_of: dict[str, PytestRun] = {}
    if tests:
        for stage, expect, tree, counted in (
            ("red", RunStatus.RED, under, "failed"),
            ("green", RunStatus.GREEN, commit, "passed"),
        ):
            repo.reset_hard(tree)
            if stage == "red":
                repo.run("checkout", commit, "--", *added)
            say = prefixed(ctx.log, f"{where} {stage}")
            run = cached_pytest(runs.cache, log_stem=Path(f"{stem}.{stage}"), expect=expect, say=say, **common)
            runs_of[stage] = run
            ctx.log(f"{where} {stage}: {_progress(run, counted, 'total' if stage == 'red' else 'skipped')}")
    red, green = runs_of.get("red"), runs_of.get("green")
    repo.reset_hard(commit)
    style = run_style(runs.python, repo.path, touched_py, base=under)
    found["red"] = None if red is None else _progress(red, "failed", "total")
    found["green"] = None if green is None else _progress(green, "passed", "skipped")
    found["style_clean"] = style.clean
    if red is None or red.status != RunStatus.RED:
        res.problems.append(f"without its cut the tests are {red.status if red else 'missing'}, not red")
    if green is None or green.status != RunStatus.GREEN:
        res.problems.append(f"with its cut the tests are {green.status if green else 'missing'}, not green")
    if not style.clean:
        res.problems.append("its cut is not ruff-clean")
    red_ok = red is not None and red.status == RunStatus.RED
    green_ok = green is not None and green.status == RunStatus.GREEN
    found["ok"] = bool(found["same_change"] and red_ok and green_ok and style.clean)
    alone = f"on the pinned base{' and ' + _names(needs) if needs else ' alone'}"
    differs = f" (it differs only in lines of {_names(carried)}: carried, or absent without it)" if carried else ""
    if found["own"]:
        differs += f" and in {found['own']} line(s) of its own ({own['reason']})"
    res.notes.append(
        f"its pull request's cut ({found['file']}) goes in {alone}: the same change{differs}; its tests without it "
        f"{found['red']}, with it {found['green']}; style {'clean' if style.clean else 'NOT CLEAN'}"
    )
    ctx.log(f"{where} {'ok' if found['ok'] else 'NOT OK'}: goes in {alone}")


def _names(patches: list[str]) -> str:
    return ", ".join(patch[:4] for patch in patches)


def check_upstream_stack(
    ctx: Context,
    target: Target,
    repo: Repo,
    base: str,
    results: list[PatchResult],
    preimages: Callable[[], None] | None = None,
) -> None:
    """The upstream tier alone: the upstream-tier patches that went in, in series order, must go in on the base as a
    stack without any fork-tier patch (through the same merge, 3-way where needed), since upstream gets them without
    the fork tier. One that does not fails, named; the repository is left at the commit it was at."""
    went_in = [res for res in results if res.applies and res.tier == UPSTREAM_TIER]
    if not target.fork:
        for res in went_in:
            res.upstream_stack = True  # the series is the upstream tier
        return
    ctx.log(f"[{target.name}] the {len(went_in)} upstream-tier patches as a stack on the base, without the fork tier")
    paths = [target.patch_path(res.name) for res in went_in]
    placed = placement.stack(repo, base, paths, ctx.work, preimages=preimages)
    for res in went_in:
        where = placed[res.name]
        res.upstream_stack = where.status.went_in or where.status == BaseStatus.ALREADY_UPSTREAM
        if res.upstream_stack:
            continue
        files = ", ".join(conflict.describe() for conflict in where.conflicts) or "git am failed"
        res.problems.append(
            f"{STACK_PROBLEM}, without the fork tier ({files}): an upstream-tier patch must not need a fork-tier "
            f"one ([targets.{target.name}.fork])"
        )
        res.decide()


def apply_backports(target: Target, version: str, results: list[PatchResult]) -> None:
    """On an older release the manifest declares patches for (`[targets.<t>.backports]`): a declared patch that
    conflicts needs a backport there (verdict `backport`, a note, no failure), and so do the patches blocked by it
    only; so does one that goes in but whose own tests fail there (the release lacks what it relies on, e.g. a class
    it changed later); a declared patch that goes in and passes is a stale declaration (a failure)."""
    declared = target.backports[version]
    needs = set()
    for res in results:
        if res.name not in declared:
            continue
        red_there = res.applies and res.green is not None and not res.green_with_fix
        if res.base_status == BaseStatus.CONFLICT or red_there:
            needs.add(res.name)
            why = "goes in, but its tests fail there: " if red_there else ""
            res.notes += [f"{why}needs a backport to {target.package} {version} (declared: {declared[res.name]})"]
            res.notes += res.problems
            res.problems = []
            res.verdict = Verdict.BACKPORT
        else:
            res.problems.append(
                f"[targets.{target.name}.backports] declares it needs a backport to {version}, but it "
                f"{'goes in' if res.applies else 'is ' + str(res.base_status)} there: remove the stale declaration"
            )
            res.verdict = Verdict.FAIL
    for res in results:
        if res.base_status == BaseStatus.BLOCKED and res.blocked_by and set(res.blocked_by) <= needs:
            res.notes += [f"needs {', '.join(dep[:4] for dep in res.blocked_by)}, which needs a backport to {version}"]
            res.notes += res.problems
            res.problems = []
            res.verdict = Verdict.BACKPORT


def release_red(ctx: Context, target: Target, name: str, runs: Runs, logs: Path) -> set[str] | None:
    """The tests of the patch `name` that fail without it on the pinned release (put on the release plus the
    patches before it, in a checkout of its own under <work>/verify-release/), for a conflict on another base when
    no verify on the release is kept to compare with (the nightly job's fresh work folder). The run is the red
    stage of a verify on the release: its outcome is reused. None when it cannot be told."""
    where = f"[{target.name}] {name[:4]} on the {target.version} release"
    try:
        repo, _ = prepare_scratch(ctx, target, base_mod.SDIST, folder="verify-release")
    except SeriesError as exc:
        ctx.log(f"{where}: cannot compare with the release ({exc})")
        return None
    failed, _ = am_series(repo, target, target.patches[: target.patches.index(name)])
    patch = Path(target.patch_path(name))
    added = placement.added_files(patch, target.tests)
    files = [path for path in added if is_test_file(path)]
    if failed or not files or not placement.put_added_files(repo, patch, added):
        return None
    ctx.log(f"{where}: which of its tests fail without it there (to compare with this base)")
    run = cached_pytest(
        runs.cache,
        python=runs.python,
        repo_dir=repo.path,
        source_dir=target.source_dir,
        files=files,
        device=runs.device,
        timeout=runs.timeout,
        log_stem=logs / f"{name.removesuffix('.patch')}.release-red",
        expect=RunStatus.RED,
        extra_paths=runs.paths,
        say=prefixed(ctx.log, where),
    )
    repo.reset_hard("HEAD")
    return set(run.failing) if run.status == RunStatus.RED else None


def _run_progress(ctx: Context, what: str, repeat: int) -> Callable[[int, PytestRun], None]:
    """One line per repeated run: `--repeat 50` of a slow test is minutes without one."""

    def show(number: int, run: PytestRun) -> None:
        ctx.log(f"{what} run {number}/{repeat}: {run.status} ({run.duration_s:.1f}s)")

    return show


def _progress(run: PytestRun, first: str, second: str) -> str:
    when = "earlier identical run" if run.cached else f"{run.duration_s:.1f}s"
    if run.runs > 1:
        when = f"{run.run_statuses.count(RunStatus.GREEN)} of {run.runs} runs green, {when}"
    return f"{run.status} {getattr(run, first)}/{getattr(run, second)} {first}/{second} ({when})"


def run_detail(run: PytestRun, limit: int = 5) -> str:
    """What a failed check needs on the console: the failing test ids and the log."""
    parts = []
    if run.flaky:
        more = f" and {len(run.flaky) - limit} more" if len(run.flaky) > limit else ""
        tests = [f"{f['test']} failed in {f['failed']} of {run.runs} runs" for f in run.flaky[:limit]]
        parts.append(", ".join(tests) + more)
    elif run.runs > 1 and run.status == RunStatus.FLAKY:
        parts.append(f"green in {run.run_statuses.count(RunStatus.GREEN)} of {run.runs} runs")
    failing = [test for test in run.failing if test not in {f["test"] for f in run.flaky}]
    if failing:
        more = f" and {len(failing) - limit} more" if len(failing) > limit else ""
        parts.append("failing: " + ", ".join(failing[:limit]) + more)
    elif run.status == RunStatus.NOT_RED and run.passed:
        parts.append(f"all {run.passed} pass")
    if run.log:
        parts.append(f"log {shown_path(run.log)}")
    return f" ({'; '.join(parts)})" if parts else ""


def _check_dependencies(
    ctx: Context,
    target: Target,
    repo: Repo,
    base: str,
    res: PatchResult,
    patch: Path,
    went_in: set[str],
    preimages: Callable[[], None] | None = None,
) -> None:
    """A patch that applies in the series but not alone on the base needs an earlier one: the manifest must say
    which (`[targets.<target>.depends]`), so that it is submitted after it. Else it is a hidden dependency. The
    patches go in as in the series (3-way where the context moved), so a fork's moved line is no dependency."""
    needs = [dep for dep in target.depends_on(res.name) if dep in went_in]
    paths = [target.patch_path(dep) for dep in needs]
    if needs and placement.applies_with(repo, base, patch, paths, ctx.work, preimages=preimages):
        return
    res.hidden_dependency = True
    table = f"[targets.{target.name}.depends]"
    if needs:
        recorded = ", ".join(dep[:4] for dep in needs)
        res.problems.append(
            f"does not apply on the base with only the patches it depends on ({recorded}): record the other "
            f"earlier patches it needs in {table}"
        )
    else:
        res.problems.append(
            f"does not apply alone on the base, but {table} records no earlier patch it needs (hidden dependency): "
            "record the ones it needs"
        )


def check_base_imports(ctx: Context, target: Target, repo: Repo, base: str, runs: Runs) -> None:
    """Bad environment, said once and before any patch, when the base (another than the pinned sdist) does not
    import with the interpreter's packages: a base whose requirements moved past the pinned ones (upstream main
    needing a newer tokenizers) would make every pytest run an error that is no verdict on any patch."""
    source = repo.path / target.source_dir
    name = base_mod.import_name(target)
    if not (source / name).is_dir():
        return
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, [source, *runs.paths])), PYTHONUNBUFFERED="1")
    for key in ("PYTHONSTARTUP", "PYTHONHOME"):
        env.pop(key, None)
    if runs.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    try:
        proc = subprocess.run(
            [str(runs.python), "-c", f"import {name}"],
            cwd=repo.path,
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=min(runs.timeout, 600),
            check=False,
        )
    except subprocess.TimeoutExpired:
        return  # a slow import is the pytest runs' business, with their own limit
    if proc.returncode == 0:
        return
    logs = ctx.work / "logs" / "verify" / target.name
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / "base-import.log"
    log.write_text(proc.stdout + proc.stderr, encoding="utf-8")
    lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
    # the exception's line (a hint may follow it: transformers adds `Try: pip install ...`)
    errors = [line for line in lines if re.match(r"^[\w.]+(Error|Exception)\b", line)]
    why = (errors or lines or [f"exit {proc.returncode}"])[-1]
    raise SeriesError(
        f"the base {base[:12]} does not import with the packages of {runs.python} (`import {name}`: {why}), so "
        "no test of any patch could run on it: its requirements moved past the pinned ones "
        f"(scripts/requirements-test.txt). Install what the base needs into an environment with pytest and ruff "
        f"0.14.10 and pass it with --python PATH (log {shown_path(log)})"
    )


def environment(
    ctx: Context,
    target: Target,
    version: str | None,
    chosen: dict[str, str],
    runs: Runs,
    hashes: dict[tuple[str, str], str],
) -> list[companions_mod.CompanionTrees]:
    """The companions `target` is judged with on a base of `version` (companions.py), their trees made, and checked
    to be what `runs.python` imports. `hashes`: the sdist sha256 of `--with` releases the manifest does not list."""
    if not target.verify_with:
        return []
    pinned = {name: ctx.manifest.target(name) for name in target.verify_with}
    # a release the manifest does not list comes only from --with, resolved before anything was made
    chose = companions_mod.choose(
        ctx.manifest, target, version, chosen, sha256_for=lambda other, wanted: hashes[(other.name, wanted)]
    )
    trees = [companions_mod.prepare(ctx, companion, pinned[companion.target.name]) for companion in chose]
    companions_mod.check_imported(runs.python, trees)
    return trees


def first_line(
    target: Target,
    spec: BaseSpec,
    commit: str,
    version: str | None,
    trees: list[companions_mod.CompanionTrees],
    info: dict[str, Any],
) -> str:
    """`verify: transformers 5.25.0 sdist (sha256 ...) with accelerate 1.16.0 (...), torch ..., Python ...`."""
    where = spec.describe(target)
    if spec.moved:
        where = f"{where}, commit {commit} ({target.package} {version or 'of no declared version'})"
    parts = [f"verify: {target.name} on {where}"]
    if trees:
        parts.append(f"with {companions_mod.describe(trees)}")
    return " ".join(parts) + f", {companions_mod.versions_line(info)}"


def judged(found: Verification) -> str:
    """The versions every verdict of the run was judged with: `transformers 5.25.0 + accelerate 1.16.0, torch ...`."""
    names = []
    for entry in found.targets:
        base = entry.get("base", {})
        names.append(f"{entry['name']} {base.get('version') or base.get('describe') or 'of no declared version'}")
        names += [f"{other['name']} {other['version']}" for other in entry.get("with", [])]
    if not names:
        return ""
    return " + ".join(dict.fromkeys(names)) + f", {companions_mod.versions_line(found.info)}"


def verify_with_companions(
    ctx: Context,
    target: Target,
    results: list[PatchResult],
    scratch: dict[str, tuple[Repo, str]],
    runs: Runs,
    trees: list[companions_mod.CompanionTrees],
) -> CompanionResult | None:
    """Run all of `target`'s regression tests on its fully patched checkout with the patched sources of its
    companions (`trees`, the versions it was judged with) on PYTHONPATH: the series must not depend on, nor break
    with, its companions' patches.

    Returns None when there is nothing to run."""
    own = [res for res in results if res.target == target.name]
    # a patch declared to need a backport to this older release is left out of the stage, not a reason to skip it
    own = [res for res in own if res.verdict != Verdict.BACKPORT]
    if not trees or not own or not all(res.verdict == Verdict.OK for res in own):
        return None
    if not any(ctx.manifest.target(tree.companion.target.name).patches for tree in trees):
        return None
    repo, _ = scratch[target.name]
    files = [path for res in own for path in res.test_files]
    names = ", ".join(f"{tree.companion.target.name} {tree.companion.version}" for tree in trees)
    label = f"{target.name} + patched {names}"
    blocked = [tree.blocked for tree in trees if tree.blocked]
    if blocked:
        ctx.log(f"[{label}] last stage blocked: {'; '.join(blocked)}")
        return CompanionResult(
            target=target.name,
            companions=[tree.companion.target.name for tree in trees],
            label=label,
            run=PytestRun(status=RunStatus.NO_TESTS),
            blocked="; ".join(blocked),
        )
    paths = [tree.patched for tree in trees if tree.patched is not None]
    tests = sum(res.green.passed + res.green.skipped + res.green.failed for res in own if res.green is not None)
    some = f"{len(files)} new test file{'s' if len(files) != 1 else ''} of {target.name} ({tests} tests)"
    ctx.log(
        f"[{label}] last stage: the {some} once more, with the patched sources of {names} first on PYTHONPATH, "
        "in one pytest run"
    )
    run = repeated_pytest(
        runs.cache,
        runs.repeat,
        progress=_run_progress(ctx, f"[{label}]", runs.repeat),
        python=runs.python,
        repo_dir=repo.path,
        source_dir=target.source_dir,
        files=files,
        device=runs.device,
        log_stem=ctx.work / "logs" / "verify" / target.name / "with-companions",
        timeout=runs.timeout,
        expect=RunStatus.GREEN,
        extra_paths=paths,
        say=prefixed(ctx.log, f"[{label}] green"),
    )
    ctx.log(f"[{label}] {_progress(run, 'passed', 'skipped')}")
    return CompanionResult(
        target=target.name, companions=[tree.companion.target.name for tree in trees], label=label, run=run
    )


def companion_line(companion: CompanionResult) -> str:
    """What `verify` prints about a companion stage."""
    if companion.blocked:
        return f"{companion.label}: blocked ({companion.blocked}): not judged, no failure of the transformers patches"
    run = companion.run
    verdict = "ok" if companion.green else f"FAIL ({run.status})"
    if run.status == RunStatus.FLAKY:
        verdict = f"FLAKY{run_detail(run)}"
    counts = f"{run.passed} passed, {run.skipped} skipped, {run.failed} failed"
    if run.runs > 1:
        counts += f" ({run.run_statuses.count(RunStatus.GREEN)} of {run.runs} runs green)"
    return f"{companion.label}: {verdict}, {counts}"


def _count(number: int, word: str, plural: str | None = None) -> str:
    return f"{number} {word if number == 1 else plural or word + 's'}"


def console_lines(found: Verification, *, only: set[str] | None, duration: float, logs: Path) -> list[str]:
    """What `verify` prints when it is done: the table, the problems, the companion stages, upstream's tests, the
    reused runs and the verdict line."""
    lines = []
    if found.results:
        patches = [res.to_json() for res in found.results]
        lines += [table(patches), *problem_lines(patches)]
    lines += [companion_line(companion) for companion in found.companions]
    for part in found.upstream_tests:
        lines += upstream_tests.lines(part)
    runs = [run for res in found.results for run in (res.red, res.green) if run and run.exit_code is not None]
    runs += [companion.run for companion in found.companions]
    reused = sum(run.cached for run in runs)
    if reused:
        total = sum(run.runs for run in runs)  # a repeated stage is `runs` pytest runs, never reused
        lines.append(f"{reused} of {total} pytest runs: outcome of an identical earlier run (--no-cache to run them)")
    counted = _count(len(found.results), "patch", "patches")
    if only is not None:
        checked = sum(1 for res in found.results if res.name in only)
        counted = _count(checked, "patch", "patches")
        if len(found.results) > checked:
            counted += f", {len(found.results) - checked} more not checked (--patch)"
    verdict = "OK" if found.ok else "FAILED"
    world = judged(found)
    counted += f"; {world};" if world else ","
    lines.append(f"verify: {verdict} ({counted} {duration:.1f}s, logs in {shown_path(logs)})")
    return lines


def report(found: Verification, runs: Runs, info: dict[str, Any], duration: float) -> dict[str, Any]:
    """The JSON report (docs/reviewer-ci.md, "The JSON report")."""
    return {
        "schema_version": SCHEMA_VERSION,
        "ok": found.ok,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": runs.device,
        "repeat": runs.repeat,
        "python": str(runs.python),
        "tools": tools(found, info),
        "targets": found.targets,
        "patches": [res.to_json() for res in found.results],
        "companions": [companion.to_json() for companion in found.companions],
        "upstream_tests": [part.to_json() for part in found.upstream_tests],
        "duration_s": duration,
    }


def tools(found: Verification, info: dict[str, Any]) -> dict[str, Any]:
    """The JSON report's `tools`: every version the verdict was judged with (the interpreter's, each target's base
    and each companion's)."""
    versions: dict[str, Any] = {key: info.get(key) for key in ("python", "pytest", "ruff", "torch", "cuda")}
    for entry in found.targets:
        versions.setdefault(entry["name"], entry.get("base", {}).get("version"))
        for other in entry.get("with", []):
            versions[other["name"]] = other["version"]
    return versions
