"""The invariants: each a function of a case's configuration and observation that returns what it finds wrong
(a list of texts; empty when the invariant holds). Expected values come from `reference` and from the faults the
harness injected, never from the Trainer's own counters. Each docstring names the series' claim it checks.
"""

import math
from collections.abc import Callable
from typing import Any

import torch

from . import reference
from .case import COUNT_KEYS, Observation, Run


GRAD_RTOL = 1e-5
GRAD_ATOL = 1e-7
LOSS_RTOL = 1e-4
# fp16 cases run under accelerate's CPU autocast (float16 matmuls): about 3 significant digits
FP16_RTOL = 1e-2
LR_RTOL = 1e-6

Judge = Callable[[Observation], list[str]]


def _runs(obs: Observation) -> list[tuple[str, Run]]:
    runs = [("first run", obs.first)]
    if obs.resumed is not None:
        runs.append(("after resume", obs.resumed))
    return runs


def _injected(run: Run) -> int:
    return sum(1 for a in run.attempts if a["injected"])


def _applied(run: Run) -> int:
    return sum(1 for a in run.attempts if a["applied"])


def _counts_skipped(obs: Observation) -> bool:
    """The drawn `count_skipped_steps` (0012): whether a skipped optimizer step is a step (the default)."""
    return bool(obs.config.get("count_skipped_steps", True))


def _same_arguments(obs: Observation) -> bool:
    resume = obs.config["resume"]
    return resume is not None and (resume["batch_size"], resume["ga"]) == (obs.config["batch_size"], obs.config["ga"])


def window_gradient(obs: Observation) -> list[str]:
    """The gradient of every applied update equals the reference's token-weighted mean over the targets of its
    window (the micro-batches read since the previous attempt). Series claims: 0003-0006 (token counts, the short
    last window of a stream gets its step, no gradient leaks into the next pass)."""
    found = []
    rtol = FP16_RTOL if obs.config["fp16"] else GRAD_RTOL
    for where, run in _runs(obs):
        for a in run.attempts:
            if not a["applied"] or a["injected"]:
                continue
            expected = a["expected"]["grad"]
            diff = float((a["grad"] - expected).norm())
            scale = float(expected.norm())
            if not diff <= GRAD_ATOL + rtol * scale:
                ratio = float(a["grad"].norm()) / scale if scale else math.inf
                found.append(
                    f"{where}: attempt {a['index']} ({a['micro_batches']} micro-batch(es), "
                    f"{a['expected']['targets']} target(s)): |grad| / |reference| = {ratio:.4f}, "
                    f"|diff| {diff:.3g}"
                )
    return found[:3]


def _injected_before(obs: Observation, run: Run) -> int:
    """Infs injected in the first run before the checkpoint `run` resumed from (0 for the first run)."""
    if run is obs.first or obs.resumed_from is None:
        return 0
    return sum(1 for a in obs.first.attempts if a["injected"] and a["index"] < obs.resumed_from["attempts"])


def updates_counted(obs: Observation) -> list[str]:
    """An attempt is skipped exactly when the harness injected an inf into its window, and `global_step` equals the
    optimizer steps taken (by default, as 5.24.0 counts) or, with `count_skipped_steps=False`, the applied updates
    (the optimizer's own step count), also after a resume. Series claims: 0011, 0012 (seed 000)."""
    found = []
    for where, run in _runs(obs):
        if run.error_kind is not None:
            continue
        for a in run.attempts:
            if a["applied"] is not None and a["applied"] == a["injected"]:
                state = "applied" if a["applied"] else "skipped"
                found.append(f"{where}: attempt {a['index']} was {state} (inf injected: {a['injected']})")
                break
        if _counts_skipped(obs):
            expected, what = run.first_attempt + len(run.attempts), "optimizer steps taken"
        else:
            expected, what = run.optimizer_steps, "applied updates"
        if run.global_step != expected:
            found.append(f"{where}: global_step {run.global_step} but {expected} {what}")
    return found


def skip_count(obs: Observation) -> list[str]:
    """The Trainer's skip count equals the infs the harness injected, in the run and after a resume from any
    checkpoint, with any batch size or accumulation. Series claims: 0011, 0012 (issue 27 items 2, 3)."""
    found = []
    for where, run in _runs(obs):
        if run.error_kind is not None:
            continue
        skips = _injected(run) + _injected_before(obs, run)
        if (run.skipped or 0) != skips:
            found.append(f"{where}: skip count {run.skipped} but {skips} inf(s) injected")
    return found


def run_length(obs: Observation) -> list[str]:
    """A `max_steps` run without a stopping callback ends at `global_step == max_steps` (also after a resume); an
    epoch run without one attempts the windows of its epochs (closed form). Series claim: 0012 (extra passes make
    up skipped steps only), issue 27 item 2 (the right end after a resume)."""
    config = obs.config
    if config["callback"] is not None:
        return []
    found = []
    for where, run in _runs(obs):
        if run.error_kind is None and config["max_steps"] > 0 and run.global_step != config["max_steps"]:
            found.append(f"{where}: ended at global_step {run.global_step} of max_steps {config['max_steps']}")
    expected = config["epochs"] * reference.windows_per_pass(config)
    if config["max_steps"] <= 0 and obs.first.error_kind is None and len(obs.first.attempts) != expected:
        found.append(f"first run: {len(obs.first.attempts)} optimizer attempts, {expected} windows in the epochs")
    return found


