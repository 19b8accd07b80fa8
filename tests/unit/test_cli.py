"""cli.py: every command's help, usage errors as one line, and how `main` turns errors into exit codes; the pytest
command line of `selftest`."""

import argparse
import signal
import types
from pathlib import Path

import pytest
from seriestool import cli
from seriestool.commands import selftest
from seriestool.context import Context
from seriestool.errors import SeriesError
from seriestool.git import GitError


def _help(capsys, *argv):
    with pytest.raises(SystemExit) as info:
        cli.build_parser().parse_args([*argv, "--help"])
    assert info.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("module", cli.COMMANDS, ids=[module.NAME for module in cli.COMMANDS])
def test_every_command_help_starts_with_its_help_line(capsys, module):
    text = _help(capsys, module.NAME)
    usage, _, rest = text.partition("\n\n")
    assert usage.startswith(f"usage: series {module.NAME} ")
    assert rest.splitlines()[0] == f"{module.HELP}."
    assert "exit status" in rest and ("example" in rest)
    assert "--work DIR" in text and "--manifest FILE" in text
    assert module.HELP == module.HELP.strip() and "\n" not in module.HELP


def test_the_top_help_lists_every_command_with_its_help_line(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # one line per command
    text = _help(capsys)
    for module in cli.COMMANDS:
        assert any(line.split(None, 1) == [module.NAME, module.HELP] for line in text.splitlines()), module.NAME
    assert text.rstrip().endswith(cli.EXIT_CODES.splitlines()[-1])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: COMMAND"),
        (["frobnicate"], "argument COMMAND: invalid choice: 'frobnicate'"),
        (["verify", "--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
        (["verify", "--test-timeout", "soon"], "argument --test-timeout: 'soon' is not a whole number of seconds"),
    ],
)
def test_usage_errors_are_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as info:
        cli.build_parser().parse_args(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("series: error: ") and err.endswith(" (see --help)\n")
    assert message in err


def test_global_options_before_and_after_the_command(tmp_path):
    before = cli.build_parser().parse_args(["--work", "w", "--manifest", "m", "selftest"])
    after = cli.build_parser().parse_args(["selftest", "--work", "w", "--manifest", "m"])
    assert (before.work, before.manifest) == (after.work, after.manifest) == ("w", "m")
    assert before.module is after.module is selftest
    neither = cli.build_parser().parse_args(["selftest"])
    assert (neither.work, neither.manifest) == (None, None)


@pytest.fixture
def command(monkeypatch, tmp_path):
    """`selftest` with its run replaced: returns the list of what each run does."""
    calls = []

    def install(action, *, needs_git=False, needs_work=False, locks_work=False):
        def run(args, ctx):
            calls.append((args, ctx))
            return action()

        monkeypatch.setattr(selftest, "run", run)
        monkeypatch.setattr(selftest, "NEEDS_GIT", needs_git)
        monkeypatch.setattr(selftest, "NEEDS_WORK", needs_work)
        monkeypatch.setattr(selftest, "LOCKS_WORK", locks_work)
        return calls

    return install


def _raise(exc):
    def action():
        raise exc

    return action


@pytest.mark.parametrize(
    ("exc", "code", "line"),
    [
        (SeriesError("bad input"), 2, "series: error: bad input"),
        (GitError(["am", "x"], 128, "", "fatal: broken\n"), 2, "series: error: git am x failed (exit 128): broken"),
        (PermissionError(13, "Permission denied", "/x"), 2, "series: error: [Errno 13] Permission denied: '/x'"),
        (KeyboardInterrupt(), 130, "series: error: interrupted"),
    ],
)
def test_errors_are_one_line_with_their_exit_code(capsys, command, tmp_path, exc, code, line):
    command(_raise(exc))
    assert cli.main(["--work", str(tmp_path / "work"), "selftest"]) == code
    assert capsys.readouterr().err == line + "\n"


def test_the_exit_code_of_the_command_and_its_context(command, tmp_path):
    calls = command(lambda: 7, needs_work=True)
    assert cli.main(["selftest", "--work", str(tmp_path / "w"), "--manifest", str(tmp_path / "m.toml"), "x"]) == 7
    ((args, ctx),) = calls
    assert args.pytest_args == ["x"] and ctx.work == tmp_path / "w" and (tmp_path / "w").is_dir()
    assert ctx.manifest_path == tmp_path / "m.toml"


def test_a_work_folder_that_cannot_be_made(capsys, command, tmp_path):
    calls = command(lambda: 0, needs_work=True)
    (tmp_path / "file").write_text("", encoding="utf-8")
    assert cli.main(["--work", str(tmp_path / "file" / "w"), "selftest"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"series: error: cannot use the work folder {tmp_path / 'file' / 'w'}: ") and not calls


@pytest.mark.parametrize(
    ("version", "message"),
    [(None, "git is not installed (not found on PATH)"), ((2, 1, 4), "git 2.32 or newer is needed (found 2.1.4)")],
)
def test_git_is_checked_first(capsys, command, monkeypatch, tmp_path, version, message):
    calls = command(lambda: 0, needs_git=True)
    monkeypatch.setattr(cli, "git_version", lambda: version)
    assert cli.main(["--work", str(tmp_path), "selftest"]) == 2
    assert capsys.readouterr().err == f"series: error: {message}\n" and not calls
    monkeypatch.setattr(cli, "git_version", lambda: cli.MIN_GIT)
    assert cli.main(["--work", str(tmp_path), "selftest"]) == 0 and len(calls) == 1


def test_sigterm_unwinds_like_ctrl_c_and_the_handler_is_restored(capsys, command, tmp_path):
    def action():
        signal.raise_signal(signal.SIGTERM)
        return 0

    def mine(signum, frame):
        raise AssertionError("not restored")

    before = signal.signal(signal.SIGTERM, mine)
    try:
        command(action)
        assert cli.main(["--work", str(tmp_path), "selftest"]) == 130
        assert capsys.readouterr().err == "series: error: interrupted\n"
        assert signal.getsignal(signal.SIGTERM) is mine
        command(lambda: 0)
        assert cli.main(["--work", str(tmp_path), "selftest"]) == 0
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, before)


def test_sigint_ignored_by_a_script_that_started_the_job_still_unwinds(capsys, command, tmp_path):
    """`series.py downstream &` in a script starts with SIGINT ignored; before, Ctrl-C (or `kill -INT`) did nothing
    and the run went on to its end. Now it unwinds like SIGTERM, and SIGINT is ignored again afterwards."""

    def action():
        signal.raise_signal(signal.SIGINT)
        return 0

    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        command(action)
        assert cli.main(["--work", str(tmp_path), "selftest"]) == 130
        assert capsys.readouterr().err == "series: error: interrupted\n"
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_interrupt_handler():
    with pytest.raises(KeyboardInterrupt):
        cli._interrupt(signal.SIGTERM, None)


# -- selftest's pytest command line -------------------------------------------------------------------


def test_selftest_runs_all_tests_unless_some_are_named(tmp_path):
    root = tmp_path / "repo"
    (root / "tests" / "unit").mkdir(parents=True)
    (root / "tests" / "test_a.py").write_text("", encoding="utf-8")
    base = ["python", "-m", "pytest", "-p", "no:cacheprovider"]
    tests = str(root / "tests")
    assert selftest.pytest_command("python", root, [], root) == [*base, tests]
    assert selftest.pytest_command("python", root, ["--", "-m", "not network"], root) == [
        *base,
        tests,
        "-m",
        "not network",
    ]
    assert selftest.pytest_command("python", root, ["--", "tests/unit"], root) == [*base, str(root / "tests/unit")]
    assert selftest.pytest_command("python", root, ["-x", "tests/unit"], root) == [
        *base,
        "-x",
        str(root / "tests/unit"),
    ]
    assert selftest.pytest_command("python", root, ["unit", "-x"], root / "tests") == [
        *base,
        str(root / "tests/unit"),
        "-x",
    ]
    assert selftest.pytest_command("python", root, ["tests/test_a.py::test_x"], root) == [
        *base,
        f"{root / 'tests/test_a.py'}::test_x",
    ]
    # not below tests/, or not there: passed on as it is, after the whole of tests/
    (root / "other.py").write_text("", encoding="utf-8")
    assert selftest.pytest_command("python", root, ["other.py", "nope.py"], root) == [
        *base,
        tests,
        "other.py",
        "nope.py",
    ]


def test_selftest_says_when_nothing_was_collected(monkeypatch, tmp_path):
    monkeypatch.setattr(selftest.pyenv, "ensure_venv", lambda work, requirements, log: "python")
    monkeypatch.setattr(selftest.subprocess, "run", lambda *a, **k: types.SimpleNamespace(returncode=5))
    ctx = types.SimpleNamespace(work=tmp_path, requirements=None, log=print, repo_root=Path(tmp_path))
    with pytest.raises(SeriesError, match="^the tool's tests collected nothing$"):
        selftest.run(types.SimpleNamespace(pytest_args=[], full=False), ctx)
    monkeypatch.setattr(selftest.subprocess, "run", lambda *a, **k: types.SimpleNamespace(returncode=1))
    assert selftest.run(types.SimpleNamespace(pytest_args=[], full=True), ctx) == 1


def test_selftest_is_the_quick_suite_unless_full(tmp_path):
    """Before: `selftest` ran all of tests/ (731 tests, 5 minutes idle, 54 at load 5-13); now every unit test and
    the end-to-end tests marked quick, and --full (CI, tox) runs everything."""
    root = tmp_path / "repo"
    (root / "tests" / "unit").mkdir(parents=True)
    base = ["python", "-m", "pytest", "-p", "no:cacheprovider"]
    tests = str(root / "tests")
    quick = [*base, "-m", "not e2e or quick", tests]
    assert selftest.pytest_command("python", root, [], root, full=False) == quick
    assert selftest.pytest_command("python", root, ["--", "-x"], root, full=False) == [*quick, "-x"]
    assert selftest.pytest_command("python", root, [], root, full=True) == [*base, tests]
    # your own -m, or tests you name, run as asked
    assert selftest.pytest_command("python", root, ["-m", "network"], root, full=False) == [
        *base,
        tests,
        "-m",
        "network",
    ]
    assert selftest.pytest_command("python", root, ["tests/unit"], root, full=False) == [
        *base,
        str(root / "tests/unit"),
    ]
    parsed = cli.build_parser().parse_args(["selftest", "--full", "--", "-x"])
    assert parsed.full and parsed.pytest_args == ["--", "-x"]
    assert not cli.build_parser().parse_args(["selftest"]).full


def test_a_second_run_on_one_work_folder_stops_in_one_line(capsys, command, tmp_path):
    # before: two runs of a stage on one .work/ wrote the same scratch checkout, logs and reports;
    # after: the second one stops at once, naming the first; the lock goes with the run that holds it.
    work = tmp_path / "work"
    calls = command(lambda: 0, needs_work=True, locks_work=True)
    first = Context(argparse.Namespace(work=str(work), manifest=None))
    first.lock_work("verify")
    assert cli.main(["--work", str(work), "selftest"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"series: error: the work folder {work} is in use by another series.py run (verify, pid ")
    assert err.count("\n") == 1 and "--work DIR" in err and calls == []
    first.unlock_work()
    assert cli.main(["--work", str(work), "selftest"]) == 0 and len(calls) == 1
    assert cli.main(["--work", str(work), "selftest"]) == 0 and len(calls) == 2  # released at the end of a run
