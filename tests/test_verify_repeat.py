"""`verify --repeat N`: each green stage (and the companion stage) run N times afresh, a test that fails in some
runs and passes in others reported as flaky, and N validated."""

import json
import shutil
import sys
import xml.etree.ElementTree as ET

import pytest
from seriesfixtures import SERIES, VERSION, counted, manifest_text, one_error_line, problem_items, table_rows


COUNTED_TEST = "tests.regress.test_counted::test_counted"


def _verify(fake, python, *args):
    report, junit, summary = fake.root / "report.json", fake.root / "report.xml", fake.root / "summary.md"
    proc = fake.run(
        "verify", "--python", python, "--json", str(report), "--junit", str(junit), "--summary", str(summary), *args
    )
    data = json.loads(report.read_text(encoding="utf-8")) if report.exists() else None
    return proc, data, ET.parse(junit).getroot() if junit.exists() else None, summary


def _runs(counter):
    """How many times the counted test ran (the red run included)."""
    return len(counter.read_text(encoding="utf-8")) if counter.exists() else 0


def test_a_test_failing_in_some_runs_is_flaky_and_fails_verify(fake, test_python):
    counter = fake.root / "counter"
    # run 1 is red (without the fix), runs 2-4 the green stage: it fails in the second of them
    fake.build_series(counted(counter, fail_on=(3,)))
    proc, data, junit, summary = _verify(fake, test_python, "--repeat", "3")

    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert _runs(counter) == 4
    (patch,) = data["patches"]
    assert data["repeat"] == 3 and data["ok"] is False
    assert (patch["red_without_fix"], patch["style_clean"], patch["verdict"]) == (True, True, "flaky")
    green = patch["green"]
    assert green["status"] == "flaky" and green["runs"] == 3 and green["cached"] is False
    assert green["run_statuses"] == ["green", "failed", "green"]
    assert green["flaky"] == [{"test": COUNTED_TEST, "failed": 1}]
    assert green["log"].endswith(".green.run2.log")  # the run that failed

    (row,) = table_rows(proc.stdout)
    assert (row["green pass/skip"], row["verdict"]) == ("FLAKY: 2/3 runs", "FLAKY")
    line = next(line for line in problem_items(proc.stdout) if "flaky" in line)
    assert line.startswith(
        f"  fake 0001: with the patch the tests are flaky ({COUNTED_TEST} failed in 1 of 3 runs; log "
    )
    assert "verify: FAILED" in proc.stdout
    assert "series: [fake 1/1] green run 2/3: failed (" in proc.stderr

    (case,) = [c for c in junit.iter("testcase") if c.get("name") == "green_with_fix"]
    failure = case.find("failure")
    assert failure.get("type") == "flaky" and failure.get("message") == "green_with_fix flaky: green in 2 of 3 runs"
    assert failure.text == f"{COUNTED_TEST} failed in 1 of 3 runs"
    text = summary.read_text(encoding="utf-8")
    assert "| **FLAKY: 2/3 runs** |" in text and "| **FLAKY** |" in text
    assert "each green stage run 3 times" in text


def test_a_test_failing_in_every_run_is_failed_not_flaky(fake, test_python):
    counter = fake.root / "counter"
    fake.build_series(counted(counter, fail_on=(2, 3, 4)))
    proc, data, _, _ = _verify(fake, test_python, "--repeat", "3")
    assert proc.returncode == 1
    green = data["patches"][0]["green"]
    assert (green["status"], green["flaky"], data["patches"][0]["verdict"]) == ("failed", [], "fail")
    assert green["run_statuses"] == ["failed"] * 3
    assert table_rows(proc.stdout)[0]["green pass/skip"] == "NO: failed 1/0 x3"


