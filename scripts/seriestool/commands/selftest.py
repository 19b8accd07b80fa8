"""`selftest`: the tool's own tests (tests/), in the pinned venv: the quick suite, or all of it with --full."""

import argparse
import subprocess
from pathlib import Path

from .. import pyenv
from ..context import Context
from ..errors import SeriesError


NAME = "selftest"
HELP = "run the tool's own tests in the pinned venv: the quick suite, or --full (extra args go to pytest)"
# The quick suite: every unit test (tests/unit/) and the end-to-end tests marked `quick` (a thin path through
# checkout, export, verify, apply, branches and the error lines).
QUICK_MARK = "not e2e or quick"
DESCRIPTION = f"""\
{HELP}.

Builds the pinned venv first when needed (once). Without --full it runs the quick suite: every unit test
(tests/unit/) and the end-to-end tests marked `quick` (pytest -m "{QUICK_MARK}"; about a minute on 2
idle cores). --full runs all of tests/ (every end-to-end test too; several minutes, what CI runs).
Arguments after `--` go to pytest; naming test files or passing your own -m runs those, quick or not.

examples:
  python3 scripts/series.py selftest                                   # the quick suite
  python3 scripts/series.py selftest --full                            # everything (CI, tox -e tests)
  python3 scripts/series.py selftest -- tests/unit                     # the in-process tests only
  python3 scripts/series.py selftest --full -- -m "not network"
  python3 scripts/series.py selftest -- tests/test_cli.py -k usage     # only that file

exit status: that of pytest (0 all passed, 1 a test failed); 2 nothing collected, or bad environment."""
NEEDS_GIT = False
NEEDS_WORK = True
LOCKS_WORK = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--full", action="store_true", help="run every test, end to end too (what CI runs)")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="passed to pytest")


def pytest_command(
    python: str | Path, repo_root: str | Path, pytest_args: list[str], cwd: str | Path, *, full: bool = True
) -> list[str]:
    """The pytest command line: the whole of tests/ unless the arguments name some of its tests (a file, folder
    or node id below tests/, relative to `cwd`); those are made absolute, since pytest runs from the repository
    root. Not `full`: only the quick suite (`-m QUICK_MARK`), unless the arguments name tests or pass an -m."""
    extra = [a for a in pytest_args if a != "--"]
    named = []
    for index, arg in enumerate(extra):
        if arg.startswith("-"):
            continue
        path = Path(cwd, arg.split("::", 1)[0]).resolve()
        if path.exists() and path.is_relative_to(Path(repo_root, "tests").resolve()):
            named.append(index)
            extra[index] = str(path) + (arg[len(arg.split("::", 1)[0]) :])
    cmd = [str(python), "-m", "pytest", "-p", "no:cacheprovider"]
    own_mark = any(a == "-m" or a.startswith("-m") and not a.startswith("--") for a in extra)
    if not full and not named and not own_mark:
        cmd += ["-m", QUICK_MARK]
    return cmd + ([] if named else [str(Path(repo_root) / "tests")]) + extra


def run(args: argparse.Namespace, ctx: Context) -> int:
    python = pyenv.ensure_venv(ctx.work, ctx.requirements, log=ctx.log)
    cmd = pytest_command(python, ctx.repo_root, args.pytest_args, Path.cwd(), full=args.full)
    code = subprocess.run(cmd, cwd=ctx.repo_root, stdin=subprocess.DEVNULL).returncode
    if code == 5:
        raise SeriesError("the tool's tests collected nothing")
    return code
