"""reports.py: the last report per target, and which earlier results a `--patch` run keeps."""

import copy
import json
from types import SimpleNamespace

import pytest
from seriestool import reports
from seriestool.digests import sha256_file
from seriestool.statuses import Verdict


def _patch(name, verdict, target="fake", sha="s", **extra):
    return {"name": name, "target": target, "verdict": verdict, "sha256": f"{sha}-{name}", **extra}


def _report(patches, *, commit="c1", date="2026-01-01T00:00:00Z", targets=("fake",), **extra):
    report = {
        "schema_version": 2,
        "ok": True,
        "date": date,
        "device": "cpu",
        "python": "/venv/bin/python",
        "tools": {"torch": "2.13.0"},
        "targets": [{"name": name, "base": {"spec": "sdist", "commit": commit}} for name in targets],
        "patches": patches,
        "upstream_tests": [],
    }
    report.update(extra)
    return report


FULL = [_patch("0001-a.patch", Verdict.OK), _patch("0002-b.patch", Verdict.FAIL), _patch("0003-c.patch", Verdict.OK)]
ONLY_2 = [
    _patch("0001-a.patch", Verdict.NOT_CHECKED),
    _patch("0002-b.patch", Verdict.OK),
    _patch("0003-c.patch", Verdict.NOT_CHECKED),
]


def _save(tmp_path, report):
    reports.save_last(tmp_path, copy.deepcopy(report))
    return reports.load_last(tmp_path, "fake")


def test_save_and_load(tmp_path):
    saved = _save(tmp_path, _report(FULL))
    assert reports.last_path(tmp_path, "fake") == tmp_path / "reports" / "verify-fake.json"
    assert saved == dict(_report(FULL), ok=False)
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["bases", "verify-fake.json"]
    assert reports.load_base(tmp_path, "fake", "c1") == saved
    assert reports.load_last(tmp_path, "other") is None
    reports.last_path(tmp_path, "broken").write_text("{", encoding="utf-8")
    assert reports.load_last(tmp_path, "broken") is None


def test_one_file_per_target_with_its_own_results_and_verdict(tmp_path):
    patches = [_patch("0001-a.patch", Verdict.OK), _patch("0001-x.patch", Verdict.FAIL, target="other")]
    upstream = [{"target": "fake", "ok": True}, {"target": "other", "ok": True}]
    reports.save_last(tmp_path, _report(patches, targets=("fake", "other"), upstream_tests=upstream))
    fake, other = reports.load_last(tmp_path, "fake"), reports.load_last(tmp_path, "other")
    assert [t["name"] for t in fake["targets"]] == ["fake"] and [t["name"] for t in other["targets"]] == ["other"]
    assert [p["name"] for p in fake["patches"]] == ["0001-a.patch"] and fake["ok"] is True
    assert [p["name"] for p in other["patches"]] == ["0001-x.patch"] and other["ok"] is False
    assert fake["upstream_tests"] == [upstream[0]] and other["upstream_tests"] == [upstream[1]]


def test_a_failed_upstream_tests_run_fails_the_report(tmp_path):
    saved = _save(tmp_path, _report(FULL[:1], upstream_tests=[{"target": "fake", "ok": False}]))
    assert saved["ok"] is False


def test_upstream_and_not_checked_verdicts_pass(tmp_path):
    saved = _save(tmp_path, _report([_patch("0001-a.patch", Verdict.UPSTREAM), _patch("0002-b.patch", Verdict.OK)]))
    assert saved["ok"] is True
    assert _save(tmp_path / "x", _report([_patch("0001-a.patch", Verdict.NOT_CHECKED)]))["ok"] is True


def test_a_patch_run_keeps_the_checked_results_of_the_others(tmp_path):
    _save(tmp_path, _report(FULL, date="2026-01-01T00:00:00Z"))
    saved = _save(tmp_path, _report(ONLY_2, date="2026-01-02T00:00:00Z"))
    assert [p["verdict"] for p in saved["patches"]] == [Verdict.OK, Verdict.OK, Verdict.OK]
    assert saved["patches"][0] == dict(FULL[0], checked_at="2026-01-01T00:00:00Z")
    assert saved["patches"][1] == ONLY_2[1]
    assert saved["ok"] is True and saved["date"] == "2026-01-02T00:00:00Z"
    # A result kept twice keeps the date it was checked.
    again = _save(tmp_path, _report(ONLY_2, date="2026-01-03T00:00:00Z"))
    assert again["patches"][0]["checked_at"] == "2026-01-01T00:00:00Z"


