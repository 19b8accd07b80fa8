"""Command line of `scripts/series.py`."""

import argparse
import os
import subprocess
import sys
from pathlib import Path

from . import manifest as manifest_mod
from .errors import SeriesError
from .git import MIN_GIT, GitError, git_version


REPO_ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = REPO_ROOT / "scripts" / "requirements-test.txt"


class Context:
    """Where things live for one invocation."""

    def __init__(self, args):
        self.repo_root = REPO_ROOT
        self.work = Path(args.work or os.environ.get("SERIES_WORK") or REPO_ROOT / ".work").resolve()
        manifest = args.manifest or os.environ.get("SERIES_MANIFEST") or REPO_ROOT / "patches" / "series.toml"
        self.manifest_path = Path(manifest).resolve()
        downloads = os.environ.get("SERIES_DOWNLOADS")
        self.downloads = Path(downloads).resolve() if downloads else self.work / "downloads"
        self.requirements = Path(os.environ.get("SERIES_REQUIREMENTS") or REQUIREMENTS).resolve()
        self._manifest = None

    @property
    def manifest(self):
        if self._manifest is None:
            self._manifest = manifest_mod.load(self.manifest_path)
        return self._manifest

    def work_dir(self):
        self.work.mkdir(parents=True, exist_ok=True)
        return self.work

    def out(self, message):
        print(message, flush=True)

    def log(self, message):
        print(f"series: {message}", file=sys.stderr, flush=True)


class Parser(argparse.ArgumentParser):
    def error(self, message):
        # One line, like every other error of the tool.
        print(f"series: error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def _global_options(parser, suppress):
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--work", metavar="DIR", default=default, help="work folder (default: <repo>/.work, or $SERIES_WORK)"
    )
    parser.add_argument(
        "--manifest",
        metavar="FILE",
        default=default,
        help="series manifest (default: <repo>/patches/series.toml, or $SERIES_MANIFEST)",
    )


def build_parser():
    parser = Parser(prog="series", description="Pinned-base patch series: checkout, apply, export, verify, pr.")
    _global_options(parser, suppress=False)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    def command(name, help_text):
        p = sub.add_parser(name, help=help_text, description=help_text)
        _global_options(p, suppress=True)
        return p

    p = command("checkout", "make DIR a git checkout of the base with the series applied, one commit per patch")
    p.add_argument("--target", help="target in the manifest (default: the first)")
    p.add_argument("--dir", help="destination (default: <work>/checkouts/<target>)")
    p.add_argument("--base", metavar="SPEC", help="sdist (default), path:DIR (a clone's HEAD) or git:URL@REF")
    p.add_argument("--replace", action="store_true", help="replace an existing non-empty DIR")
    p.add_argument(
        "--stop-at-conflict",
        action="store_true",
        help="when a patch does not apply, keep DIR with `git am` stopped there (exit 1) to resolve it by hand",
    )

    p = command("apply", "apply the series to an existing clone on a new branch (all or nothing)")
    p.add_argument("--repo", required=True, metavar="PATH", help="the clone (clean work tree)")
    p.add_argument("--branch", metavar="NAME", help="new branch (default: series/<target>)")
    p.add_argument("--target", help="target in the manifest (default: the first)")

    p = command("export", "regenerate patches/<target>/*.patch and the manifest list from a checkout")
    p.add_argument("--target", help="target (default: the one the checkout was made for, else the first)")
    p.add_argument("--dir", help="the checkout (default: <work>/checkouts/<target>)")

    p = command("verify", "check every patch: applies, red without its fix, green with it, ruff-clean")
    p.add_argument("--target", help="only this target (default: all)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cpu hides GPUs; cuda needs CUDA torch")
    p.add_argument("--base", metavar="SPEC", help="sdist (default), path:DIR or git:URL@REF; needs --target")
    p.add_argument("--patch", action="append", metavar="NAME", help="red/green/style-check only this patch")
    p.add_argument("--json", metavar="FILE", help="write the JSON report here")
    p.add_argument("--junit", metavar="FILE", help="write a JUnit XML report here")
    p.add_argument("--summary", metavar="FILE", help="append a markdown summary here (e.g. $GITHUB_STEP_SUMMARY)")
    p.add_argument("--python", metavar="PATH", help="use this interpreter instead of the pinned venv")
    p.add_argument(
        "--upstream-tests",
        metavar="SPEC",
        help="also run the manifest's upstream_tests from path:DIR or git:URL@REF on the base and with the series",
    )
    p.add_argument("--test-timeout", type=int, default=1800, metavar="S", help="limit per pytest run (1800)")
    p.add_argument(
        "--no-cache", action="store_true", help="run every pytest, even where an identical run's outcome is known"
    )

    p = command("bench", "time the unpatched and the patched Trainer side by side and count their host syncs")
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

    p = command("python", "run Python in the pinned venv with a checkout's sources first on PYTHONPATH")
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

    p = command("pr", "print the title and body of an upstream pull request for one patch")
    p.add_argument("name", metavar="NAME", help="the patch: its number (0001), file name, or name without .patch")
    p.add_argument("--target", help="target in the manifest (default: the first)")

    p = command("selftest", "run the tool's own tests in the pinned venv (extra args go to pytest)")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="passed to pytest")
    return parser


def _need_git():
    version = git_version()
    if version is None:
        raise SeriesError("git is not installed (not found on PATH)")
    if version < MIN_GIT:
        need, found = ".".join(map(str, MIN_GIT)), ".".join(map(str, version))
        raise SeriesError(f"git {need} or newer is needed (found {found})")


def _selftest(ctx, args):
    from . import pyenv

    python = pyenv.ensure_venv(ctx.work, ctx.requirements, log=ctx.log)
    extra = [a for a in args.pytest_args if a != "--"]
    cmd = [str(python), "-m", "pytest", "-p", "no:cacheprovider", str(ctx.repo_root / "tests"), *extra]
    code = subprocess.run(cmd, cwd=ctx.repo_root, stdin=subprocess.DEVNULL).returncode
    if code == 5:
        raise SeriesError("the tool's tests collected nothing")
    return code


def _python(ctx, args):
    from . import pyenv
    from .checkout import default_dir

    target = ctx.manifest.default_target(args.target)
    dirs = [Path(args.dir).resolve() if args.dir else default_dir(ctx, target)]
    dirs += [default_dir(ctx, ctx.manifest.target(name)) for name in args.with_targets]
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


def main(argv=None):
    args = build_parser().parse_args(argv)
    for key in ("work", "manifest"):
        if not hasattr(args, key):
            setattr(args, key, None)
    ctx = Context(args)
    try:
        if args.command == "selftest":
            return _selftest(ctx, args)
        if args.command == "python":
            return _python(ctx, args)
        _need_git()
        if args.command == "checkout":
            from .checkout import run
        elif args.command == "apply":
            from .apply import run
        elif args.command == "export":
            from .export import run
        elif args.command == "pr":
            from .pr import run
        elif args.command == "bench":
            from .bench import run
        else:
            from .verify import run
        return run(ctx, args)
    except (SeriesError, GitError) as exc:
        print(f"series: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("series: error: interrupted", file=sys.stderr)
        return 130
