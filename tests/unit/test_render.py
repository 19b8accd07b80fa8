"""render.py: the cells of the console table and the summary, the table's width, JUnit XML and markdown."""

import xml.etree.ElementTree as ET

import pytest
from seriestool import render
from seriestool.errors import SeriesError
from seriestool.results import (
    DeclaredChange,
    PatchResult,
    PytestRun,
    Regression,
    Style,
    UpstreamRun,
    UpstreamTestsResult,
)
from seriestool.statuses import BaseStatus, RunStatus, Verdict


def run(status, **counts):
    return {"status": status, "passed": 0, "failed": 0, "skipped": 0, "total": 0, **counts}


@pytest.mark.parametrize(
    ("given", "cell"),
    [
        (None, "-"),
        (run(RunStatus.RED, failed=2, total=3), "yes 2/3"),
        (run(RunStatus.NOT_RED, passed=3, total=3), "NO: not-red 0/3"),
        (run(RunStatus.IMPORT_ONLY, failed=1, total=1), "NO: import-only 1/1"),
        (run(RunStatus.ERROR), "NO: error"),
    ],
)
def test_red_cell(given, cell):
    assert render.red_cell(given) == cell


@pytest.mark.parametrize(
    ("given", "cell"),
    [
        (None, "-"),
        (run(RunStatus.GREEN, passed=3, skipped=1), "yes 3/1"),
        (run(RunStatus.FAILED, passed=2, skipped=0), "NO: failed 2/0"),
        (run(RunStatus.ERROR), "NO: error 0/0"),
    ],
)
def test_green_cell(given, cell):
    assert render.green_cell(given) == cell


def test_the_other_cells():
    assert render.style_cell({"style": None}) == "-" and render.style_cell({}) == "-"
    assert render.style_cell({"style": {}, "style_clean": True}) == "clean"
    assert render.style_cell({"style": {}, "style_clean": False}) == "NOT CLEAN"
    assert render.applies_cell({"base_status": None}) == "-"
    assert [render.applies_cell({"base_status": s}) for s in BaseStatus] == [s.label for s in BaseStatus]
    assert render.alone_cell({"applies_alone": None}) == "-"
    assert render.alone_cell({"applies_alone": True}) == "yes"
    assert render.alone_cell({"applies_alone": False}) == "no"
    assert render.alone_cell({"applies_alone": False, "depends_on": ["0002-a.patch"]}) == "needs 0002"
    assert render.short_name({"target": "fake", "name": "0003-x.patch"}) == "fake 0003"


@pytest.mark.parametrize(
    ("names", "text"),
    [
        (["0002-a", "0004-b"], "0002,0004"),
        (["0002-a", "0003-b"], "0002,0003"),
        (["0005-a", "0006-b", "0007-c", "0008-d"], "0005-0008"),
        (["0005-a", "0006-b", "0008-d"], "0005,0006,0008"),
        (["0005-a", "0006-b", "0007-c"], "0005-0007"),
        (["abcd-a", "0006-b", "0007-d"], "abcd,0006,0007"),
    ],
)
def test_numbers(names, text):
    assert render._numbers(names) == text


def test_fit():
    assert render._fit("abcdef", 6) == "abcdef"
    assert render._fit("abc defgh", 7) == "abc..."
    assert render._fit("abcdef", 2) == "..."


def _patch(number, verdict=Verdict.OK, **fields):
    patch = {
        "name": f"{number}-a-patch.patch",
        "target": "fake",
        "subject": f"core: patch {number}",
        "tier": "upstream",
        "base_status": BaseStatus.CLEAN,
        "applies_alone": True,
        "depends_on": [],
        "red": run(RunStatus.RED, failed=1, total=1),
        "green": run(RunStatus.GREEN, passed=1),
        "style": {},
        "style_clean": True,
        "verdict": verdict,
        "problems": [],
        "notes": [],
    }
    patch.update(fields)
    return patch


