"""upstream_tests.py: where upstream's tests come from, what it reads from a JUnit file and what it prints."""

from types import SimpleNamespace

import pytest
from seriestool import base, upstream_tests
from seriestool.errors import SeriesError
from seriestool.git import Repo
from seriestool.results import DeclaredChange, PytestRun, Regression, UpstreamRun, UpstreamTestsResult
from seriestool.statuses import RunStatus

from .conftest import commit


TARGET = SimpleNamespace(package="fakepkg", version="1.2", sha256="ab" * 32)


@pytest.fixture
def upstream(tmp_path):
    """A repository whose default branch `main` holds tests/a.py and whose tag v1.2 holds tests/b.py."""
    repo = Repo.init(tmp_path / "upstream")
    repo.run("checkout", "--quiet", "-b", "main")
    commit(repo, {"tests/b.py": "B = 1\n", "src/big.py": "# not fetched\n"})
    repo.run("tag", "v1.2")
    commit(repo, {"tests/a.py": "A = 1\n", "tests/b.py": None})
    return repo


def _ctx(tmp_path):
    logged = []
    return SimpleNamespace(work=tmp_path / "work", log=logged.append, logged=logged)


def test_tests_of_a_git_ref_and_of_the_default_branch(tmp_path, upstream):
    ctx = _ctx(tmp_path)
    url = upstream.path.as_uri()
    tagged = upstream_tests.fetch_tests(ctx, f"git:{url}@v{{version}}", TARGET)
    assert sorted(p.name for p in (tagged / "tests").iterdir()) == ["b.py"]
    assert not (tagged / "src").exists()  # tests/ only
    default = upstream_tests.fetch_tests(ctx, f"git:{url}", TARGET)  # no @REF: the remote's HEAD
    assert sorted(p.name for p in (default / "tests").iterdir()) == ["a.py"]
    assert tagged != default and tagged.parent == default.parent == ctx.work / "upstream-tests" / "sources"
    assert ctx.logged == [
        f"fetching tests/ of {url}@v1.2 (shallow, sparse)",
        f"fetching tests/ of {url}@HEAD (shallow, sparse)",
    ]
    assert [p.name for p in tagged.parent.iterdir() if p.name.startswith(".")] == []  # no staging folder left
    assert len(tagged.name) == 16 and int(tagged.name, 16) >= 0
    # The same spec again: fetched afresh into the same folder (a moved branch brings other tests).
    commit(upstream, {"tests/c.py": "C = 1\n"})
    again = upstream_tests.fetch_tests(ctx, f"git:{url}", TARGET)
    assert again == default and sorted(p.name for p in (again / "tests").iterdir()) == ["a.py", "c.py"]


def test_tests_from_a_path_or_nowhere(tmp_path, upstream):
    ctx = _ctx(tmp_path)
    assert upstream_tests.fetch_tests(ctx, f"path:{upstream.path}", TARGET) == upstream.path
    with pytest.raises(SeriesError) as info:
        upstream_tests.fetch_tests(ctx, f"path:{tmp_path}", TARGET)
    assert str(info.value) == f"--upstream-tests path:{tmp_path}: {tmp_path} has no tests/ folder"
    with pytest.raises(SeriesError) as info:
        upstream_tests.fetch_tests(ctx, f"git:{upstream.path.as_uri()}@v9", TARGET)
    assert str(info.value).startswith(f"cannot fetch tests/ of {upstream.path.as_uri()}@v9: ")


def test_the_checkout_of_upstream_tests_gets_the_commits_of_a_shallow_base(tmp_path, upstream):
    """A base fetched with git:URL@REF is a shallow fetch of one commit: a plain fetch from that repository refused
    the refs of the base and the series (git only warns, "shallow roots are not allowed to be updated"), so the first
    `verify --upstream-tests` on such a base stopped with exit 2."""
    bare = tmp_path / "bare.git"
    Repo(tmp_path).run("clone", "--quiet", "--bare", str(upstream.path), str(bare))
    target = SimpleNamespace(name="fake", package="fakepkg", version="1.2", sha256="ab" * 32)
    ctx = _ctx(tmp_path)
    spec = base.parse_spec(f"git:{bare.as_uri()}@v1.2", target)
    on = base.create(target, spec, tmp_path / "scratch", downloads=tmp_path / "downloads", log=ctx.log)
    scratch = Repo(tmp_path / "scratch", isolated=True)
    assert (scratch.git_dir() / "shallow").is_file()
    series = commit(scratch, {"src/fix.py": "FIXED = True\n"}, "the series")
    commits = {"base": on, "series": series}
    for state, commit_id in commits.items():
        scratch.run("update-ref", f"{upstream_tests.REFS}/{state}", commit_id)
    for _ in range(2):  # a new checkout, then the same one again
        tree = upstream_tests._tree(ctx, target, scratch)
        for state, commit_id in commits.items():
            assert tree.rev(f"{upstream_tests.REFS}/{state}") == commit_id
            tree.reset_hard(f"{upstream_tests.REFS}/{state}")
        assert (tree.path / "src" / "fix.py").is_file() and (tree.path / "tests" / "b.py").is_file()


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
    fields = {"passed": 0, "failed": 0, "skipped": 0, "error": 0, "total": 0, "exit_code": 0, "timed_out": False}
    fields.update(duration_s=61.4, log="x.log", run={"status": RunStatus.GREEN, "output_tail": ""})
    return UpstreamRun(**dict(fields, **counts))


