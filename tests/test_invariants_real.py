"""`series.py invariants --replay` on the real release (the pinned sdist, the worker in the pinned venv): a plain
configuration with a resume breaks nothing, a BERT classifier with accumulation 2 shows issue 28's x GA gradient
(and the logged loss and `train_loss` that follow it),
and an fp16 skip shows seed 000's count. Skipped without the pinned venv or the sdist in the download cache (any
`verify`, `downstream` or `invariants` run makes both)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from seriesfixtures import REPO_ROOT


sys.path.insert(0, str(REPO_ROOT / "scripts"))

from seriestool import manifest, pyenv  # noqa: E402


PLAIN = {
    "batch_size": 1,
    "callback": None,
    "epochs": 1,
    "fp16": False,
    "ga": 2,
    "inject": [],
    "learning_rate": 0.01,
    "logging": 1,
    "max_grad_norm": 0.0,
    "max_steps": 3,
    "model": "reg_kw",
    "optim": "adamw_torch",
    "resume": {"batch_size": 1, "checkpoint": 0, "ga": 2},
    "save_steps": 1,
    "schedule": "linear",
    "seq_len": 2,
    "streamed": False,
    "targets": [2, 1, 0, 2, 2],
    "warmup": 1,
}


@pytest.fixture(scope="module")
def work():
    work = Path(os.environ.get("SERIES_WORK") or REPO_ROOT / ".work")
    venv = work / f"venv-{pyenv.venv_key(REPO_ROOT / 'scripts' / 'requirements-test.txt')}"
    if not (venv / pyenv.MARKER).is_file() or not list((work / "downloads").glob("*/transformers-*.tar.gz")):
        pytest.skip("no pinned venv or sdist: run `python3 scripts/series.py invariants` once")
    return work


def _replay(work, tmp_path, **changes):
    report = tmp_path / "report.json"
    cmd = [sys.executable, str(REPO_ROOT / "scripts" / "series.py"), "--work", str(work), "invariants"]
    cmd += ["--tree", "release", "--replay", json.dumps(dict(PLAIN, **changes)), "--json", str(report)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]  # the release's findings do not fail
    (tree,) = json.loads(report.read_text(encoding="utf-8"))["trees"]
    assert (
        tree["versions"]["transformers"]
        == manifest.load(REPO_ROOT / "patches" / "series.toml").target("transformers").version
    )
    return {v["invariant"]: v["found"] for v in tree["violations"]}


def test_a_plain_configuration_with_a_resume_breaks_nothing_on_the_release(work, tmp_path):
    assert _replay(work, tmp_path) == {}


def test_the_release_scales_a_classifier_head_by_the_accumulation(work, tmp_path):
    found = _replay(work, tmp_path, model="bert_cls", targets=[1] * 5, resume=None, save_steps=0)
    # the gradient, its logged norm, and the losses that follow it
    assert set(found) == {"window-gradient", "logged-grad-norm", "logged-loss", "train-metrics"}
    assert "|grad| / |reference| = 2.0000" in found["window-gradient"][0]


def test_the_release_counts_a_skipped_step_as_a_step(work, tmp_path):
    found = _replay(
        work, tmp_path, fp16=True, inject=[1], max_grad_norm=1e9, resume=None, save_steps=0, count_skipped_steps=False
    )
    assert found["updates-counted"] == ["first run: global_step 3 but 2 applied updates"]
    assert found["skip-count"] == ["first run: skip count None but 1 attempt(s) skipped, 1 inf(s) injected"]