def test_check_cells():
    assert render.check_cells(_patch("0001")) == ("yes", "yes", "yes 1/1", "yes 1/0", "clean", "ok")
    assert render.check_cells(_patch("0001", Verdict.FAIL, red=None, style=None))[2:] == ("-", "yes 1/0", "-", "FAIL")
    assert [render.tier_cell(_patch("0001", tier=tier)) for tier in ("upstream", "fork")] == ["upstream", "fork"]
    assert render.tier_cell({}) == "-"  # a report that does not say
    assert [render.tier_mark(_patch("0001", tier=tier)) for tier in ("upstream", "fork")] == ["", " (fork)"]


def test_table():
    patches = [_patch("0001"), _patch("0002", Verdict.FAIL, subject="", base_status=BaseStatus.CONFLICT)]
    lines = render.table(patches).splitlines()
    assert lines[0].split() == [
        "patch",
        "applies",
        "alone",
        "red",
        "fail/all",
        "green",
        "pass/skip",
        "style",
        "verdict",
    ]
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert lines[2].startswith("fake 0001 core: patch 0001  yes ")
    assert lines[3].startswith("fake 0002 a-patch  ") and "CONFLICT" in lines[3] and lines[3].endswith("FAIL")
    columns = [line.find("yes 1/1") for line in lines[2:]]
    assert columns[0] == columns[1] == lines[0].index("red")
    assert all(line == line.rstrip() for line in lines)


def test_a_long_subject_is_cut_to_the_width():
    long = _patch("0001", subject="core: " + "word " * 40)
    lines = render.table([long]).splitlines()
    assert [len(line) for line in lines] == [120, 120, 115]  # "ok" is 5 columns narrower than "verdict"
    assert lines[2].startswith("fake 0001 core: word word") and "wor...  yes  " in lines[2]
    assert max(len(line) for line in render.table([long], width=90).splitlines()) == 90
    # the patch column never shrinks below 20 columns, even when that makes the table wider
    narrow = render.table([long], width=40).splitlines()
    assert narrow[0].index("applies") == 22 and narrow[2].startswith("fake 0001 core: w...  yes")


def test_problem_lines():
    patches = [_patch("0001", problems=["p1", "p2"], notes=["n1"]), _patch("0002"), _patch("0003", notes=["n3"])]
    assert render.problem_lines(patches) == [
        "  fake 0001: p1",
        "  fake 0001: p2",
        "  fake 0001: note: n1",
        "  fake 0003: note: n3",
    ]


def _junit(tmp_path, results, duration=1.5):
    path = tmp_path / "junit.xml"
    render.write_junit(path, results, duration)
    suite = ET.parse(path).getroot().find("testsuite")
    cases = {}
    for case in suite.iter("testcase"):
        outcome = next((child for child in case if child.tag != "properties"), None)
        outcome = None if outcome is None or outcome.tag == "system-out" else (outcome.tag, outcome.get("message"))
        cases[case.get("name")] = outcome
    return suite, cases


def _res(**fields):
    res = PatchResult(name="0001-a.patch", target="fake", index=1)
    defaults = {
        "applies": True,
        "applies_alone": True,
        "base_status": BaseStatus.CLEAN,
        "red": PytestRun(status=RunStatus.RED),
        "green": PytestRun(status=RunStatus.GREEN),
        "style": Style(clean=True),
    }
    for key, value in {**defaults, **fields}.items():
        setattr(res, key, value)
    res.decide()
    return res


def test_junit_of_a_good_patch(tmp_path):
    suite, cases = _junit(tmp_path, [_res()])
    assert {key: suite.get(key) for key in ("name", "tests", "failures", "skipped", "errors", "time")} == {
        "name": "series-verify",
        "tests": "5",
        "failures": "0",
        "skipped": "0",
        "errors": "0",
        "time": "1.50",
    }
    assert cases == dict.fromkeys(("applies", "applies_alone", "red_without_fix", "green_with_fix", "style_clean"))
    assert {case.get("classname") for case in suite.iter("testcase")} == {"fake.0001-a.patch"}


