"""`python`: run Python in the pinned venv with a checkout's sources first on PYTHONPATH."""

import argparse
import os
import subprocess
from pathlib import Path

from .. import pyenv
from ..context import Context
from ..errors import SeriesError


NAME = "python"
HELP = "run Python in the pinned venv with a checkout's sources first on PYTHONPATH"
DESCRIPTION = f"""\
{HELP}.

The checkout is not installed: its source folder (and those of --with targets) goes first on
PYTHONPATH, so a script or `-m pytest` sees the patched package.

example:
  python3 scripts/series.py python -- -m pytest -q .work/checkouts/transformers/tests/trainer/test_x.py
  python3 scripts/series.py python --with accelerate -- repro/some_script.py

exit status: that of Python; 2 bad input (no checkout, no venv)."""
NEEDS_GIT = False
NEEDS_WORK = True
LOCKS_WORK = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", help="target (default: the first)")
    p.add_argument("--dir", help="the checkout (default: <work>/checkouts/<target>)")
    p.add_argument(
        "--with",
        dest="with_targets",
        action="append",
        default=[],
        metavar="TARGET",
        help="also put this target's checkout (<work>/checkouts/TARGET) on PYTHONPATH (repeatable)",
    )
    p.add_argument("--python", dest="interpreter", metavar="PATH", help="this interpreter instead of the pinned venv")
    p.add_argument("python_args", nargs=argparse.REMAINDER, help="passed to python (e.g. a script and its args)")


def run(args: argparse.Namespace, ctx: Context) -> int:
    target = ctx.manifest.default_target(args.target)
    dirs = [Path(args.dir).resolve() if args.dir else ctx.checkout_dir(target)]
    dirs += [ctx.checkout_dir(ctx.manifest.target(name)) for name in args.with_targets]
    targets = [target] + [ctx.manifest.target(name) for name in args.with_targets]
    for folder, owner in zip(dirs, targets, strict=True):
        if not (folder / owner.source_dir).is_dir():
            raise SeriesError(f"{folder} is no checkout of {owner.name}; make one with `series.py checkout`")
    python = pyenv.interpreter(ctx.work, ctx.requirements, args.interpreter, log=ctx.log)
    env = dict(os.environ)
    paths = [str(folder / owner.source_dir) for folder, owner in zip(dirs, targets, strict=True)]
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    extra = [a for a in args.python_args if a != "--"]
    return subprocess.run([str(python), *extra], env=env).returncode
