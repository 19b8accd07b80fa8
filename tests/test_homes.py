"""`homes`, end to end on the fake series: a patch's new test file moved into its upstream home as a diff, the diff
applied to upstream's tests on the pinned base, the moved tests green with the patch and red without it; bad input
is one error line and writes nothing."""

import textwrap

import pytest
from seriesfixtures import GOOD, VERSION, one_error_line


HOME = textwrap.dedent(
    """\
    import os

    from fakepkg.core import mul


    def test_mul():
        assert mul(2, 3) == 6 and os.sep
    """
)


def _homes(fake, names, home=HOME):
    upstream = fake.root / "upstream"
    (upstream / "tests").mkdir(parents=True)
    (upstream / "tests" / "test_core.py").write_text(home, encoding="utf-8")
    text = fake.manifest.read_text(encoding="utf-8")
    text += '\n[targets.fake.test_homes]\n"tests/regress/test_add.py" = "tests/test_core.py"\n'
    fake.manifest.write_text(text, encoding="utf-8")
    return f"path:{upstream}"


@pytest.mark.quick
def test_a_patch_s_tests_moved_home_and_checked(fake, test_python):
    names = fake.build_series(GOOD, VERSION)
    spec = _homes(fake, names)
    out = fake.root / "add.diff"
    proc = fake.run("homes", "0001", "--upstream-tests", spec, "--out", str(out), "--python", str(test_python))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0001 tests/test_core.py (appended): test_add, test_add_zero\n" in proc.stdout
    assert "  imports: from fakepkg.core import add\n" in proc.stdout
    assert "0001 applied to upstream's tests: yes\n" in proc.stdout
    assert "0001 green (with the patch): 2 passed, 0 failed, 0 skipped (green)\n" in proc.stdout
    assert "0001 red (without it): 1 passed, 1 failed, 0 skipped (red); as new files there: 1 passed, 1 failed" in (
        proc.stdout
    )
    assert "0001 style (ruff check, format --check): clean\n" in proc.stdout
    assert proc.stdout.endswith("0001 tests moved home: ok\n")
    diff = out.read_text(encoding="utf-8")
    assert diff.startswith("diff --git a/tests/test_core.py b/tests/test_core.py\n")
    assert "-from fakepkg.core import mul\n+from fakepkg.core import add, mul\n" in diff
    assert "+def test_add():\n+    assert add(2, 3) == 5\n" in diff


@pytest.mark.quick
def test_bad_input_is_one_line_and_writes_nothing(fake):
    names = fake.build_series(GOOD, VERSION)
    spec = _homes(fake, names, HOME + "\n\ndef test_add():\n    pass\n")
    out = fake.root / "add.diff"
    for args, message in (
        (("0001",), "tests/test_core.py already defines test_add: rename it in tests/regress/test_add.py first"),
        (("0002",), "tests/regress/test_version.py::test_version (0002) has no home in [targets.fake.test_homes]"),
        (("0009",), "unknown patch '0009'"),
    ):
        line = one_error_line(fake.run("homes", *args, "--upstream-tests", spec, "--out", str(out), "--no-check"))
        assert message in line
        assert not out.exists()
    line = one_error_line(fake.run("homes", "0001", "--upstream-tests", f"path:{fake.root / 'none'}", "--no-check"))
    assert "has no tests/ folder" in line