def test_junit_of_failed_checks(tmp_path):
    style = Style(clean=False, check_output="E1", format_output="F1")
    res = _res(red=PytestRun(status=RunStatus.NOT_RED), style=style, applies_alone=False)
    suite, cases = _junit(tmp_path, [res])
    assert cases == {
        "applies": None,
        "applies_alone": ("skipped", "does not apply alone on the bare base"),
        "red_without_fix": ("failure", "red_without_fix failed"),
        "green_with_fix": None,
        "style_clean": ("failure", "style_clean failed"),
    }
    assert (suite.get("failures"), suite.get("skipped")) == ("2", "1")
    text = {case.get("name"): case.findtext("failure") for case in suite.iter("testcase")}
    assert text["red_without_fix"] == "not-red" and text["style_clean"] == "E1\nF1"


def test_junit_of_a_patch_that_is_not_green(tmp_path):
    _, cases = _junit(tmp_path, [_res(green=PytestRun(status=RunStatus.FAILED))])
    assert cases["green_with_fix"] == ("failure", "green_with_fix failed")
    assert cases["red_without_fix"] is None


def test_junit_is_indented(tmp_path):
    _junit(tmp_path, [_res()])
    lines = (tmp_path / "junit.xml").read_text(encoding="utf-8").splitlines()
    assert lines[:7] == [
        "<testsuites>",
        '  <testsuite name="series-verify" time="1.50" tests="5" failures="0" skipped="0" errors="0">',
        '    <testcase classname="fake.0001-a.patch" name="applies">',
        "      <properties>",
        '        <property name="tier" value="upstream" />',
        "      </properties>",
        "    </testcase>",
    ]


def test_junit_of_a_hidden_dependency(tmp_path):
    res = _res(applies_alone=False, hidden_dependency=True, problems=["needs 0000"])
    _, cases = _junit(tmp_path, [res])
    assert cases["applies_alone"] == ("failure", "applies_alone failed")


def test_junit_of_a_patch_that_does_not_apply(tmp_path):
    res = _res(
        applies=False,
        applies_alone=None,
        base_status=BaseStatus.CONFLICT,
        red=PytestRun(status=RunStatus.RED),
        green=None,
        style=None,
        problems=["conflicts", "more"],
    )
    suite, cases = _junit(tmp_path, [res])
    assert cases == {
        "applies": ("failure", "applies failed"),
        "applies_alone": ("skipped", "not run: the patch does not apply"),
        "red_without_fix": None,
        "green_with_fix": ("skipped", "not run: the patch does not apply"),
        "style_clean": ("skipped", "not run: the patch does not apply"),
    }
    assert suite.find("testcase").findtext("failure") == "conflicts\nmore"
    _, cases = _junit(tmp_path, [_res(applies=False, red=PytestRun(status=RunStatus.ERROR))])
    assert cases["red_without_fix"] == ("skipped", "without the patch: error")
    _, cases = _junit(tmp_path, [_res(applies=False, red=None)])
    assert cases["red_without_fix"] == ("skipped", "not run: the patch does not apply")


@pytest.mark.parametrize("status", [BaseStatus.ALREADY_UPSTREAM, BaseStatus.FIXED_DIFFERENTLY])
def test_junit_of_a_patch_upstream_has(tmp_path, status):
    _, cases = _junit(tmp_path, [_res(applies=False, base_status=status, notes=["drop it"])])
    assert cases["applies"] == ("skipped", f"{status}: drop it")
    assert {cases[name] for name in cases if name != "applies"} == {("skipped", f"not run: {status}")}
    _, cases = _junit(tmp_path, [_res(applies=False, base_status=status)])
    assert cases["applies"] == ("skipped", f"{status}: ")


