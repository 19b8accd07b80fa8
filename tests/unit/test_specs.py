"""The two spec syntaxes: `--base` (base.py) and `--upstream-tests` (upstream_tests.py), as they are today (their
rules for `@REF` differ: see the cases marked DIFFERS), and what upstream_tests.py reads from a JUnit file."""

from pathlib import Path
from types import SimpleNamespace

import pytest
from seriestool import base, upstream_tests
from seriestool.errors import SeriesError
from seriestool.git import Repo

from .conftest import commit


TARGET = SimpleNamespace(package="fakepkg", version="1.2", sha256="ab" * 32)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (None, ("sdist", "", "")),
        ("", ("sdist", "", "")),
        ("sdist", ("sdist", "", "")),
        ("git:https://example.invalid/x.git", ("git", "https://example.invalid/x.git", "HEAD")),
        ("git:x", ("git", "x", "HEAD")),
        ("git:https://example.invalid/x.git@v1.2", ("git", "https://example.invalid/x.git", "v1.2")),
        ("git:https://example.invalid/x.git@", ("git", "https://example.invalid/x.git@", "HEAD")),  # DIFFERS
        ("git:git@example.invalid:org/x.git", ("git", "git@example.invalid:org/x.git", "HEAD")),  # DIFFERS
        ("git:git@example.invalid:org/x.git@main", ("git", "git@example.invalid:org/x.git", "main")),
        ("git:@main", ("git", "@main", "HEAD")),
        ("git:x@v{version}", ("git", "x", "v{version}")),  # DIFFERS: {version} is not filled in
    ],
)
def test_base_specs(spec, expected):
    parsed = base.parse_spec(spec)
    assert (parsed.kind, parsed.location, parsed.ref) == expected


def test_a_base_path_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert base.parse_spec("path:clone") == base.BaseSpec("path", str(tmp_path / "clone"))
    assert base.parse_spec("path:c") == base.BaseSpec("path", str(tmp_path / "c"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert base.parse_spec("path:~/clone").location == str(tmp_path / "home" / "clone")


@pytest.mark.parametrize("spec", ["path:", "git:", "main", "https://example.invalid/x.git", "PATH:x"])
def test_bad_base_specs(spec):
    with pytest.raises(SeriesError) as info:
        base.parse_spec(spec)
    assert str(info.value) == f"bad base {spec!r}: use sdist, path:DIR or git:URL@REF"


def test_describe_a_base_and_its_key():
    assert base.parse_spec(None).describe(TARGET) == "fakepkg 1.2 sdist (sha256 abababababab...)"
    assert base.BaseSpec("path", "/x/clone").describe(TARGET) == "HEAD of /x/clone"
    assert base.BaseSpec("git", "https://e/x.git", "main").describe(TARGET) == "https://e/x.git@main"
    assert base.key_of(base.BaseSpec("sdist"), TARGET) == f"sdist:fakepkg==1.2:{'ab' * 32}"
    assert base.key_of(base.BaseSpec("git", "u", "r"), TARGET) is None
    assert base.key_of(base.BaseSpec("path", "/x"), TARGET) is None


def test_check_spec_of_a_path(tmp_path):
    def message(path):
        with pytest.raises(SeriesError) as info:
            base.check_spec(base.BaseSpec("path", str(path)))
        return str(info.value)

    assert message(tmp_path / "missing") == f"base path {tmp_path / 'missing'} does not exist"
    (tmp_path / "file").write_text("", encoding="utf-8")
    assert message(tmp_path / "file") == f"base path {tmp_path / 'file'} is not a folder"
    (tmp_path / "plain").mkdir()
    assert message(tmp_path / "plain") == f"base path {tmp_path / 'plain'} is not a git repository"
    Repo(tmp_path).run("init", "--quiet", "--bare", "bare.git")
    bare = tmp_path / "bare.git"
    assert message(bare) == (
        f"base path {bare} is a bare git repository (no work tree): use git:{bare.as_uri()}@BRANCH for it"
    )
    empty = Repo.init(tmp_path / "empty")
    assert message(empty.path) == f"base path {empty.path} has no commits"
    (empty.path / "sub").mkdir()
    assert message(empty.path / "sub") == f"base path {empty.path} has no commits"  # its top folder is named
    commit(empty, {"a.txt": "a\n"})
    base.check_spec(base.BaseSpec("path", str(empty.path / "sub")))
    assert base._git_source(base.BaseSpec("path", str(empty.path / "sub"))) == (empty.path.as_uri(), "HEAD")
    assert base._git_source(base.BaseSpec("git", "u", "r")) == ("u", "r")
    base.check_spec(base.BaseSpec("git", str(tmp_path / "missing"), "main"))  # checked when fetched


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("git:https://example.invalid/x.git@v1.2", ("git", "https://example.invalid/x.git", "v1.2")),
        ("git:https://example.invalid/x.git@v{version}", ("git", "https://example.invalid/x.git", "v1.2")),
        ("git:x@{version}-{version}", ("git", "x", "1.2-1.2")),
        ("git:git@example.invalid:org/x.git@main", ("git", "git@example.invalid:org/x.git", "main")),
    ],
)
def test_upstream_tests_specs(spec, expected):
    assert upstream_tests.parse_spec(spec, TARGET) == expected