def test_a_run_that_checked_none_keeps_all_earlier_results(tmp_path):
    _save(tmp_path, _report(FULL))
    none = [_patch(p["name"], Verdict.NOT_CHECKED) for p in FULL]
    saved = _save(tmp_path, _report(none))
    assert [p["verdict"] for p in saved["patches"]] == [p["verdict"] for p in FULL] and saved["ok"] is False


def test_an_earlier_result_that_was_not_checked_either_is_not_taken(tmp_path):
    _save(tmp_path, _report(ONLY_2))
    saved = _save(tmp_path, _report(ONLY_2))
    assert saved["patches"] == ONLY_2


def test_a_full_run_takes_nothing_from_the_earlier_report(tmp_path):
    _save(tmp_path, _report(FULL))
    new = [_patch("0001-a.patch", Verdict.FAIL), _patch("0002-b.patch", Verdict.OK)]
    assert _save(tmp_path, _report(new))["patches"] == new


OTHER_SETUP = {
    "base": {"commit": "c2"},  # results saved for one base are not merged into a report for another
    "device": {"device": "cuda"},
    "python": {"python": "/other/bin/python"},
    "tools": {"tools": {"torch": "2.14.0"}},
    "schema": {"schema_version": 3},
}


@pytest.mark.parametrize("change", sorted(OTHER_SETUP))
def test_results_of_another_setup_are_not_kept(tmp_path, change):
    _save(tmp_path, _report(FULL))
    saved = _save(tmp_path, _report(ONLY_2, **OTHER_SETUP[change]))
    assert saved["patches"] == ONLY_2


def test_results_for_an_unknown_base_are_not_kept(tmp_path):
    for old in (_report(FULL, targets=()), _report(FULL, commit=None)):
        reports.last_path(tmp_path, "fake").parent.mkdir(parents=True, exist_ok=True)
        reports.last_path(tmp_path, "fake").write_text(json.dumps(old), encoding="utf-8")
        assert _save(tmp_path, _report(ONLY_2, commit=None))["patches"] == ONLY_2


def test_a_result_is_kept_only_while_it_and_the_patches_before_it_are_the_same_files(tmp_path):
    _save(tmp_path, _report(FULL))
    changed_first = [_patch("0001-a.patch", Verdict.NOT_CHECKED, sha="new"), *ONLY_2[1:]]
    assert _save(tmp_path, _report(changed_first))["patches"] == changed_first

    _save(tmp_path, _report(FULL))
    changed_second = [ONLY_2[0], _patch("0002-b.patch", Verdict.OK, sha="new"), ONLY_2[2]]
    saved = _save(tmp_path, _report(changed_second))
    assert [p["verdict"] for p in saved["patches"]] == [Verdict.OK, Verdict.OK, Verdict.NOT_CHECKED]

    _save(tmp_path, _report(FULL))
    inserted = [ONLY_2[0], _patch("0002-new.patch", Verdict.OK), *ONLY_2[1:]]
    saved = _save(tmp_path, _report(inserted))
    assert [p["verdict"] for p in saved["patches"]] == [Verdict.OK] * 3 + [Verdict.NOT_CHECKED]


def _judged_setup(tmp_path):
    """Three patch files, and a saved report on base c1 that judged them (the second had no base status)."""
    folder = tmp_path / "patches"
    folder.mkdir()
    names = ["0001-a.patch", "0002-b.patch", "0003-c.patch"]
    for name in names:
        (folder / name).write_text(f"patch {name}\n", encoding="utf-8")
    target = SimpleNamespace(name="fake", patch_path=lambda name: folder / name)
    sha = {name: sha256_file(folder / name) for name in names}
    patches = [
        dict(_patch(names[0], Verdict.OK, base_status="clean", problems=["p"]), sha256=sha[names[0]]),
        dict(_patch(names[1], Verdict.OK), sha256=sha[names[1]]),
        dict(
            _patch(names[2], Verdict.UPSTREAM, base_status="fixed-differently", checked_at="2025-12-31T00:00:00Z"),
            sha256=sha[names[2]],
        ),
    ]
    reports.save_last(tmp_path, _report(patches))
    return target, folder, names


def test_what_the_last_verify_judged_on_a_base(tmp_path):
    target, folder, names = _judged_setup(tmp_path)
    found = reports.judged(tmp_path, target, "c1")
    assert found == {
        names[0]: reports.Judgement("clean", Verdict.OK, "2026-01-01T00:00:00Z", ["p"]),
        names[2]: reports.Judgement("fixed-differently", Verdict.UPSTREAM, "2025-12-31T00:00:00Z", []),
    }
    assert reports.judged(tmp_path, target, "c2") == {}  # another base
    assert reports.judged(tmp_path, SimpleNamespace(name="other", patch_path=target.patch_path), "c1") == {}
    # A changed patch file: it and every later one are no longer what was judged.
    (folder / names[1]).write_text("changed\n", encoding="utf-8")
    assert reports.judged(tmp_path, target, "c1") == {names[0]: found[names[0]]}
    (folder / names[0]).unlink()
    assert reports.judged(tmp_path, target, "c1") == {}


