"""`bench`: the unpatched and the patched Trainer side by side: time per optimizer step and host syncs."""

import json
import os
import shutil
import statistics
import time
from pathlib import Path

from .. import pyenv
from ..benchmark import (
    GOAL_RATIO,
    LABELS,
    SCHEMA_VERSION,
    VARIANTS,
    count_table,
    loadavg,
    machine,
    prepare_trees,
    run_both,
    summarize,
    time_table,
)
from ..errors import SeriesError


NAME = "bench"
HELP = "time the unpatched and the patched Trainer side by side and count their host syncs"
DESCRIPTION = f"""\
{HELP}.

Makes two source trees per target under <work>/bench/ (the pinned sdists, and with the series), runs
scripts/trainer_bench.py in the pinned venv for each: first a counting run (host syncs, torch and Python
calls per optimizer step), then timed pairs of runs that take turns step by step on one CPU. Prints the
README's Performance tables.

example:
  python3 scripts/series.py bench --json /tmp/bench.json      # about 3 minutes on 2 cores

exit status: 0 host syncs within budget; 1 the series adds host syncs over the budget; 2 bad input."""
NEEDS_GIT = True
NEEDS_WORK = True


def add_arguments(p):
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


def run(args, ctx):
    started = time.monotonic()
    targets = ctx.manifest.select()
    if args.reps < 1 or args.steps < 1 or args.warmup < 1 or args.count_steps < 1:
        raise SeriesError("--reps, --steps, --warmup and --count-steps must be at least 1")
    python = pyenv.interpreter(ctx.work, ctx.requirements, args.python, log=ctx.log)
    trees = {target.name: prepare_trees(ctx, target) for target in targets}

    common = ["--warmup", str(args.warmup), "--threads", str(args.threads)]
    for case in args.case or []:
        common += ["--case", case]
    loads = [loadavg()]
    ctx.log("counting host syncs and calls per optimizer step")
    logs = ctx.work / "logs" / "bench"
    if logs.exists():
        shutil.rmtree(logs)
    counted = run_both(
        python,
        trees,
        targets,
        [*common, "--count-syncs", "--steps", str(args.count_steps)],
        logs=logs / "count",
        timeout=args.timeout,
        paired=False,
    )
    info = counted["base"][0]
    counts = {variant: counted[variant][1] for variant in VARIANTS}
    loads.append(loadavg())
    timings = {variant: [] for variant in VARIANTS}
    reps = 0 if args.count_only else args.reps
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [None]
    for rep in range(reps):
        lead, cpu = VARIANTS[rep % 2], cpus[(rep // 2) % len(cpus)]
        where = "" if cpu is None else f" on CPU {cpu}"
        ctx.log(f"timed pair {rep + 1}/{reps}{where} ({LABELS[lead]} steps first)")
        timed = run_both(
            python,
            trees,
            targets,
            [*common, "--steps", str(args.steps)],
            logs=logs / f"pair{rep + 1}",
            timeout=args.timeout,
            paired=True,
            lead=lead,
            cpu=cpu,
        )
        for variant in VARIANTS:
            timings[variant].append(timed[variant][1])
        loads.append(loadavg())

    rows = summarize(counts, timings)
    host = machine()
    loads = [load for load in loads if load is not None]
    load = f"{min(loads):.1f}-{max(loads):.1f}" if loads else "unknown"
    if reps:
        ctx.out(time_table(rows))
        ctx.out("")
    ctx.out(count_table(rows))
    ctx.out("")
    ctx.out(
        f"Machine: {host['cpus']} CPUs ({host['cpu_model']}), {host['system']}, 1-minute load average {load} "
        f"during the run (the benchmark's own process included). torch {info['torch']}, {info['threads']} "
        f"thread(s) per process. Model: {info['model']}."
    )
    if reps:
        ctx.out(
            f"Time: {reps} pairs of runs, one process per variant, taking turns step by step on one CPU (A/B/A/B; "
            "the variant that starts alternates, the CPU every two pairs). A run's time is its median over "
            f"{args.steps} optimizer steps after {args.warmup} warm-up steps; a cell is the median over the runs "
            "(lowest-highest run in brackets). Ratio: patched/unpatched of those medians; per pair: the median "
            "(lowest-highest) of the ratios within a pair. CPU time is the process's own; the wall-time ratio "
            "is computed the same way from wall-clock times."
        )
    ctx.out(
        f"Counts per optimizer step over {args.count_steps} steps after the warm-up: host syncs are calls that "
        "read a tensor on the host (item, bool, tolist, cpu, ...); torch calls are those made from Python; "
        "Python calls are function calls. Budget: host syncs per step the series may add."
    )
    syncs_ok = all(row["syncs_ok"] for row in rows)
    duration = round(time.monotonic() - started, 1)
    verdict = f"host syncs {'within budget' if syncs_ok else 'OVER BUDGET'}"
    if reps:
        within = sum(row["ratio_cpu"] <= GOAL_RATIO for row in rows)
        within_pairs = sum(statistics.median(row["pair_ratios_cpu"]) <= GOAL_RATIO for row in rows)
        verdict += (
            f"; CPU-time ratio <= {GOAL_RATIO} in {within} of {len(rows)} cases, per pair (median) in "
            f"{within_pairs} of {len(rows)}"
        )
    ctx.out(f"bench: {verdict} ({duration:.0f}s)")
    if args.json:
        report = {
            "schema_version": SCHEMA_VERSION,
            "syncs_ok": syncs_ok,
            "machine": dict(host, load_average_1m=loads),
            "setup": {
                "reps": reps,
                "steps": args.steps,
                "warmup": args.warmup,
                "count_steps": args.count_steps,
                "threads": info["threads"],
                "torch": info["torch"],
                "model": info["model"],
            },
            "python": str(python),
            "cases": rows,
            "duration_s": duration,
        }
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0 if syncs_ok else 1
