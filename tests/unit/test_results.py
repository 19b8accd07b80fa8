"""statuses.py and results.py: every status's value and label, and a patch's verdict from its checks."""

import json

import pytest
from seriestool.results import SCHEMA_VERSION, PatchResult, PytestRun, Style, is_test_file
from seriestool.statuses import BaseStatus, RunStatus, Verdict


# status: (JSON value, label, informational, went in)
BASE = {
    BaseStatus.CLEAN: ("clean", "yes", False, True),
    BaseStatus.THREE_WAY: ("3-way", "3-way", False, True),
    BaseStatus.CONFLICT: ("conflict", "CONFLICT", False, False),
    BaseStatus.ALREADY_UPSTREAM: ("already-upstream", "upstream", True, False),
    BaseStatus.FIXED_DIFFERENTLY: ("fixed-differently", "fixed upstream", True, False),
    BaseStatus.BLOCKED: ("blocked", "blocked", False, False),
}


def test_every_base_status_is_listed():
    assert set(BASE) == set(BaseStatus)


@pytest.mark.parametrize("status", list(BaseStatus))
def test_base_status(status):
    value, label, informational, went_in = BASE[status]
    assert (status.value, status.label, status.informational, status.went_in) == BASE[status]
    assert BaseStatus(value) is status and json.dumps(status) == json.dumps(value)


RUN_VALUES = {
    RunStatus.RED: "red",
    RunStatus.GREEN: "green",
    RunStatus.NOT_RED: "not-red",
    RunStatus.FAILED: "failed",
    RunStatus.SKIPPED: "skipped",
    RunStatus.IMPORT_ONLY: "import-only",
    RunStatus.ERROR: "error",
    RunStatus.TIMEOUT: "timeout",
    RunStatus.NO_TESTS: "no-tests",
}


@pytest.mark.parametrize("status", list(RUN_VALUES))
def test_run_status_values_are_the_json_contract(status):
    assert status.value == RUN_VALUES[status] and f"{status}" == RUN_VALUES[status]


# verdict: (JSON value, label, passed)
VERDICTS = {
    Verdict.OK: ("ok", "ok", True),
    Verdict.FAIL: ("fail", "FAIL", False),
    Verdict.NOT_CHECKED: ("not checked", "not checked", True),
    Verdict.UPSTREAM: ("upstream", "upstream", True),
    Verdict.FLAKY: ("flaky", "FLAKY", False),
    Verdict.BLOCKED: ("blocked", "blocked", False),  # not passed; the conflict that blocks it fails the run
    Verdict.BACKPORT: ("backport", "backport", True),  # declared for an older release: reported, not a failure
}


def test_every_verdict_is_listed():
    assert set(VERDICTS) == set(Verdict)


@pytest.mark.parametrize("verdict", list(VERDICTS))
def test_verdict(verdict):
    assert (verdict.value, verdict.label, verdict.passed) == VERDICTS[verdict]


@pytest.mark.parametrize(
    ("path", "is_test"),
    [
        ("tests/test_a.py", True),
        ("test_a.py", True),
        ("tests/a_test.py", True),
        ("tests/test_a.txt", False),
        ("tests/helper.py", False),
        ("tests/test_dir/helper.py", False),
        ("tests/conftest.py", False),
        ("tests/testing.py", False),
    ],
)
def test_is_test_file(path, is_test):
    assert is_test_file(path) is is_test


RED = PytestRun(status=RunStatus.RED, failed=1, total=1)
GREEN = PytestRun(status=RunStatus.GREEN, passed=1, total=1)
CLEAN = Style(clean=True)


def _result(**fields):
    fields = {"applies": True, "red": RED, "green": GREEN, "style": CLEAN, **fields}
    return PatchResult(name="0001-a.patch", target="fake", index=1, **fields)


