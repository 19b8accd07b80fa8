"""`invariants`: property-based checks of the Trainer's step loop against an independent reference."""

import argparse
import json
import secrets
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

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
(scripts/invariants/declared.py) are reported apart. After the search, each tree runs the profile's configurations
on 2 CPU processes (gloo; 12 for ci): the gradient and the logged loss of every window when one process has fewer
targets or none (`processes-*`). The worker is the package scripts/invariants/, run in the pinned venv.

--tree release (the pinned release, 5.25.0, with released accelerate 1.16.0), upstream (the upstream tier alone,
0001-0022, on released accelerate 1.16.0: what upstream gets), series (the manifest's whole series, the fork tier
0023-0027 and the accelerate patches included), path:DIR (a checkout); default: release, upstream, then series (a
manifest without a fork tier runs its upstream tier once, as series). A search states its coverage (examples per
tree, and per invariant the examples that checked it / whose check could tell right from wrong) and fails below a
floor (60 examples a tree for ci, each invariant told right from wrong in 3).

--mutants runs the checker's own mutation check instead: each mutant of scripts/invariants/mutants.py (a plausible
bug, one per claim a patch makes) is applied to a copy of its tree (the series, or the upstream tier) and searched
with the ci profile's examples (300, whatever the machine's speed), then its 2-process configurations, until the
first undeclared violation (a mutant whose claim only those exercise runs those alone: `processes_only`); the table
says which tree and which invariant caught each, and the run fails when fewer than --min-score of them are caught
(default 0.9). --mutant NAME runs only those (repeatable); with --replay JSON, each mutant runs that one
configuration instead of a search (does it catch the mutant?).

--profile ci (about 3 minutes a tree on 2 cores) or nightly (about 40). --seed N makes the search reproducible
(the examples it draws; the time budgets can only cut it short). --replay JSON runs one configuration on each
tree instead of a search.

examples:
  python3 scripts/series.py invariants --profile ci --json /tmp/invariants.json
  python3 scripts/series.py invariants --tree series --replay '{{"model": "reg_kw", ...}}'
  python3 scripts/series.py invariants --mutants --json /tmp/mutants.json

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
        "--tree",
        action="append",
        metavar="TREE",
        help="release, upstream, series or path:DIR (repeatable; default the first three)",
    )
    p.add_argument("--profile", choices=invariants.PROFILES, default="ci", help="examples and time per tree (ci)")
    p.add_argument("--seed", type=_seed, default=0, metavar="N", help="the search's seed, or random (0)")
    p.add_argument("--replay", metavar="JSON", help="run this one configuration (as a violation printed it)")
    p.add_argument("--json", metavar="FILE", help="write the report here")
    p.add_argument("--python", metavar="PATH", help="use this interpreter (with torch) instead of the pinned venv")
    p.add_argument("--mutants", action="store_true", help="score the checker on the mutants of its trees")
    p.add_argument("--mutant", action="append", metavar="NAME", help="with --mutants: only this one (repeatable)")
    p.add_argument(
        "--fit",
        action="store_true",
        help="with --mutants: only check that each mutant's text occurs once in its tree (seconds), run none",
    )
    p.add_argument("--min-score", type=_score, default=0.9, metavar="F", help="with --mutants: the least score (0.9)")
    p.add_argument("--jobs", type=_jobs, default=2, metavar="N", help="with --mutants: mutants at once (2)")


