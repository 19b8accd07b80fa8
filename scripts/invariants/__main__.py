"""The worker: `python -m invariants --tree-label series --tree-spec series --profile ci --seed 0 --result F`
(search) or `... --replay JSON` (one configuration), with the transformers tree on PYTHONPATH.

Prints each violation as it is found; writes the result (JSON) to --result: {tree, versions, examples, seconds,
violations, declared, replayed}. Exit 0 whatever it found (the tool judges), 2 on bad input, 3 on a crash of the
harness itself.
"""

import argparse
import functools
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import declared, draw, judges, processes, report


LOADER = r"""
import dataclasses, json, os, sys, tempfile
from transformers.trainer_callback import TrainerState
# The release's state: the file as saved (does the release load it?), and the file once the keys the release does
# not know are dropped (the series' 0001, the way upstream adds TrainerState fields: each known key as it reads it)
KNOWN = {field.name for field in dataclasses.fields(TrainerState)}


def load(state):
    fd, path = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(state))
    try:
        TrainerState.load_from_json(path)
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        os.unlink(path)


for line in sys.stdin:
    state = json.loads(json.loads(line))
    unknown = sorted(key for key in state if key not in KNOWN)
    answer = {
        "as_saved": load(state),
        "known_keys": load({k: v for k, v in state.items() if k in KNOWN}),
        "unknown": {key: state[key] for key in unknown},
    }
    print(json.dumps(answer), flush=True)
"""


