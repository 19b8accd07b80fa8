"""runners.py: how a pytest run is classified (red, green, error, ...), with a fake interpreter that writes a given
JUnit file and exits with a given code; the environment it gets; a run stopped at its time limit."""

import os
import py_compile
import stat
from pathlib import Path

import pytest
from seriestool import runners
from seriestool.statuses import RunStatus

from .conftest import commit


FAKE = """\
#!/bin/sh
for arg in "$@"; do
  case "$arg" in --junitxml=*) [ -n "$FAKE_JUNIT" ] && cp "$FAKE_JUNIT" "${arg#--junitxml=}";; esac
done
echo "args: $*"
echo "PYTHONPATH=$PYTHONPATH"
echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}"
echo "PYTEST_ADDOPTS=${PYTEST_ADDOPTS-unset}"
echo "EXTRA=${EXTRA-unset}"
echo "PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE-unset}"
[ -n "$FAKE_SLEEP" ] && sleep "$FAKE_SLEEP"
exit "$FAKE_CODE"
"""


def case(name, outcome=None, message=""):
    inner = f'<{outcome} message="{message}"/>' if outcome else ""
    return f'<testcase classname="tests.test_a" name="{name}">{inner}</testcase>'


def junit(*cases):
    return f"<testsuites><testsuite>{''.join(cases)}</testsuite></testsuites>"


PASS = case("test_pass")
FAIL = case("test_fail", "failure", "AssertionError: assert 1 == 2")
IMPORT = case("test_import", "failure", "ModuleNotFoundError: No module named 'x'")
IMPORT_ERROR = case("test_import2", "failure", "ImportError: cannot import name 'y'")
ERROR = case("test_error", "error", "failed on setup with ValueError")
SKIP = case("test_skip", "skipped", "needs a GPU")


@pytest.fixture
def fake(tmp_path, repo, monkeypatch):
    """Runs run_pytest with the fake interpreter; returns the PytestRun."""
    python = tmp_path / "python"
    python.write_text(FAKE, encoding="utf-8")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    commit(repo, {"src/pkg/__init__.py": ""})
    monkeypatch.setenv("PYTEST_ADDOPTS", "-x")

    def run(code, xml=None, *, expect=RunStatus.RED, timeout=60, **kwargs):
        junit_file = tmp_path / "given.xml"
        if xml is None:
            junit_file.unlink(missing_ok=True)
        else:
            junit_file.write_text(xml, encoding="utf-8")
        monkeypatch.setenv("FAKE_JUNIT", str(junit_file) if xml is not None else "")
        monkeypatch.setenv("FAKE_CODE", str(code))
        options = {"device": "cpu", "extra_paths": (), "extra_env": None}
        options.update(kwargs)
        return runners.run_pytest(
            python=python,
            repo_dir=repo.path,
            source_dir="src",
            files=["tests/test_a.py"],
            log_stem=tmp_path / "run",
            timeout=timeout,
            expect=expect,
            **options,
        )

    return run


RED_RUNS = {
    "assertion_failures": (1, [FAIL, PASS], RunStatus.RED),
    "failures_and_an_import_error": (1, [FAIL, IMPORT], RunStatus.RED),
    "only_import_errors": (1, [IMPORT, IMPORT_ERROR], RunStatus.IMPORT_ONLY),
    # Errors (in setup, in collection) are neither red nor "passes without the fix": no false green.
    "only_errors": (1, [ERROR, PASS], RunStatus.ERROR),
    "all_pass": (0, [PASS, SKIP], RunStatus.NOT_RED),
    "all_skipped": (0, [SKIP], RunStatus.SKIPPED),
    "nothing_collected": (5, [], RunStatus.NO_TESTS),
    "usage_error": (4, None, RunStatus.ERROR),
    "collection_error": (2, [ERROR], RunStatus.ERROR),
    "interrupted": (1, None, RunStatus.ERROR),
}


@pytest.mark.parametrize("name", sorted(RED_RUNS))
def test_a_red_run(fake, name):
    code, cases, status = RED_RUNS[name]
    run = fake(code, None if cases is None else junit(*cases))
    assert (run.status, run.exit_code) == (status, code)
    assert bool(run.output_tail) is (status != RunStatus.RED)


GREEN_RUNS = {
    "all_pass": (0, [PASS, SKIP], RunStatus.GREEN),
    "all_skipped": (0, [SKIP], RunStatus.GREEN),
    "a_failure": (1, [FAIL, PASS], RunStatus.FAILED),
    "only_errors": (1, [ERROR], RunStatus.FAILED),
    "nothing_collected": (5, [], RunStatus.NO_TESTS),
    "collection_error": (2, [ERROR], RunStatus.ERROR),
}