def test_junit_of_a_blocked_patch(tmp_path):
    problem = "blocked by 0001 (conflict): it needs 0001 ..."
    res = _res(
        applies=False,
        applies_alone=None,
        base_status=BaseStatus.BLOCKED,
        blocked_by=["0001-x.patch"],
        red=None,
        green=None,
        style=None,
        problems=[problem],
    )
    assert res.verdict == Verdict.BLOCKED
    suite, cases = _junit(tmp_path, [res])
    # skipped with the reason, not a failure: the conflict that blocks it is the failure
    assert cases == {
        "applies": ("skipped", problem),
        "applies_alone": ("skipped", "not run: blocked by 0001"),
        "red_without_fix": ("skipped", "not run: blocked by 0001"),
        "green_with_fix": ("skipped", "not run: blocked by 0001"),
        "style_clean": ("skipped", "not run: blocked by 0001"),
    }
    assert (suite.get("failures"), suite.get("skipped")) == ("0", "5")


def test_junit_of_a_patch_not_checked(tmp_path):
    res = _res(checked=False, red=None, green=None, style=None, applies_alone=False)
    suite, cases = _junit(tmp_path, [res])
    assert cases == {
        "applies": None,
        "applies_alone": ("skipped", "does not apply alone on the bare base"),
        "red_without_fix": ("skipped", "not checked (--patch)"),
        "green_with_fix": ("skipped", "not checked (--patch)"),
        "style_clean": ("skipped", "not checked (--patch)"),
    }


def test_junit_says_when_a_patch_needed_a_3_way_merge(tmp_path):
    suite, _ = _junit(tmp_path, [_res(base_status=BaseStatus.THREE_WAY)])
    outs = [case.findtext("system-out") for case in suite.iter("testcase")]
    assert outs == ["applies with a 3-way merge", None, None, None, None]


def _report(patches, **fields):
    report = {
        "ok": True,
        "device": "cpu",
        "duration_s": 12.4,
        "tools": {"torch": "2.13.0", "python": "3.11.7"},
        "targets": [{"name": "fake", "base": {"describe": "fakepkg 1.0 sdist", "commit": "0123456789abcdef"}}],
        "patches": patches,
        "upstream_tests": [],
    }
    report.update(fields)
    return report


def test_markdown_of_a_good_run():
    text = render.markdown(_report([_patch("0001")]))
    assert text.splitlines()[:9] == [
        "### Patch series verify: OK",
        "",
        "| target | base | commit | judged with |",
        "|---|---|---|---|",
        "| fake | fakepkg 1.0 sdist | `0123456789ab` | - |",
        "",
        "Device `cpu`, torch 2.13.0, Python 3.11.7, 12 s.",
        "",
        "| patch | tier | applies | alone | red without the fix (failed/total) | green with it (passed/skipped) "
        "| style | verdict |",
    ]
    assert "| `fake/0001-a-patch.patch` | upstream | yes | yes | yes 1/1 | yes 1/0 | clean | ok |" in text
    assert "Needs a maintainer" not in text and "Notes" not in text and "No patches" not in text


def test_markdown_of_a_failed_run():
    bad = _patch(
        "0002",
        Verdict.FAIL,
        base_status=BaseStatus.CONFLICT,
        red=run(RunStatus.NOT_RED, total=1),
        style_clean=False,
        problems=["a | b\nc"],
        notes=["n"],
    )
    report = _report([bad], ok=False, targets=[{"name": "fake", "base": {"describe": "x|y"}, "notes": ["t"]}])
    text = render.markdown(report)
    assert text.startswith("### Patch series verify: FAILED\n")
    assert "| fake | x\\|y | `` |" in text
    assert (
        "| `fake/0002-a-patch.patch` | upstream | **CONFLICT** | yes | **NO: not-red 0/1** | yes 1/0 | **NOT CLEAN** "
        "| **FAIL** |" in text
    )
    assert "**Needs a maintainer:**\n\n- `fake/0002-a-patch.patch`: a \\| b c\n" in text
    assert "**Notes:**\n\n- `fake`: t\n- `fake/0002-a-patch.patch`: n\n" in text


