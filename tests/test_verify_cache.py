"""`verify` on a warm work folder: outcomes of identical pytest runs are reused (stale bytecode:
tests/unit/test_runners.py)."""

import json
from pathlib import Path

from seriesfixtures import GOOD, NOT_RED


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
