"""`bench`: the unpatched and the patched Trainer side by side: time per optimizer step and host syncs."""

import argparse
import json
import time
from pathlib import Path

from .. import pyenv
from ..benchmark import Plan, measure, prepare_trees, report, result_lines, summarize, verdict
from ..context import Context
from ..errors import SeriesError


NAME = "bench"
HELP = "time the unpatched and the patched Trainer side by side and count their host syncs"
DESCRIPTION = f"""\
{HELP}.

Makes two source trees per target under <work>/bench/ (the pinned sdists, and with the series), runs
scripts/trainer_bench.py in the pinned venv for each: first a counting run (host syncs, torch and Python
calls per optimizer step), then timed pairs of runs that take turns step by step on one CPU. Prints the
tables of docs/contributor.md's Performance section and the README's summary line.

example:
  python3 scripts/series.py bench --json /tmp/bench.json      # about 3 minutes on 2 cores

exit status: 0 host syncs within budget; 1 the series adds host syncs over the budget; 2 bad input."""
NEEDS_GIT = True
NEEDS_WORK = True
LOCKS_WORK = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reps", type=int, default=8, metavar="N", help="timed pairs of runs (8)")
    p.add_argument("--steps", type=int, default=40, metavar="N", help="timed optimizer steps per run and case (40)")
    p.add_argument("--warmup", type=int, default=5, metavar="N", help="optimizer steps before measuring (5)")
    p.add_argument("--count-steps", type=int, default=8, metavar="N", help="optimizer steps to count work over (8)")
    p.add_argument("--case", action="append", metavar="NAME", help="only this case (fp32, fp16-adamw, ...)")
    p.add_argument("--threads", type=int, default=1, metavar="N", help="torch threads per run (1)")
    p.add_argument("--count-only", action="store_true", help="only count host syncs and calls, no timed runs")
    p.add_argument("--json", metavar="FILE", help="write the results here")
    p.add_argument("--python", metavar="PATH", help="use this interpreter (with torch) instead of the pinned venv")
    p.add_argument("--timeout", type=int, default=900, metavar="S", help="limit per benchmark process (900)")


def run(args: argparse.Namespace, ctx: Context) -> int:
    started = time.monotonic()
    targets = ctx.manifest.select()
    if args.reps < 1 or args.steps < 1 or args.warmup < 1 or args.count_steps < 1:
        raise SeriesError("--reps, --steps, --warmup and --count-steps must be at least 1")
    plan = Plan(
        reps=0 if args.count_only else args.reps,
        steps=args.steps,
        warmup=args.warmup,
        count_steps=args.count_steps,
        threads=args.threads,
        cases=args.case or [],
        timeout=args.timeout,
    )
    python = pyenv.interpreter(ctx.work, ctx.requirements, args.python, log=ctx.log)
    trees = {target.name: prepare_trees(ctx, target) for target in targets}
    measured = measure(ctx, python, trees, targets, plan)
    rows = summarize(measured.counts, measured.timings)
    for line in result_lines(rows, measured, plan):
        ctx.out(line)
    duration = round(time.monotonic() - started, 1)
    ctx.out(f"bench: {verdict(rows, plan)} ({duration:.0f}s)")
    if args.json:
        data = report(rows, measured, plan, python, duration)
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return 0 if all(row["syncs_ok"] for row in rows) else 1