def test_markdown_of_a_blocked_patch():
    root = _patch(
        "0001", Verdict.FAIL, base_status=BaseStatus.CONFLICT, red=run(RunStatus.RED), problems=["conflicts"]
    )
    blocked = _patch(
        "0002",
        Verdict.BLOCKED,
        base_status=BaseStatus.BLOCKED,
        red=None,
        green=None,
        style=None,
        depends_on=["0001-a-patch.patch"],
        blocked_by=["0001-a-patch.patch"],
        problems=["blocked by 0001 (conflict): it needs 0001"],
    )
    text = render.markdown(_report([root, blocked], ok=False))
    assert "| `fake/0002-a-patch.patch` | upstream | blocked | needs 0001 | - | - | - | blocked |" in text
    assert "**Needs a maintainer:**\n\n- `fake/0001-a-patch.patch`: conflicts\n\n" in text
    assert (
        "**Blocked** (left out with a patch they need; judged once it goes in):\n\n"
        "- `fake/0002-a-patch.patch`: blocked by 0001 (conflict): it needs 0001\n"
    ) in text
    assert render.check_cells(blocked) == ("blocked", "needs 0001", "-", "-", "-", "blocked")


def test_markdown_blocks_are_separated_by_blank_lines():
    part = {
        "target": "fake",
        "files": ["tests/test_a.py"],
        "spec": "path:x",
        "ok": False,
        "states": {"base": {"passed": 1, "failed": 0, "skipped": 0, "error": 0, "duration_s": 1.0}},
        "regressions": [],
        "problems": ["p"],
    }
    report = _report([_patch("0001", problems=["bad"], notes=["n"])], ok=False, upstream_tests=[part])
    assert render.markdown(report) == "\n".join(
        [
            "### Patch series verify: FAILED",
            "",
            "| target | base | commit | judged with |",
            "|---|---|---|---|",
            "| fake | fakepkg 1.0 sdist | `0123456789ab` | - |",
            "",
            "Device `cpu`, torch 2.13.0, Python 3.11.7, 12 s.",
            "",
            "| patch | tier | applies | alone | red without the fix (failed/total) | green with it (passed/skipped) "
            "| style | verdict |",
            "|---|---|---|---|---|---|---|---|",
            "| `fake/0001-a-patch.patch` | upstream | yes | yes | yes 1/1 | yes 1/0 | clean | ok |",
            "",
            "**Needs a maintainer:**",
            "",
            "- `fake/0001-a-patch.patch`: bad",
            "",
            "**Notes:**",
            "",
            "- `fake/0001-a-patch.patch`: n",
            "",
            "**Upstream tests of fake** (1 file(s) from `path:x`): **0 regression(s)**",
            "",
            "| tree | passed | failed | skipped | error | time |",
            "|---|---|---|---|---|---|",
            "| base | 1 | 0 | 0 | 0 | 1 s |",
            "",
            "- p",
            "",
        ]
    )
    clean = dict(part, ok=True, problems=[])
    text = render.markdown(_report([_patch("0001")], upstream_tests=[clean]))
    assert text.endswith("| base | 1 | 0 | 0 | 0 | 1 s |\n")


def test_markdown_without_patches_and_with_upstream_tests():
    part = {
        "target": "fake",
        "files": ["tests/test_a.py", "tests/test_b.py"],
        "spec": "path:x",
        "ok": False,
        "states": {
            "base": {"passed": 3, "failed": 1, "skipped": 0, "error": 0, "duration_s": 10.2},
            "series": {"passed": 2, "failed": 2, "skipped": 0, "error": 0, "duration_s": 9.6},
        },
        "regressions": [{"id": "t::a", "base": "passed", "series": "failed"}],
        "problems": ["p"],
    }
    text = render.markdown(_report([], upstream_tests=[part]))
    assert "**Upstream tests of fake** (2 file(s) from `path:x`): **1 regression(s)**" in text
    assert "| base | 3 | 1 | 0 | 0 | 10 s |" in text and "| series | 2 | 2 | 0 | 0 | 10 s |" in text
    assert "- regression `t::a`: passed on the base, failed with the series\n- p\n" in text
    assert text.endswith("No patches to verify.\n")
    assert "| patch |" not in text
    good = dict(part, ok=True, regressions=[], problems=[])
    assert "(2 file(s) from `path:x`): no regression" in render.markdown(_report([], upstream_tests=[good]))