DECISIONS = {
    "all_good": ({}, Verdict.OK),
    "all_good_3_way": ({"base_status": BaseStatus.THREE_WAY}, Verdict.OK),
    "all_good_clean": ({"base_status": "clean"}, Verdict.OK),
    "not_red": ({"red": PytestRun(status=RunStatus.NOT_RED)}, Verdict.FAIL),
    "red_error": ({"red": PytestRun(status=RunStatus.ERROR)}, Verdict.FAIL),
    "no_red": ({"red": None}, Verdict.FAIL),
    "not_green": ({"green": PytestRun(status=RunStatus.FAILED)}, Verdict.FAIL),
    "no_green": ({"green": None}, Verdict.FAIL),
    "not_clean": ({"style": Style(clean=False)}, Verdict.FAIL),
    "no_style": ({"style": None}, Verdict.FAIL),
    "does_not_apply": ({"applies": False}, Verdict.FAIL),
    "conflict": ({"applies": False, "base_status": BaseStatus.CONFLICT}, Verdict.FAIL),
    "hidden_dependency": ({"hidden_dependency": True}, Verdict.FAIL),
    "hidden_dependency_not_checked": ({"hidden_dependency": True, "checked": False}, Verdict.FAIL),
    "not_checked": ({"checked": False, "red": None, "green": None, "style": None}, Verdict.NOT_CHECKED),
    "not_checked_not_applying": ({"checked": False, "applies": False}, Verdict.FAIL),
    "already_upstream": ({"applies": False, "base_status": BaseStatus.ALREADY_UPSTREAM}, Verdict.UPSTREAM),
    "fixed_differently": ({"applies": False, "base_status": "fixed-differently"}, Verdict.UPSTREAM),
    "blocked": ({"applies": False, "base_status": BaseStatus.BLOCKED, "red": None, "green": None}, Verdict.BLOCKED),
    "blocked_not_checked": ({"applies": False, "base_status": "blocked", "checked": False}, Verdict.BLOCKED),
    # an upstream-tier patch that goes in only on top of a fork-tier one
    "not_in_the_upstream_stack": ({"upstream_stack": False}, Verdict.FAIL),
    "not_in_the_upstream_stack_not_checked": ({"upstream_stack": False, "checked": False}, Verdict.FAIL),
    "in_the_upstream_stack": ({"upstream_stack": True}, Verdict.OK),
    "fork_tier": ({"tier": "fork", "upstream_stack": None}, Verdict.OK),
}


@pytest.mark.parametrize("case", sorted(DECISIONS))
def test_decide(case):
    fields, verdict = DECISIONS[case]
    res = _result(**fields)
    assert res.decide() == verdict and res.verdict == verdict


def test_defaults():
    from dataclasses import asdict

    assert asdict(PytestRun(status=RunStatus.NO_TESTS)) == {
        "status": "no-tests",
        "exit_code": None,
        "passed": 0,
        "failed": 0,
        "errors": 0,
        "skipped": 0,
        "total": 0,
        "failing": [],
        "duration_s": 0.0,
        "log": None,
        "output_tail": "",
        "cached": False,
        "runs": 1,
        "run_statuses": [],
        "flaky": [],
    }
    res = PatchResult(name="n", target="t", index=1)
    assert (res.applies, res.applies_alone, res.checked, res.verdict, res.base_status) == (
        False,
        None,
        True,
        Verdict.FAIL,
        None,
    )
    assert (res.red, res.green, res.style, res.hidden_dependency, res.sha256, res.subject) == (
        None,
        None,
        None,
        False,
        "",
        "",
    )
    assert res.decide() == Verdict.FAIL


def test_the_checks_of_a_result():
    res = _result()
    assert (res.red_without_fix, res.green_with_fix, res.style_clean) == (True, True, True)
    res = _result(red=GREEN, green=RED, style=Style(clean=False))
    assert (res.red_without_fix, res.green_with_fix, res.style_clean) == (False, False, False)


def test_to_json():
    from seriestool.placement import Conflict

    res = _result(
        base_status=BaseStatus.CLEAN,
        applies_alone=False,
        depends_on=["0000-x.patch"],
        test_files=["tests/test_a.py"],
        conflicts=[Conflict("a.py", "content differs", regions=[[1, 2]])],
        sha256="f" * 64,
        subject="core: fix",
    )
    res.decide()
    data = json.loads(json.dumps(res.to_json()))
    assert data == {
        "name": "0001-a.patch",
        "target": "fake",
        "index": 1,
        "sha256": "f" * 64,
        "subject": "core: fix",
        "tier": "upstream",
        "verdict": "ok",
        "ok": True,
        "base_status": "clean",
        "applies": True,
        "applies_alone": False,
        "depends_on": ["0000-x.patch"],
        "blocked_by": [],
        "upstream_stack": None,
        "red_without_fix": True,
        "green_with_fix": True,
        "style_clean": True,
        "test_files": ["tests/test_a.py"],
        "conflict_files": [],
        "conflicts": [{"file": "a.py", "reason": "content differs", "hunks": [], "regions": [[1, 2]]}],
        "skipped_before": [],
        "red": json.loads(json.dumps(RED.__dict__)),
        "green": json.loads(json.dumps(GREEN.__dict__)),
        "style": {
            "clean": True,
            "files": [],
            "check_exit": None,
            "check_output": "",
            "format_exit": None,
            "format_output": "",
        },
        "hidden_dependency": False,
        "cut": None,
        "problems": [],
        "notes": [],
    }
    assert _result(verdict=Verdict.FAIL, red=None, green=None, style=None).to_json()["ok"] is False
    empty = _result(red=None, green=None, style=None).to_json()
    assert (empty["red"], empty["green"], empty["style"]) == (None, None, None)
    assert SCHEMA_VERSION == 5  # 5: each patch's `tier` and `upstream_stack`
