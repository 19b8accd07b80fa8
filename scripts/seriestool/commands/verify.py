"""`verify`: prove every patch applies, is red without its fix, green with it, and style-clean."""

import argparse
import datetime
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

from .. import base as base_mod
from .. import pyenv, render, reports, upstream_tests
from ..am import check_patches
from ..errors import SeriesError
from ..manifest import find_patch
from ..results import SCHEMA_VERSION, PytestRun
from ..runcache import RunCache, tool_digest
from ..scratch import prepare_scratch
from ..statuses import RunStatus, Verdict
from ..verification import run_detail, verify_target, verify_with_companions


NAME = "verify"
HELP = "check every patch: applies, red without its fix, green with it, ruff-clean"
DESCRIPTION = f"""\
{HELP}.

Each patch is put, in order, on the base plus the earlier patches that went in, in a scratch checkout
(<work>/verify/<target>). The test files it adds run without its code change (they must fail with real
assertion failures: red) and with it (they must pass: green); ruff check and ruff format --check run on
the Python files it touches. The outcome of an identical earlier pytest run is reused (--no-cache runs
everything). --repeat N runs each green stage (and the companion stage) N times afresh: a test that fails
in some runs and passes in others is flaky, a failure of its own. Prints a table and the problems, writes
<work>/reports/verify-<target>.json (for `pr`).

examples:
  python3 scripts/series.py verify                                  # the whole series, on CPU
  python3 scripts/series.py verify --target transformers --patch 0003
  python3 scripts/series.py verify --repeat 10                      # a flaky test fails it
  python3 scripts/series.py verify --target transformers \\
      --base git:https://github.com/huggingface/transformers.git@main

exit status: 0 every patch passed (or is already upstream); 1 a check failed (a conflict, not red, not
green, flaky, not ruff-clean, a hidden dependency, an upstream-tests regression); 2 bad input or
environment; 130 interrupted (its pytest runs are stopped)."""
NEEDS_GIT = True
NEEDS_WORK = True


def add_arguments(p):
    p.add_argument("--target", help="only this target (default: all)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cpu hides GPUs; cuda needs CUDA torch")
    p.add_argument("--base", metavar="SPEC", help="sdist (default), path:DIR or git:URL@REF; needs --target")
    p.add_argument(
        "--patch",
        action="append",
        metavar="NAME",
        help="red/green/style-check only this patch (its number, or file name; with --target when several "
        "targets have that number); the saved results of the others are kept",
    )
    p.add_argument("--json", metavar="FILE", help="write the JSON report here")
    p.add_argument("--junit", metavar="FILE", help="write a JUnit XML report here")
    p.add_argument("--summary", metavar="FILE", help="append a markdown summary here (e.g. $GITHUB_STEP_SUMMARY)")
    p.add_argument("--python", metavar="PATH", help="use this interpreter instead of the pinned venv")
    p.add_argument(
        "--upstream-tests",
        metavar="SPEC",
        help="also run the manifest's upstream_tests from path:DIR or git:URL@REF on the base and with the series",
    )
    p.add_argument(
        "--test-timeout", type=positive_seconds, default=1800, metavar="S", help="limit per pytest run (1800)"
    )
    p.add_argument(
        "--repeat",
        type=_repeat,
        default=1,
        metavar="N",
        help="run each green stage (and the companion stage) N times, without reusing earlier outcomes, and fail "
        "on a test that fails in some runs but not all (flaky); default 1",
    )
    p.add_argument(
        "--no-cache", action="store_true", help="run every pytest, even where an identical run's outcome is known"
    )


def positive_seconds(text):
    """--test-timeout: a whole number of seconds above 0 (a negative or zero limit would fail every run)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


def check_writable(path, option):
    """Bad input, before the run, when the report file `path` cannot be written: a run of many minutes must not
    end in an error. An existing file is opened for appending (its content is not changed); a new one is made and
    removed again."""
    path = Path(path)
    try:
        if path.is_dir():
            raise IsADirectoryError(21, "is a folder", str(path))
        if path.exists():
            with open(path, "a", encoding="utf-8"):
                pass
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            os.unlink(path)
    except OSError as exc:
        raise SeriesError(f"{option} {path}: cannot write it ({exc.strerror or exc})") from None


def _count(number, word, plural=None):
    return f"{number} {word if number == 1 else plural or word + 's'}"


def _repeat(value):
    """--repeat N: a whole number of runs, at least 1 (argparse turns the error into one line, exit 2)."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of runs, at least 1 (got {value!r})")
    return number


def resolve_patch(targets, wanted, *, explicit):
    """The patch file `wanted` names (number, file name or name without .patch) among `targets`. A number that
    several targets have is an error without --target: picking one would check the other target's patch."""
    found = []
    for target in targets:
        try:
            found.append((target, find_patch(target, wanted)))
        except SeriesError:
            continue
    if not found:
        names = ", ".join(p for t in targets for p in t.patches) or "none"
        raise SeriesError(f"unknown patch {wanted!r} (patches: {names})")
    if len(found) > 1 and not explicit:
        where = ", ".join(f"{target.name} ({name})" for target, name in found)
        raise SeriesError(f"--patch {wanted} is in several targets: {where}; add --target")
    return found[0][1]