def test_a_known_pass_does_not_count_as_repeated_runs(fake, test_python):
    counter = fake.root / "counter"
    fake.build_series(counted(counter))
    fake.ok("verify", "--python", test_python)
    assert _runs(counter) == 2  # red and green, both now known

    proc, data, _, _ = _verify(fake, test_python, "--repeat", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _runs(counter) == 5  # red reused, green run 3 times afresh
    green = data["patches"][0]["green"]
    assert (green["status"], green["runs"], green["cached"], green["flaky"]) == ("green", 3, False, [])
    assert table_rows(proc.stdout)[0]["green pass/skip"] == "yes 2/0 x3"
    assert "1 of 4 pytest runs: outcome of an identical earlier run" in proc.stdout

    # every run passed: a later single run reuses that outcome
    proc, data, _, _ = _verify(fake, test_python)
    assert proc.returncode == 0 and _runs(counter) == 5
    assert data["patches"][0]["green"]["cached"] is True


def test_repeat_1_is_the_default(fake, test_python):
    counter = fake.root / "counter"
    fake.build_series(counted(counter))
    outputs = []
    for args in ((), ("--repeat", "1")):
        proc, data, _, _ = _verify(fake, test_python, "--no-cache", *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        green = data["patches"][0]["green"]
        assert (data["repeat"], green["runs"], green["run_statuses"], green["flaky"]) == (1, 1, [], [])
        outputs.append((table_rows(proc.stdout), green["status"], data["patches"][0]["verdict"]))
    assert _runs(counter) == 4  # red and green once each time
    assert outputs[0] == outputs[1] == ([outputs[0][0][0]], "green", "ok")
    assert outputs[0][0][0]["green pass/skip"] == "yes 2/0"


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5", ""])
def test_a_bad_repeat_is_one_error_line(fake, value):
    line = one_error_line(fake.run("verify", "--repeat", value))
    assert line.startswith("series: error: argument --repeat: must be a whole number of runs, at least 1")
    assert not fake.work.exists()


def test_the_companion_stage_is_repeated_too(fake, test_python):
    # `other` (the same package) holds one patch; fake's tests run once more with its patched sources
    (version,) = fake.build_series(VERSION)
    (fake.patches_dir / "other").mkdir()
    shutil.move(fake.patches_dir / "fake" / version, fake.patches_dir / "other" / version)
    other = manifest_text(fake.sha, [version], name="other").split("\n", 2)[2]
    counter = fake.root / "counter"
    # run 1 red, runs 2-3 green, runs 4-5 the companion stage: it fails in the second of those
    # the checkout still holds VERSION, whose patch now belongs to `other`: start the series over
    fake.build_series(counted(counter, fail_on=(5,)), discard=True, extra='verify_with = ["other"]\n\n' + other)

    proc, data, _, summary = _verify(fake, test_python, "--repeat", "2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert _runs(counter) == 5
    assert [p["verdict"] for p in data["patches"]] == ["ok", "ok"]
    (companion,) = data["companions"]
    assert (companion["green"], companion["status"]) == (False, "flaky")
    assert companion["run"]["flaky"] == [{"test": COUNTED_TEST, "failed": 1}]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("fake + patched other 1.0: "))
    assert line.startswith(f"fake + patched other 1.0: FLAKY ({COUNTED_TEST} failed in 1 of 2 runs; log ")
    assert line.endswith("(1 of 2 runs green)")
    assert "series: [fake + patched other 1.0] run 2/2: failed (" in proc.stderr
    assert "- `fake + patched other 1.0`: all the tests: flaky (green in 1 of 2 runs)" in summary.read_text("utf-8")


def test_how_runs_combine():
    sys.path.insert(0, str(SERIES.parent))
    from seriestool.results import PytestRun
    from seriestool.runners import combine_runs

    def run(status, log, **counts):
        return PytestRun(status=status, duration_s=1.5, log=log, **counts)

    green = run("green", "1.log", passed=2)
    both_pass = {"t::a": "passed", "t::b": "passed"}

    # a timeout in one of three runs (no JUnit, no test to blame) while the others pass: flaky
    combined = combine_runs([green, run("timeout", "2.log"), green], [both_pass, {}, both_pass])
    assert (combined.status, combined.flaky, combined.log, combined.duration_s) == ("flaky", [], "2.log", 4.5)
    assert combined.run_statuses == ["green", "timeout", "green"]

    # a test that fails every time beside one that fails once: failed, the flaky one named all the same
    failed = run("failed", "3.log", failed=2, failing=["t::a", "t::b"])
    outcomes = [{"t::a": "failed", "t::b": "errors"}, {"t::a": "failed", "t::b": "passed"}]
    combined = combine_runs([failed, failed], outcomes)
    assert (combined.status, combined.flaky) == ("failed", [{"test": "t::b", "failed": 1}])

    # the same error every time (a collection error): that status, not a flake
    error = run("error", "4.log", errors=1, failing=["t"])
    combined = combine_runs([error, error], [{"t": "errors"}, {"t": "errors"}])
    assert (combined.status, combined.flaky, combined.runs) == ("error", [], 2)

    # all green: green, the first run's counts and log
    combined = combine_runs([green, run("green", "5.log", passed=2)], [both_pass, both_pass])
    assert (combined.status, combined.passed, combined.log, combined.runs) == ("green", 2, "1.log", 2)