def test_what_verify_prints_about_upstream_tests(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = UpstreamTestsResult(
        target="fake",
        files=["tests/a.py"],
        spec="path:up",
        missing=["tests/b.py", "tests/c.py"],
        states={"base": _state(passed=3), "series": _state(passed=2, failed=1, timed_out=True)},
        problems=["p"],
        regressions=[Regression("t::a", "passed", "failed", str(tmp_path / "logs" / "l.log"))],
        fixed=["t::b"],
        ok=False,
    )
    assert upstream_tests.lines(result) == [
        "fake upstream tests (1 file(s) from path:up), base: 3 passed, 0 failed, 0 skipped, 0 error (61s)",
        "fake upstream tests (1 file(s) from path:up), series: 2 passed, 1 failed, 0 skipped, 0 error (61s), "
        "TIMED OUT",
        "  fake upstream tests: p",
        "  REGRESSION t::a: passed on the base, failed with the series (log logs/l.log)",  # shown relative
        "  1 test(s) fail on the base and pass with the series",
        "  note: not in path:up: tests/b.py, tests/c.py",
        "fake upstream tests: FAIL (1 regression(s))",
    ]
    good = UpstreamTestsResult(target="fake", spec="path:up", files=["tests/a.py"], missing=[])
    assert upstream_tests.lines(good) == ["fake upstream tests: no regression"]


def _compared(base, series, declared=(), missing=()):
    result = UpstreamTestsResult(target="fake", spec="path:up", files=["tests/a.py"], missing=list(missing))
    result.states = {"base": _state(log="base.log"), "series": _state(log="series.log")}
    upstream_tests.compare(result, base, series, declared)
    return result


def test_a_test_that_passed_on_the_base_and_not_with_the_series_is_a_regression():
    base = {"t::ok": "passed", "t::skip": "passed", "t::gone": "passed", "t::err": "passed", "t::fail": "passed"}
    series = {"t::ok": "passed", "t::skip": "skipped", "t::err": "error", "t::fail": "failed", "t::new": "failed"}
    result = _compared(base, series)
    assert result.regressions == [
        Regression("t::gone", "passed", "not run", "series.log"),
        Regression("t::err", "passed", "error", "series.log"),
        Regression("t::fail", "passed", "failed", "series.log"),
    ]
    assert result.fixed == [] and result.problems == [] and result.ok is False


def test_fixed_tests_and_no_regression():
    base = {"t::ok": "passed", "t::f": "failed", "t::e": "error", "t::s": "skipped", "t::still": "failed"}
    series = {"t::ok": "passed", "t::f": "passed", "t::e": "passed", "t::s": "passed", "t::still": "error"}
    result = _compared(base, series)
    assert result.regressions == [] and result.fixed == ["t::f", "t::e"] and result.ok is True


def test_a_base_where_nothing_passes_is_a_problem():
    result = _compared({"t::f": "failed", "t::s": "skipped"}, {"t::f": "passed"})
    assert result.problems == ["no upstream test passed on the base (log base.log)"]
    assert result.fixed == ["t::f"] and result.ok is False


def test_the_state_of_a_run_and_the_json():
    run = PytestRun(status=RunStatus.TIMEOUT, exit_code=None, duration_s=9.5, log="l.log", output_tail="tail")
    state = upstream_tests._state({"a": "passed", "b": "error", "c": "skipped", "d": "passed"}, run)
    assert state == UpstreamRun(
        passed=2,
        failed=0,
        skipped=1,
        error=1,
        total=4,
        exit_code=None,
        timed_out=True,
        duration_s=9.5,
        log="l.log",
        run={"status": RunStatus.TIMEOUT, "output_tail": "tail"},
    )
    assert not upstream_tests._state({}, PytestRun(status=RunStatus.GREEN, exit_code=0)).timed_out
    result = UpstreamTestsResult(target="fake", spec="path:up", files=["a"], missing=["b"], states={"base": state})
    result.regressions.append(Regression("t::a", "passed", "failed", "l.log"))
    assert list(result.to_json()) == [
        "target", "spec", "files", "missing", "states", "regressions", "declared", "stale", "fixed", "problems",
        "ok",
    ]  # fmt: skip
    assert result.to_json()["states"]["base"] == {
        "passed": 2,
        "failed": 0,
        "skipped": 1,
        "error": 1,
        "total": 4,
        "exit_code": None,
        "timed_out": True,
        "duration_s": 9.5,
        "log": "l.log",
        "run": {"status": "timeout", "output_tail": "tail"},
    }
    assert result.to_json()["regressions"] == [{"id": "t::a", "base": "passed", "series": "failed", "log": "l.log"}]


# -- declared changes ([targets.<target>.upstream_tests_changed]) ----------------------------------------------

P14, P15 = "0016-log-nan.patch", "0017-other.patch"
NAN = "tests/trainer/test_trainer.py::TrainerLoggingTest::test_logging_inf_nan_filter"
NAN_ID = "tests.trainer.test_trainer.TrainerLoggingTest::test_logging_inf_nan_filter"


def test_the_junit_id_of_a_node_id():
    assert upstream_tests.junit_id(NAN) == NAN_ID
    assert upstream_tests.junit_id("tests/test_a.py::test_f") == "tests.test_a::test_f"  # a module-level function
    assert upstream_tests.junit_id("tests/a/test_b.py::T::U::test_c[x-1]") == "tests.a.test_b.T.U::test_c[x-1]"


def test_declarations_count_only_for_patches_that_went_in():
    target = SimpleNamespace(
        patches=["0001-a.patch", P14, P15],
        upstream_tests_changed={P15: [{"test": "t.py::b", "reason": "rb"}], P14: [{"test": NAN, "reason": "r"}]},
    )
    assert upstream_tests.declarations(target, [P15, "0001-a.patch", P14]) == [
        (P14, NAN, "r"),
        (P15, "t.py::b", "rb"),
    ]  # in series order
    assert upstream_tests.declarations(target, ["0001-a.patch", P15]) == [(P15, "t.py::b", "rb")]
    assert upstream_tests.declarations(target, []) == []


def test_a_declared_regression_does_not_fail_and_an_undeclared_one_still_does():
    base = {NAN_ID: "passed", "t::other": "passed", "t::ok": "passed"}
    series = {NAN_ID: "failed", "t::other": "error", "t::ok": "passed"}
    result = _compared(base, series, [(P14, NAN, "logging 0.0 hides a destroyed model")])
    assert result.declared == [
        DeclaredChange(P14, NAN, NAN_ID, "logging 0.0 hides a destroyed model", "passed", "failed")
    ]
    assert result.regressions == [Regression("t::other", "passed", "error", "series.log")]
    assert result.stale == [] and result.ok is False
    del series["t::other"], base["t::other"]
    result = _compared(base, series, [(P14, NAN, "r")])
    assert result.regressions == [] and result.stale == [] and len(result.declared) == 1 and result.ok is True
    # Without the declaration (its patch did not go in), the same outcomes are a regression.
    result = _compared(base, series)
    assert result.regressions == [Regression(NAN_ID, "passed", "failed", "series.log")] and result.ok is False
    assert result.declared == []


def test_a_declaration_covers_the_parametrized_cases_of_its_test():
    base = {"tests.a.T::test_x[1]": "passed", "tests.a.T::test_x[2]": "passed", "tests.a.T::test_xy": "passed"}
    series = {"tests.a.T::test_x[1]": "failed", "tests.a.T::test_x[2]": "passed", "tests.a.T::test_xy": "failed"}
    result = _compared(base, series, [(P14, "tests/a.py::T::test_x", "r")])
    assert [change.id for change in result.declared] == ["tests.a.T::test_x[1]"]
    assert [reg.id for reg in result.regressions] == ["tests.a.T::test_xy"]  # another test, not a case of it


@pytest.mark.parametrize(
    ("before", "after", "why"),
    [
        ("passed", "passed", "it passes with the series"),
        ("passed", "skipped", "it is skipped with the series"),
        ("failed", "failed", "it fails on the base too"),
        ("error", "failed", "it errors on the base too"),
        ("skipped", "failed", "it is skipped on the base"),
        (None, "failed", "it does not run on the base"),
        (None, None, "it runs on neither tree (is the node id right?)"),
    ],
)
def test_a_declaration_whose_test_does_not_regress_is_stale(before, after, why):
    base = {"t::ok": "passed", **({NAN_ID: before} if before else {})}
    series = {"t::ok": "passed", **({NAN_ID: after} if after else {})}
    result = _compared(base, series, [(P14, NAN, "r")])
    shown = (before or "not run", after or "not run")
    assert result.stale == [DeclaredChange(P14, NAN, NAN_ID, "r", *shown, why=why)]
    assert result.declared == [] and result.regressions == [] and result.ok is False


def test_a_declaration_in_a_file_the_spec_lacks_is_stale():
    result = _compared({"t::ok": "passed"}, {"t::ok": "passed"}, [(P14, NAN, "r")], missing=[NAN.split("::")[0]])
    assert [change.why for change in result.stale] == ["its file is not in path:up"] and result.ok is False


def _declared_result(tmp_path, **fields):
    result = UpstreamTestsResult(
        target="transformers", spec="path:up", files=["tests/trainer/test_trainer.py"], missing=[]
    )
    result.states = {"base": _state(passed=3), "series": _state(passed=2, failed=1)}
    for key, value in fields.items():
        setattr(result, key, value)
    return result


def test_what_verify_prints_about_declared_and_stale_declarations(tmp_path):
    declared = DeclaredChange(P14, NAN, NAN_ID, "logging 0.0 hides a destroyed model", "passed", "failed")
    result = _declared_result(tmp_path, declared=[declared])
    printed = upstream_tests.lines(result)
    assert printed[2:] == [
        f"  declared by 0016: {NAN_ID}: passed on the base,",
        "      failed with the series (its pull request updates the test: logging 0.0 hides a destroyed model)",
        "transformers upstream tests: no undeclared regression (1 declared: test_logging_inf_nan_filter by 0016)",
    ]
    stale = DeclaredChange(P15, "tests/trainer/test_trainer.py::T::test_b", "x", "r2", "passed", "passed")
    stale.why = "it passes with the series"
    result = _declared_result(
        tmp_path,
        declared=[declared],
        stale=[stale],
        regressions=[Regression("t::c", "passed", "failed", None)],
        ok=False,
    )
    printed = upstream_tests.lines(result)
    assert printed[-4:] == [
        "  STALE DECLARATION tests/trainer/test_trainer.py::T::test_b by 0017: it passes with the series "
        "(passed on the base,",
        "      passed with the series); remove it from [targets.transformers.upstream_tests_changed] or correct it "
        "(reason given:",
        "      r2)",
        "transformers upstream tests: FAIL (1 regression(s), 1 stale declaration(s); 1 declared: "
        "test_logging_inf_nan_filter by 0016)",
    ]
    assert "  REGRESSION t::c: passed on the base, failed with the series (log None)" in printed
    # One test's parametrized cases are one declaration on the summary line.
    cases = [DeclaredChange(P14, "t.py::test_x", f"t::test_x[{n}]", "r", "passed", "failed") for n in (1, 2)]
    result = _declared_result(tmp_path, declared=cases)
    assert upstream_tests.verdict(result) == "no undeclared regression (1 declared: test_x by 0016)"
    assert upstream_tests.verdict(_declared_result(tmp_path)) == "no regression"
    assert upstream_tests.verdict(_declared_result(tmp_path, ok=False, problems=["p"])) == "FAIL (0 regression(s))"


def test_the_json_of_declared_and_stale_declarations():
    result = UpstreamTestsResult(target="fake", spec="path:up", files=["a"], missing=[])
    result.declared.append(DeclaredChange(P14, NAN, NAN_ID, "r", "passed", "failed"))
    result.stale.append(DeclaredChange(P15, "t.py::b", "t::b", "r2", "failed", "failed", "it fails on the base too"))
    data = result.to_json()
    assert data["declared"] == [
        {
            "patch": P14,
            "test": NAN,
            "id": NAN_ID,
            "reason": "r",
            "base": "passed",
            "series": "failed",
            "why": "",
            "diff": "",
            "updated": {},
        }
    ]
    assert data["stale"][0]["why"] == "it fails on the base too" and data["stale"][0]["patch"] == P15
