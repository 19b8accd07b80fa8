"""`verify --upstream-tests SPEC`: upstream's own tests on the base and with the whole series; a test that
passes on the base and fails with the series is a regression - on a fake target with a fake upstream test tree."""

import json
import textwrap

from seriesfixtures import GOOD, git, one_error_line


# Upstream's existing tests of the fake package: a package (tests/__init__.py), a helper beside them.
UPSTREAM_TESTS = {
    "tests/__init__.py": "",
    "tests/upstream/__init__.py": "",
    "tests/upstream/helpers.py": "SIX = 6\n",
    "tests/upstream/test_core.py": textwrap.dedent(
        """\
        import pytest

        from fakepkg.core import add, mul

        from .helpers import SIX


        def test_mul():
            assert mul(2, 3) == SIX


        def test_mul_by_zero():
            assert mul(3, 0) == 0


        def test_add():
            assert add(2, 3) == 5


        def test_broken_everywhere():
            assert mul(1, 1) == 2


        @pytest.mark.skip(reason="needs a GPU")
        def test_gpu():
            pass
        """
    ),
    "tests/upstream/test_not_listed.py": "def test_not_listed():\n    assert False\n",
}
LISTED = 'upstream_tests = ["tests/upstream/test_core.py"]\n'

# A patch that passes its own checks (red without it, green with it) but breaks an upstream test.
BREAK_MUL = (
    "core: make mul() keep a by zero",
    {
        "src/fakepkg/core.py": ("    return a * b\n", "    return a * b if b else a\n"),
        "tests/regress/test_mul_keep.py": (
            "from fakepkg.core import mul\n\n\ndef test_keep():\n    assert mul(2, 0) == 2\n"
        ),
    },
)


def _tests_tree(fake):
    root = fake.root / "upstream-tests"
    for rel, text in UPSTREAM_TESTS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def _verify(fake, python, spec, *more):
    out = fake.root / "report.json"
    summary = fake.root / "summary.md"
    summary.unlink(missing_ok=True)
    proc = fake.run(
        "verify", "--python", python, "--upstream-tests", spec, "--json", str(out), "--summary", str(summary), *more
    )
    data = json.loads(out.read_text(encoding="utf-8"))
    return proc, data, summary.read_text(encoding="utf-8")


