"""`downstream`: run real TRL, sentence-transformers, setfit and PEFT trainers on the release and along the series."""

import argparse
import datetime
import fnmatch
import json
import time
from pathlib import Path
from typing import Any

from .. import downstream, pyenv
from ..benchmark import loadavg
from ..context import Context
from ..digests import sha256_file
from ..errors import SeriesError
from ..manifest import Target, find_patch
from ..render import check_writable
from ..runcache import RunCache


NAME = "downstream"
HELP = "run TRL, sentence-transformers, setfit and PEFT trainers on the release and the series; attribute changes"
DESCRIPTION = f"""\
{HELP}.

Installs the pinned packages of scripts/requirements-downstream*.txt once, beside the venv (--no-deps:
transformers and accelerate stay the pinned ones; an older TRL in a layer of its own), and runs the
scenarios of scripts/downstream_scenarios.py - their real trainers on tiny models built in code, offline -
on the release and on the series (with the released accelerate, then with the companion accelerate patches
on top). Each scenario's final weights, global_step, optimizer updates, scheduler steps, callback events
and log are compared with the release's own run. A difference is attributed to the patch that makes it
(bisection over the prefixes of the series) and checked against what that patch declares in the manifest
([targets.<target>.downstream]: scenario patterns, a reason, optionally the fields). Prints one line per
scenario as its results come, then a table; keeps <work>/reports/downstream-<target>.json (for `pr`).
Outcomes of identical runs (same trees, scenario code, interpreter and packages) are reused.

--patch NNNN stops the series at that patch: the release, then the prefixes up to NNNN (no companion
patches); the changes are attributed within it, and `pr` of NNNN or an earlier patch can use the report.

examples:
  python3 scripts/series.py downstream --json /tmp/downstream.json
  python3 scripts/series.py downstream --patch 0006 --scenario 'trl/sft-stream*'

exit status: 0 every difference from the release is declared by the patch that makes it; 1 an undeclared
difference, or a scenario that could not run (crashed, timed out); 2 bad input or environment; 130
interrupted."""
NEEDS_GIT = True
NEEDS_WORK = True
LOCKS_WORK = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", help="whose series (default: the first target, transformers)")
    p.add_argument("--patch", metavar="NNNN", help="the series only up to this patch (number or file name)")
    p.add_argument(
        "--scenario", action="append", metavar="PATTERN", help="only the scenarios matching this glob (repeatable)"
    )
    p.add_argument("--json", metavar="FILE", help="write the report here")
    p.add_argument("--summary", metavar="FILE", help="append a markdown summary here (e.g. $GITHUB_STEP_SUMMARY)")
    p.add_argument("--jobs", type=int, default=2, metavar="N", help="worker processes at a time (2)")
    p.add_argument("--timeout", type=int, default=300, metavar="S", help="limit per scenario run (300)")
    p.add_argument("--no-cache", action="store_true", help="run every scenario, even where an outcome is known")
    p.add_argument("--python", metavar="PATH", help="use this interpreter (with torch) instead of the pinned venv")


def _check_args(args: argparse.Namespace, ctx: Context) -> tuple[Target, str | None]:
    target = ctx.manifest.default_target(args.target)
    if not target.patches:
        raise SeriesError(f"{target.name} has no patches: nothing to compare with its release")
    through = find_patch(target, args.patch) if args.patch else None
    if args.jobs < 1 or args.timeout < 1:
        raise SeriesError("--jobs and --timeout must be at least 1")
    for path in (downstream.WORKER, downstream.REQUIREMENTS):
        if not path.is_file():
            raise SeriesError(f"{path} does not exist")
    for option, path in (("--json", args.json), ("--summary", args.summary)):
        if path and not Path(path).resolve().parent.is_dir():
            raise SeriesError(f"{option} {path}: the folder {Path(path).resolve().parent} does not exist")
        if path:
            check_writable(path, option)  # before the run of many minutes, not after it printed OK
    return target, through


