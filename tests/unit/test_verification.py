"""verification.py without pytest runs: the verdict of a whole run, what `verify` prints and its JSON report."""

from pathlib import Path
from types import SimpleNamespace

from seriestool import verification
from seriestool.render import problem_lines, table
from seriestool.results import SCHEMA_VERSION, CompanionResult, PatchResult, PytestRun, UpstreamTestsResult
from seriestool.statuses import RunStatus, Verdict
from seriestool.verification import Runs, Verification


def _patch(name, verdict=Verdict.OK, **fields):
    res = PatchResult(name=name, target="fake", index=int(name[:4]), applies=True, **fields)
    res.verdict = verdict
    return res


def _green(**fields):
    return PytestRun(**{"status": RunStatus.GREEN, "exit_code": 0, "passed": 3, "skipped": 1, **fields})


def _companion(run):
    return CompanionResult(target="fake", companions=["other"], label="fake + patched other", run=run)


def _upstream(ok=True):
    return UpstreamTestsResult(target="fake", spec="path:up", files=["tests/a.py"], missing=[], ok=ok)


def test_the_verdict_of_a_run():
    assert Verification().ok
    good = Verification(results=[_patch("0001-a"), _patch("0002-b", Verdict.UPSTREAM)])
    assert good.ok  # a patch already upstream is news, not a failure
    assert not Verification(results=[_patch("0001-a"), _patch("0002-b", Verdict.FAIL)]).ok
    assert not Verification(results=[_patch("0001-a", Verdict.FLAKY)]).ok
    assert Verification(results=[_patch("0001-a")], companions=[_companion(_green())]).ok
    failed = _companion(PytestRun(status=RunStatus.FAILED, exit_code=1))
    assert not Verification(results=[_patch("0001-a")], companions=[failed]).ok
    assert Verification(upstream_tests=[_upstream()]).ok
    assert not Verification(upstream_tests=[_upstream(), _upstream(ok=False)]).ok


def test_a_companion_stage():
    companion = _companion(_green(log="/x/with-companions.log"))
    assert companion.green
    assert companion.to_json() == {
        "target": "fake",
        "with": ["other"],
        "label": "fake + patched other",
        "green": True,
        "status": RunStatus.GREEN,
        "blocked": None,
        "run": companion.run.__dict__,
    }
    assert verification.companion_line(companion) == "fake + patched other: ok, 3 passed, 1 skipped, 0 failed"
    failed = _companion(PytestRun(status=RunStatus.FAILED, exit_code=1, passed=1, failed=2))
    assert not failed.green and failed.to_json()["green"] is False
    assert verification.companion_line(failed) == "fake + patched other: FAIL (failed), 1 passed, 0 skipped, 2 failed"
    flaky = PytestRun(
        status=RunStatus.FLAKY,
        exit_code=1,
        passed=3,
        failed=1,
        runs=3,
        run_statuses=["green", "failed", "green"],
        flaky=[{"test": "t::a", "failed": 1}],
    )
    assert verification.companion_line(_companion(flaky)) == (
        "fake + patched other: FLAKY (t::a failed in 1 of 3 runs), 3 passed, 0 skipped, 1 failed (2 of 3 runs green)"
    )
    repeated = _green(runs=2, run_statuses=["green", "green"])
    assert verification.companion_line(_companion(repeated)).endswith("0 failed (2 of 2 runs green)")
    # the companions' patches do not go in on the release judged: nothing runs, and it fails no patch of this target
    blocked = CompanionResult("fake", ["other"], "fake + patched other 1.0", PytestRun(status=RunStatus.NO_TESTS), "x")
    assert blocked.green and blocked.to_json()["status"] == "blocked" and blocked.to_json()["blocked"] == "x"
    assert verification.companion_line(blocked).startswith("fake + patched other 1.0: blocked (x): not judged")


