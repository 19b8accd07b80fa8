#!/usr/bin/env python3
"""Mutation check of the tool's library: how many one-token changes to a module its tests notice.

Each mutant changes one thing in one library module - a comparison (`==` to `!=`, `<` to `<=`, `in` to
`not in`, ...), `and`/`or`, a dropped `not`, a negated condition, `True`/`False`, an integer plus one,
`+`/`-`, a `break`/`continue` swap, a call statement removed, a returned value replaced by None - and runs
that module's unit tests (tests/unit/) on a copy of the repository with the mutant in place. A mutant the
tests fail on (or that makes them time out) is killed; one they pass with survives. Standard library only.

    python3 tests/mutation_check.py                     # every module below, 2 jobs (about 10 minutes)
    python3 tests/mutation_check.py -m manifest -m archive --survivors
    python3 tests/mutation_check.py --sample 40 --seed 1 --tests old --python .work/venv-*/bin/python

`--tests old` runs, instead of tests/unit/, the end-to-end test files that exercise each module (the
suite before tests/unit/ existed; they need pytest, parameterized and ruff 0.14.10: the venv). Exit
status 0 when the score is at least --min-score (default 0), 1 below it, 2 bad input.
"""

import argparse
import ast
import json
import os
import queue
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path("scripts/seriestool")
COPIED = ("scripts", "tests", "pyproject.toml", "patches")

# module (below scripts/seriestool/) -> (the top-level functions/classes mutated, None for all;
# its unit tests; the end-to-end tests that exercise it)
MODULES = {
    "archive.py": (None, ["unit/test_archive.py"], ["test_archive.py"]),
    "base.py": (
        ["BaseSpec", "parse_spec", "_split_ref", "check_spec", "_git_source"],
        ["unit/test_specs.py"],
        ["test_upstream.py", "test_errors.py"],
    ),
    "bundle.py": (
        [
            "sdist_metadata",
            "_names",
            "dist_members",
            "imported_modules",
            "_modes",
            "tool_state",
            "_canonical",
            "_read",
            "write",
            "_info",
        ],
        ["unit/test_bundle.py"],
        ["test_bundle.py"],
    ),  # fmt: skip
    "cli.py": (None, ["unit/test_cli.py"], ["test_cli.py", "test_errors.py", "test_interrupt.py"]),
    "clone.py": (None, ["unit/test_clone.py"], ["test_apply.py", "test_branches.py"]),
    "commands/selftest.py": (["pytest_command", "run"], ["unit/test_cli.py"], ["test_cli.py"]),
    "benchmark.py": (
        [
            "Plan",
            "measure",
            "summarize",
            "_stats",
            "_label",
            "time_table",
            "count_table",
            "result_lines",
            "verdict",
            "report",
        ],
        ["unit/test_benchmark.py"],
        ["test_bench.py"],
    ),  # fmt: skip
    "downstream.py": (
        [
            "layer_files",
            "_close",
            "_short",
            "_weights_differ",
            "_log_differs",
            "compare",
            "describe",
            "bisect",
            "_last_of_target",
            "declared_fields",
        ],
        ["unit/test_downstream.py"],
        ["test_downstream.py"],
    ),  # fmt: skip
    "digests.py": (None, ["unit/test_digests.py"], ["test_checkout.py"]),
    "manifest.py": (None, ["unit/test_manifest.py"], ["test_cli.py", "test_export.py", "test_landed_and_depends.py"]),
    "patchfile.py": (None, ["unit/test_patchfile.py"], ["test_errors.py", "test_apply.py", "test_upstream.py"]),
    "placement.py": (None, ["unit/test_placement.py"], ["test_upstream.py", "test_landed_and_depends.py"]),
    "upstream_tests.py": (
        ["fetch_tests", "outcomes", "_state", "compare", "_counts", "lines"],
        ["unit/test_upstream_tests.py"],
        ["test_upstream_tests.py"],
    ),
    "verification.py": (
        [
            "Runs",
            "Verification",
            "verify_with_companions",
            "companion_line",
            "_count",
            "console_lines",
            "report",
            "run_detail",
        ],
        ["unit/test_verification.py"],
        ["test_verify.py", "test_verify_repeat.py"],
    ),  # fmt: skip
    "prtemplate.py": (None, ["unit/test_prtemplate.py"], ["test_pr.py", "test_branches.py"]),
    "pyenv.py": (
        ["venv_key", "venv_python", "interpreter", "pinned_count", "_pip_error", "describe", "probe"],
        ["unit/test_pyenv.py"],
        ["test_venv.py"],
    ),
    "reports.py": (None, ["unit/test_reports.py"], ["test_pr.py", "test_verify.py"]),
    "render.py": (None, ["unit/test_render.py"], ["test_verify.py", "test_upstream.py"]),
    "results.py": (
        None,
        ["unit/test_results.py", "unit/test_render.py", "unit/test_verification.py", "unit/test_upstream_tests.py"],
        ["test_verify.py"],
    ),
    "runcache.py": (None, ["unit/test_runcache.py"], ["test_verify_cache.py"]),
    "runners.py": (
        ["_parse_junit", "_tail", "run_pytest", "cached_pytest"],
        ["unit/test_runners.py", "unit/test_runcache.py"],
        ["test_verify.py", "test_verify_cache.py"],
    ),
    "statuses.py": (None, ["unit/test_results.py", "unit/test_placement.py"], ["test_verify.py", "test_upstream.py"]),
}

