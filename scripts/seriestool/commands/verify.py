"""`verify`: prove every patch applies, is red without its fix, green with it, and style-clean."""

import argparse
import json
import time
from pathlib import Path

from .. import base as base_mod
from .. import companions, pyenv, render, reports, runcache
from ..am import check_patches
from ..context import Context
from ..errors import SeriesError
from ..manifest import Target, find_patch
from ..render import check_writable
from ..verification import Runs, console_lines, report, verify_all


NAME = "verify"
HELP = "check every patch: applies, red without its fix, green with it, ruff-clean"
DESCRIPTION = f"""\
{HELP}.

Each patch is put, in order, on the base plus the earlier patches that went in, in a scratch checkout
(<work>/verify/<target>). The test files it adds run without its code change (they must fail with real
assertion failures: red) and with it (they must pass: green); ruff check and ruff format --check run on
the Python files it touches. Where the target has fork-tier patches ([targets.<target>.fork]), the
upstream-tier ones must also go in on the base as a stack without them. The outcome of an identical
earlier pytest run is reused (--no-cache runs
everything). --repeat N runs each green stage (and the companion stage) N times afresh: a test that fails
in some runs and passes in others is flaky, a failure of its own. Prints a table and the problems, writes
<work>/reports/verify-<target>.json (for `pr`) and, per base, <work>/reports/bases/ (for `checkout` and
`branches`).

examples:
  python3 scripts/series.py verify                                  # the whole series, on CPU
  python3 scripts/series.py verify --target transformers --patch 0003
  python3 scripts/series.py verify --repeat 10                      # a flaky test fails it
  python3 scripts/series.py verify --target transformers \\
      --base git:https://github.com/huggingface/transformers.git@main
  python3 scripts/series.py verify --target transformers --base sdist:5.23.0   # another release

exit status: 0 every patch passed (or is already upstream); 1 a check failed (a conflict, not red, not
green, flaky, not ruff-clean, a hidden dependency, an upstream-tier patch that goes in only on top of a
fork-tier one, an upstream-tests regression that no patch declares
in upstream_tests_changed, a stale declaration there); 2 bad input or environment; 130 interrupted (its
pytest runs are stopped). A patch that depends on a conflicting one is blocked: left out and not tested,
no failure of its own (the conflict fails the run)."""
NEEDS_GIT = True
NEEDS_WORK = True
LOCKS_WORK = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", help="only this target (default: all)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cpu hides GPUs; cuda needs CUDA torch")
    p.add_argument(
        "--base", metavar="SPEC", help="sdist (default), sdist:VERSION, path:DIR or git:URL@REF; needs --target"
    )
    p.add_argument(
        "--patch",
        action="append",
        metavar="NAME",
        help="red/green/style-check only this patch (its number, or file name; with --target when several "
        "targets have that number); the saved results of the others are kept",
    )
    p.add_argument(
        "--with",
        dest="with_",
        action="append",
        metavar="NAME==VERSION",
        help="judge with this release of a companion (e.g. accelerate==1.15.0), released and patched, instead of the "
        "one the base release's users get (the manifest's companions; else the companion's pin)",
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


def positive_seconds(text: str) -> int:
    """--test-timeout: a whole number of seconds above 0 (a negative or zero limit would fail every run)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


def _repeat(value: str) -> int:
    """--repeat N: a whole number of runs, at least 1 (argparse turns the error into one line, exit 2)."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of runs, at least 1 (got {value!r})")
    return number


def resolve_patch(targets: list[Target], wanted: str, *, explicit: bool) -> str:
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


def run(args: argparse.Namespace, ctx: Context) -> int:
    started = time.monotonic()
    targets, spec, only, upstream = _read_input(args, ctx)
    chosen = companions.parse_with(args.with_, ctx.manifest, targets)
    hashes = companions.unlisted_hashes(chosen, ctx.manifest, ctx.downloads, ctx.log)
    python = pyenv.interpreter(ctx.work, ctx.requirements, args.python, log=ctx.log)
    info = pyenv.probe(python, device=args.device)
    cache = None if args.no_cache else runcache.for_verify(ctx.work, python, info, args.device)
    runs = Runs(python=python, device=args.device, timeout=args.test_timeout, cache=cache, repeat=args.repeat)
    # `sdist:<the pinned version>` is the pinned sdist: its report is the release's (`pr`, `reports.on_release`)
    spec_text = args.base if spec.moved else "sdist"
    found = verify_all(
        ctx,
        targets,
        spec,
        runs,
        spec_text=spec_text,
        only=only,
        upstream=upstream,
        chosen=chosen,
        info=info,
        hashes=hashes,
    )
    duration = round(time.monotonic() - started, 2)
    for line in console_lines(found, only=only, duration=duration, logs=ctx.work / "logs" / "verify"):
        ctx.out(line)
    data = report(found, runs, info, duration)
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    if args.junit:
        render.write_junit(args.junit, found.results, duration, found.upstream_tests)
    reports.save_last(ctx.work, data)
    if args.summary:
        render.append_markdown(args.summary, data)
    return 0 if found.ok else 1


def _read_input(
    args: argparse.Namespace, ctx: Context
) -> tuple[list[Target], base_mod.BaseSpec, set[str] | None, tuple[Target, str] | None]:
    """Everything `run` needs from the arguments, checked before any work (bad input: one error line): the targets,
    the base, the patches to check (None: all) and the target and spec of --upstream-tests (or None)."""
    targets = ctx.manifest.select(args.target)
    if args.base and len(targets) > 1:
        raise SeriesError("--base names one target's base; add --target")
    spec = base_mod.parse_spec(args.base, targets[0]) if args.base else base_mod.SDIST
    base_mod.check_spec(spec)
    for option, path in (("--json", args.json), ("--junit", args.junit), ("--summary", args.summary)):
        if path:
            check_writable(path, option)
    for target in targets:
        check_patches(target)
    only = None
    if args.patch:
        only = {resolve_patch(targets, wanted, explicit=args.target is not None) for wanted in args.patch}
    upstream = None
    if args.upstream_tests:
        listing = [target for target in targets if target.upstream_tests]
        if not listing:
            named = ", ".join(target.name for target in targets)
            raise SeriesError(f"--upstream-tests: {named} lists no upstream_tests in {ctx.manifest.path.name}")
        if len(listing) > 1:
            raise SeriesError("--upstream-tests names one target's tests; add --target")
        tests = base_mod.parse_spec(args.upstream_tests, listing[0], option="--upstream-tests")
        if tests.kind == "path" and not Path(tests.location, "tests").is_dir():
            raise SeriesError(f"--upstream-tests {args.upstream_tests}: {tests.location} has no tests/ folder")
        upstream = (listing[0], args.upstream_tests)
    # The sdist of a release the manifest does not list: downloaded (its sha256 recorded) before any work.
    spec = base_mod.resolve(spec, targets[0], ctx.downloads, ctx.log)
    return targets, spec, only, upstream