def step_end_once(obs: Observation) -> list[str]:
    """`on_step_end` sees each `global_step` once, strictly increasing, from the one the run starts at to the one it
    ends at. Series claim: the `TrainerCallback` contract of 0012 (issue 27 item 4: a callback keyed on
    `global_step` fires once per step)."""
    found = []
    for where, run in _runs(obs):
        if run.error_kind is not None:
            continue
        expected = list(range(run.initial_step + 1, (run.global_step or 0) + 1))
        if run.step_end != expected:
            found.append(f"{where}: on_step_end saw global_step {_short(run.step_end)}, expected {_short(expected)}")
    return found


def step_begin_once(obs: Observation) -> list[str]:
    """`on_step_begin` sees a `global_step` again only for an attempt that was skipped there (a step cut by the end
    of a pass does not begin twice). Series claim: 0012 (issue 27 item 4)."""
    found = []
    for where, run in _runs(obs):
        if run.error_kind is not None:
            continue
        skipped_at: dict[int, int] = {}
        for a in run.attempts:
            if a["applied"] is False:
                skipped_at[a["global_step"]] = skipped_at.get(a["global_step"], 0) + 1
        for step in sorted(set(run.step_begin)):
            count = run.step_begin.count(step)
            if count > 1 + skipped_at.get(step, 0):
                found.append(
                    f"{where}: on_step_begin saw global_step {step} {count} times "
                    f"({skipped_at.get(step, 0)} skipped attempt(s) there): {_short(run.step_begin)}"
                )
                break
    return found


def learning_rates(obs: Observation) -> list[str]:
    """The learning rate of the n-th applied update equals the schedule's closed form at n (a skipped attempt does
    not advance the schedule). Series claims: 0011 and accelerate 0001 (fused optimizers' skips)."""
    found = []
    runs = [("first run", obs.first)] + (
        [("after resume", obs.resumed)] if _same_arguments(obs) and obs.resumed else []
    )
    for where, run in runs:
        n = (
            0
            if run is obs.first
            else sum(1 for a in obs.first.attempts if a["applied"] and a["index"] < run.first_attempt)
        )
        for a in run.attempts:
            if not a["applied"]:
                continue
            expected = reference.learning_rate(obs.config, n)
            if not math.isclose(a["lr"], expected, rel_tol=LR_RTOL, abs_tol=1e-12):
                found.append(
                    f"{where}: applied update {n} (attempt {a['index']}) used lr {a['lr']:.6g}, "
                    f"schedule {expected:.6g}"
                )
                break
            n += 1
    return found


def bounded_run(obs: Observation) -> list[str]:
    """`train()` ends within a bound of reads: the passes the run needs, one more per injected skip, one spare (and
    a wall-clock guard). Series claim: 0012 (issue 27 item 1: a `max_steps` run over sized data reads only the
    passes its updates and skips need)."""
    return [
        f"{where}: {run.error} (bound {run.read_bound} samples)"
        for where, run in _runs(obs)
        if run.error_kind in ("bound", "timeout")
    ]


def completes(obs: Observation) -> list[str]:
    """`train()` returns normally for every configuration drawn (none of them is invalid or exhausts the skips)."""
    return [f"{where}: {run.error}" for where, run in _runs(obs) if run.error_kind == "crash"]


def resume_identical(obs: Observation) -> list[str]:
    """Resuming from a checkpoint with the same arguments ends with bit-identical weights to the run that was not
    interrupted. Series claims: 0008 (exact next batch), 0011, 0012 (counts restored)."""
    if not _same_arguments(obs) or obs.resumed is None or obs.resumed.error_kind or obs.first.error_kind:
        return []
    differ = [
        i for i, (a, b) in enumerate(zip(obs.first.weights, obs.resumed.weights, strict=True)) if not torch.equal(a, b)
    ]
    if differ:
        step = obs.resumed_from["global_step"] if obs.resumed_from else "?"
        return [f"resumed from checkpoint-{step}: {len(differ)} of {len(obs.first.weights)} tensors differ"]
    return []