def _score(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number from 0 to 1")
    return value


def _jobs(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number 1 or more")
    return int(text)


def _mutants(names: list[str] | None) -> list:
    sys.path.insert(0, str(invariants.SCRIPTS))
    try:
        from invariants.mutants import MUTANTS
        from invariants.mutants_outside import OUTSIDE_MUTANTS
    finally:
        sys.path.remove(str(invariants.SCRIPTS))
    known = {m.name: m for m in [*MUTANTS, *OUTSIDE_MUTANTS]}
    unknown = [n for n in names or [] if n not in known]
    if unknown:
        raise SeriesError(f"--mutant {unknown[0]}: no such mutant (one of {', '.join(known)})")
    return [known[n] for n in names] if names else list(known.values())


def run_mutants(args: argparse.Namespace, ctx: Context) -> int:
    started = time.monotonic()
    if args.tree:
        raise SeriesError("--mutants runs each mutant on its own tree (scripts/invariants/mutants.py): no --tree")
    replay = invariants.parse_replay(args.replay)
    chosen = _mutants(args.mutant)
    for mutant in chosen:
        if mutant.tree not in invariants.MUTANT_TREES:
            raise SeriesError(
                f"mutant {mutant.name}: tree {mutant.tree!r} is not one of {', '.join(invariants.MUTANT_TREES)}: "
                "update scripts/invariants/mutants.py"
            )
    target = ctx.manifest.default_target(args.target)
    needed = [invariants.parse_tree(name) for name in invariants.MUTANT_TREES if any(m.tree == name for m in chosen)]
    if any(t.label == invariants.UPSTREAM for t in needed):
        invariants.upstream_index(target)  # a fork tier that does not come last: bad input, before any work
    if args.fit:
        paths = invariants.tree_sources(ctx, target, needed)[0]
        misfits = []
        with tempfile.TemporaryDirectory(prefix="mutants-") as tmp:
            for mutant in chosen:
                try:
                    invariants.mutant_paths(paths[mutant.tree], mutant, Path(tmp) / mutant.name)
                except SeriesError as error:
                    misfits.append(str(error))
        for line in misfits:
            ctx.out(f"  {line}")
        verdict = f"FAILED ({len(misfits)} of {len(chosen)} do not fit)" if misfits else "OK"
        ctx.out(f"invariants --mutants --fit: {verdict} ({len(chosen)} mutant(s) checked on their trees, none run)")
        return 1 if misfits else 0
    python = pyenv.interpreter(ctx.work, ctx.requirements, args.python, log=ctx.log)
    paths, release, census = invariants.tree_sources(ctx, target, needed)
    counts = ", ".join(f"{sum(1 for m in chosen if m.tree == t.label)} of the {t.label} tree" for t in needed)
    ctx.out(
        f"invariants: {len(chosen)} mutant(s) ({counts}), seed {args.seed}, {args.jobs} at once, each searched "
        "until its first violation (at most the ci profile's 300 examples; one whose claim only the 2-process "
        "configurations exercise, on those alone)"
    )
    with tempfile.TemporaryDirectory(prefix="mutants-") as tmp:

        def one(mutant: Any) -> dict:
            folder = Path(tmp) / mutant.name
            tree_paths = invariants.mutant_paths(paths[mutant.tree], mutant, folder)
            tree = invariants.Tree(f"mutant:{mutant.name}", mutant.tree)
            result = invariants.run_worker(
                python,
                tree,
                tree_paths,
                release,
                profile="mutants",
                seed=args.seed,
                replay=replay,
                timeout=invariants.worker_timeout("mutants"),
                out=lambda line: None,
                log_path=ctx.work / "logs" / "invariants" / f"mutant_{mutant.name}.log",
                first=True,
                # a model's declaration: the census reads every head, the search only those it draws
                census=census[mutant.tree] if invariants.touches_models(mutant) else None,
                # a claim only the 2-process configurations exercise: no search before them
                processes_only=mutant.processes_only and replay is None,
            )
            row = invariants.mutant_row(mutant, result)
            ctx.out(f"  {mutant.name}: {'caught by ' + row['by'] if row['caught'] else 'NOT CAUGHT'}")
            return row

        for mutant in chosen:  # every mutant fits its tree before any runs
            invariants.mutant_paths(paths[mutant.tree], mutant, Path(tmp) / "check" / mutant.name)
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            rows = list(pool.map(one, chosen))
    seconds = time.monotonic() - started
    ctx.out("")
    for line in invariants.mutation_lines(rows, seconds):
        ctx.out(line)
    scores = invariants.mutation_scores(rows)
    ok = all(score >= args.min_score for score in scores.values())
    each = ", ".join(f"{origin} {score:.0%}" for origin, score in scores.items())
    ctx.out(f"invariants --mutants: {'OK' if ok else 'FAILED'} (score {each}; each at least {args.min_score:.0%})")
    if args.json:
        score = sum(1 for r in rows if r["caught"]) / len(rows)
        report = {
            "mutants": rows,
            "score": score,
            "scores": scores,
            "min_score": args.min_score,
            "duration_s": round(seconds, 1),
        }
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0 if ok else 1


def run(args: argparse.Namespace, ctx: Context) -> int:
    if args.json and not Path(args.json).resolve().parent.is_dir():
        raise SeriesError(f"--json {args.json}: the folder {Path(args.json).resolve().parent} does not exist")
    if args.mutants:
        return run_mutants(args, ctx)
    if args.mutant or args.fit:
        raise SeriesError(f"{'--mutant' if args.mutant else '--fit'} needs --mutants")
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
    what = invariants.describe_trees(ctx, target)
    labels = {t.label for t in trees}
    if not target.fork and {invariants.UPSTREAM, invariants.SERIES} <= labels:
        ctx.out(f"invariants: upstream skipped: {what[invariants.UPSTREAM]} (run once, as series)")
        trees = [t for t in trees if t.label != invariants.UPSTREAM]
    elif invariants.UPSTREAM in labels:
        invariants.upstream_index(target)  # a fork tier that does not come last: bad input, before any work
    python = pyenv.interpreter(ctx.work, ctx.requirements, args.python, log=ctx.log)
    paths, release, census = invariants.tree_sources(ctx, target, trees)
    for tree in trees:
        what.setdefault(tree.label, f"a checkout: {tree.folder}/src" if tree.folder else tree.spec)
        ctx.out(f"invariants: {tree.label} = {what[tree.label]}")
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
                census=census.get(tree.label),
            )
        )
        results[-1]["what"] = what[tree.label]
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