def test_append_markdown(tmp_path):
    path = tmp_path / "summary.md"
    path.write_text("before\n", encoding="utf-8")
    render.append_markdown(path, _report([_patch("0001")]))
    render.append_markdown(path, _report([_patch("0001")]))
    text = path.read_text(encoding="utf-8")
    assert text.startswith("before\n### Patch series verify: OK") and text.count("### Patch series verify") == 2


def test_shown_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert render.shown_path(tmp_path / "logs" / "a.log") == "logs/a.log"
    assert render.shown_path(str(tmp_path / "a.log")) == "a.log"
    assert render.shown_path(tmp_path) == "."
    assert render.shown_path(tmp_path / "..dots" / "a.log") == "..dots/a.log"  # below, though it starts with ..
    outside = tmp_path.parent / "elsewhere" / "a.log"
    assert render.shown_path(outside) == str(outside)  # outside: as it is
    assert render.shown_path(tmp_path.parent) == str(tmp_path.parent)
    assert render.shown_path("relative/a.log") == "relative/a.log"


def test_the_cells_of_repeated_and_flaky_runs():
    assert render.green_cell(dict(run(RunStatus.GREEN, passed=3, skipped=1), runs=3)) == "yes 3/1 x3"
    assert render.green_cell(dict(run(RunStatus.GREEN, passed=3), runs=1)) == "yes 3/0"
    failed = dict(run(RunStatus.FAILED, passed=2), runs=2)
    assert render.green_cell(failed) == "NO: failed 2/0 x2"
    flaky = dict(run(RunStatus.FLAKY, passed=3), runs=4, run_statuses=["green", "failed", "green", "green"])
    assert render.green_cell(flaky) == "FLAKY: 3/4 runs"


def _companion(status, **run_fields):
    fields = {"status": status, "runs": 1, "run_statuses": [], **run_fields}
    return {"label": "fake + patched other", "green": status == RunStatus.GREEN, "run": fields}


def test_markdown_of_companion_stages_and_repeats():
    good = render.markdown(_report([_patch("0001")], companions=[_companion(RunStatus.GREEN)], repeat=3))
    assert "Device `cpu`, torch 2.13.0, Python 3.11.7, 12 s, each green stage run 3 times.\n" in good
    assert "Needs a maintainer" not in good
    once = render.markdown(_report([_patch("0001")], repeat=1))
    assert "Python 3.11.7, 12 s.\n" in once
    failed = render.markdown(_report([_patch("0001")], ok=False, companions=[_companion(RunStatus.FAILED)]))
    assert "**Needs a maintainer:**\n\n- `fake + patched other`: all the tests: failed, not green\n" in failed
    statuses = ["green", "failed", "green"]
    flaky = _companion(RunStatus.FLAKY, runs=3, run_statuses=statuses)
    text = render.markdown(_report([_patch("0001")], ok=False, companions=[flaky]))
    assert "- `fake + patched other`: all the tests: flaky (green in 2 of 3 runs)\n" in text


def test_junit_of_a_flaky_patch(tmp_path):
    green = PytestRun(
        status=RunStatus.FLAKY,
        runs=3,
        run_statuses=["green", "failed", "green"],
        flaky=[{"test": "t::a", "failed": 1}],
    )
    suite, cases = _junit(tmp_path, [_res(green=green)])
    assert cases["green_with_fix"] == ("failure", "green_with_fix flaky: green in 2 of 3 runs")
    [failure] = [case.find("failure") for case in suite.iter("testcase") if case.get("name") == "green_with_fix"]
    assert failure.get("type") == "flaky" and failure.text == "t::a failed in 1 of 3 runs"
    others = [case.find("failure") for case in suite.iter("testcase") if case.find("failure") is not None]
    assert others == [failure]
    _, plain = _junit(tmp_path, [_res(red=PytestRun(status=RunStatus.NOT_RED))])
    root = ET.parse(tmp_path / "junit.xml").getroot()
    assert all(f.get("type") is None for f in root.iter("failure")) and plain["red_without_fix"][0] == "failure"


