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
    return PytestRun(status=RunStatus.GREEN, exit_code=0, passed=3, skipped=1, **fields)


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
        "tools": {"python": "3.11", "pytest": "9", "ruff": "0.14.10", "torch": "2.13.0", "cuda": False},
        "targets": [{"name": "fake"}],
        "patches": [found.results[0].to_json()],
        "companions": [found.companions[0].to_json()],
        "upstream_tests": [found.upstream_tests[0].to_json()],
        "duration_s": 4.5,
    }


def test_no_companion_stage_without_companions_or_with_a_failed_patch():
    other = SimpleNamespace(name="other", patches=["0001-o.patch"], source_dir="src")
    target = SimpleNamespace(name="fake", verify_with=["other"])
    ctx = SimpleNamespace(manifest=SimpleNamespace(target={"other": other}.__getitem__))
    scratch = {"fake": (None, "b"), "other": (None, "b")}
    runs = Runs(python=Path("/py"), device="cpu", timeout=9)
    good, bad = _patch("0001-a"), _patch("0002-b", Verdict.FAIL)
    assert verification.verify_with_companions(ctx, target, [good, bad], scratch, runs) is None
    assert verification.verify_with_companions(ctx, target, [], scratch, runs) is None
    assert verification.verify_with_companions(ctx, target, [good], {"fake": scratch["fake"]}, runs) is None
    lonely = SimpleNamespace(name="fake", verify_with=[])
    assert verification.verify_with_companions(ctx, lonely, [good], scratch, runs) is None
