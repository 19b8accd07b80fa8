"""Command-line surface: help, usage errors and manifest errors are one line and exit 2."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from seriesfixtures import GOOD, REPO_ROOT, SERIES, one_error_line


@pytest.mark.quick
def test_help_lists_the_commands():
    proc = subprocess.run([sys.executable, str(SERIES), "--help"], capture_output=True, text=True)
    assert proc.returncode == 0
    for command in ("checkout", "apply", "export", "verify", "pr", "bench", "selftest"):
        assert command in proc.stdout


@pytest.mark.quick
def test_usage_errors_are_one_line(fake):
    assert "invalid choice: 'frobnicate'" in one_error_line(fake.run("frobnicate"))
    assert "--repo" in one_error_line(fake.run("apply"))
    assert "invalid choice: 'tpu'" in one_error_line(fake.run("verify", "--device", "tpu"))
    for bad in ("-5", "0", "soon"):
        line = one_error_line(fake.run("verify", "--test-timeout", bad))
        assert "argument --test-timeout: " in line and f"{bad}" in line, line


def test_every_help_starts_with_its_command_line():
    sys.path.insert(0, str(SERIES.parent))
    from seriestool import cli

    commands = [module.NAME for module in cli.COMMANDS]
    assert "branches" in commands
    for command in commands:
        proc = subprocess.run([sys.executable, str(SERIES), command, "--help"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        description = proc.stdout.split("\n\n", 1)[1]
        assert not description.startswith("\\") and description.split("\n", 1)[0].endswith("."), (command, description)


def test_global_options_work_after_the_command(fake):
    fake.seed_cache()
    proc = subprocess.run(
        [sys.executable, str(SERIES), "checkout", "--work", str(fake.work), "--manifest", str(fake.manifest)],
        capture_output=True,
        text=True,
        env=fake.env(),
    )
    assert proc.returncode == 0, proc.stderr
    assert fake.checkout_dir.is_dir()


def test_manifest_errors(fake):
    fake.manifest.unlink()
    assert "does not exist" in one_error_line(fake.run("checkout"))
    fake.manifest.write_text("[targets.fake\n", encoding="utf-8")
    assert "is not valid TOML" in one_error_line(fake.run("checkout"))
    fake.manifest.write_text('[targets.fake]\npackage = "x"\n', encoding="utf-8")
    assert "lacks version, sha256, git_url, tests, patches" in one_error_line(fake.run("checkout"))
    fake.write_manifest(["../escape.patch"])
    assert "bad patch file name '../escape.patch'" in one_error_line(fake.run("checkout"))
    fake.write_manifest(extra='verify_with = ["fake"]\n')
    assert "verify_with must list other targets" in one_error_line(fake.run("checkout"))
    fake.write_manifest(extra='verify_with = ["nowhere"]\n')
    assert "verify_with must list other targets" in one_error_line(fake.run("checkout"))
    # A key the manifest does not know is a typo, in every table.
    fake.write_manifest(extra='soruce_dir = "src"\n')
    line = one_error_line(fake.run("checkout"))
    assert "[targets.fake] has an unknown key 'soruce_dir' (did you mean 'source_dir'?)" in line
    fake.manifest.write_text("shema = 1\n" + fake.manifest.read_text(encoding="utf-8"), encoding="utf-8")
    assert "the top level has an unknown key 'shema' (did you mean 'schema'?)" in one_error_line(fake.run("pr", "1"))
    fake.write_manifest(extra="\n[targets.fake.extras]\nx = 1\n")
    assert "[targets.fake] has an unknown key 'extras'" in one_error_line(fake.run("checkout"))


def test_the_project_manifest_loads():
    sys.path.insert(0, str(SERIES.parent))
    from seriestool import manifest

    loaded = manifest.load(REPO_ROOT / "patches" / "series.toml")
    assert set(loaded.targets) == {"transformers", "accelerate"}


def test_python_runs_against_the_checkout(fake):
    fake.build_series(GOOD)
    code = "from fakepkg.core import add; print(add(2, 3))"
    proc = fake.run("python", "--python", sys.executable, "--", "-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "5"  # the patched add(), not the base's a - b

    missing = fake.run("python", "--python", sys.executable, "--dir", str(fake.root / "nowhere"), "--", "-c", "1")
    assert "is no checkout of fake" in one_error_line(missing)


def test_selftest_runs_only_the_tests_named(tmp_path):
    sys.path.insert(0, str(SERIES.parent))
    from seriestool.commands.selftest import pytest_command

    tests = REPO_ROOT / "tests"
    whole = pytest_command("py", REPO_ROOT, ["--", "-m", "not network"], REPO_ROOT)
    assert whole[-3:] == [str(tests), "-m", "not network"]
    one = pytest_command("py", REPO_ROOT, ["--", "tests/test_cli.py", "-k", "usage"], REPO_ROOT)
    assert str(tests) not in one and one[-3:] == [str(tests / "test_cli.py"), "-k", "usage"]
    node = pytest_command("py", REPO_ROOT, ["test_cli.py::test_help_lists_the_commands"], tests)
    assert node[-1] == f"{tests / 'test_cli.py'}::test_help_lists_the_commands" and str(tests) not in node
    # A value that names a file outside tests/ (e.g. --junitxml's) does not narrow the run.
    (tmp_path / "out.xml").write_text("", encoding="utf-8")
    assert str(tests) in pytest_command("py", REPO_ROOT, ["--junitxml", "out.xml"], tmp_path)


def test_selftest_of_one_file_collects_only_that_file():
    # Through the real command (needs the pinned venv, which `series.py selftest` has built already).
    work = Path(os.environ.get("SERIES_WORK") or REPO_ROOT / ".work")
    sys.path.insert(0, str(SERIES.parent))
    from seriestool import pyenv

    venv = work / f"venv-{pyenv.venv_key(REPO_ROOT / 'scripts' / 'requirements-test.txt')}"
    if not (venv / pyenv.MARKER).is_file():
        pytest.skip("the pinned venv is not built")
    cmd = [sys.executable, str(SERIES), "--work", str(work), "selftest", "--", "tests/test_cli.py", "--collect-only"]
    proc = subprocess.run(cmd + ["-q"], cwd=REPO_ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    collected = [line for line in proc.stdout.splitlines() if "::" in line]
    assert collected and all(line.startswith("tests/test_cli.py::") for line in collected), proc.stdout
