"""`verify`: red without the fix, green with it, style, reports - on a fake target with tiny tests."""

import json
import shutil
import sys
import xml.etree.ElementTree as ET

import pytest
from seriesfixtures import (
    ALL_SKIPPED,
    COLLECT_ERROR,
    GOOD,
    IMPORT_ONLY,
    NO_TESTS,
    NOT_RED,
    SERIES,
    STYLE,
    VERSION,
    git,
    manifest_text,
    one_error_line,
    problem_items,
    table_rows,
)


DEPENDENT = (
    "core: truncate add()",
    {
        "src/fakepkg/core.py": ("return a + b", "return int(a + b)"),
        "tests/regress/test_truncate.py": (
            "from fakepkg.core import add\n\n\ndef test_truncate():\n    assert add(2.5, 0) == 2\n"
        ),
    },
)


def _verify(fake, python, *args):
    report = fake.root / "report.json"
    junit = fake.root / "report.xml"
    proc = fake.run("verify", "--python", python, "--json", str(report), "--junit", str(junit), *args)
    data = json.loads(report.read_text(encoding="utf-8")) if report.exists() else None
    return proc, data, junit


def test_mixed_series_reports_each_failure(fake, test_python):
    fake.build_series(GOOD, NOT_RED, STYLE, COLLECT_ERROR, IMPORT_ONLY, NO_TESTS, ALL_SKIPPED)
    proc, data, junit = _verify(fake, test_python)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert data["ok"] is False
    by_name = {p["name"].split("-", 1)[0]: p for p in data["patches"]}
    assert [p["name"] for p in data["patches"]] == [
        "0001-core-make-add-add.patch",
        "0002-core-document-mul.patch",
        "0003-core-add-sub.patch",
        "0004-core-add-div.patch",
        "0005-core-add-neg.patch",
        "0006-docs-reword-the-README.patch",
        "0007-core-add-pow2.patch",
    ]
    for patch in data["patches"]:
        assert patch["target"] == "fake" and patch["applies"] is True

    good = by_name["0001"]
    assert (good["red_without_fix"], good["green_with_fix"], good["style_clean"], good["ok"]) == (
        True,
        True,
        True,
        True,
    )
    assert good["test_files"] == ["tests/regress/test_add.py"]
    assert (good["red"]["failed"], good["red"]["passed"], good["red"]["total"]) == (1, 1, 2)
    assert good["red"]["failing"] == ["tests.regress.test_add::test_add"]
    assert (good["green"]["passed"], good["green"]["skipped"]) == (2, 0)

    assert by_name["0002"]["red"]["status"] == "not-red" and by_name["0002"]["red_without_fix"] is False
    assert by_name["0002"]["green_with_fix"] is True and by_name["0002"]["verdict"] == "fail"

    style = by_name["0003"]
    assert (style["red_without_fix"], style["green_with_fix"], style["style_clean"]) == (True, True, False)
    assert sorted(style["style"]["files"]) == [
        "src/fakepkg/core.py",
        "src/fakepkg/extra.py",
        "tests/regress/test_sub.py",
    ]
    assert "F401" in style["style"]["check_output"]
    assert "src/fakepkg/extra.py" in style["style"]["format_output"]

    # A module-level import of the new code is a collection error (pytest exit 2), not a valid red.
    assert by_name["0004"]["red"]["status"] == "error" and by_name["0004"]["red"]["exit_code"] == 2
    assert by_name["0004"]["green_with_fix"] is True
    assert by_name["0005"]["red"]["status"] == "import-only"
    assert by_name["0006"]["red"]["status"] == "no-tests" and by_name["0006"]["test_files"] == []
    assert by_name["0007"]["red"]["status"] == "skipped" and by_name["0007"]["green"]["skipped"] == 1
    assert [p["ok"] for p in data["patches"]] == [True] + [False] * 6

    first, *table = proc.stdout.splitlines()
    assert first.startswith("verify: fake on fakepkg 1.0 sdist (sha256 ")  # the world judged, then the table
    assert table[0].split()[:3] == ["patch", "applies", "alone"]
    rows = table_rows(proc.stdout)
    assert rows[0]["patch"] == "fake 0001 core: make add() add" and rows[0]["verdict"] == "ok"
    assert rows[1]["red fail/all"] == "NO: not-red 0/1" and rows[1]["verdict"] == "FAIL"
    assert rows[2]["style"] == "NOT CLEAN"
    assert max(len(line) for line in table[: 2 + len(rows)]) <= 120
    # A failed check names what failed and where the log is, on the console too.
    items = problem_items(proc.stdout)
    assert any(
        item.startswith("  fake 0002: without its fix the tests are not-red, not red (all 1 pass; log ")
        for item in items
    )
    line = next(item for item in items if item.startswith("  fake 0004: "))
    assert line.startswith("  fake 0004: without its fix the tests are error, not red (failing: tests.regress"), line
    assert line.endswith("0004-core-add-div.red.log)"), line
    assert any(item.startswith("  fake 0003: ruff check / ruff format --check not clean: ") for item in items)
    # One line per stage while it runs.
    assert "[fake 1/7] red: red 1/2 failed/total" in proc.stderr
    assert "[fake 1/7] green: green 2/0 passed/skipped" in proc.stderr
    assert "[fake 1/7] style: clean" in proc.stderr

    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == str(7 * 5)
    failures = {
        (case.get("classname"), case.get("name"))
        for case in suite.iter("testcase")
        if case.find("failure") is not None
    }
    assert ("fake.0002-core-document-mul.patch", "red_without_fix") in failures
    assert ("fake.0003-core-add-sub.patch", "style_clean") in failures
    assert not any(name.startswith("fake.0001") for name, _ in failures)