def test_a_report_without_targets_or_date_judges(tmp_path):
    target, _, names = _judged_setup(tmp_path)
    report = reports.load_last(tmp_path, "fake")
    path = reports.base_path(tmp_path, "fake", "c1")
    path.write_text(json.dumps(dict(report, targets=[])), encoding="utf-8")
    assert reports.judged(tmp_path, target, "c1") == {}
    del report["date"]
    path.write_text(json.dumps(report), encoding="utf-8")
    assert reports.judged(tmp_path, target, "c1")[names[0]].date == ""


def test_a_verify_on_the_sdist_keeps_what_the_one_on_a_fork_judged(tmp_path):
    # before: one report per target, so the sdist's verify erased the fork's and `branches`/`checkout` on the fork
    # no longer knew that 0003 was fixed upstream differently there; after: one report per target and base.
    target, _, names = _judged_setup(tmp_path)  # the fork's verify, on base c1
    sdist = [dict(_patch(name, Verdict.OK, base_status="clean")) for name in names]
    reports.save_last(tmp_path, _report(sdist, commit="s1", date="2026-01-03T00:00:00Z"))
    assert reports.load_last(tmp_path, "fake")["targets"][0]["base"]["commit"] == "s1"  # `pr` reads the last one
    assert reports.judged(tmp_path, target, "c1")[names[2]].base_status == "fixed-differently"
    assert reports.load_base(tmp_path, "fake", "s1")["date"] == "2026-01-03T00:00:00Z"
    assert reports.base_path(tmp_path, "fake", "c1").is_file() and reports.base_path(tmp_path, "fake", "s1").is_file()


def test_a_report_of_before_the_per_base_reports_still_judges_its_base(tmp_path):
    target, _, names = _judged_setup(tmp_path)
    reports.base_path(tmp_path, "fake", "c1").unlink()  # a work folder from before: only verify-fake.json
    assert names[2] in reports.judged(tmp_path, target, "c1")
    assert reports.judged(tmp_path, target, "s1") == {} and reports.load_base(tmp_path, "fake", "s1") is None


def test_a_patch_run_on_one_base_keeps_the_results_of_that_base_after_a_run_on_another(tmp_path):
    _save(tmp_path, _report(FULL, commit="c1"))
    _save(tmp_path, _report(FULL[:1], commit="s1"))
    saved = _save(tmp_path, _report(ONLY_2, commit="c1", date="2026-01-02T00:00:00Z"))
    assert [p["verdict"] for p in saved["patches"]] == [Verdict.OK, Verdict.OK, Verdict.OK]


def test_what_failed_on_the_release_without_each_patch(tmp_path):
    """The reference a conflict on a moved base is compared with: the red tests of the last verify on the pinned
    sdist of this version, for the patch files it judged."""
    target, folder, names = _judged_setup(tmp_path)
    target.version = "1.0"
    assert reports.on_release(tmp_path, target) == {}  # the report has no version: not this pin's
    report = reports.load_last(tmp_path, "fake")
    report["targets"][0]["version"] = "1.0"
    report["patches"][0]["red"] = {"status": "red", "failing": ["t::a", "t::b"]}
    report["patches"][1]["red"] = {"status": "not-red", "failing": []}
    reports.save_last(tmp_path, report)
    assert reports.on_release(tmp_path, target) == {names[0]: {"t::a", "t::b"}}
    # a verify on a fork does not count, nor one of another version
    fork = dict(report, targets=[dict(report["targets"][0], base={"spec": "path:/fork", "commit": "c2"})])
    reports.save_last(tmp_path, fork)
    assert reports.on_release(tmp_path, target) == {names[0]: {"t::a", "t::b"}}
    target.version = "1.1"
    assert reports.on_release(tmp_path, target) == {}
    target.version = "1.0"
    (folder / names[0]).write_text("changed\n", encoding="utf-8")
    assert reports.on_release(tmp_path, target) == {}


