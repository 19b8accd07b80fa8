"""`homes`: the diff a pull request carries for its tests in upstream's tree, checked there."""

import argparse
from pathlib import Path

from .. import pyenv, testhomes, verification
from ..am import check_patch
from ..context import Context
from ..errors import SeriesError
from ..manifest import find_patch
from ..render import check_writable, shown_path
from ..upstream_tests import fetch_tests


NAME = "homes"
HELP = "write (and check) the diff that moves one patch's new test files into upstream's test files"
DESCRIPTION = f"""\
{HELP}.

The sdist has no tests/, so each patch adds its regression tests as new files; upstream keeps them in topic
files. For one upstream-tier patch this writes the diff its pull request carries for its tests in upstream's
tree: each new test file's test classes appended to its home file (taken from --upstream-tests), with the
module-level helpers and imports the home file lacks (a helper it defines the same way is not repeated, one it
defines differently is renamed in the moved code; a local helper that [targets.<target>.shared_helpers] replaces
is dropped, and upstream's shared helper is imported from its module the way the home imports from it); a home
upstream does not have yet is a new file. Then, unless --no-check, it applies the diff to upstream's tests on
the pinned base with the patch and the patches it depends on (green: every moved test must pass) and without
the patch (red: every test that fails there as a new file must fail moved home too), and runs only the moved
classes (home_file::Class).

example:
  python3 scripts/series.py homes 0001 --upstream-tests path:../shared/upstream-tests

exit status: 0 written (and checked); 1 written, but the check failed; 2 bad input (an unknown or fork-tier
patch, a test class without a home, a class its home already defines, an --out that cannot be written):
nothing is written."""
NEEDS_GIT = True
NEEDS_WORK = True
LOCKS_WORK = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", metavar="NAME", help="the patch: its number (0001), file name, or name without .patch")
    p.add_argument("--target", help="target in the manifest (default: the first)")
    p.add_argument(
        "--upstream-tests",
        required=True,
        metavar="SPEC",
        help="upstream's tests, the home files' preimages: path:DIR (a tree holding tests/) or git:URL@REF",
    )
    p.add_argument(
        "--out", metavar="FILE", help="write the diff here (default: <work>/homes-diffs/<target>/<patch>.diff)"
    )
    p.add_argument("--no-check", action="store_true", help="only write the diff; run nothing")
    p.add_argument("--python", metavar="PATH", help="use this interpreter instead of the pinned venv")
    p.add_argument("--test-timeout", type=int, default=1800, metavar="S", help="limit per pytest run (1800)")


def run(args: argparse.Namespace, ctx: Context) -> int:
    target = ctx.manifest.select(args.target)[0]
    name = find_patch(target, args.name)
    check_patch(target, name)
    if not target.test_homes:
        raise SeriesError(f"{target.name} has no [targets.{target.name}.test_homes] in {ctx.manifest.path.name}")
    if args.test_timeout <= 0:
        raise SeriesError(f"--test-timeout {args.test_timeout}: not a positive number of seconds")
    out = (
        Path(args.out) if args.out else ctx.work / "homes-diffs" / target.name / f"{name.removesuffix('.patch')}.diff"
    )
    if args.out:
        check_writable(out, "--out")
    root = fetch_tests(ctx, args.upstream_tests, target)
    found = testhomes.plan(target, name, root)
    if not args.no_check:
        python = pyenv.interpreter(ctx.work, ctx.requirements, args.python, log=ctx.log)
        made = testhomes.trees(ctx, target, name)
        for problem in testhomes.format_moved(found, [python, "-m", "ruff"], made.repo.path):
            ctx.log(f"warning: {problem}")
    text = found.diff()
    testhomes.write_atomic(out, text)
    for move in found.moves:
        state = "new file" if move.new_file else "appended"
        ctx.out(f"{name[:4]} {move.home} ({state}): {', '.join(move.classes)}")
        if move.helpers:
            ctx.out(f"  helpers: {', '.join(move.helpers)}")
        if move.imports:
            ctx.out(f"  imports: {'; '.join(move.imports)}")
        if move.shared:
            names = ", ".join(f"{old} -> {new}" for old, new in move.shared.items())
            ctx.out(f"  replaced by upstream's shared helpers ({target.shared_helpers_module}): {names}")
            if move.dropped:
                ctx.out(f"  dropped with them (only they used it): {', '.join(move.dropped)}")
        if move.kept:
            ctx.out(f"  already in the home, the same: {', '.join(move.kept)}")
        if move.renamed:
            names = ", ".join(f"{old} -> {new}" for old, new in move.renamed.items())
            ctx.out(f"  renamed (the home defines them differently): {names}")
        if move.shadowed:
            names = ", ".join(move.shadowed)
            ctx.out(
                f"  warning: the home binds {names} to something else than the new file imports: check the moved tests"
            )
    if found.changes:
        ctx.out(
            f"{name[:4]} also changes {', '.join(found.changes)} of the patches it depends on: the diff makes "
            "the same change to their moved code"
        )
    if found.depends:
        names = ", ".join(dep[:4] for dep in found.depends)
        ctx.out(
            f"the diff is against upstream's tests with the moves of {names} made first (their pull requests go first)"
        )
    ctx.out(f"diff: {shown_path(out)} (git apply it in your clone's root)")
    if args.no_check:
        return 0
    runs = verification.Runs(python=python, device="cpu", timeout=args.test_timeout, cache=None)
    trees = verification.environment(ctx, target, target.version, {}, runs, {})
    result = testhomes.check(
        ctx,
        target,
        found,
        out,
        root,
        made,
        python=python,
        extra_paths=[tree.released for tree in trees],
        timeout=args.test_timeout,
    )
    for line in testhomes.report_lines(found, result):
        ctx.out(line)
    return 0 if result.ok else 1