def logged_losses(obs: Observation) -> list[str]:
    """Each logged `loss` is the mean of the reference losses of the windows read since the previous log (those
    whose optimizer step was skipped too: their loss was measured on the same weights) that have a target (NaN when
    none has), and nothing is logged when no update was applied since then. Series claims: 0006 (no leaked loss),
    0012 (an interval's loss over its windows, none without an update; issue 27 item 9), 0015 (a window without
    targets is left out, never imputed)."""
    found = []
    rtol = FP16_RTOL if obs.config["fp16"] else LOSS_RTOL
    for where, run in _runs(obs):
        start = 0
        for log in run.logs:
            windows = run.attempts[start : log["attempts"]]
            start = log["attempts"]
            if not _counts_skipped(obs) and not any(a["applied"] for a in windows):
                found.append(
                    f"{where}: a loss is logged at global_step {log['step']} with no update since the last log"
                )
                break
            # a window without targets has no mean loss: `logging_nan_inf_filter` (on) leaves it out (0015)
            kept = [a for a in windows if a["expected"]["targets"]]
            if not kept:
                if not math.isnan(log["loss"]):
                    found.append(
                        f"{where}: loss {log['loss']:.6g} logged at global_step {log['step']}, but none of its "
                        f"{len(windows)} window(s) has a target (expected NaN)"
                    )
                    break
                continue
            expected = sum(a["expected"]["loss"] for a in kept) / len(kept)
            if not math.isclose(log["loss"], expected, rel_tol=rtol, abs_tol=1e-6):
                found.append(
                    f"{where}: loss {log['loss']:.6g} logged at global_step {log['step']}, mean of its "
                    f"{len(windows)} window(s) {expected:.6g}"
                )
                break
    return found


def _attempts_before(obs: Observation, run: Run) -> list[dict[str, Any]]:
    """The first run's attempts before the checkpoint `run` resumed from (none for the first run)."""
    if run is obs.first or obs.resumed_from is None:
        return []
    return [a for a in obs.first.attempts if a["index"] < obs.resumed_from["attempts"]]


def logged_counts(obs: Observation) -> list[str]:
    """In a run with a gradient scaler (fp16), each training log's `num_optimizer_steps_attempted`,
    `num_optimizer_steps_applied` and `num_batches_seen` equal the optimizer attempts the harness saw since the start
    of training (applied or skipped), the applied ones and the micro-batches of those attempts (those of skipped steps
    and short last windows too), going on after a resume (the first run's attempts before the checkpoint count too);
    a count equal to the logged `step` is left out. A run without a scaler logs none. After a resume with another
    batch size or accumulation the batches are not checked (a batch of another size is another unit). Series claim:
    0017."""
    found = []
    for where, run in _runs(obs):
        before = _attempts_before(obs, run)
        batches = run is obs.first or _same_arguments(obs)
        for log in run.logs:
            if not obs.config["fp16"]:
                logged = [name for name in COUNT_KEYS if log.get(name) is not None]
                if logged:
                    found.append(
                        f"{where}: the log at global_step {log['step']} of a run without a scaler has {logged}"
                    )
                    break
                continue
            seen = before + run.attempts[: log["attempts"]]
            expected = {
                "num_optimizer_steps_attempted": len(seen),
                "num_optimizer_steps_applied": sum(1 for a in seen if a["applied"]),
                "num_batches_seen": sum(a["micro_batches"] for a in seen),
            }
            for name, count in expected.items():
                if name == "num_batches_seen" and not batches:
                    continue
                value = log.get(name)
                wanted = None if count == log["step"] else count
                if value != wanted:
                    found.append(
                        f"{where}: the log at global_step {log['step']} says {name} {value}, expected {wanted} "
                        f"({count} since the start of training, left out when equal to the step)"
                    )
                    break
            if found:
                break
    return found


LOADER: Callable[[str], str | None] | None = None  # set by the worker: the release's TrainerState.load_from_json


def release_loads(obs: Observation) -> list[str]:
    """Every checkpoint loads in 5.24.0 (`TrainerState.load_from_json` of the release), also after skips. Series
    claims: 0001, 0008, 0011 (the skip count is kept in `stateful_callbacks`, only when non-zero)."""
    if LOADER is None:
        return []
    found = []
    for where, run in _runs(obs):
        for save in run.saves:
            if run is obs.first and save.get("state_json"):
                error = LOADER(save["state_json"])
                if error:
                    found.append(f"{where}: checkpoint-{save['global_step']}: {error}")
                    break
    return found


def _short(values: list[int]) -> str:
    return str(values) if len(values) <= 12 else f"[{', '.join(map(str, values[:12]))}, ...]"


# name -> judge, in the order a report lists them
INVARIANTS: dict[str, Judge] = {
    "window-gradient": window_gradient,
    "updates-counted": updates_counted,
    "skip-count": skip_count,
    "run-length": run_length,
    "step-end-once": step_end_once,
    "step-begin-once": step_begin_once,
    "learning-rate": learning_rates,
    "bounded-run": bounded_run,
    "resume-identical": resume_identical,
    "logged-loss": logged_losses,
    "logged-counts": logged_counts,
    "release-loads": release_loads,
    "completes": completes,
}


def judge(obs: Observation) -> dict[str, list[str]]:
    """Every invariant the observation breaks, with what each found."""
    out = {}
    for name, check in INVARIANTS.items():
        found = check(obs)
        if found:
            out[name] = found
    return out
