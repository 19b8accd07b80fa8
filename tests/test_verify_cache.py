"""`verify` on a warm work folder: outcomes of identical pytest runs are reused, bytecode is never stale."""

import json
import os
import py_compile
import sys
from pathlib import Path

from seriesfixtures import GOOD, NOT_RED, git


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from seriestool.git import Repo  # noqa: E402
from seriestool.runners import drop_stale_bytecode  # noqa: E402


def _verify(fake, python, *args):
    report = fake.root / "report.json"
    proc = fake.run("verify", "--python", python, "--json", str(report), *args)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    data = json.loads(report.read_text(encoding="utf-8"))
    return proc, {p["name"].split("-", 1)[0]: p for p in data["patches"]}


def test_identical_runs_are_reused_and_changed_or_failed_ones_run_again(fake, test_python):
    names = fake.build_series(GOOD, NOT_RED)
    _, first = _verify(fake, test_python)
    assert not any(first[n][check]["cached"] for n in ("0001", "0002") for check in ("red", "green"))

    proc, again = _verify(fake, test_python)
    good = again["0001"]
    assert good["verdict"] == "ok" and good["red"]["cached"] and good["green"]["cached"]
    assert (good["red"]["failed"], good["red"]["passed"]) == (first["0001"]["red"]["failed"], 1)
    assert "test_add.py" in Path(good["red"]["log"]).read_text(encoding="utf-8")
    # Only expected outcomes are kept: the red run of 0002 is not red, so it runs again.
    assert again["0002"]["green"]["cached"] and not again["0002"]["red"]["cached"]
    assert again["0002"]["verdict"] == "fail"
    assert "3 of 4 pytest runs: outcome of an identical earlier run" in proc.stdout

    _, rerun = _verify(fake, test_python, "--no-cache")
    assert not any(rerun[n][check]["cached"] for n in ("0001", "0002") for check in ("red", "green"))
    assert rerun["0001"]["verdict"] == "ok"

    # A changed test file changes the tree tested: both runs of that patch run again.
    patch = fake.patches_dir / "fake" / names[0]
    patch.write_text(
        patch.read_text(encoding="utf-8").replace("assert add(0, 0) == 0", "assert add(0, 1) == 1"), encoding="utf-8"
    )
    _, changed = _verify(fake, test_python)
    assert changed["0001"]["verdict"] == "ok"
    assert not changed["0001"]["red"]["cached"] and not changed["0001"]["green"]["cached"]


def _commit(repo_dir, files):
    for name, text in files.items():
        (repo_dir / name).write_text(text, encoding="utf-8")
    git(repo_dir, "add", "--all")
    git(repo_dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "state")
    return git(repo_dir, "rev-parse", "HEAD^{tree}")


def _pyc(source):
    return Path(py_compile.compile(str(source), doraise=True))


def test_bytecode_of_changed_files_is_dropped_even_within_the_same_second(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "--quiet")
    repo = Repo(root)
    first = _commit(root, {"core.py": "X = 1 - 1\n", "other.py": "Y = 2\n"})
    core_pyc, other_pyc = _pyc(root / "core.py"), _pyc(root / "other.py")

    # Nothing recorded yet: every bytecode file in the checkout could be stale, so all of it goes.
    drop_stale_bytecode(repo, first)
    assert not core_pyc.exists() and not other_pyc.exists()
    core_pyc, other_pyc = _pyc(root / "core.py"), _pyc(root / "other.py")

    # Same size and same mtime: Python itself would take the old bytecode for the new source.
    stamp = os.stat(root / "core.py").st_mtime_ns
    second = _commit(root, {"core.py": "X = 1 + 1\n"})
    os.utime(root / "core.py", ns=(stamp, stamp))
    drop_stale_bytecode(repo, second)
    assert not core_pyc.exists() and other_pyc.exists()

    # The same tree again: nothing to drop.
    core_pyc = _pyc(root / "core.py")
    drop_stale_bytecode(repo, second)
    assert core_pyc.exists() and other_pyc.exists()