@pytest.mark.quick
def test_good_series_passes_and_reuses_the_scratch_checkout(fake, test_python):
    names = fake.build_series(GOOD, DEPENDENT)
    with open(fake.manifest, "a", encoding="utf-8") as fh:
        fh.write(f'\n[targets.fake.depends]\n"{names[1]}" = ["{names[0]}"]\n')
    proc, data, _ = _verify(fake, test_python)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["ok"] is True and [p["verdict"] for p in data["patches"]] == ["ok", "ok"]
    # The second patch needs the first, as the manifest says: it does not apply alone, which is reported.
    assert [p["applies_alone"] for p in data["patches"]] == [True, False]
    assert "verify: OK (2 patches; fake 1.0, torch " in proc.stdout
    assert "extracting" in proc.stderr
    proc, data, _ = _verify(fake, test_python)
    assert proc.returncode == 0 and data["ok"] is True
    assert "extracting" not in proc.stderr


def test_empty_series_verifies_fine_and_says_so(fake, test_python):
    fake.seed_cache()
    proc, data, _ = _verify(fake, test_python)
    assert proc.returncode == 0, proc.stderr
    assert "no patches for fake: nothing to verify" in proc.stdout
    assert data["ok"] is True and data["patches"] == []
    assert data["targets"][0]["patches"] == 0 and len(data["targets"][0]["base"]["commit"]) == 40