def run(args: argparse.Namespace, ctx: Context) -> int:
    started = time.monotonic()
    target, through = _check_args(args, ctx)
    python = pyenv.interpreter(ctx.work, ctx.requirements, args.python, log=ctx.log)
    catalogue = downstream.scenarios(python)
    known = [spec["name"] for spec in catalogue]
    if args.scenario:
        catalogue = [s for s in catalogue if any(fnmatch.fnmatchcase(s["name"], p) for p in args.scenario)]
        if not catalogue:
            raise SeriesError(f"no scenario matches {', '.join(args.scenario)} (see {downstream.WORKER.name} --list)")
    loads = [loadavg()]
    series = downstream.series_points(ctx, target, through)
    points = series.points
    base_tree = series.ensure(target.name, series.base_trees[target.name])
    install = downstream.ensure_install(ctx.work, python, base_tree, log=ctx.log)
    cache = None
    if not args.no_cache:
        cache = RunCache(ctx.work / "cache" / "downstream", downstream.identity(python, install))
    names = [spec["name"] for spec in catalogue]
    specs = {spec["name"]: spec for spec in catalogue}
    printed: set[str] = set()

    def show(point: downstream.Point, name: str) -> None:
        # one line per scenario, once the release and the whole series have both run
        release, last = runner.get(points[0], name), runner.get(points[-1], name)
        if name not in printed and release is not None and last is not None:
            printed.add(name)
            ctx.out(downstream.progress_line(name, specs[name]["package"], release, last))

    runner = downstream.Runner(
        ctx, series, install, python, catalogue, cache=cache, jobs=args.jobs, timeout=args.timeout, log=ctx.log
    )
    runner.on_outcome = show
    labels = ", ".join(p.label for p in points)
    ctx.log(f"downstream: {len(names)} scenario(s); the series' points: {labels}")
    found = downstream.bisect(runner, points, names, ways=args.jobs + 1, log=ctx.log)
    loads.append(loadavg())
    scenarios = downstream.attribute(ctx.manifest, points, runner, catalogue, found)
    undeclared = [
        {"scenario": entry["name"], "patch": change["patch"], "target": change["target"], **change}
        for entry in scenarios
        for change in entry["changes"]
        if change["undeclared_fields"]
    ]
    failures = [{key: failure.get(key) for key in ("name", "point", "crashed", "log")} for failure in runner.failures]
    failures += downstream.release_failures(runner, points, names)
    ok = not undeclared and not failures
    duration = round(time.monotonic() - started, 1)
    report: dict[str, Any] = {
        "schema_version": downstream.SCHEMA_VERSION,
        "ok": ok,
        "target": target.name,
        "through": through,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "packages": downstream.packages_of(install, catalogue),
        "install": {
            "folder": str(install.folder),
            "seconds": install.info["seconds"],
            "bytes": install.info["bytes"],
        },
        "points": [
            {
                "label": p.label,
                "patch": p.patch,
                "target": p.target,
                "sha256": sha256_file(ctx.manifest.target(p.target).patch_path(p.patch))
                if p.patch and p.target
                else None,
            }
            for p in points
        ],
        "scenarios": scenarios,
        "undeclared": undeclared,
        "not_seen": downstream.not_seen(ctx.manifest, points, scenarios, names, known),
        "failures": failures,
        "outcomes": {"run": runner.ran, "reused": runner.reused},
        "load_average_1m": [load for load in loads if load is not None],
        "duration_s": duration,
    }
    ctx.out("")
    ctx.out(downstream.table(report))
    for line in downstream.problem_lines(report):
        ctx.out(line)
    load = report["load_average_1m"]
    load_text = f", load {min(load):.1f}-{max(load):.1f}" if load else ""
    ctx.out(
        f"downstream: {'OK' if ok else 'FAILED'} ({len(names)} scenario(s), {len(undeclared)} undeclared "
        f"change(s), {len(failures)} not run; {runner.ran} outcome(s) run, {runner.reused} reused; {duration:.0f}s"
        f"{load_text}; logs in {ctx.work / 'logs' / 'downstream'})"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.summary:
        with open(args.summary, "a", encoding="utf-8") as fh:
            fh.write(downstream.markdown(report))
    downstream.save_last(ctx.work, report)
    series.prune()
    return 0 if ok else 1
