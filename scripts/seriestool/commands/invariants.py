"""`invariants`: property-based checks of the Trainer's step loop against an independent reference."""

import argparse
import json
import secrets
import time
from pathlib import Path

from .. import invariants, pyenv
from ..benchmark import loadavg
from ..context import Context
from ..errors import SeriesError
from ..progress import prefixed


NAME = "invariants"
HELP = "check the Trainer's step loop on generated configurations against an independent reference"
DESCRIPTION = f"""\
{HELP}.

Hypothesis draws training configurations (model, batch size, accumulation, sized or streamed data with masked
targets, fp16 with infs injected at chosen attempts, schedules, logging and save strategies, callbacks that stop
an epoch or the run, a resume with the same or other arguments), runs each on tiny models through the Trainer of
each tree, and checks named invariants whose expected values come from a plain PyTorch reference, closed-form
schedules and the faults the harness injected (see docs/invariants.md). A violation is shrunk to a minimal
configuration and printed with the tree and one command that replays it. Declared limitations
(scripts/invariants/declared.py) are reported apart. The worker is the package scripts/invariants/, run in the
pinned venv.

--tree release (5.24.0), series (the manifest's whole series), path:DIR (a checkout); default: release, then
series. --profile ci (about 3 minutes a tree on 2 cores) or nightly (about 40). --seed N makes the search
reproducible (the examples it draws; the time budgets can only cut it short). --replay JSON runs one
configuration on each tree instead of a search.

examples:
  python3 scripts/series.py invariants --profile ci --json /tmp/invariants.json
  python3 scripts/series.py invariants --tree series --replay '{{"model": "reg_kw", ...}}'

exit status: 0 no undeclared violation on any tree but the release; 1 some (or a worker that gave no result);
2 bad input or environment; 130 interrupted."""
NEEDS_GIT = True
NEEDS_WORK = True
LOCKS_WORK = True


def _seed(text: str) -> int:
    """A seed: a whole number, or `random` (one is drawn, and printed with the command that reruns it)."""
    if text == "random":
        return secrets.randbelow(2**31)
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number 0 or more, or random")
    return int(text)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", help="whose series (default: the first target, transformers)")
    p.add_argument(
        "--tree", action="append", metavar="TREE", help="release, series or path:DIR (repeatable; default both)"
    )
    p.add_argument("--profile", choices=invariants.PROFILES, default="ci", help="examples and time per tree (ci)")
    p.add_argument("--seed", type=_seed, default=0, metavar="N", help="the search's seed, or random (0)")
    p.add_argument("--replay", metavar="JSON", help="run this one configuration (as a violation printed it)")
    p.add_argument("--json", metavar="FILE", help="write the report here")
    p.add_argument("--python", metavar="PATH", help="use this interpreter (with torch) instead of the pinned venv")


def run(args: argparse.Namespace, ctx: Context) -> int:
    started = time.monotonic()
    trees = [invariants.parse_tree(spec) for spec in args.tree or invariants.TREES]
    if len({t.label for t in trees}) != len(trees):
        raise SeriesError("--tree: each tree once")
    replay = invariants.parse_replay(args.replay)
    if args.json and not Path(args.json).resolve().parent.is_dir():
        raise SeriesError(f"--json {args.json}: the folder {Path(args.json).resolve().parent} does not exist")
    if not (invariants.PACKAGE / "__main__.py").is_file():
        raise SeriesError(f"{invariants.PACKAGE} is missing")
    target = ctx.manifest.default_target(args.target)
    python = pyenv.interpreter(ctx.work, ctx.requirements, args.python, log=ctx.log)
    paths, release = invariants.tree_paths(ctx, target, trees)
    loads = [load for load in [loadavg()] if load is not None]
    if replay is None:
        ctx.out(
            f"invariants: seed {args.seed}, profile {args.profile}; again: "
            f"{invariants.rerun_command(args.profile, args.seed, trees)}"
        )
    results = []
    for tree in trees:
        ctx.log(f"invariants: {tree.label} ({', '.join(map(str, paths[tree.label]))})")
        results.append(
            invariants.run_worker(
                python,
                tree,
                paths[tree.label],
                release,
                profile=args.profile,
                seed=args.seed,
                replay=replay,
                timeout=invariants.worker_timeout(args.profile),
                out=ctx.out,
                say=prefixed(ctx.log, f"invariants: {tree.label}"),
                log_path=ctx.work / "logs" / "invariants" / f"{tree.label.replace('/', '_').replace(':', '_')}.log",
            )
        )
    loads += [load for load in [loadavg()] if load is not None]
    report = invariants.make_report(args.profile, args.seed, results, loads, time.monotonic() - started)
    ctx.out("")
    for line in invariants.summary_lines(report):
        ctx.out(line)
    undeclared = sum(len(t.get("violations", [])) for t in results if t["tree"] != invariants.RELEASE)
    load_text = f", load {min(loads):.1f}-{max(loads):.1f}" if loads else ""
    ctx.out(
        f"invariants: {'OK' if report['ok'] else 'FAILED'} ({undeclared} undeclared violation(s) beyond the release; "
        f"{report['duration_s']:.0f}s{load_text})"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0 if report["ok"] else 1