def test_a_patch_that_does_not_apply_is_left_out_and_the_rest_judged(fake, test_python):
    names = fake.build_series(GOOD, NOT_RED)
    first = fake.patches_dir / "fake" / names[0]
    first.write_text(
        first.read_text(encoding="utf-8").replace("-    return a - b", "-    return a * b"), encoding="utf-8"
    )
    proc, data, junit = _verify(fake, test_python)
    assert proc.returncode == 1
    assert [p["verdict"] for p in data["patches"]] == ["fail", "fail"]
    assert [p["base_status"] for p in data["patches"]] == ["conflict", "clean"]
    conflict = data["patches"][0]
    assert conflict["applies"] is False and conflict["conflict_files"] == ["src/fakepkg/core.py"]
    assert conflict["conflicts"][0]["file"] == "src/fakepkg/core.py"
    assert [h["index"] for h in conflict["conflicts"][0]["hunks"]] == [1]
    # Its tests still fail on the base, so the bug is not fixed there: a real conflict, not news.
    assert conflict["red"]["status"] == "red" and conflict["green"] is None
    # The second patch is judged all the same, on the base without the first.
    second = data["patches"][1]
    assert second["skipped_before"] == [names[0]] and second["applies"] is True
    assert second["red"]["status"] == "not-red"
    assert "src/fakepkg/core.py: content differs; hunk 1/1 (@@ -3,7 +3,7 @@) does not apply" in proc.stdout
    assert f"checked without {names[0]}, which did not go in" in proc.stdout
    cases = {(c.get("classname"), c.get("name")): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert cases[(f"fake.{names[0]}", "applies")].find("failure") is not None
    assert cases[(f"fake.{names[0]}", "green_with_fix")].find("skipped") is not None
    assert cases[(f"fake.{names[1]}", "red_without_fix")].find("failure") is not None


def test_only_the_named_patch_is_checked(fake, test_python):
    fake.build_series(NOT_RED, GOOD)
    proc, data, _ = _verify(fake, test_python, "--patch", "0002")
    assert proc.returncode == 0, proc.stdout
    assert [p["verdict"] for p in data["patches"]] == ["not checked", "ok"]
    assert "verify: OK (1 patch, 1 more not checked (--patch); fake 1.0, torch " in proc.stdout
    line = one_error_line(fake.run("verify", "--python", test_python, "--patch", "0009-nope.patch"))
    assert "unknown patch '0009-nope.patch'" in line


def test_device_cuda_without_cuda_is_one_clear_error(fake, test_python):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    fake.seed_cache()
    line = one_error_line(fake.run("verify", "--python", test_python, "--device", "cuda"))
    assert "--device cuda needs a CUDA build of torch" in line


def test_base_needs_a_single_target(fake, test_python):
    extra = (
        '\n[targets.second]\npackage = "second"\nversion = "1"\nsha256 = "' + "2" * 64 + '"\n'
        'git_url = "u"\ntests = "tests/"\npatches = []\n'
    )
    fake.write_manifest(extra=extra)
    line = one_error_line(fake.run("verify", "--python", test_python, "--base", "git:https://example.invalid/x@main"))
    assert "--base names one target's base; add --target" in line
    assert "unknown target 'third'" in one_error_line(fake.run("verify", "--target", "third"))


def test_verify_against_a_clone_or_git_ref(fake, test_python):
    fake.build_series(GOOD)
    upstream = fake.upstream_repo(fake.root / "upstream")
    for spec in (f"path:{upstream}", f"git:{upstream.as_uri()}@main"):
        proc, data, _ = _verify(fake, test_python, "--target", "fake", "--base", spec)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert data["targets"][0]["base"]["spec"] == spec
        assert data["targets"][0]["base"]["commit"] == git(upstream, "rev-parse", "HEAD")
        assert [p["verdict"] for p in data["patches"]] == ["ok"]


BROKEN = (
    "core: make add() add, with a wrong test",
    {
        "src/fakepkg/core.py": ("return a - b", "return a + b"),
        "tests/regress/test_broken.py": (
            "from fakepkg.core import add\n\n\ndef test_ok():\n    assert add(1, 1) == 2\n\n\n"
            "def test_wrong():\n    assert add(2, 3) == 6\n"
        ),
    },
)


def test_a_failed_green_names_the_failing_tests_and_the_log(fake, test_python):
    fake.build_series(BROKEN)
    proc, data, _ = _verify(fake, test_python)
    assert proc.returncode == 1
    assert data["patches"][0]["green"]["failing"] == ["tests.regress.test_broken::test_wrong"]
    line = next(item for item in problem_items(proc.stdout) if "not green" in item)
    assert line.startswith("  fake 0001: with the patch the tests are failed, not green (failing: ")
    assert "tests.regress.test_broken::test_wrong; log " in line
    assert line.endswith("0001-core-make-add-add-with-a-wrong-test.green.log)")


def test_the_table_fits_in_120_columns():
    sys.path.insert(0, str(SERIES.parent))
    from seriestool import render

    run = {"status": "import-only", "failed": 12, "total": 14, "passed": 0, "skipped": 12}
    patches = [
        {
            "target": "transformers",
            "name": f"{n:04d}-Trainer-" + "x" * 90 + ".patch",
            "subject": "Trainer: don't count optimizer steps skipped by the grad scaler, " + "and more " * 10,
            "base_status": "fixed-differently",
            "depends_on": ["0005-a.patch", "0006-b.patch", "0007-c.patch", "0008-d.patch"],
            "applies_alone": False,
            "red": run,
            "green": dict(run, status="timeout"),
            "style": {},
            "style_clean": False,
            "verdict": "not checked",
        }
        for n in (1, 9)
    ]
    lines = render.table(patches).splitlines()
    assert max(len(line) for line in lines) <= 120, "\n".join(lines)
    assert lines[2].startswith("transformers 0001")
    assert "needs 0005-0008" in lines[2] and "..." in lines[2]


def test_problem_and_note_lines_are_wrapped_to_the_table():
    sys.path.insert(0, str(SERIES.parent))
    from seriestool import render

    problem = "conflicts with the base: " + "; ".join(
        f"src/transformers/trainer.py: hunk {n} does not apply" for n in range(30)
    )
    patch = {"target": "transformers", "name": "0009-x.patch", "problems": [problem], "notes": ["word " * 80]}
    lines = render.problem_lines([patch])
    assert max(len(line) for line in lines) <= 120 and len(lines) > 4, "\n".join(lines)
    assert lines[0].startswith("  transformers 0009: conflicts with the base: ")
    assert all(line.startswith("      ") for line in lines[1:] if "note:" not in line)
    assert " ".join(" ".join(lines).split()) == " ".join(
        f"transformers 0009: {problem} transformers 0009: note: {'word ' * 80}".split()
    )
    # A word longer than the line (a log path) stays whole.
    long = render.problem_lines([dict(patch, problems=["log " + "/x" * 80], notes=[])])
    assert long == ["  transformers 0009: log", "      " + "/x" * 80]


def test_report_files_that_cannot_be_written_are_refused_before_the_run(fake):
    fake.build_series(GOOD)
    folder = fake.root / "a-folder"
    folder.mkdir()
    kept = fake.root / "summary.md"
    kept.write_text("earlier step\n", encoding="utf-8")
    for option, path in (
        ("--json", fake.root / "missing" / "r.json"),
        ("--junit", folder),
        ("--summary", fake.root / "summary.md" / "below-a-file.md"),
    ):
        # --python names no interpreter: the check comes before anything else runs.
        proc = fake.run("verify", "--python", str(fake.root / "no-python"), option, str(path))
        line = one_error_line(proc)
        assert line.startswith(f"series: error: {option} {path}: cannot write it ("), line
    # A file that can be written is not changed by the check.
    proc = fake.run("verify", "--summary", str(kept), "--json", str(folder / "x" / "r.json"))
    assert "--json" in one_error_line(proc) and kept.read_text(encoding="utf-8") == "earlier step\n"
    assert not (fake.work / "verify").exists() and not (fake.work / "reports").exists()


def test_the_last_stage_says_what_runs_before_it_starts(fake, test_python):
    """A target with `verify_with`: its tests run once more with the companion's patched sources."""
    names = fake.build_series(GOOD, VERSION)
    other = fake.patches_dir / "other"
    other.mkdir()
    shutil.move(fake.patches_dir / "fake" / names[1], other / "0001-fakepkg-add-__version__.patch")
    text = manifest_text(fake.sha, [names[0]], extra='verify_with = ["other"]\n')
    text += manifest_text(fake.sha, ["0001-fakepkg-add-__version__.patch"], name="other").split("\nschema = 1\n")[1]
    fake.manifest.write_text(text, encoding="utf-8")
    proc = fake.run("verify", "--python", test_python)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stage = [line for line in proc.stderr.splitlines() if line.startswith("series: [fake + patched other 1.0]")]
    assert stage[0].startswith(
        "series: [fake + patched other 1.0] last stage: the 1 new test file of fake (2 tests) once more, with the "
        "patched sources of other 1.0 first on PYTHONPATH, in one pytest run"
    )
    assert stage[1].startswith("series: [fake + patched other 1.0] green 2/0 passed/skipped (")
    assert "fake + patched other 1.0: ok, 2 passed, 0 skipped, 0 failed" in proc.stdout
    # the first line names the world of the verdict: the base, the companion (released and patched), torch, Python
    first = proc.stdout.splitlines()[0]
    assert (
        first.startswith("verify: fake on fakepkg 1.0 sdist (sha256 ") and " with fakepkg 1.0 (released and " in first
    )
    assert "patched; the pin), torch " in first and ", Python 3." in first


def test_a_patch_number_in_several_targets_needs_target(fake, test_python):
    (name,) = fake.build_series(GOOD)
    other = fake.patches_dir / "other"
    other.mkdir()
    shutil.copy(fake.patches_dir / "fake" / name, other / name)
    with open(fake.manifest, "a", encoding="utf-8") as fh:
        fh.write(manifest_text(fake.sha, [name], name="other").split("\n", 2)[2])
    line = one_error_line(fake.run("verify", "--python", test_python, "--patch", "0001"))
    assert "--patch 0001 is in several targets: fake (0001-core-make-add-add.patch), other (" in line
    assert line.endswith("add --target")
    proc = fake.run("verify", "--python", test_python, "--patch", "0001", "--target", "other")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_verify_of_one_patch_keeps_the_saved_results_of_the_others(fake, test_python):
    names = fake.build_series(GOOD, DEPENDENT)
    with open(fake.manifest, "a", encoding="utf-8") as fh:
        fh.write(f'\n[targets.fake.depends]\n"{names[1]}" = ["{names[0]}"]\n')
    saved = fake.work / "reports" / "verify-fake.json"
    fake.ok("verify", "--python", test_python)
    first = json.loads(saved.read_text(encoding="utf-8"))
    fake.ok("verify", "--python", test_python, "--patch", "0002")
    merged = json.loads(saved.read_text(encoding="utf-8"))
    assert [p["verdict"] for p in merged["patches"]] == ["ok", "ok"] and merged["ok"] is True
    assert merged["patches"][0]["checked_at"] == first["date"]
    assert merged["patches"][0]["red"] == first["patches"][0]["red"]
    proc = fake.ok("pr", "0001")
    assert "Result of the verify of " in proc.stdout and "on the fakepkg 1.0 release" in proc.stdout
    assert "no verify result" not in proc.stderr and "another version" not in proc.stderr

    # Once the earlier patch changes, its old result is no longer kept (nor that of anything after it).
    patch = fake.patches_dir / "fake" / names[0]
    patch.write_text(patch.read_text(encoding="utf-8").replace("Why and how.", "Why, and how."), encoding="utf-8")
    fake.ok("verify", "--python", test_python, "--patch", "0002")
    merged = json.loads(saved.read_text(encoding="utf-8"))
    assert [p["verdict"] for p in merged["patches"]] == ["not checked", "ok"]
