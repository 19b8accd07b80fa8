"""Each patch of a target on the scratch repository: where it stands on the base, red without its fix, green
with it, ruff-clean; then the target's tests with its companions' patched sources."""

import os
import shutil
from dataclasses import asdict
from pathlib import Path

from . import patchfile, placement
from .results import PatchResult, PytestRun, is_test_file
from .runners import cached_pytest, repeated_pytest, run_pytest, run_style
from .statuses import BaseStatus, RunStatus, Verdict


def verify_target(
    ctx, target, repo, base, *, python, device, only, timeout, spec=None, notes=None, cache=None, repeat=1
):
    """The results of `target`'s patches; with `repeat` > 1 each green stage runs that many times (flakes)."""
    results = []
    logs = ctx.work / "logs" / "verify" / target.name
    if logs.exists():
        shutil.rmtree(logs)
    logs.mkdir(parents=True)
    moved = spec is not None and spec.kind != "sdist"

    def run_red(files, stem):
        common = {"python": python, "repo_dir": repo.path, "source_dir": target.source_dir}
        return run_pytest(
            log_stem=Path(f"{stem}.red"), expect=RunStatus.RED, files=files, device=device, timeout=timeout, **common
        )

    placing = placement.Placing(ctx, target, repo, moved=moved, notes=notes, run_red=run_red, is_test=is_test_file)
    # The patches the base already holds, found as a stack (a base with patches 1..k, e.g. upstream main
    # after k pull requests landed), and those that went in on top of it.
    in_base = placement.landed(repo, base, target.patch_paths(), ctx.work_dir())
    went_in = set()
    prev = base
    for index, name in enumerate(target.patches, start=1):
        res = PatchResult(name=name, target=target.name, index=index, depends_on=target.depends.get(name, []))
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
        commit = repo.head()
        res.applies_alone = repo.apply_check_on(base, patch, ctx.work)
        if not res.applies_alone and res.base_status == BaseStatus.CLEAN:
            _check_dependencies(ctx, target, repo, base, res, patch, went_in)
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
            common.update(files=res.test_files, device=device, timeout=timeout)
            res.red = cached_pytest(cache, log_stem=Path(f"{stem}.red"), expect=RunStatus.RED, **common)
            ctx.log(f"{where} red: {_progress(res.red, 'failed', 'total')}")
            repo.reset_hard(commit)
            res.green = repeated_pytest(
                cache,
                repeat,
                progress=_run_progress(ctx, f"{where} green", repeat),
                log_stem=Path(f"{stem}.green"),
                expect=RunStatus.GREEN,
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
        res.style = run_style(python, repo.path, touched_py)
        ctx.log(f"{where} style: {'clean' if res.style.clean else 'NOT CLEAN'} ({len(touched_py)} file(s))")
        if not res.style.clean:
            first = (res.style.check_output or res.style.format_output).splitlines()
            res.problems.append(
                "ruff check / ruff format --check not clean" + (f": {first[0].strip()}" if first else "")
            )
        res.decide()
        prev = commit
    return results


def _run_progress(ctx, what, repeat):
    """One line per repeated run: `--repeat 50` of a slow test is minutes without one."""

    def show(number, run):
        ctx.log(f"{what} run {number}/{repeat}: {run.status} ({run.duration_s:.1f}s)")

    return show


def _progress(run, first, second):
    when = "earlier identical run" if run.cached else f"{run.duration_s:.1f}s"
    if run.runs > 1:
        when = f"{run.run_statuses.count(RunStatus.GREEN)} of {run.runs} runs green, {when}"
    return f"{run.status} {getattr(run, first)}/{getattr(run, second)} {first}/{second} ({when})"


def shown_path(path):
    """`path` relative to the current folder when it is below it (shorter on the console), else as it is."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return rel if not rel.startswith("..") else str(path)


def run_detail(run, limit=5):
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


def _check_dependencies(ctx, target, repo, base, res, patch, went_in):
    """A patch that applies in the series but not alone on the base needs an earlier one: the manifest must say
    which (`[targets.<target>.depends]`), so that it is submitted after it. Else it is a hidden dependency."""
    needs = [dep for dep in target.depends_on(res.name) if dep in went_in]
    if needs and placement.applies_with(repo, base, patch, [target.patch_path(dep) for dep in needs], ctx.work):
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


def verify_with_companions(ctx, target, results, scratch, *, python, device, timeout, cache=None, repeat=1):
    """Run all of `target`'s regression tests on its fully patched checkout with the patched sources of the
    targets in `target.verify_with` on PYTHONPATH: the series must not depend on, nor break with, its companions.

    Returns None when there is nothing to run, else a dict for the report."""
    others = [ctx.manifest.target(name) for name in target.verify_with]
    others = [other for other in others if other.name in scratch and other.patches]
    own = [res for res in results if res.target == target.name]
    if not others or not own or not all(res.verdict == Verdict.OK for res in own):
        return None
    repo, _ = scratch[target.name]
    files = [path for res in own for path in res.test_files]
    paths = [scratch[other.name][0].path / other.source_dir for other in others]
    label = f"{target.name} + patched {', '.join(other.name for other in others)}"
    tests = sum(res.green.passed + res.green.skipped + res.green.failed for res in own if res.green is not None)
    some = f"{len(files)} new test file{'s' if len(files) != 1 else ''} of {target.name} ({tests} tests)"
    ctx.log(
        f"[{label}] last stage: the {some} once more, with the patched sources of "
        f"{', '.join(other.name for other in others)} first on PYTHONPATH, in one pytest run"
    )
    run = repeated_pytest(
        cache,
        repeat,
        progress=_run_progress(ctx, f"[{label}]", repeat),
        python=python,
        repo_dir=repo.path,
        source_dir=target.source_dir,
        files=files,
        device=device,
        log_stem=ctx.work / "logs" / "verify" / target.name / "with-companions",
        timeout=timeout,
        expect=RunStatus.GREEN,
        extra_paths=paths,
    )
    ctx.log(f"[{label}] {_progress(run, 'passed', 'skipped')}")
    return {
        "target": target.name,
        "with": [other.name for other in others],
        "label": label,
        "green": run.status == RunStatus.GREEN,
        "status": run.status,
        "run": asdict(run),
    }