SWAPS = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.And: ast.Or,
    ast.Or: ast.And,
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
}
SYMBOLS = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.And: "and",
    ast.Or: "or",
    ast.Add: "+",
    ast.Sub: "-",
}


@dataclass
class Mutant:
    module: str
    index: int  # of the node in ast.walk order
    operator: int  # which of the node's mutations
    line: int
    what: str
    outcome: str = ""  # killed, timeout, survived
    seconds: float = 0.0


def _is_docstring(node, parent):
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        and isinstance(parent, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    )


def _mutations(node):
    """The ways to change `node`: a list of (description, function that changes the tree in place)."""
    found = []
    if isinstance(node, ast.Compare):
        for position, op in enumerate(node.ops):
            if type(op) in SWAPS:

                def swap(tree, node=node, position=position, op=op):
                    node.ops[position] = SWAPS[type(op)]()

                found.append((f"{SYMBOLS[type(op)]} -> {SYMBOLS[SWAPS[type(op)]]}", swap))
    elif isinstance(node, ast.BoolOp | ast.BinOp | ast.AugAssign) and type(node.op) in SWAPS:

        def swap(tree, node=node):
            node.op = SWAPS[type(node.op)]()

        found.append((f"{SYMBOLS[type(node.op)]} -> {SYMBOLS[SWAPS[type(node.op)]]}", swap))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        found.append(("not x -> x", lambda tree, node=node: _replace(tree, node, node.operand)))
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):

        def flip(tree, node=node):
            node.value = not node.value

        found.append((f"{node.value} -> {not node.value}", flip))
    elif isinstance(node, ast.Constant) and type(node.value) is int:

        def plus_one(tree, node=node):
            node.value += 1

        found.append((f"{node.value} -> {node.value + 1}", plus_one))
    elif isinstance(node, ast.Break | ast.Continue):
        other = ast.Continue if isinstance(node, ast.Break) else ast.Break
        found.append(
            (f"{type(node).__name__.lower()} -> {other.__name__.lower()}", lambda t, n=node: _replace(t, n, other()))
        )
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):

        def drop(tree, node=node):
            node.value = ast.Constant(None)

        found.append(("call removed", drop))
    elif isinstance(node, ast.Return) and node.value is not None:
        if not (isinstance(node.value, ast.Constant) and node.value.value is None):

            def nothing(tree, node=node):
                node.value = None

            found.append(("return None", nothing))
    if isinstance(node, ast.If | ast.While | ast.IfExp) and not isinstance(node.test, ast.Compare | ast.BoolOp):
        if not (isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)):

            def negate(tree, node=node):
                node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)

            found.append(("condition negated", negate))
    return found


def _replace(tree, old, new):
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list) and any(item is old for item in value):
                value[[id(item) for item in value].index(id(old))] = new
                return
    raise AssertionError("node not found")


def _nodes(tree, only):
    """(index, node) in ast.walk order, inside the top-level definitions named in `only` (all when None),
    without docstrings and what is below them."""
    parents = {}
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            parents[child] = parent
    allowed = None
    if only is not None:
        allowed = set()
        for top in tree.body:
            if getattr(top, "name", None) in only:
                allowed.update(ast.walk(top))
    skipped = set()
    for index, node in enumerate(ast.walk(tree)):
        if node in skipped or (allowed is not None and node not in allowed):
            continue
        if _is_docstring(node, parents.get(node)):
            skipped.update(ast.walk(node))
            continue
        yield index, node


def mutants_of(module, only):
    tree = ast.parse((ROOT / PACKAGE / module).read_text(encoding="utf-8"))
    found = []
    for index, node in _nodes(tree, only):
        for operator, (what, _) in enumerate(_mutations(node)):
            found.append(Mutant(module, index, operator, getattr(node, "lineno", 0), what))
    return found


def mutated_source(mutant):
    tree = ast.parse((ROOT / PACKAGE / mutant.module).read_text(encoding="utf-8"))
    node = next(node for index, node in enumerate(ast.walk(tree)) if index == mutant.index)
    _mutations(node)[mutant.operator][1](tree)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _copy(dest):
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
        elif source.exists():
            shutil.copy2(source, dest / name)


