"""Command-line surface: help, usage errors and manifest errors are one line and exit 2."""

import subprocess
import sys

from seriesfixtures import GOOD, SERIES, one_error_line


def test_help_lists_the_commands():
    proc = subprocess.run([sys.executable, str(SERIES), "--help"], capture_output=True, text=True)
    assert proc.returncode == 0
    for command in ("checkout", "apply", "export", "verify", "pr", "bench", "selftest"):
        assert command in proc.stdout


def test_usage_errors_are_one_line(fake):
    assert "invalid choice: 'frobnicate'" in one_error_line(fake.run("frobnicate"))
    assert "--repo" in one_error_line(fake.run("apply"))
    assert "invalid choice: 'tpu'" in one_error_line(fake.run("verify", "--device", "tpu"))


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


def test_python_runs_against_the_checkout(fake):
    fake.build_series(GOOD)
    code = "from fakepkg.core import add; print(add(2, 3))"
    proc = fake.run("python", "--python", sys.executable, "--", "-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "5"  # the patched add(), not the base's a - b

    missing = fake.run("python", "--python", sys.executable, "--dir", str(fake.root / "nowhere"), "--", "-c", "1")
    assert "is no checkout of fake" in one_error_line(missing)