def run(args, ctx):
    started = time.monotonic()
    targets = ctx.manifest.select(args.target)
    if args.base and len(targets) > 1:
        raise SeriesError("--base names one target's base; add --target")
    spec = base_mod.parse_spec(args.base)
    base_mod.check_spec(spec)
    for option, path in (("--json", args.json), ("--junit", args.junit), ("--summary", args.summary)):
        if path:
            check_writable(path, option)
    for target in targets:
        check_patches(target)
    only = None
    if args.patch:
        only = {resolve_patch(targets, wanted, explicit=args.target is not None) for wanted in args.patch}

    upstream_target = None
    if args.upstream_tests:
        listing = [target for target in targets if target.upstream_tests]
        if not listing:
            named = ", ".join(target.name for target in targets)
            raise SeriesError(f"--upstream-tests: {named} lists no upstream_tests in {ctx.manifest.path.name}")
        if len(listing) > 1:
            raise SeriesError("--upstream-tests names one target's tests; add --target")
        upstream_target = listing[0]
        upstream_tests.parse_spec(args.upstream_tests, upstream_target)

    python = pyenv.interpreter(ctx.work, ctx.requirements, args.python, log=ctx.log)
    info = pyenv.probe(python)
    if args.device == "cuda" and not info.get("cuda"):
        torch = info.get("torch") or "missing"
        raise SeriesError(f"--device cuda needs a CUDA build of torch, but {python} has torch {torch} without CUDA")
    cache = None
    if not args.no_cache:
        identity = {"python": str(python), "probe": info, "device": args.device, "tool": tool_digest()}
        if args.device == "cuda":
            identity["visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
        cache = RunCache(ctx.work / "cache" / "verify", identity)

    results, target_reports, scratch, tops = [], [], {}, {}
    for target in targets:
        repo, base = prepare_scratch(ctx, target, spec)
        scratch[target.name] = (repo, base)
        notes = []
        target_reports.append(
            {
                "name": target.name,
                "version": target.version,
                "base": {"spec": args.base or "sdist", "describe": spec.describe(target), "commit": base},
                "patches": len(target.patches),
                "notes": notes,
            }
        )
        if not target.patches:
            ctx.out(f"no patches for {target.name}: nothing to verify")
            continue
        results += verify_target(
            ctx,
            target,
            repo,
            base,
            python=python,
            device=args.device,
            only=only,
            timeout=args.test_timeout,
            spec=spec,
            notes=notes,
            cache=cache,
            repeat=args.repeat,
        )
        tops[target.name] = repo.head()
    companions = []
    if only is None:
        for target in targets:
            companion = verify_with_companions(
                ctx,
                target,
                results,
                scratch,
                python=python,
                device=args.device,
                timeout=args.test_timeout,
                cache=cache,
                repeat=args.repeat,
            )
            if companion is not None:
                companions.append(companion)
    upstream_parts = []
    if upstream_target is not None:
        repo, base = scratch[upstream_target.name]
        upstream_parts.append(
            upstream_tests.run(
                ctx,
                upstream_target,
                repo,
                {"base": base, "series": tops.get(upstream_target.name, base)},
                args.upstream_tests,
                python=python,
                device=args.device,
                timeout=args.test_timeout,
            )
        )
    # Conflicts and failed checks need a maintainer; a patch already upstream is only news.
    ok = all(Verdict(res.verdict).passed for res in results)
    ok = ok and all(companion["green"] for companion in companions)
    ok = ok and all(part["ok"] for part in upstream_parts)
    duration = round(time.monotonic() - started, 2)
    if results:
        patches = [res.to_json() for res in results]
        ctx.out(render.table(patches))
        for line in render.problem_lines(patches):
            ctx.out(line)
    for companion in companions:
        run = companion["run"]
        verdict = "ok" if companion["green"] else f"FAIL ({run['status']})"
        if run["status"] == RunStatus.FLAKY:
            verdict = f"FLAKY{run_detail(PytestRun(**run))}"
        counts = f"{run['passed']} passed, {run['skipped']} skipped, {run['failed']} failed"
        if run["runs"] > 1:
            counts += f" ({run['run_statuses'].count(RunStatus.GREEN)} of {run['runs']} runs green)"
        ctx.out(f"{companion['label']}: {verdict}, {counts}")
    for part in upstream_parts:
        for line in upstream_tests.lines(part):
            ctx.out(line)
    logs = ctx.work / "logs" / "verify"
    runs = [asdict(run) for res in results for run in (res.red, res.green) if run and run.exit_code is not None]
    runs += [companion["run"] for companion in companions]
    reused = sum(run["cached"] for run in runs)
    if reused:
        total = sum(run["runs"] for run in runs)  # a repeated stage is `runs` pytest runs, never reused
        ctx.out(f"{reused} of {total} pytest runs: outcome of an identical earlier run (--no-cache to run them)")
    counted = _count(len(results), "patch", "patches")
    if only is not None:
        checked = sum(1 for res in results if res.name in only)
        counted = _count(checked, "patch", "patches")
        if len(results) > checked:
            counted += f", {len(results) - checked} more not checked (--patch)"
    ctx.out(f"verify: {'OK' if ok else 'FAILED'} ({counted}, {duration:.1f}s, logs in {logs})")
    report = {
        "schema_version": SCHEMA_VERSION,
        "ok": ok,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": args.device,
        "repeat": args.repeat,
        "python": str(python),
        "tools": {key: info.get(key) for key in ("python", "pytest", "ruff", "torch", "cuda")},
        "targets": target_reports,
        "patches": [res.to_json() for res in results],
        "companions": companions,
        "upstream_tests": upstream_parts,
        "duration_s": duration,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.junit:
        render.write_junit(args.junit, results, duration)
    reports.save_last(ctx.work, report)
    if args.summary:
        render.append_markdown(args.summary, report)
    return 0 if ok else 1