def _pytest(python, copy, tests, timeout, extra):
    cmd = [str(python), "-m", "pytest", "-x", "-q", "--no-header", "-p", "no:cacheprovider", *extra]
    cmd += [str(copy / "tests" / test) for test in tests]
    # No bytecode (a mutant may have the size and mtime second of the file before it); no third-party pytest
    # plugins (the tests need none, and some take seconds to import).
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    for key in ("PYTEST_ADDOPTS", "SERIES_WORK", "SERIES_MANIFEST", "SERIES_DOWNLOADS"):
        env.pop(key, None)
    started = time.monotonic()
    try:
        proc = subprocess.run(
            cmd, cwd=copy, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - started, ""
    return proc.returncode, time.monotonic() - started, proc.stdout + proc.stderr


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "-m", "--module", action="append", help="a module of the list (manifest, commands/selftest...)"
    )
    parser.add_argument("-j", "--jobs", type=int, default=2, help="mutants run at once (2)")
    parser.add_argument("--tests", choices=("unit", "old"), default="unit", help="tests/unit (default) or end to end")
    parser.add_argument("--python", default=sys.executable, help="the interpreter with pytest (default: this one)")
    parser.add_argument("--sample", type=int, help="only this many mutants, picked at random (with --seed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument("--survivors", action="store_true", help="list each surviving mutant")
    parser.add_argument("--json", metavar="FILE", help="write every mutant and its outcome here")
    parser.add_argument("--min-score", type=float, default=0.0, help="exit 1 below this percentage killed")
    args = parser.parse_args(argv)

    names = []
    for wanted in args.module or MODULES:
        name = wanted if wanted.endswith(".py") else f"{wanted}.py"
        if name not in MODULES:
            parser.error(f"unknown module {wanted!r} (known: {', '.join(MODULES)})")
        names.append(name)
    mutants = [m for name in names for m in mutants_of(name, MODULES[name][0])]
    if args.sample is not None:
        mutants = sorted(random.Random(args.seed).sample(mutants, min(args.sample, len(mutants))), key=_order)
    if args.list:
        for mutant in mutants:
            print(f"{mutant.module}:{mutant.line}: {mutant.what}")
        print(f"{len(mutants)} mutant(s)")
        return 0
    tests = {name: MODULES[name][1 if args.tests == "unit" else 2] for name in names}
    extra = ["-m", "not network"] if args.tests == "old" else []

    work = Path(tempfile.mkdtemp(prefix="mutation-"))
    try:
        copies = queue.Queue()
        for number in range(max(args.jobs, 1)):
            copy = work / f"copy{number}"
            copy.mkdir()
            _copy(copy)
            copies.put(copy)
        # The tests of each module must pass on the real code first; their time sets the limit per mutant.
        limits = {}
        copy = copies.get()
        for name in sorted({m.module for m in mutants}):
            code, seconds, output = _pytest(args.python, copy, tests[name], None, extra)
            if code != 0:
                print(output[-3000:])
                print(f"mutation_check: the tests of {name} fail without any mutant: {' '.join(tests[name])}")
                return 2
            limits[name] = max(30.0, 5 * seconds)
        copies.put(copy)
        started = time.monotonic()
        lock = threading.Lock()
        done = [0]

        def run(mutant):
            copy = copies.get()
            target = copy / PACKAGE / mutant.module
            original = target.read_text(encoding="utf-8")
            try:
                target.write_text(mutated_source(mutant), encoding="utf-8")
                code, mutant.seconds, _ = _pytest(
                    args.python, copy, tests[mutant.module], limits[mutant.module], extra
                )
            finally:
                target.write_text(original, encoding="utf-8")
                copies.put(copy)
            mutant.outcome = "timeout" if code is None else ("survived" if code == 0 else "killed")
            with lock:
                done[0] += 1
                if done[0] % 25 == 0 or done[0] == len(mutants):
                    print(f"  {done[0]}/{len(mutants)} mutants ({time.monotonic() - started:.0f}s)", file=sys.stderr)

        with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
            list(pool.map(run, mutants))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"{'module':<22} {'mutants':>7} {'killed':>7} {'survived':>8}  score")
    for name in names:
        mine = [m for m in mutants if m.module == name]
        if mine:
            print(_score_line(name, mine))
    print(_score_line("all", mutants))
    if args.survivors:
        for mutant in mutants:
            if mutant.outcome == "survived":
                line = (ROOT / PACKAGE / mutant.module).read_text(encoding="utf-8").splitlines()[mutant.line - 1]
                print(f"  {mutant.module}:{mutant.line}: {mutant.what}: {line.strip()}")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(m) for m in mutants], indent=1) + "\n", encoding="utf-8")
    killed = sum(m.outcome != "survived" for m in mutants)
    score = 100.0 * killed / len(mutants) if mutants else 100.0
    return 0 if score >= args.min_score else 1


def _order(mutant):
    return (mutant.module, mutant.index, mutant.operator)


def _score_line(name, mutants):
    killed = sum(m.outcome != "survived" for m in mutants)
    survived = len(mutants) - killed
    return f"{name:<22} {len(mutants):>7} {killed:>7} {survived:>8}  {100.0 * killed / len(mutants):5.1f} %"


if __name__ == "__main__":
    sys.exit(main())