def test_an_upstream_tests_path_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert upstream_tests.parse_spec("path:up", TARGET) == ("path", str(tmp_path / "up"), "")
    assert upstream_tests.parse_spec("path:u", TARGET) == ("path", str(tmp_path / "u"), "")


@pytest.mark.parametrize(
    "spec",
    [
        "path:",
        "sdist",
        "git:https://example.invalid/x.git",  # DIFFERS: a ref is required
        "git:https://example.invalid/x.git@",
        "git:@main",
        "git:git@example.invalid:org/x.git",  # DIFFERS
        "main",
    ],
)
def test_bad_upstream_tests_specs(spec):
    with pytest.raises(SeriesError) as info:
        upstream_tests.parse_spec(spec, TARGET)
    assert str(info.value) == f"bad --upstream-tests {spec!r}: use path:DIR (a tree with tests/) or git:URL@REF"


JUNIT = """\
<testsuites><testsuite>
<testcase classname="tests.test_a.T" name="test_ok"/>
<testcase classname="tests.test_a.T" name="test_fail"><failure message="x"/></testcase>
<testcase classname="tests.test_a.T" name="test_error"><error message="x"/></testcase>
<testcase classname="tests.test_a.T" name="test_both"><failure message="x"/><error message="y"/></testcase>
<testcase classname="tests.test_a.T" name="test_skip"><skipped message="x"/></testcase>
<testcase name="collect"><error message="x"/></testcase>
</testsuite></testsuites>
"""


def test_outcomes_of_a_junit_file(tmp_path):
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT, encoding="utf-8")
    assert upstream_tests.outcomes(path) == {
        "tests.test_a.T::test_ok": "passed",
        "tests.test_a.T::test_fail": "failed",
        "tests.test_a.T::test_error": "error",
        "tests.test_a.T::test_both": "error",
        "tests.test_a.T::test_skip": "skipped",
        "::collect": "error",
    }
    assert upstream_tests.outcomes(tmp_path / "missing.xml") == {}
    (tmp_path / "bad.xml").write_text("<testsuite", encoding="utf-8")
    assert upstream_tests.outcomes(tmp_path / "bad.xml") == {}


def _state(**counts):
    return {"passed": 0, "failed": 0, "skipped": 0, "error": 0, "duration_s": 61.4, "timed_out": False, **counts}


def test_what_verify_prints_about_upstream_tests():
    report = {
        "target": "fake",
        "files": ["tests/a.py"],
        "spec": "path:up",
        "states": {"base": _state(passed=3), "series": _state(passed=2, failed=1, timed_out=True)},
        "problems": ["p"],
        "regressions": [{"id": "t::a", "base": "passed", "series": "failed", "log": Path("l.log")}],
        "fixed": ["t::b"],
        "missing": ["tests/b.py", "tests/c.py"],
        "ok": False,
    }
    assert upstream_tests.lines(report) == [
        "fake upstream tests (1 file(s) from path:up), base: 3 passed, 0 failed, 0 skipped, 0 error (61s)",
        "fake upstream tests (1 file(s) from path:up), series: 2 passed, 1 failed, 0 skipped, 0 error (61s), "
        "TIMED OUT",
        "  fake upstream tests: p",
        "  REGRESSION t::a: passed on the base, failed with the series (log l.log)",
        "  1 test(s) fail on the base and pass with the series",
        "  note: not in path:up: tests/b.py, tests/c.py",
        "fake upstream tests: FAIL (1 regression(s))",
    ]
    good = dict(report, states={}, problems=[], regressions=[], fixed=[], missing=[], ok=True)
    assert upstream_tests.lines(good) == ["fake upstream tests: no regression"]