def test_no_regression_with_counts_per_state(fake, test_python):
    fake.build_series(GOOD, extra=LISTED)
    root = _tests_tree(fake)
    proc, data, summary = _verify(fake, test_python, f"path:{root}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [part] = data["upstream_tests"]
    assert part["ok"] is True and part["regressions"] == [] and part["files"] == ["tests/upstream/test_core.py"]
    counts = {
        state: [part["states"][state][k] for k in ("passed", "failed", "skipped", "error")] for state in part["states"]
    }
    # test_add fails on the base (the bug GOOD fixes) and passes with the series.
    assert counts == {"base": [2, 2, 1, 0], "series": [3, 1, 1, 0]}
    assert part["fixed"] == ["tests.upstream.test_core::test_add"]
    assert "fake upstream tests (1 file(s) from path:" in proc.stdout
    assert "base: 2 passed, 2 failed, 1 skipped, 0 error" in proc.stdout
    assert "fake upstream tests: no regression" in proc.stdout
    assert "| series | 3 | 1 | 1 | 0 |" in summary
    # The tests ran in a tool-owned checkout; the scratch checkout of verify has none of them.
    assert not (fake.work / "verify" / "fake" / "tests" / "upstream").exists()


def test_a_breaking_patch_is_a_regression_with_its_test_id(fake, test_python):
    fake.build_series(GOOD, BREAK_MUL, extra=LISTED)
    root = _tests_tree(fake)
    proc, data, summary = _verify(fake, test_python, f"path:{root}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # The patches themselves pass every check: only the regression fails the run.
    assert [p["verdict"] for p in data["patches"]] == ["ok", "ok"]
    [part] = data["upstream_tests"]
    assert part["ok"] is False and data["ok"] is False
    [regression] = part["regressions"]
    assert regression["id"] == "tests.upstream.test_core::test_mul_by_zero"
    assert (regression["base"], regression["series"]) == ("passed", "failed")
    assert regression["log"].endswith("upstream-tests.series.log")
    assert (
        "REGRESSION tests.upstream.test_core::test_mul_by_zero: passed on the base, failed with the series"
        in proc.stdout
    )
    assert "fake upstream tests: FAIL (1 regression(s))" in proc.stdout
    assert "regression `tests.upstream.test_core::test_mul_by_zero`" in summary


def test_tests_from_a_git_ref(fake, test_python):
    fake.build_series(GOOD, extra=LISTED)
    root = _tests_tree(fake)
    (root / "src").mkdir()
    (root / "src" / "big.py").write_text("# not fetched: only tests/ is checked out\n", encoding="utf-8")
    git(root, "init", "--quiet", "--initial-branch=main")
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "-m", "upstream tests")
    git(root, "tag", "v1.0")
    # `{version}` in the ref is the target's pinned version.
    proc, data, _ = _verify(fake, test_python, f"git:{root.as_uri()}@v{{version}}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [part] = data["upstream_tests"]
    assert part["states"]["series"]["passed"] == 3
    fetched = list((fake.work / "upstream-tests" / "sources").iterdir())
    assert len(fetched) == 1 and (fetched[0] / "tests" / "upstream" / "test_core.py").is_file()
    assert not (fetched[0] / "src").exists()


def test_tests_from_a_git_ref_on_a_base_from_git(fake, test_python):
    """The base fetched from a local git URL too (a shallow fetch of one commit): the first run used to stop with
    exit 2, as the checkout of upstream's tests refused the base's and the series' commits; a rerun is the same."""
    fake.build_series(GOOD, extra=LISTED)
    upstream = fake.upstream_repo(fake.root / "upstream")
    for rel, text in UPSTREAM_TESTS.items():
        (upstream / rel).parent.mkdir(parents=True, exist_ok=True)
        (upstream / rel).write_text(text, encoding="utf-8")
    git(upstream, "add", "--all")
    git(upstream, "commit", "--quiet", "-m", "upstream tests")
    git(upstream, "tag", "v1.0")
    (upstream / "README.md").write_text("# fakepkg\n\nAfter the release.\n", encoding="utf-8")
    git(upstream, "commit", "--quiet", "-am", "after the release")
    bare = fake.root / "upstream.git"
    git(fake.root, "clone", "--quiet", "--bare", str(upstream), str(bare))
    url = bare.as_uri()
    report = fake.root / "report.json"
    for _ in range(2):
        options = ["--base", f"git:{url}@main", "--upstream-tests", f"git:{url}@v1.0", "--json", str(report)]
        proc = fake.run("verify", "--python", test_python, "--target", "fake", *options)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.startswith(f"verify: fake on {url}@main, commit {git(bare, 'rev-parse', 'main')} ")
        [part] = json.loads(report.read_text(encoding="utf-8"))["upstream_tests"]
        assert part["ok"] is True and part["states"]["series"]["passed"] == 3


def test_bad_upstream_tests_input(fake, test_python):
    fake.build_series(GOOD)
    root = _tests_tree(fake)
    line = one_error_line(fake.run("verify", "--python", test_python, "--upstream-tests", f"path:{root}"))
    assert "fake lists no upstream_tests in series.toml" in line
    fake.build_series(GOOD, extra=LISTED)
    line = one_error_line(fake.run("verify", "--python", test_python, "--upstream-tests", "tests"))
    assert "bad --upstream-tests 'tests'" in line
    line = one_error_line(fake.run("verify", "--python", test_python, "--upstream-tests", f"path:{fake.root}/nowhere"))
    assert "has no tests/ folder" in line
    # before any patch is placed (no scratch checkout), not after the whole series
    assert not (fake.work / "verify").exists()
    fake.write_manifest(extra='upstream_tests = ["/abs/test_x.py"]\n')
    line = one_error_line(fake.run("verify", "--python", test_python))
    assert "upstream_tests must list relative .py files" in line


def test_a_declared_regression_does_not_fail_and_a_stale_declaration_does(fake, test_python):
    names = fake.build_series(GOOD, BREAK_MUL, extra=LISTED)
    root = _tests_tree(fake)
    manifest = fake.manifest.read_text(encoding="utf-8")

    def declare(test):
        table = f'\n[targets.fake.upstream_tests_changed]\n"{names[1]}" = [{{ test = "{test}", reason = "keep a" }}]\n'
        fake.manifest.write_text(manifest + table, encoding="utf-8")

    # test_mul_by_zero asserts what BREAK_MUL changes on purpose: declared, the run passes.
    declare("tests/upstream/test_core.py::test_mul_by_zero")
    junit = fake.root / "junit.xml"
    proc, data, summary = _verify(fake, test_python, f"path:{root}", "--junit", str(junit))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [part] = data["upstream_tests"]
    assert part["ok"] is True and part["regressions"] == [] and part["stale"] == []
    assert [(d["patch"], d["id"], d["reason"]) for d in part["declared"]] == [
        (names[1], "tests.upstream.test_core::test_mul_by_zero", "keep a")
    ]
    assert "fake upstream tests: no undeclared regression (1 declared: test_mul_by_zero by 0002)" in proc.stdout
    assert "declared by `0002` `tests.upstream.test_core::test_mul_by_zero`" in summary
    assert 'name="tests.upstream.test_core::test_mul_by_zero"' in junit.read_text(encoding="utf-8")
    # test_mul passes with the series: the declaration is stale, and test_mul_by_zero an undeclared regression.
    declare("tests/upstream/test_core.py::test_mul")
    proc, data, _ = _verify(fake, test_python, f"path:{root}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [part] = data["upstream_tests"]
    assert [s["why"] for s in part["stale"]] == ["it passes with the series"] and part["declared"] == []
    assert [r["id"] for r in part["regressions"]] == ["tests.upstream.test_core::test_mul_by_zero"]
    assert "STALE DECLARATION tests/upstream/test_core.py::test_mul by 0002: it passes with the series" in proc.stdout
    assert "fake upstream tests: FAIL (1 regression(s), 1 stale declaration(s))" in proc.stdout


# The change a pull request makes to test_mul_by_zero (context lines start with a space)
MUL_BY_ZERO_UPDATE = "\n".join(
    [
        "diff --git a/tests/upstream/test_core.py b/tests/upstream/test_core.py",
        "--- a/tests/upstream/test_core.py",
        "+++ b/tests/upstream/test_core.py",
        "@@ -11,7 +11,7 @@ def test_mul():",
        " ",
        " ",
        " def test_mul_by_zero():",
        "-    assert mul(3, 0) == 0",
        "+    assert mul(3, 0) == {want}",
        " ",
        " ",
        " def test_add():",
        "",
    ]
)


def test_a_declared_change_to_an_upstream_test_is_run_with_the_change(fake, test_python):
    names = fake.build_series(GOOD, BREAK_MUL, extra=LISTED)
    root = _tests_tree(fake)
    manifest = fake.manifest.read_text(encoding="utf-8")
    update = fake.manifest.parent / "upstream-tests" / "mul.diff"
    update.parent.mkdir(parents=True, exist_ok=True)
    test = "tests/upstream/test_core.py::test_mul_by_zero"
    table = (
        f'\n[targets.fake.upstream_tests_changed]\n"{names[1]}" = [{{ test = "{test}", reason = "keep a", '
        'diff = "upstream-tests/mul.diff" }]\n'
    )
    fake.manifest.write_text(manifest + table, encoding="utf-8")

    # the pull request's change to the test: it passes with the series (and fails on the base, which keeps 0)
    update.write_text(MUL_BY_ZERO_UPDATE.format(want=3), encoding="utf-8")
    proc, data, _ = _verify(fake, test_python, f"path:{root}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [part] = data["upstream_tests"]
    [change] = part["declared"]
    assert change["updated"] == {"base": "failed", "series": "passed"} and change["diff"].endswith("mul.diff")
    assert "updated by mul.diff: failed on the base, passed with the series" in proc.stdout
    # the tests tree is left as upstream has it
    assert "== 0" in (root / "tests/upstream/test_core.py").read_text(encoding="utf-8")

    # a change that does not make the test pass with the series fails the run
    update.write_text(MUL_BY_ZERO_UPDATE.format(want=4), encoding="utf-8")
    proc, data, _ = _verify(fake, test_python, f"path:{root}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [part] = data["upstream_tests"]
    assert part["declared"][0]["updated"]["series"] == "failed"
    assert any("with its pull request's change (mul.diff) is failed with the series" in p for p in part["problems"])

    # one that does not apply fails it too
    update.write_text(MUL_BY_ZERO_UPDATE.replace("== 0\n", "== 7\n").format(want=3), encoding="utf-8")
    proc, data, _ = _verify(fake, test_python, f"path:{root}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert any("does not apply" in p for p in data["upstream_tests"][0]["problems"])