class ReleaseLoader:
    """The release's `TrainerState.load_from_json` in a process of its own (one import for the whole run)."""

    def __init__(self, path: str) -> None:
        env = dict(os.environ, PYTHONPATH=path)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", LOADER], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def __call__(self, text: str) -> dict[str, Any]:
        """`as_saved`: the release's error on the file as saved (None: it loads); `known_keys`: its error once the keys
        it does not know are dropped; `unknown`: those keys and their saved values."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(text) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            return {"as_saved": "the loader process ended", "known_keys": "the loader process ended", "unknown": {}}
        return json.loads(line)


def _versions() -> dict[str, Any]:
    import accelerate
    import hypothesis
    import torch
    import transformers

    return {
        "transformers": transformers.__version__,
        "transformers_file": transformers.__file__,
        "accelerate": accelerate.__version__,
        "accelerate_file": accelerate.__file__,
        "torch": torch.__version__,
        "hypothesis": hypothesis.__version__,
    }


def _features() -> frozenset[str]:
    """What the imported Trainer has of `draw.FEATURES` (its `TrainingArguments` fields): the draw leaves out the
    choices a tree cannot take (the release and the upstream tier have no `count_skipped_steps`)."""
    import dataclasses

    from transformers import TrainingArguments

    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    return frozenset(name for name in draw.FEATURES if name in names)


def _freeze_imports() -> None:
    """Move what the imports made (modules, torch, transformers, Hypothesis) out of the garbage collector's reach:
    each Trainer calls `gc.collect()` when it starts (accelerate's memory release), which otherwise walks all of them
    again, about 0.24 s a Trainer and two thirds of a case's time. Objects made afterwards, a case's, are collected
    as before."""
    _versions()  # imports transformers, accelerate and torch
    import transformers.trainer  # noqa: F401  (the Trainer's own imports)

    gc.collect()
    gc.freeze()


def _two_process_runner(configs: list[dict[str, Any]], profile: Any) -> list[judges.Verdict]:
    # about a second a configuration and 5 for the launch on 2 cores: a hung collective ends the run well before
    # the worker's own timeout
    records = processes.run(configs, timeout=10 * len(configs) + 60)
    out = []
    for config, record in zip(configs, records, strict=True):
        found, checked = processes.judge(config, record)
        broken = judges.Verdict(found)
        broken.checked = broken.discriminating = frozenset(checked)
        out.append(broken)
    return out


def _two_process_check(args: Any, profile: Any, source: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The profile's 2-process configurations run and judged: their violations (each with its declaration, if any)
    and the examples each invariant was checked in. Told apart by invariant and model, not shrunk."""
    configs = processes.configs(args.seed, profile.processes)
    started = time.monotonic()
    entries: list[dict[str, Any]] = []
    seen: set[str] = set()
    checked: dict[str, int] = {}
    for i, (config, broken) in enumerate(zip(configs, _two_process_runner(configs, profile), strict=True)):
        for name in broken.checked:
            checked[name] = checked.get(name, 0) + 1
        for invariant, found in broken.items():
            key = f"{invariant}[{config['model']}]"
            if key in seen:
                continue
            seen.add(key)
            entry = {
                "invariant": invariant,
                "key": key,
                "tree": args.tree_label,
                "config": config,
                "found": found,
                "declared": declared.find(invariant, args.tree_label, config, source=source),
                "replay": report.replay_command(args.tree_spec, config),
                "examples": i + 1,
                "seconds": round(time.monotonic() - started, 1),
            }
            entries.append(entry)
            if not entry["declared"]:
                for line in report.violation_lines(entry):
                    print(line, flush=True)
    return entries, checked


def _census(args: Any, result: dict[str, Any]) -> list[dict[str, Any]]:
    """Run the tree's census (`args.census`): its figures go to `result["census"]`; what it found wrong, as a
    violation entry (none is declared: a head the census fails on is always wrong)."""
    from . import census

    figures = census.run(args.census)
    result["census"] = figures  # reported beside the invariants (one run, not a count of examples)
    found = census.found(figures)
    print(
        f"invariants: census: exit {figures['exit']}, {len(figures['failing'])} head(s) failing, "
        f"{figures.get('not_checked', 0)} not checked ({figures['seconds']}s)",
        flush=True,
    )
    if not found:
        return []
    entry = {
        "invariant": census.INVARIANT,
        "key": census.INVARIANT,
        "tree": args.tree_label,
        "config": {"census": "utils/check_loss_kwargs_declarations.py"},
        "found": found,
        "declared": None,
        "replay": f"PYTHONPATH=<the tree's src> python {Path(args.census).name} (from the tree's utils/)",
    }
    for line in report.violation_lines(entry):
        print(line, flush=True)
    return [entry]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="invariants")
    p.add_argument("--tree-label", required=True)
    p.add_argument("--tree-spec", required=True)
    p.add_argument("--profile", choices=sorted(draw.PROFILES), default="ci")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--replay")
    p.add_argument("--release-path", help="PYTHONPATH of the release, for the release-loads invariant")
    p.add_argument("--result", required=True)
    p.add_argument("--first", action="store_true", help="stop at the first undeclared violation, unshrunk (mutants)")
    p.add_argument("--census", help="the tree's utils/check_loss_kwargs_declarations.py, run beside the search")
    p.add_argument(
        "--processes-only",
        action="store_true",
        help="with --first: the profile's 2-process configurations only, no search (a mutant whose claim only they "
        "exercise)",
    )
    args = p.parse_args(argv)
    profile = draw.PROFILES[args.profile]
    if args.release_path:
        judges.LOADER = ReleaseLoader(args.release_path)
    from .case import run_case
    from .search import Search, observe

    run = functools.partial(run_case, seconds=profile.case_seconds)
    _freeze_imports()
    runner = observe(run, judges.judge)
    started = time.monotonic()
    result: dict[str, Any] = {"tree": args.tree_label, "versions": _versions(), "profile": profile.name}
    source = declared.tree_source()
    features = _features()
    result.update(invariants=judges.invariants_of(features), first_only=args.first)
    if args.replay:
        try:
            config = json.loads(args.replay)
            two = isinstance(config, dict) and "processes" in config
            config = processes.check_config(config) if two else draw.check(config)
        except ValueError as exc:  # json.JSONDecodeError is one
            print(f"invariants: error: --replay: {exc}", file=sys.stderr)
            return 2
        broken: Any
        if two:
            result["invariants"] = list(processes.INVARIANTS)
            broken = _two_process_runner([config], profile)[0]
        else:
            broken = runner(config)
        result["coverage"] = {
            "examples": 1,
            "checked": dict.fromkeys(getattr(broken, "checked", ()), 1),
            "discriminating": dict.fromkeys(getattr(broken, "discriminating", ()), 1),
        }
        facts = getattr(broken, "facts", None)
        entries = []
        for invariant, found in broken.items():
            entry = {
                "invariant": invariant,
                "key": report.key(invariant, config),
                "tree": args.tree_label,
                "config": config,
                "found": found,
                "declared": declared.find(invariant, args.tree_label, config, source=source, facts=facts),
                "replay": report.replay_command(args.tree_spec, config),
            }
            entries.append(entry)
            for line in report.violation_lines(entry):
                print(line, flush=True)
        result.update(
            examples=1,
            violations=[e for e in entries if not e["declared"]],
            declared=[e for e in entries if e["declared"]],
            replayed=True,
        )
    else:
        # the tree's census of every head (issue 54 item 5): before a mutant's search (it alone sees a declaration),
        # after any other's
        census_entries = _census(args, result) if args.census and args.first else []
        search = Search(
            args.tree_label,
            args.tree_spec,
            profile,
            args.seed,
            runner,
            log=lambda s: print(s, flush=True),
            source=source,
            first_only=args.first,
            features=features,
        )
        if not census_entries and not args.processes_only:
            search.run()
        if args.census and not args.first:
            census_entries = _census(args, result)
        search.violations += census_entries
        result.update(examples=search.examples, violations=search.violations, declared=search.declared, replayed=False)
        checked = dict(search.checked)
        discriminating = dict(search.discriminating)
        # the 2-process configurations (the mutation check: only when the search found nothing)
        if profile.processes and not (args.first and search.violations):  # the census's entries included
            found, checked_two = _two_process_check(args, profile, source)
            result["invariants"] += list(processes.INVARIANTS)
            result["processes"] = profile.processes
            search.violations += [e for e in found if not e["declared"]]
            search.declared += [e for e in found if e["declared"]]
            for name, count in checked_two.items():
                checked[name] = checked.get(name, 0) + count
                discriminating[name] = discriminating.get(name, 0) + count
        result["coverage"] = {
            "examples": search.examples,
            "checked": dict(sorted(checked.items())),
            "discriminating": dict(sorted(discriminating.items())),
            # what was drawn, per edge and reading (`draw.count_cells`), and the cells under the floor
            "cells": dict(sorted(search.cells.items())),
            "cell_gaps": draw.cell_gaps(search.cells, search.features) if not args.first else [],
        }
        if "processes" in result:  # the 2-process configurations' row (what they drew, not steered)
            row = processes.cells(processes.configs(args.seed, profile.processes))
            result["coverage"]["cells"]["processes/2"] = row
            result["coverage"]["cell_gaps"] += processes.cell_gaps(row) if not args.first else []
        result["features"] = sorted(search.features)
        for entry in search.declared:
            for line in report.violation_lines(entry):
                print(line, flush=True)
    result["seconds"] = round(time.monotonic() - started, 1)
    with open(args.result, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
