"""Command line of `scripts/series.py`: a registry of the command modules in `commands/`.

Each command module has NAME, HELP (one line), DESCRIPTION (what it does, an example, its exit codes),
`add_arguments(parser)` and `run(args, ctx)`; NEEDS_GIT and NEEDS_WORK say what `main` checks first, LOCKS_WORK
whether the command holds the work folder's lock while it runs (it writes shared state there).
Only this module imports the command modules.
"""

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import NoReturn

from .commands import (
    apply,
    bench,
    branches,
    bundle,
    checkout,
    downstream,
    export,
    homes,
    invariants,
    pr,
    python,
    selftest,
    verify,
)
from .context import Context
from .errors import SeriesError
from .git import MIN_GIT, GitError, git_version


COMMANDS = (
    checkout,
    apply,
    branches,
    export,
    verify,
    pr,
    homes,
    bench,
    downstream,
    invariants,
    bundle,
    python,
    selftest,
)

EXIT_CODES = """\
exit status: 0 success; 1 a check failed (verify, bench, downstream, invariants) or git am stopped
(checkout --stop-at-conflict); 2 bad input or environment (one `series: error: ...` line, nothing half-changed);
130 interrupted."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, like every other error of the tool.
        print(f"series: error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def _global_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
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


def build_parser() -> Parser:
    parser = Parser(
        prog="series",
        description="Pinned-base patch series: checkout, apply, branches, export, verify, pr.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _global_options(parser, suppress=False)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND")
    for module in COMMANDS:
        p = sub.add_parser(
            module.NAME,
            help=module.HELP,
            description=module.DESCRIPTION,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _global_options(p, suppress=True)
        module.add_arguments(p)
        p.set_defaults(module=module)
    return parser


def _need_git() -> None:
    version = git_version()
    if version is None:
        raise SeriesError("git is not installed (not found on PATH)")
    if version < MIN_GIT:
        need, found = ".".join(map(str, MIN_GIT)), ".".join(map(str, version))
        raise SeriesError(f"git {need} or newer is needed (found {found})")


def _interrupt(signum: int, frame: FrameType | None) -> NoReturn:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for key in ("work", "manifest"):
        if not hasattr(args, key):
            setattr(args, key, None)
    ctx = Context(args)
    module = args.module
    on_main_thread = threading.current_thread() is threading.main_thread()
    if on_main_thread:
        # A SIGTERM (a CI job cancelled, `timeout`) unwinds like Ctrl-C: the test processes are stopped. A job a
        # shell script starts in the background (`cmd &`) inherits SIGINT ignored: Ctrl-C then unwinds too.
        previous = signal.signal(signal.SIGTERM, _interrupt)
        previous_int = signal.getsignal(signal.SIGINT)
        if previous_int == signal.SIG_IGN:
            signal.signal(signal.SIGINT, _interrupt)
    try:
        if module.NEEDS_GIT:
            _need_git()
        if module.NEEDS_WORK:
            ctx.work_dir()
        if module.LOCKS_WORK:
            ctx.lock_work(module.NAME)
        return module.run(args, ctx)
    except (SeriesError, GitError) as exc:
        print(f"series: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        # A file system error the command did not foresee (disk full, permissions): one line, not a traceback.
        print(f"series: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("series: error: interrupted", file=sys.stderr)
        return 130
    finally:
        ctx.unlock_work()
        if on_main_thread:
            signal.signal(signal.SIGTERM, previous)
            if previous_int == signal.SIG_IGN:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