def test_the_verify_of_a_base_with_the_same_files(tmp_path):
    """`pr` for a branch made on a fork's commit of the release's files quotes the verify on the pinned sdist,
    whose commit differs but whose tree is the same; never the verify of another base."""
    target, _, names = _judged_setup(tmp_path)  # base c1
    report = reports.load_last(tmp_path, "fake")
    report["targets"][0]["base"]["tree"] = "t1"
    reports.save_last(tmp_path, report)
    found, judged = reports.judged_on(tmp_path, target, "c1", None)
    assert found["targets"][0]["base"]["commit"] == "c1" and names[0] in judged
    found, judged = reports.judged_on(tmp_path, target, "fork-commit", "t1")
    assert found["targets"][0]["base"]["commit"] == "c1" and names[0] in judged
    assert reports.judged_on(tmp_path, target, "fork-commit", "t2") == (None, {})
    assert reports.judged_on(tmp_path, target, "fork-commit", None) == (None, {})


def test_the_record_of_the_branches(tmp_path):
    assert reports.load_branches(tmp_path, "fake") is None
    reports.save_branches(tmp_path, "fake", {"base": "c1", "branches": {"0001-a.patch": {"branch": "b"}}})
    assert reports.load_branches(tmp_path, "fake")["base"] == "c1"
    assert reports.branches_path(tmp_path, "fake") == tmp_path / "reports" / "branches-fake.json"


def test_upstream_and_blocked_verdicts_in_a_saved_report(tmp_path):
    # A blocked patch is not passed; its conflict (a failure) is in the same report anyway.
    blocked = _patch("0002-b.patch", Verdict.BLOCKED, base_status="blocked", blocked_by=["0001-a.patch"])
    saved = _save(tmp_path, _report([_patch("0001-a.patch", Verdict.FAIL), blocked]))
    assert saved["ok"] is False and saved["patches"][1]["blocked_by"] == ["0001-a.patch"]


def test_what_the_last_verify_found_about_a_conflict_and_a_blocked_patch(tmp_path):
    target, folder, names = _judged_setup(tmp_path)
    report = reports.load_last(tmp_path, "fake")
    report["patches"][0].update(
        base_status="conflict", verdict=Verdict.FAIL, red={"status": "red"}, test_files=["tests/test_a.py"]
    )
    report["patches"][1].update(base_status="blocked", verdict=Verdict.BLOCKED, blocked_by=[names[0]])
    reports.save_last(tmp_path / "w", report)
    found = reports.judged(tmp_path / "w", target, "c1")
    assert (found[names[0]].red, found[names[0]].test_files) == ("red", ["tests/test_a.py"])
    assert (found[names[1]].base_status, found[names[1]].blocked_by, found[names[1]].red) == (
        "blocked",
        [names[0]],
        None,
    )


DATE = "2026-01-01T00:00:00Z"
FOUND = f"as the verify of {DATE} on this base found"


@pytest.mark.parametrize(
    "status, red, test_files, advice",
    [
        ("conflict", "red", ["t.py"], f"resolve it (its tests still fail on this base without it, {FOUND})"),
        (
            "conflict",
            "error",
            ["t.py"],
            f"resolve it, or read upstream's code (its tests are error on this base without it, {FOUND}: they "
            "cannot tell whether upstream fixed it)",
        ),
        (
            "conflict",
            None,
            [],
            f"resolve it, or read upstream's code (it adds no tests, so the verify of {DATE} could not tell)",
        ),
        ("conflict", None, ["t.py"], ""),  # not tested (--patch): a verify is still the next step
        ("clean", "red", ["t.py"], ""),  # the verify saw it go in: it did not judge a conflict
        (None, None, [], ""),  # no verify on this base
    ],
    ids=["red", "error", "no-tests", "not-tested", "went-in", "no-verify"],
)
def test_conflict_advice(status, red, test_files, advice):
    judgement = None if status is None else reports.Judgement(status, Verdict.FAIL, DATE, [], red, test_files)
    assert reports.conflict_advice(judgement) == advice


def test_conflict_hint():
    red = reports.Judgement("conflict", Verdict.FAIL, DATE, [], "red", ["t.py"])
    judged = {"0001-a.patch": red}
    verify, then = "verify --target fake --base path:/r", "apply then leaves it out"
    unjudged = "if upstream fixed it in another way, `verify --target fake --base path:/r` finds out, and " + then
    assert reports.conflict_hint({}, ["0002-b.patch"], verify, then) == unjudged
    told = f"0001 conflicts: resolve it (its tests still fail on this base without it, {FOUND})"
    assert reports.conflict_hint(judged, ["0001-a.patch"], verify, then) == told
    assert reports.conflict_hint(judged, ["0001-a.patch", "0003-c.patch"], verify, then) == (
        f"{told}; if upstream fixed 0003 in another way, `{verify}` finds out, and {then}"
    )
