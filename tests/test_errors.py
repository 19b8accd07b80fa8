"""Bad input and a bad environment: one `series: error:` line, exit status 2, no traceback, nothing changed."""

import os
import subprocess
import sys

import pytest
from seriesfixtures import GOOD, SERIES, git, one_error_line


sys.path.insert(0, str(SERIES.parent))

from seriestool import cli, context  # noqa: E402


def _run(fake, *args):
    cmd = [sys.executable, str(SERIES), "--manifest", str(fake.manifest), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=fake.env(), stdin=subprocess.DEVNULL)


@pytest.mark.quick
def test_work_folder_under_a_file(fake):
    blocker = fake.root / "a-file"
    blocker.write_text("", encoding="utf-8")
    for command in (["checkout"], ["verify"], ["selftest"], ["export"]):
        line = one_error_line(_run(fake, "--work", str(blocker / "work"), *command))
        assert f"cannot use the work folder {blocker / 'work'}" in line, line


def test_read_only_work_folder(fake, monkeypatch, capsys):
    # As root a read-only folder is still writable: make the write fail the way it does for a user.
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(fake.work))

    fake.work.mkdir()
    monkeypatch.setattr(context.tempfile, "mkstemp", refuse)
    code = cli.main(["--work", str(fake.work), "--manifest", str(fake.manifest), "checkout"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"series: error: cannot use the work folder {fake.work}: Permission denied")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write to a read-only folder")
def test_read_only_work_folder_for_real(fake):
    fake.work.mkdir()
    fake.work.chmod(0o555)
    try:
        assert "cannot use the work folder" in one_error_line(fake.run("checkout"))
    finally:
        fake.work.chmod(0o755)


@pytest.mark.parametrize("cut", ["middle-of-a-hunk", "in-a-file-header", "before-the-diff", "empty"])
def test_corrupt_patch_is_named_corrupt(fake, cut):
    (name,) = fake.build_series(GOOD)
    patch = fake.patches_dir / "fake" / name
    text = patch.read_text(encoding="utf-8")
    cuts = {
        "middle-of-a-hunk": text.index("def test_add_zero"),
        "in-a-file-header": text.index("+++ b/tests/regress/test_add.py") + 12,
        "before-the-diff": text.index("---\n"),
        "empty": 0,
    }
    patch.write_text(text[: cuts[cut]], encoding="utf-8")
    for args in (["checkout", "--replace"], ["verify"], ["apply", "--repo", str(fake.root)]):
        line = one_error_line(fake.run(*args))
        assert f"corrupt patch {name} of fake" in line, (args, line)
        assert "does not apply" not in line and "conflict" not in line


def test_base_git_url_keeps_gits_whole_message(fake):
    fake.build_series(GOOD)
    line = one_error_line(fake.run("checkout", "--dir", str(fake.root / "other"), "--base", "git:notaurl"))
    assert "'notaurl' does not appear to be a git repository" in line, line
    assert "Could not read from remote repository" in line and "the repository exists" in line, line
    assert not (fake.root / "other").exists()


def test_bare_repository_is_called_bare(fake):
    fake.build_series(GOOD)
    clone = fake.upstream_repo(fake.root / "up")
    bare = fake.root / "bare.git"
    git(fake.root, "clone", "--quiet", "--bare", str(clone), str(bare))
    line = one_error_line(fake.run("checkout", "--dir", str(fake.root / "other"), "--base", f"path:{bare}"))
    assert "is a bare git repository" in line and "not a git repository" not in line, line
    line = one_error_line(fake.run("apply", "--repo", str(bare)))
    assert "is a bare git repository" in line, line


def test_verify_with_a_bad_base_leaves_the_scratch_checkout_alone(fake, test_python):
    fake.build_series(GOOD)
    fake.ok("verify", "--python", test_python)
    scratch = fake.work / "verify" / "fake"
    marker = scratch / ".git" / "kept"
    marker.write_text("", encoding="utf-8")
    head = git(scratch, "rev-parse", "HEAD")
    missing = fake.root / "nonexistent"
    line = one_error_line(fake.run("verify", "--python", test_python, "--base", f"path:{missing}"))
    assert f"base path {missing} does not exist" in line, line
    line = one_error_line(fake.run("verify", "--python", test_python, "--base", "git:notaurl"))
    assert "does not appear to be a git repository" in line, line
    assert marker.exists() and git(scratch, "rev-parse", "HEAD") == head
    assert sorted(p.name for p in scratch.parent.iterdir()) == ["fake"]
