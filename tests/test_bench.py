"""`bench`: its two source trees per target, and on the real pinned sdists the host syncs the series adds.

The sync count is deterministic, so it is asserted here: without a gradient scaler the patched Trainer
reads no tensor on the host more often per optimizer step than the unpatched one, and with fp16 (CPU
GradScaler) at most once more, on the fused optimizer path only. It needs torch (the pinned venv, as
`series.py selftest` runs it) and the package index once, like test_e2e.py; deselect with
`-m "not network"`.
"""

import json
import os
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest
from seriesfixtures import GOOD, NOT_RED, REPO_ROOT, SERIES, git


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from seriestool import benchmark  # noqa: E402
from seriestool.context import Context  # noqa: E402


# Host syncs per optimizer step the series may add: only the fused (AMP-aware) optimizer under a scaler
# has to read whether its kernel skipped the update.
ALLOWED_ADDED_SYNCS = {"fp32": 0, "fp16-adamw": 0, "fp16-adamw-fused": 1, "ga4": 0, "cls-ga4": 0}


def _context(fake):
    return Context(Namespace(work=str(fake.work), manifest=str(fake.manifest)))


def test_trees_are_the_base_and_the_series_and_follow_the_patches(fake, monkeypatch):
    monkeypatch.delenv("SERIES_DOWNLOADS", raising=False)
    fake.build_series(GOOD)
    ctx = _context(fake)
    target = ctx.manifest.default_target()
    trees = benchmark.prepare_trees(ctx, target)
    assert "return a - b" in (trees["base"] / "src/fakepkg/core.py").read_text(encoding="utf-8")
    assert "return a + b" in (trees["series"] / "src/fakepkg/core.py").read_text(encoding="utf-8")
    first = git(trees["series"], "rev-parse", "HEAD")

    # Unchanged series: reused as they are.
    sentinel = trees["series"] / ".git" / "sentinel"
    sentinel.write_text("kept", encoding="utf-8")
    assert benchmark.prepare_trees(ctx, target) == trees and sentinel.exists()

    # A file changed by hand in a tree, or a new patch: made again.
    (trees["base"] / "README.md").write_text("edited\n", encoding="utf-8")
    assert benchmark.prepare_trees(ctx, target) == trees and not sentinel.exists()
    assert git(trees["base"], "status", "--porcelain") == ""
    sentinel.write_text("kept", encoding="utf-8")
    fake.build_series(GOOD, NOT_RED)
    ctx = _context(fake)
    trees = benchmark.prepare_trees(ctx, ctx.manifest.default_target())
    assert not sentinel.exists()
    assert git(trees["series"], "rev-list", "--count", "series/base..HEAD") == "2"
    assert git(trees["series"], "rev-parse", "HEAD") != first
    assert "(a times b)" not in (trees["base"] / "src/fakepkg/core.py").read_text(encoding="utf-8")


@pytest.mark.network
def test_series_adds_no_host_sync_but_the_fused_fp16_one(tmp_path):
    pytest.importorskip("torch", reason="needs torch: run it with `python3 scripts/series.py selftest`")
    env = dict(os.environ, SERIES_DOWNLOADS=str(REPO_ROOT / ".work" / "downloads"))
    env.pop("SERIES_WORK", None)
    report = tmp_path / "bench.json"
    cmd = [sys.executable, str(SERIES), "--work", str(tmp_path / "work"), "bench", "--count-only"]
    cmd += ["--warmup", "2", "--count-steps", "4", "--python", sys.executable, "--json", str(report)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    cases = {row["case"]: row for row in json.loads(report.read_text(encoding="utf-8"))["cases"]}
    assert sorted(cases) == sorted(ALLOWED_ADDED_SYNCS)
    for name, row in cases.items():
        base, series = row["base"]["syncs_per_step"], row["series"]["syncs_per_step"]
        # The counter sees what is there: the NaN/inf filter of the logged loss (`logging_nan_inf_filter`,
        # on by default) reads `isnan(loss)` and `isinf(loss)` on the host after every micro-batch.
        assert base >= 2 * row["accumulation"], (name, row["base"]["syncs"])
        assert series - base <= ALLOWED_ADDED_SYNCS[name], (name, row["base"]["syncs"], row["series"]["syncs"])