def test_what_verify_prints(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cached = _green(cached=True)
    red = PytestRun(status=RunStatus.RED, exit_code=1, failed=1, total=1)
    results = [
        _patch("0001-a", red=red, green=cached),
        _patch("0002-b", Verdict.FAIL, red=red, green=_green(), problems=["boom"]),
        _patch("0003-c", Verdict.NOT_CHECKED, red=PytestRun(status=RunStatus.NO_TESTS)),
    ]
    found = Verification(results=results, companions=[_companion(_green(cached=True))])
    patches = [res.to_json() for res in results]
    lines = verification.console_lines(found, only={"0001-a", "0002-b"}, duration=3.14, logs=tmp_path / "logs")
    assert lines == [
        table(patches),
        *problem_lines(patches),
        "fake + patched other: ok, 3 passed, 1 skipped, 0 failed",
        "2 of 5 pytest runs: outcome of an identical earlier run (--no-cache to run them)",
        "verify: FAILED (2 patches, 1 more not checked (--patch), 3.1s, logs in logs)",
    ]
    # a run that names its world says it in the last line too
    found.targets = [{"name": "fake", "base": {"version": "1.0"}, "with": [{"name": "other", "version": "2.0"}]}]
    found.info = {"torch": "2.13.0", "python": "3.11.7"}
    last = verification.console_lines(found, only=None, duration=1, logs=Path("/l"))[-1]
    assert last == "verify: FAILED (3 patches; fake 1.0 + other 2.0, torch 2.13.0, Python 3.11.7; 1.0s, logs in /l)"
    one = Verification(results=[_patch("0001-a", red=red, green=_green())])
    assert verification.console_lines(one, only=None, duration=1, logs=Path("/l")) == [
        table([one.results[0].to_json()]),
        "verify: OK (1 patch, 1.0s, logs in /l)",
    ]
    only_one = verification.console_lines(one, only={"0001-a"}, duration=1, logs=Path("/l"))
    assert only_one[-1] == "verify: OK (1 patch, 1.0s, logs in /l)"
    assert verification.console_lines(Verification(), only=None, duration=0, logs=Path("/l")) == [
        "verify: OK (0 patches, 0.0s, logs in /l)"
    ]
    with_upstream = Verification(upstream_tests=[_upstream()])
    lines = verification.console_lines(with_upstream, only=None, duration=0, logs=Path("/l"))
    assert lines == ["fake upstream tests: no regression", "verify: OK (0 patches, 0.0s, logs in /l)"]


def test_the_json_report():
    found = Verification(
        targets=[{"name": "fake"}],
        results=[_patch("0001-a", green=_green())],
        companions=[_companion(_green())],
        upstream_tests=[_upstream(ok=False)],
    )
    runs = Runs(python=Path("/py"), device="cpu", timeout=9, repeat=2)
    info = {"python": "3.11", "pytest": "9", "ruff": "0.14.10", "torch": "2.13.0", "cuda": False, "packages": "x"}
    data = verification.report(found, runs, info, 4.5)
    assert data.pop("date").endswith("Z")
    assert data == {
        "schema_version": SCHEMA_VERSION,
        "ok": False,
        "device": "cpu",
        "repeat": 2,
        "python": "/py",
        # a base of no declared version is named with None
        "tools": {"python": "3.11", "pytest": "9", "ruff": "0.14.10", "torch": "2.13.0", "cuda": False, "fake": None},
        "targets": [{"name": "fake"}],
        "patches": [found.results[0].to_json()],
        "companions": [found.companions[0].to_json()],
        "upstream_tests": [found.upstream_tests[0].to_json()],
        "duration_s": 4.5,
    }


def _trees(tmp_path, *names):
    """Companion trees (companions.CompanionTrees) of `names`, version 2.0, patched under tmp_path/<name>/lib."""
    return [
        SimpleNamespace(
            companion=SimpleNamespace(target=SimpleNamespace(name=name), version="2.0"),
            patched=tmp_path / name / "lib",
            blocked=None,
        )
        for name in names
    ]


def test_no_companion_stage_without_companions_or_with_a_failed_patch(tmp_path):
    other = SimpleNamespace(name="other", patches=["0001-o.patch"], source_dir="src")
    bare = SimpleNamespace(name="bare", patches=[], source_dir="src")
    target = SimpleNamespace(name="fake", verify_with=["other"])
    ctx = SimpleNamespace(manifest=SimpleNamespace(target={"other": other, "bare": bare}.__getitem__))
    scratch = {"fake": (None, "b")}
    runs = Runs(python=Path("/py"), device="cpu", timeout=9)
    good, bad = _patch("0001-a"), _patch("0002-b", Verdict.FAIL)
    trees = _trees(tmp_path, "other")
    assert verification.verify_with_companions(ctx, target, [good, bad], scratch, runs, trees) is None
    assert verification.verify_with_companions(ctx, target, [], scratch, runs, trees) is None
    assert verification.verify_with_companions(ctx, target, [good], scratch, runs, []) is None
    # a companion without patches of its own has nothing to add to the runs with its release
    assert verification.verify_with_companions(ctx, target, [good], scratch, runs, _trees(tmp_path, "bare")) is None


def test_run_detail(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    detail = verification.run_detail
    assert detail(PytestRun(status=RunStatus.GREEN)) == ""
    failing = [f"t::{i}" for i in range(7)]
    run = PytestRun(status=RunStatus.FAILED, failing=failing, log=str(tmp_path / "l.log"))
    assert detail(run) == " (failing: t::0, t::1, t::2, t::3, t::4 and 2 more; log l.log)"
    assert detail(PytestRun(status=RunStatus.FAILED, failing=failing[:5])) == (
        " (failing: t::0, t::1, t::2, t::3, t::4)"
    )
    assert detail(run, limit=7) == f" (failing: {', '.join(failing)}; log l.log)"
    assert detail(PytestRun(status=RunStatus.NOT_RED, passed=3)) == " (all 3 pass)"
    assert detail(PytestRun(status=RunStatus.NOT_RED, passed=0)) == ""
    assert detail(PytestRun(status=RunStatus.RED, passed=3)) == ""
    flaky = [{"test": f"t::{i}", "failed": i + 1} for i in range(6)]
    many = PytestRun(status=RunStatus.FLAKY, runs=9, flaky=flaky, failing=["t::0", "t::9"])
    assert detail(many) == (
        " (t::0 failed in 1 of 9 runs, t::1 failed in 2 of 9 runs, t::2 failed in 3 of 9 runs, "
        "t::3 failed in 4 of 9 runs, t::4 failed in 5 of 9 runs and 1 more; failing: t::9)"
    )
    statuses = ["green", "timeout", "green"]
    blameless = PytestRun(status=RunStatus.FLAKY, runs=3, run_statuses=statuses)
    assert detail(blameless) == " (green in 2 of 3 runs)"
    assert detail(PytestRun(status=RunStatus.FAILED, runs=3, run_statuses=statuses)) == ""
    assert detail(PytestRun(status=RunStatus.FLAKY, runs=1)) == ""
    five = PytestRun(status=RunStatus.FLAKY, runs=2, flaky=flaky[:5])
    assert detail(five).endswith("t::4 failed in 5 of 2 runs)")  # five of five: no "and more"
    assert detail(PytestRun(status=RunStatus.FLAKY, runs=2, run_statuses=["green", "timeout"])) == (
        " (green in 1 of 2 runs)"
    )


def test_progress_and_counts():
    run = PytestRun(status=RunStatus.RED, failed=2, total=3, duration_s=1.25)
    assert verification._progress(run, "failed", "total") == "red 2/3 failed/total (1.2s)"
    cached = PytestRun(status=RunStatus.GREEN, passed=3, skipped=1, cached=True)
    assert verification._progress(cached, "passed", "skipped") == "green 3/1 passed/skipped (earlier identical run)"
    repeated = PytestRun(status=RunStatus.FLAKY, passed=3, runs=3, run_statuses=["green", "failed", "green"])
    assert verification._progress(repeated, "passed", "skipped") == (
        "flaky 3/0 passed/skipped (2 of 3 runs green, 0.0s)"
    )
    assert verification._count(1, "patch", "patches") == "1 patch" and verification._count(0, "run") == "0 runs"
    assert verification._count(2, "patch", "patches") == "2 patches" and verification._count(1, "run") == "1 run"
    lines = []
    show = verification._run_progress(SimpleNamespace(log=lines.append), "[x]", 4)
    show(2, PytestRun(status=RunStatus.GREEN, duration_s=0.5))
    assert lines == ["[x] run 2/4: green (0.5s)"]


def test_the_companion_stage_runs_the_tests_of_every_patch_with_the_companions(tmp_path, monkeypatch):
    calls = []

    def repeated_pytest(cache, repeat, progress=None, **kwargs):
        calls.append((cache, repeat, kwargs))
        return _green(passed=5, skipped=2)

    monkeypatch.setattr(verification, "repeated_pytest", repeated_pytest)
    other = SimpleNamespace(name="other", patches=["0001-o.patch"], source_dir="lib")
    target = SimpleNamespace(name="fake", verify_with=["other"], source_dir="src")
    third = SimpleNamespace(name="third", patches=[], source_dir="src")
    logged = []
    ctx = SimpleNamespace(
        manifest=SimpleNamespace(target={"other": other, "third": third}.__getitem__),
        work=tmp_path,
        log=logged.append,
    )
    scratch = {"fake": (SimpleNamespace(path=tmp_path / "fake"), "b")}
    trees = _trees(tmp_path, "other")
    one = _patch("0001-a", green=_green(passed=2, skipped=1, failed=1), test_files=["tests/test_a.py"])
    two = _patch("0002-b", green=_green(passed=1, skipped=0), test_files=["tests/test_b.py", "tests/test_c.py"])
    foreign = PatchResult(name="0001-x", target="other", index=1)  # another target's, failed: not this stage's
    results = [one, two, foreign]
    runs = Runs(python=Path("/py"), device="cpu", timeout=9, cache="cache", repeat=3)
    companion = verification.verify_with_companions(ctx, target, results, scratch, runs, trees)
    assert companion == CompanionResult("fake", ["other"], "fake + patched other 2.0", _green(passed=5, skipped=2))
    [(cache, repeat, kwargs)] = calls
    assert (cache, repeat) == ("cache", 3)
    kwargs.pop("say")("still running, 30 s, 3/7 tests done")  # its progress lines name the stage
    assert logged.pop() == "[fake + patched other 2.0] green: still running, 30 s, 3/7 tests done"
    assert kwargs == {
        "python": Path("/py"),
        "repo_dir": tmp_path / "fake",
        "source_dir": "src",
        "files": ["tests/test_a.py", "tests/test_b.py", "tests/test_c.py"],
        "device": "cpu",
        "log_stem": tmp_path / "logs" / "verify" / "fake" / "with-companions",
        "timeout": 9,
        "expect": RunStatus.GREEN,
        "extra_paths": [tmp_path / "other" / "lib"],
    }
    assert logged == [
        "[fake + patched other 2.0] last stage: the 3 new test files of fake (5 tests) once more, with the patched "
        "sources of other 2.0 first on PYTHONPATH, in one pytest run",
        "[fake + patched other 2.0] green 5/2 passed/skipped (0.0s)",
    ]
    # a companion whose patches do not go in on that release: the stage is blocked, nothing runs
    trees[0].blocked = "0001 does not apply to other 2.0 (x.py)"
    blocked = verification.verify_with_companions(ctx, target, results, scratch, runs, trees)
    assert blocked is not None and blocked.blocked == trees[0].blocked and len(calls) == 1
    trees[0].blocked = None
    # a patch that needs a backport to an older base is left out of the stage, which still runs
    declared = _patch("0003-c", Verdict.BACKPORT, test_files=[])
    assert verification.verify_with_companions(ctx, target, [one, two, declared], scratch, runs, trees) is not None
    assert calls[-1][2]["files"] == ["tests/test_a.py", "tests/test_b.py", "tests/test_c.py"]
    single = verification.verify_with_companions(ctx, target, [one], scratch, runs, trees)
    assert single is not None and "the 1 new test file of fake (4 tests)" in logged[-2]


def test_upstream_tests_count_the_declarations_of_the_patches_that_went_in(monkeypatch):
    """verify_all hands upstream_tests.run the declarations of the patches that went in (with --patch, the ones
    not checked went in too); a patch left out (a conflict) or already upstream changes no test."""
    p1, p2, p3 = "0001-a.patch", "0002-b.patch", "0003-c.patch"
    target = SimpleNamespace(
        name="fake",
        package="fakepkg",
        source_dir="src",
        version="1",
        patches=[p1, p2, p3],
        verify_with=[],
        upstream_tests_changed={
            p1: [{"test": "tests/a.py::T::t1", "reason": "r1"}],
            p2: [{"test": "tests/a.py::T::t2", "reason": "r2"}],
            p3: [{"test": "tests/a.py::T::t3", "reason": "r3"}],
        },
    )
    # a base that declares no version (no __init__.py, no PKG-INFO to read)
    repo = SimpleNamespace(out=lambda *args: "top", run=lambda *args, **kwargs: SimpleNamespace(returncode=128))
    monkeypatch.setattr(verification, "prepare_scratch", lambda ctx, target, spec: (repo, "base"))
    went_in = {p1: True, p2: False, p3: True}  # 0002 conflicts

    def verify_target(ctx, target, repo, base, runs, **kwargs):
        results = [_patch(name, Verdict.OK if went_in[name] else Verdict.FAIL) for name in target.patches]
        for res in results:
            res.applies = went_in[res.name]
        results[2].checked = False  # --patch 0001: 0003 went in unchecked
        return results

    calls = []

    def run(ctx, target, repo, commits, text, **kwargs):
        calls.append((commits, text, kwargs))
        return _upstream()

    monkeypatch.setattr(verification, "verify_target", verify_target)
    monkeypatch.setattr(verification.upstream_tests, "run", run)
    spec = SimpleNamespace(
        describe=lambda target: "fake 1", kind="sdist", moved=False, report_fields=lambda target: {}
    )
    runs = Runs(python=Path("/py"), device="cpu", timeout=9)
    printed = []
    found = verification.verify_all(
        SimpleNamespace(out=printed.append),
        [target],
        spec,
        runs,
        spec_text="sdist",
        only={p1},
        upstream=(target, "path:up"),
    )
    assert printed == ["verify: fake on fake 1, torch none, Python None"]
    [(commits, text, kwargs)] = calls
    assert commits == {"base": "base", "series": "top"} and text == "path:up"
    assert kwargs["declared"] == [(p1, "tests/a.py::T::t1", "r1"), (p3, "tests/a.py::T::t3", "r3")]
    assert found.upstream_tests == [_upstream()]


def test_a_patch_declared_to_need_a_backport_to_an_older_release():
    """`[targets.<t>.backports]`: on that release a declared conflict and the patches it blocks are `backport`, not
    failures; a declared patch that goes in is a stale declaration."""
    p1, p2, p3, p4 = "0001-a.patch", "0002-b.patch", "0003-c.patch", "0004-d.patch"
    target = SimpleNamespace(name="fake", package="fakepkg", backports={"0.9": {p1: "0.9 has its own classes"}})

    def results():
        one = _patch(p1, Verdict.FAIL, base_status="conflict", problems=["conflicts with the base"])
        two = _patch(p2, Verdict.BLOCKED, base_status="blocked", blocked_by=[p1], problems=["blocked by 0001"])
        three = _patch(p3, Verdict.FAIL, base_status="conflict", problems=["conflicts"])
        four = _patch(p4, Verdict.BLOCKED, base_status="blocked", blocked_by=[p1, p3], problems=["blocked"])
        return [one, two, three, four]

    found = results()
    verification.apply_backports(target, "0.9", found)
    assert [res.verdict for res in found] == [Verdict.BACKPORT, Verdict.BACKPORT, Verdict.FAIL, Verdict.BLOCKED]
    assert (
        found[0].problems == []
        and found[0].notes[0] == "needs a backport to fakepkg 0.9 (declared: 0.9 has its own classes)"
    )
    assert found[1].problems == [] and found[1].notes[0] == "needs 0001, which needs a backport to 0.9"
    assert Verdict.BACKPORT.passed and not Verification(results=found).ok  # 0003's own conflict still fails the run
    assert Verification(results=found[:2]).ok
    # a declared patch that goes in there after all: the declaration is stale
    stale = [_patch(p1, base_status="clean")]
    verification.apply_backports(target, "0.9", stale)
    assert stale[0].verdict == Verdict.FAIL and "remove the stale declaration" in stale[0].problems[0]
    # one that goes in but whose own tests fail there needs its backport too
    red = _patch(p1, Verdict.FAIL, base_status="clean", problems=["green: failed 1/0"])
    red.green = PytestRun(status=RunStatus.FAILED, exit_code=1)
    verification.apply_backports(target, "0.9", [red])
    assert red.verdict == Verdict.BACKPORT and red.notes[0].startswith("goes in, but its tests fail there: needs")