@pytest.mark.parametrize("name", sorted(GREEN_RUNS))
def test_a_green_run(fake, name):
    code, cases, status = GREEN_RUNS[name]
    run = fake(code, junit(*cases), expect=RunStatus.GREEN)
    assert run.status == status
    assert bool(run.output_tail) is (status != RunStatus.GREEN)


def test_the_counts_and_the_failing_tests(fake):
    run = fake(1, junit(FAIL, ERROR, PASS, SKIP, IMPORT, case("collect", "error")))
    assert (run.passed, run.failed, run.errors, run.skipped, run.total) == (1, 2, 2, 1, 6)
    assert run.failing == [
        "tests.test_a::test_fail",
        "tests.test_a::test_error",
        "tests.test_a::test_import",
        "tests.test_a::collect",
    ]
    assert run.log.endswith("run.log") and run.duration_s >= 0


def test_a_collection_error_is_named_by_its_file(fake):
    run = fake(2, junit('<testcase classname="" name="tests.test_b"><error message="ImportError"/></testcase>'))
    assert (run.status, run.errors, run.failing) == (RunStatus.ERROR, 1, ["tests.test_b"])


def test_the_environment_of_the_run(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # bytecode is kept in the checkouts: see drop_stale_bytecode
    run = fake(0, junit(PASS), extra_paths=[tmp_path / "companion"], extra_env={"EXTRA": "yes"})
    log = open(run.log, encoding="utf-8").read()
    assert f"PYTHONPATH={tmp_path / 'repo' / 'src'}{os.pathsep}{tmp_path / 'companion'}\n" in log
    assert "CUDA_VISIBLE_DEVICES=\n" in log and "PYTEST_ADDOPTS=unset\n" in log and "EXTRA=yes\n" in log
    assert "PYTHONDONTWRITEBYTECODE=unset\n" in log
    assert f"args: -m pytest -p no:cacheprovider -rfE --junitxml={tmp_path / 'run.xml'} tests/test_a.py\n" in log
    run = fake(0, junit(PASS), device="cuda")
    assert "CUDA_VISIBLE_DEVICES=unset\n" in open(run.log, encoding="utf-8").read()


def test_stale_bytecode_is_dropped_before_a_run(fake, repo):
    pyc = repo.path / "src" / "pkg" / "__pycache__" / "__init__.cpython-311.pyc"
    pyc.parent.mkdir()
    pyc.write_bytes(b"stale")
    fake(0, junit(PASS))
    assert not pyc.exists()  # nothing recorded about this checkout yet: all of its bytecode may be stale


def test_an_old_junit_file_is_not_read_again(fake, tmp_path):
    fake(1, junit(FAIL))
    run = fake(1, None)
    assert (run.status, run.total, run.failing) == (RunStatus.ERROR, 0, [])


def test_a_run_past_its_time_limit_is_stopped(fake, monkeypatch):
    monkeypatch.setenv("FAKE_SLEEP", "30")
    run = fake(0, junit(PASS), timeout=0.5)
    assert (run.status, run.exit_code) == (RunStatus.TIMEOUT, None)
    assert run.duration_s < 10 and "args:" in run.output_tail


def test_the_tail_of_a_log(tmp_path):
    log = tmp_path / "log"
    log.write_text("".join(f"line {n}\n" for n in range(100)), encoding="utf-8")
    assert runners._tail(log, lines=3) == "line 97\nline 98\nline 99"
    assert runners._tail(log).splitlines()[0] == "line 60"
    assert runners._tail(tmp_path / "missing") == ""


def _pyc(source):
    return Path(py_compile.compile(str(source), doraise=True))


def _tree(repo, files):
    commit(repo, files)
    return repo.out("rev-parse", "HEAD^{tree}")


def test_bytecode_of_changed_files_is_dropped_even_within_the_same_second(repo):
    root = repo.path
    first = _tree(repo, {"core.py": "X = 1 - 1\n", "other.py": "Y = 2\n"})
    core_pyc, other_pyc = _pyc(root / "core.py"), _pyc(root / "other.py")

    # Nothing recorded yet: every bytecode file in the checkout could be stale, so all of it goes.
    runners.drop_stale_bytecode(repo, first)
    assert not core_pyc.exists() and not other_pyc.exists()
    core_pyc, other_pyc = _pyc(root / "core.py"), _pyc(root / "other.py")

    # Same size and same mtime: Python itself would take the old bytecode for the new source.
    stamp = os.stat(root / "core.py").st_mtime_ns
    second = _tree(repo, {"core.py": "X = 1 + 1\n"})
    os.utime(root / "core.py", ns=(stamp, stamp))
    runners.drop_stale_bytecode(repo, second)
    assert not core_pyc.exists() and other_pyc.exists()

    # The same tree again: nothing to drop.
    core_pyc = _pyc(root / "core.py")
    runners.drop_stale_bytecode(repo, second)
    assert core_pyc.exists() and other_pyc.exists()


def test_parse_junit_counts_and_the_worst_outcome_of_a_test(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(
        "<testsuites><testsuite>"
        '<testcase classname="t.T" name="a"/>'
        '<testcase classname="t.T" name="a"><error message="teardown"/></testcase>'
        '<testcase classname="t.T" name="b"><failure message="AssertionError: no"/></testcase>'
        '<testcase classname="t.T" name="b"><error message="teardown"/></testcase>'
        '<testcase classname="t.T" name="c"><skipped/></testcase>'
        '<testcase classname="t.T" name="c"/>'
        '<testcase name="collect"><failure message="ImportError: x: y"/></testcase>'
        "</testsuite></testsuites>",
        encoding="utf-8",
    )
    counts, failing, kinds, outcomes = runners._parse_junit(junit)
    assert counts == {"passed": 2, "failed": 2, "errors": 2, "skipped": 1}
    assert failing == ["t.T::a", "t.T::b", "t.T::b", "collect"]
    assert kinds == ["AssertionError", "ImportError"]
    # a test that passes and then errors in teardown counts as its worst entry; a failure is not undone
    assert outcomes == {"t.T::a": "errors", "t.T::b": "failed", "t.T::c": "passed", "collect": "failed"}
    assert runners._parse_junit(tmp_path / "missing.xml") == (
        {"passed": 0, "failed": 0, "errors": 0, "skipped": 0},
        [],
        [],
        {},
    )


def _ruff_or_skip():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip("needs ruff in this interpreter (run `python3 scripts/series.py selftest`)")
    return sys.executable


LINT_IN_BASE = "import os\nimport sys\n\n\ndef f(a):\n    return a\n"
FORMAT_IN_BASE = "x=1\n\n\ndef g(b):\n    return b\n"


def test_the_style_check_judges_what_the_patch_changes_not_the_lint_of_the_base(repo):
    python = _ruff_or_skip()
    base = commit(repo, {"lint.py": LINT_IN_BASE, "fmt.py": FORMAT_IN_BASE, "pyproject.toml": "[tool.ruff]\n"})
    # The patch edits both files cleanly: the unused imports and `x=1` were there before it.
    commit(repo, {"lint.py": LINT_IN_BASE + "\n\ndef h(c):\n    return c\n", "fmt.py": FORMAT_IN_BASE + "\n\ny = 2\n"})
    files = ["lint.py", "fmt.py"]
    whole = runners.run_style(python, repo.path, files)
    assert not whole.clean and "F401" in whole.check_output  # before: the base's lint is blamed on the patch
    style = runners.run_style(python, repo.path, files, base=base)
    assert style.clean, style  # after: nothing new
    assert (style.check_exit, style.format_exit) == (0, 0)
    assert "2 finding(s) already in the file(s) before the patch" in style.check_output
    assert "not formatted before the patch either" in style.format_output and "fmt.py" in style.format_output
    # What the patch itself gets wrong still counts: an unused import it adds, a line it leaves unformatted.
    commit(repo, {"lint.py": "import json\n" + LINT_IN_BASE, "fmt.py": FORMAT_IN_BASE + "z=3\n"})
    style = runners.run_style(python, repo.path, files, base=base)
    assert not style.clean
    assert style.check_output.splitlines()[0] == "lint.py:1:8: F401 `json` imported but unused"
    assert "Would reformat: fmt.py (1 line(s) of the patch)" in style.format_output
    # A new file is the patch's alone, and a file clean before it must stay clean.
    head = commit(repo, {"clean.py": "a = 1\n"})
    commit(repo, {"new.py": "import os\n", "clean.py": "a=1\n"})
    style = runners.run_style(python, repo.path, ["new.py", "clean.py"], base=head)
    assert "new.py:1:8: F401" in style.check_output and "Would reformat: clean.py" in style.format_output