def test_wrap_keeps_a_long_word_and_a_hyphenated_path_whole():
    path = "/a-very/long-path/" + "x" * 150 + "-with-hyphens.log"
    assert render.wrap(f"log {path} end", width=40) == ["  log", f"      {path}", "      end"]
    assert render.wrap("", width=40) == [""]
    assert render.wrap("one-two three-four", width=12) == ["  one-two", "      three-four"]


def test_check_writable_refuses_a_folder_and_leaves_an_existing_file_as_it_is(tmp_path):
    with pytest.raises(SeriesError, match=r"^--json .*: cannot write it \(is a folder\)$"):
        render.check_writable(tmp_path, "--json")
    existing = tmp_path / "summary.md"
    existing.write_text("kept\n", encoding="utf-8")
    render.check_writable(existing, "--summary")
    assert existing.read_text(encoding="utf-8") == "kept\n"
    render.check_writable(tmp_path / "new.json", "--json")
    assert not (tmp_path / "new.json").exists()
    with pytest.raises(SeriesError, match="cannot write it"):
        render.check_writable(tmp_path / "nowhere" / "new.json", "--json")


NAN = "tests/trainer/test_trainer.py::TrainerLoggingTest::test_logging_inf_nan_filter"
NAN_ID = "tests.trainer.test_trainer.TrainerLoggingTest::test_logging_inf_nan_filter"


def _upstream_part(**fields):
    state = UpstreamRun(3, 1, 0, 0, 4, 1, False, 9.0, "b.log", {"status": "failed", "output_tail": ""})
    part = UpstreamTestsResult(target="fake", spec="path:x", files=["tests/trainer/test_trainer.py"], missing=[])
    part.states = {"base": state, "series": state}
    for key, value in fields.items():
        setattr(part, key, value)
    return part


def test_junit_of_upstream_tests_declared_undeclared_and_stale(tmp_path):
    declared = DeclaredChange("0016-nan.patch", NAN, NAN_ID, "logging 0.0 hides a destroyed model", "passed", "failed")
    stale = DeclaredChange("0017-x.patch", "tests/a.py::T::t", "tests.a.T::t", "r", "passed", "passed", "it passes")
    part = _upstream_part(
        declared=[declared], stale=[stale], regressions=[Regression("t::b", "passed", "error", "s.log")], ok=False
    )
    path = tmp_path / "junit.xml"
    render.write_junit(path, [_res()], 1.5, [part])
    suite = ET.parse(path).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("9", "2", "0")
    cases = {
        case.get("name"): case for case in suite.iter("testcase") if case.get("classname") == "fake.upstream_tests"
    }
    assert list(cases) == ["runs", "t::b", NAN_ID, f"stale declaration {stale.test}"]
    assert cases["runs"].find("failure") is None
    assert cases["runs"].find("system-out").text == (
        "1 file(s) from path:x; base: 3 passed, 1 failed, 0 skipped, 0 error; series: 3 passed, 1 failed, 0 skipped, "
        "0 error"
    )
    assert cases["t::b"].find("failure").get("message") == "regression: passed on the base, error with the series"
    assert cases[NAN_ID].find("failure") is None  # declared: it passes, and says who declares it and why
    assert cases[NAN_ID].find("system-out").text == (
        "declared by 0016-nan.patch (passed on the base, failed with the series): logging 0.0 hides a destroyed model"
    )
    failure = cases[f"stale declaration {stale.test}"].find("failure")
    assert failure.get("message") == "stale declaration by 0017-x.patch: it passes"
    assert failure.text == "passed on the base, passed with the series; reason given: r"
    # A run that cannot be judged fails the `runs` case.
    render.write_junit(path, [], 1.5, [_upstream_part(problems=["no upstream test passed on the base"], ok=False)])
    suite = ET.parse(path).getroot().find("testsuite")
    [case] = suite.iter("testcase")
    assert case.find("failure").get("message") == "runs failed"
    assert case.find("failure").text == "no upstream test passed on the base"


def test_markdown_of_declared_and_stale_declarations():
    part = _upstream_part().to_json()
    declared = {"patch": "0016-nan.patch", "test": NAN, "id": NAN_ID, "reason": "r", "base": "passed"}
    declared.update(series="failed", why="")
    text = render.markdown(_report([], upstream_tests=[dict(part, declared=[declared])]))
    assert (
        "**Upstream tests of fake** (1 file(s) from `path:x`): no undeclared regression (1 declared: "
        "test_logging_inf_nan_filter by 0016)" in text
    )
    assert (
        f"- declared by `0016` `{NAN_ID}`: passed on the base, failed with the series; its pull request updates the "
        "test: r\n" in text
    )
    stale = dict(declared, patch="0017-x.patch", series="passed", why="it passes with the series")
    text = render.markdown(_report([], upstream_tests=[dict(part, ok=False, stale=[stale])]))
    assert "(1 file(s) from `path:x`): **0 regression(s)**, **1 stale declaration(s)**" in text
    assert f"- **stale declaration** by `0017` of `{NAN}`: it passes with the series\n" in text


def test_markdown_of_a_run_on_a_moved_base_says_first_which_commit_it_judged():
    base = {"spec": "git:https://example.invalid/fake.git@main", "describe": "main of fake", "commit": "f" * 40}
    text = render.markdown(_report([_patch("0001")], targets=[{"name": "fake", "base": base}]))
    assert text.splitlines()[0] == f"### Patch series verify: OK on fake main of fake at `{'f' * 40}`"


def test_junit_says_each_patchs_tier_and_checks_the_upstream_tier_alone_where_there_is_a_fork_tier(tmp_path):
    def tiers(path):
        root = ET.parse(path).getroot()
        return {
            (case.get("classname"), case.get("name")): case.find("properties/property[@name='tier']").get("value")
            for case in root.iter("testcase")
        }

    fork = _res(name="0002-b.patch", index=2, tier="fork")
    below = _res(upstream_stack=False, problems=[f"{render.STACK_PROBLEM}, without the fork tier (a.py: x)"])
    suite, cases = _junit(tmp_path, [below, fork])
    # the upstream-tier patch gets an `upstream_stack` case (failed: it goes in only on top of a fork-tier one)
    assert cases["upstream_stack"] == ("failure", "upstream_stack failed")
    stack = next(c for c in suite.iter("testcase") if c.get("name") == "upstream_stack")
    assert stack.findtext("failure").startswith(render.STACK_PROBLEM)
    assert suite.get("tests") == str(6 + 5) and suite.get("failures") == "1"
    found = tiers(tmp_path / "junit.xml")
    assert {value for (name, _), value in found.items() if name == "fake.0002-b.patch"} == {"fork"}
    assert {value for (name, _), value in found.items() if name == "fake.0001-a.patch"} == {"upstream"}
    # without a fork tier the series is the upstream tier: no such case
    suite, cases = _junit(tmp_path, [_res(upstream_stack=True)])
    assert "upstream_stack" not in cases and suite.get("tests") == "5"


def test_markdown_and_table_show_the_fork_tier():
    patches = [_patch("0001"), _patch("0002", tier="fork")]
    assert "| `fake/0002-a-patch.patch` | fork | yes |" in render.markdown(_report(patches))
    rows = render.table(patches).splitlines()
    # the console marks the fork tier after the number (a column would not fit in 120 columns)
    assert rows[2].startswith("fake 0001 core: patch 0001  ") and rows[3].startswith("fake 0002 (fork) core: patch")
