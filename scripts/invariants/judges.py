"""The invariants: each a function of a case's configuration and observation that returns what it finds wrong
(a list of texts; empty when the invariant holds). Expected values come from `reference` and from the faults the
harness injected, never from the Trainer's own counters. Each docstring names the series' claim it checks.
"""

import json
import math
from collections.abc import Callable
from typing import Any

import torch

from . import contract, models, reference
from .case import COUNT_KEYS, Observation, Run, lowers_max_steps, outside_reaches


GRAD_RTOL = 1e-5
GRAD_ATOL = 1e-7
LOSS_RTOL = 1e-4
# fp16 cases run under accelerate's CPU autocast (float16 matmuls): the error of a float16 sum is bounded by a few
# units of its precision times the sum of the magnitudes of its terms (so a window whose micro-batch gradients cancel
# gets a tolerance from its terms, not from the small result)
FP16_EPS = 2.0**-11
FP16_UNITS = 16
LR_RTOL = 1e-6
# keys of a training log that hold what happened since the previous log (the first log after a resume holds less)
INTERVAL_KEYS = ("loss", "skipped_optimizer_steps")
# and those that time it (`include_num_input_tokens_seen` adds the throughput of the `train()` call)
TIMING_SUFFIXES = ("_runtime", "_per_second")

# A judge returns what it finds wrong (empty: the invariant holds), or None when the case gave it nothing to check
Judge = Callable[[Observation], list[str] | None]


class Verdict(dict):
    """invariant -> what it found, for the invariants broken; `checked`: the invariants the case gave something to
    check; `discriminating`: those of them whose check could tell right from wrong there (a search counts both: its
    coverage); `facts`: what the case did that declarations are keyed on (see `facts`)."""

    checked: frozenset[str] = frozenset()
    discriminating: frozenset[str] = frozenset()
    facts: dict[str, Any] = {}


def _runs(obs: Observation) -> list[tuple[str, Run]]:
    runs = [("first run", obs.first)]
    if obs.resumed is not None:
        runs.append(("after resume", obs.resumed))
    if obs.again is not None:
        runs.append(("after the second resume", obs.again))
    return runs


def _injected(run: Run) -> int:
    return sum(1 for a in run.attempts if a["injected"])


def _applied(run: Run) -> int:
    return sum(1 for a in run.attempts if a["applied"])


def _counts_skipped(obs: Observation) -> bool:
    """The drawn `count_skipped_steps` (0026): whether a skipped optimizer step is a step (the default)."""
    return bool(obs.config.get("count_skipped_steps", True))


def _same_arguments(obs: Observation) -> bool:
    resume = obs.config["resume"]
    same = resume is not None and (resume["batch_size"], resume["ga"]) == (obs.config["batch_size"], obs.config["ga"])
    return same and not lowers_max_steps(obs.config)


def _faults(obs: Observation) -> Callable[[int], bool]:
    """Whether the harness's fault reached attempt j's gradient (as the harness saw it; for an attempt the Trainer
    did not make, whether the configuration puts one there)."""
    seen: dict[int, bool] = {}
    for _, run in _runs(obs):
        for a in run.attempts:
            seen[a["index"]] = bool(a["injected"])
    start = obs.config.get("inf_from")

    def fault(j: int) -> bool:
        if j in seen:
            return seen[j]
        return j in obs.config["inject"] or (start is not None and j >= start)

    return fault


def expected(obs: Observation, run: Run) -> contract.Expected | None:
    """The contract of `run` (see `contract`), or None where it is not modelled: a resume with other arguments
    (which batches it owes is another unit), or after an epoch the callback ended early (the Trainer resumes from
    the optimizer steps taken, which do not tell where a cut pass ended)."""
    cache = obs.__dict__.setdefault("_expected", {})
    if id(run) in cache:
        return cache[id(run)]
    config, fault = obs.config, _faults(obs)
    result: contract.Expected | None = None
    if run.other_reading or run.resumed_max_steps is not None:
        pass  # due to be refused (`reading-refused`), or to train nothing (`resume-past-max-steps`)
    elif run is obs.first:
        result = contract.simulate(config, run.batch_size, run.ga, fault)
    elif _same_arguments(obs):
        previous, since = (obs.first, obs.resumed_from) if run is obs.resumed else (obs.resumed, obs.again_from)
        before = expected(obs, previous) if previous is not None else None
        if before is not None and since is not None and not before.epoch_cut:
            # where the contract was when it saved that checkpoint (the last save of that step)
            saved = [p for p in before.saves if p.global_step == since["global_step"]]
            if saved and saved[-1].attempt == since["attempts"]:
                start = contract._copy(saved[-1])
                # a sized pass's end is known: the resume begins the next one; a stream's only once a read comes
                # back empty, which the resumed run's first pass finds (an epoch without a step)
                per_pass = len(contract.windows_of_pass(len(config["targets"]), run.batch_size, run.ga))
                if start.window >= per_pass and not config["streamed"]:
                    start.pass_index, start.window = start.pass_index + 1, 0
                start.leaked = []
                result = contract.simulate(config, run.batch_size, run.ga, fault, start)
    cache[id(run)] = result
    return result


def _due_error(run: Run, exp: contract.Expected | None) -> bool:
    """Whether `run` ended with the error its contract ends it with (a `max_steps` run with `count_skipped_steps=False`
    whose loss scale fell to 0): such a run is judged in full, up to its error, not on the prefix both share."""
    return exp is not None and exp.error == "scale" and run.error_kind == "crash" and SCALE_ERROR in (run.error or "")


def _judged_in_full(run: Run, exp: contract.Expected | None) -> bool:
    """A run that returned, or ended with the error that was due."""
    return run.error_kind is None or _due_error(run, exp)


def _modelled(obs: Observation) -> list[tuple[str, Run, contract.Expected]]:
    out = []
    for where, run in _runs(obs):
        exp = expected(obs, run)
        if exp is not None and run.error_kind in (None, "crash"):
            out.append((where, run, exp))
    return out


def _first_difference(got: list[Any], want: list[Any]) -> str:
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if g != w:
            return f"at {i}: {g} where {w} was due; saw {_short(got[max(0, i - 2) : i + 3])}"
    if len(got) != len(want):
        extra = got[len(want) :] or want[len(got) :]
        what = "more" if len(got) > len(want) else "fewer"
        return f"{abs(len(got) - len(want))} {what} than due ({_short(extra)}); {len(got)} seen, {len(want)} due"
    return ""


def window_content(obs: Observation) -> list[str] | None:
    """Each optimizer attempt's window holds the samples the data schedule gives it (the contract's: passes in
    sampler order, `ga` batches a window, the short last one of a pass, the windows after a skip, a cut epoch or a
    resume), in order, and there are as many attempts as the contract makes. Series claims: 0006 (a stream's short
    last window), 0007 (the next batch after a resume), 0026 (the windows after a skip and the further passes)."""
    canon = models.canonical(obs.config)
    found: list[str] = []
    checked = False
    for where, run, exp in _modelled(obs):
        checked = True
        want = [[[canon[i] for i in batch] for batch in window] for window in exp.windows]
        got = [a["samples"] for a in run.attempts]
        if (exp.error is not None or run.error_kind is not None) and not _due_error(run, exp):
            # an error where none was due, or none where one was: `completes` reports it; the prefix is judged
            n = min(len(got), len(want))
            got, want = got[:n], want[:n]
        diff = _first_difference(got, want)
        if diff:
            found.append(f"{where}: windows (sample indices per micro-batch) {diff}")
    return found if checked else None


def _fp16_tolerance(a: dict[str, Any], key: str) -> float:
    terms = a["expected"].get(f"{key}_terms")
    return FP16_UNITS * FP16_EPS * (terms if terms is not None else float(a["expected"][key].norm()))


def _mean_loss_tolerance(kept: list[dict[str, Any]], want: float, fp16: bool) -> float:
    """How far a logged mean of the `kept` windows' losses may be from `want`: in float16, what its error scales with
    (the terms' magnitudes, a regression's operands too: `reference.window`), else a relative float32 rounding."""
    if fp16 and kept:
        return 1e-6 + FP16_UNITS * FP16_EPS * sum(
            abs(a["expected"].get("loss_terms", a["expected"]["loss"])) for a in kept
        ) / len(kept)
    return 1e-6 + LOSS_RTOL * abs(want if math.isfinite(want) else 0)


def _clip_coefficient(obs: Observation, norm: float) -> float:
    """What gradient clipping multiplies a gradient of `norm` by (1: clipping off, or the norm within the bound)."""
    bound = obs.config["max_grad_norm"]
    if not bound or bound <= 0:
        return 1.0
    return min(1.0, bound / (norm + 1e-6))


def window_gradient(obs: Observation) -> list[str] | None:
    """The gradient of every applied update equals the reference over the samples of its window: the mean over the
    window's targets for a model given the count or declared to average over its targets, the mean of its
    micro-batches' own losses for any other module (the release's rule; the Trainer cannot know what a custom loss
    averages over), scaled down to `max_grad_norm` when it is larger (clipping acts on the window's whole gradient,
    after the fp16 gradients are unscaled). fp16: within a few float16 units of the sum of the terms' magnitudes.
    Series claims: 0003-0006, 0011-0016 (the generic heads of `modeling_layers.py` too), 0018."""
    found = []
    checked = False
    fp16 = obs.config["fp16"]
    for where, run in _runs(obs):
        exp = expected(obs, run)
        for i, a in enumerate(run.attempts):
            if not a["applied"] or a["injected"]:
                continue
            cut = exp is not None and exp.cut and i < len(exp.windows) and len(exp.windows[i]) > run.ga
            if cut or (exp is None and _leaked(obs, run, exp) and a["micro_batches"] > run.ga):
                continue  # a cut window's micro-batch added to this one: the release's leak, see `contract`
            checked = True
            want = a["expected"]["grad"]
            # `max_grad_norm` scales the gradient down to that norm (torch's clip_grad_norm_), before the optimizer
            # step (and the harness) sees it
            coefficient = _clip_coefficient(obs, float(want.norm()))
            want = want * coefficient
            diff = float((a["grad"] - want).norm())
            scale = float(want.norm())
            relative = GRAD_RTOL * scale * (2 if coefficient < 1 else 1)
            tolerance = GRAD_ATOL + (2 * coefficient * _fp16_tolerance(a, "grad") if fp16 else relative)
            if not diff <= tolerance:
                ratio = float(a["grad"].norm()) / scale if scale else math.inf
                found.append(
                    f"{where}: attempt {a['index']} ({a['micro_batches']} micro-batch(es), "
                    f"{a['expected']['targets']} target(s)): |grad| / |reference| = {ratio:.4f}, "
                    f"|diff| {diff:.3g} (tolerance {tolerance:.3g})"
                )
    return found[:3] if checked else None


def _leaked(obs: Observation, run: Run, exp: contract.Expected | None) -> bool:
    """Whether `run` may train a cut window's micro-batch with the next window (the release's leak, see `contract`):
    its contract says so, or, where it has none (a resume after a pass the callback cut), the epoch-stopping callback
    is drawn and some window of this call or an earlier one holds more micro-batches than the accumulation steps (a
    count since the start of training carries an earlier leak)."""
    if exp is not None:
        return exp.cut
    callback = obs.config.get("callback") or {}
    windows = [(a, r.ga) for _, r in _runs(obs) for a in r.attempts]
    return callback.get("kind") == "epoch_stop" and any(a["micro_batches"] > ga for a, ga in windows)


def _injected_before(obs: Observation, run: Run) -> int:
    """Infs injected before the checkpoint `run` resumed from (0 for the first run)."""
    return sum(1 for a in _attempts_before(obs, run) if a["injected"])


def updates_counted(obs: Observation) -> list[str] | None:
    """An attempt is skipped exactly when the contract says (the harness's inf reached its gradient, or the gradient
    scaler's scale had fallen to 0), and `global_step` equals the optimizer steps taken (by default, as released)
    or, with `count_skipped_steps=False`, the applied updates (the optimizer's own step count), also after a resume.
    A NaN the fault left on a parameter the optimizer holds outside the model skips no later step. Series claims:
    0010, 0020, 0026 (seed 000)."""
    found = []
    checked = False
    for where, run in _runs(obs):
        exp = expected(obs, run)
        if not _judged_in_full(run, exp):
            continue
        checked = True
        for i, a in enumerate(run.attempts):
            due = exp.applied[i] if exp is not None and i < len(exp.applied) else not a["injected"]
            if a["applied"] is not None and a["applied"] != due:
                state = "applied" if a["applied"] else "skipped"
                found.append(f"{where}: attempt {a['index']} was {state} (inf injected: {a['injected']})")
                break
        if _counts_skipped(obs):
            want, what = run.first_attempt + len(run.attempts), "optimizer steps taken"
        else:
            want, what = run.optimizer_steps, "applied updates"
        if run.global_step != want:
            found.append(f"{where}: global_step {run.global_step} but {want} {what}")
    return found if checked else None


def skip_count(obs: Observation) -> list[str] | None:
    """The Trainer's skip count equals the attempts the contract skips (the injected infs, and every attempt once the
    loss scale is 0), in the run and after a resume from any checkpoint, with any batch size or accumulation. Series
    claims: 0010 (detected), 0022 (counted), 0026 (issue 27 items 2, 3)."""
    found = []
    checked = False
    for where, run in _runs(obs):
        if not _judged_in_full(run, expected(obs, run)):
            continue
        checked = True
        skips = sum(1 for a in run.attempts if not a["applied"]) + _skipped_before(obs, run)
        injected = _injected(run) + _injected_before(obs, run)
        if (run.skipped or 0) != skips or skips < injected:
            found.append(
                f"{where}: skip count {run.skipped} but {skips} attempt(s) skipped, {injected} inf(s) injected"
            )
    return found if checked else None


def _skipped_before(obs: Observation, run: Run) -> int:
    return sum(1 for a in _attempts_before(obs, run) if not a["applied"])


def run_length(obs: Observation) -> list[str] | None:
    """`train()` ends where the contract ends it: at `max_steps` (counted as the drawn reading counts), after the
    planned windows of an epoch run (fractional epochs too), or at the drawn callback's own stop rule, also after a
    resume; and makes the contract's number of optimizer attempts. Series claims: 0008, 0026 (extra passes make up
    skipped steps only), issue 27 item 2 (the right end after a resume)."""
    found = []
    checked = False
    for where, run, exp in _modelled(obs):
        if not _judged_in_full(run, exp):
            continue
        checked = True
        if run.global_step != exp.end_step or len(run.attempts) != len(exp.windows):
            found.append(
                f"{where}: ended at global_step {run.global_step} after {len(run.attempts)} optimizer attempt(s); "
                f"due: global_step {exp.end_step} after {len(exp.windows)}"
            )
    return found if checked else None


def step_end_once(obs: Observation) -> list[str] | None:
    """`on_step_end` sees each `global_step` once, strictly increasing, from the one the run starts at to the one it
    ends at (every run, also a resume with other arguments). Series claim: the `TrainerCallback` contract of 0026
    (issue 27 item 4: a callback keyed on `global_step` fires once per step)."""
    found = []
    checked = False
    for where, run in _runs(obs):
        if not _judged_in_full(run, expected(obs, run)):
            continue
        checked = True
        want = list(range(run.initial_step + 1, (run.global_step or 0) + 1))
        if run.step_end != want:
            found.append(f"{where}: on_step_end saw global_step {_short(run.step_end)}, expected {_short(want)}")
    return found if checked else None


def _events(kinds: tuple[str, ...], what: str, doc: str) -> Judge:
    def judge(obs: Observation) -> list[str] | None:
        found = []
        checked = False
        for where, run, exp in _modelled(obs):
            got = [e for e in run.events if e[0] in kinds]
            want = [e for e in exp.events if e[0] in kinds]
            if (run.error_kind is not None or exp.error is not None) and not _due_error(run, exp):
                got, want = got[: len(want)], want[: len(got)]
            checked = checked or bool(want) or bool(got) or "epoch_begin" in kinds
            diff = _first_difference(got, want)
            if diff:
                found.append(f"{where}: {what} {diff}")
        return found if checked else None

    judge.__doc__ = doc
    return judge


step_callbacks = _events(
    ("begin", "optimizer", "end"),
    "on_step_begin/on_optimizer_step/on_step_end (event, global_step)",
    """`on_step_begin`, `on_optimizer_step` and `on_step_end` come exactly as the contract has them: a begin per
    window (with `count_skipped_steps=False` not again after a skipped attempt), an optimizer step per attempt (with
    the option, per applied update), an end per step, each with its `global_step`. Series claims: 0010, 0026 (issue 27
    item 4).""",
)
epoch_callbacks = _events(
    ("epoch_begin", "epoch_end"),
    "on_epoch_begin/on_epoch_end (event, global_step)",
    """`on_epoch_begin` and `on_epoch_end` come once per planned epoch (also a fractional last one, and the one a
    resume continues), with their `global_step`; the further passes that make up skipped steps belong to the last
    planned epoch. Series claims: 0009, 0026.""",
)
logs_due = _events(
    ("log",),
    "training logs at global_step",
    """A training log comes at each step that is a multiple of `logging_steps` (or at each epoch's end), only when
    `global_step` moved since the last one, and with `count_skipped_steps=False` none for a pass whose every attempt
    was skipped. Series claims: 0026, 0019.""",
)
evals_due = _events(
    ("eval",),
    "evaluations at global_step",
    """An evaluation comes at each multiple of `eval_steps` and at the end of training (steps strategy), or at each
    epoch's end, also when the last window of an epoch run is skipped (with `count_skipped_steps=False`). Series
    claims: 0026 (issue 37: the final evaluation).""",
)
saves_due = _events(
    ("save",),
    "saves at global_step",
    """A checkpoint is saved at each multiple of `save_steps` and at the end of training (steps strategy), or at each
    epoch's end, also when the last window of an epoch run is skipped (with `count_skipped_steps=False`), and none
    for a pass that applied nothing. Series claims: 0026 (issue 37: the final save).""",
)


def logged_epoch(obs: Observation) -> list[str] | None:
    """Each training log's `epoch` is the contract's: the batches read in the pass over the pass's batches, for a
    stream the first pass over `max_steps * ga` and later ones over the pass before (also after a resume in a later
    pass), never past the next epoch or the planned ones. Series claims: 0009, 0026."""
    found = []
    checked = False
    for where, run, exp in _modelled(obs):
        if run.error_kind is not None or exp.epoch_cut or len(run.full_logs) != len(exp.log_epochs):
            continue  # a log missing or extra is `logs-due`'s
        for log, want in zip(run.full_logs, exp.log_epochs, strict=True):
            checked = True
            got = log.get("epoch")
            if got is None or want is None or not math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9):
                found.append(f"{where}: the log at global_step {log['step']} says epoch {got}, due {want}")
                break
    return found if checked else None


def checkpoints_kept(obs: Observation) -> list[str] | None:
    """With `save_total_limit`, the checkpoints left after the first run are the last `save_total_limit` steps the
    contract saves."""
    limit = obs.config.get("save_total_limit")
    exp = expected(obs, obs.first)
    if not limit or exp is None or obs.first.error_kind is not None or exp.error is not None:
        return None
    saved = sorted({step for event, step in exp.events if event == "save"})
    want = saved[-limit:]
    if obs.first.checkpoints != want:
        return [f"first run: checkpoints {obs.first.checkpoints} left, the last {limit} saved are {want}"]
    return []


def learning_rates(obs: Observation) -> list[str] | None:
    """The learning rate of the n-th applied update equals the schedule's closed form at n (a skipped attempt does
    not advance the schedule). Series claims: 0010 and accelerate 0001 (fused optimizers' skips)."""
    found = []
    checked = False
    runs = [("first run", obs.first)] + (
        [("after resume", obs.resumed)] if _same_arguments(obs) and obs.resumed else []
    )
    for where, run in runs:
        n = sum(1 for a in _attempts_before(obs, run) if a["applied"])
        for a in run.attempts:
            if not a["applied"]:
                continue
            checked = True
            want = reference.learning_rate(obs.config, n)
            if not math.isclose(a["lr"], want, rel_tol=LR_RTOL, abs_tol=1e-12):
                found.append(
                    f"{where}: applied update {n} (attempt {a['index']}) used lr {a['lr']:.6g}, schedule {want:.6g}"
                )
                break
            n += 1
    return found if checked else None


def outside_parameter(obs: Observation) -> list[str] | None:
    """A parameter the optimizer holds outside the model (drawn at 1, with its group's weight decay) trains as a
    parameter of the model would: AdamW decays it, times (1 - lr * weight decay) at the schedule's rate, at each
    applied update whose window's loss reached it (times 0: its gradient is 0), and at no other (skipped, or a window
    that left its gradient None: `optimizer.zero_grad()` sets it to None, where zeros would decay it too). Judged per
    `train()` call (the parameter is not in a checkpoint: a resume starts it at 1 again). Series claim: 0020."""
    config = obs.config
    if not config.get("outside"):
        return None
    decay = float(config.get("outside_decay") or 0.0)
    found = []
    checked = False
    for where, run in _runs(obs):
        if run.outside is None or not _judged_in_full(run, expected(obs, run)):
            continue
        checked = True
        want = torch.tensor(1.0, dtype=torch.float32)
        n = sum(1 for a in _attempts_before(obs, run) if a["applied"])
        for a in run.attempts:
            if a["applied"]:
                if outside_reaches(config, a["index"]):
                    want = want * (1 - torch.tensor(reference.learning_rate(config, n) * decay, dtype=torch.float32))
                n += 1
        if not math.isclose(run.outside, float(want), rel_tol=1e-5, abs_tol=1e-7):
            found.append(
                f"{where}: the parameter outside the model ({config['outside']}, weight decay {decay}) ended at "
                f"{run.outside:.7g}, due {float(want):.7g} after {_applied(run)} applied update(s)"
            )
    return found if checked else None


def bounded_run(obs: Observation) -> list[str]:
    """`train()` ends within a bound of reads: the passes the run needs, one more per injected skip, one spare (and
    a wall-clock guard). Series claim: 0026 (issue 27 item 1: a `max_steps` run over sized data reads only the
    passes its updates and skips need)."""
    return [
        f"{where}: {run.error} (bound {run.read_bound} samples)"
        for where, run in _runs(obs)
        if run.error_kind in ("bound", "timeout")
    ]


SCALE_ERROR = "gradient scaler's scale fell to 0"


def completes(obs: Observation) -> list[str]:
    """`train()` returns normally for every configuration drawn, but for the one the contract ends with an error: a
    `max_steps` run with `count_skipped_steps=False` whose loss scale fell to 0 (every later step would be skipped,
    and it would never end) raises a RuntimeError that says so. Series claim: 0026."""
    found = []
    for where, run in _runs(obs):
        if run.other_reading:
            continue  # `reading-refused`
        exp = expected(obs, run)
        due = exp is not None and exp.error == "scale"
        if run.error_kind == "crash" and not (due and SCALE_ERROR in (run.error or "")):
            found.append(f"{where}: {run.error}")
        elif due and run.error_kind is None:
            found.append(
                f"{where}: returned at global_step {run.global_step}; due: the RuntimeError of a loss scale at 0"
            )
    return found


def reading_refused(obs: Observation) -> list[str] | None:
    """A checkpoint saved after skipped steps, resumed with the other `count_skipped_steps` (its `global_step` and
    data position mean something else there), is refused with an error that names the option, before any training.
    Series claim: 0026."""
    found = []
    checked = False
    for where, run in _runs(obs):
        if not run.other_reading:
            continue
        checked = True
        refused = run.error_kind == "crash" and "count_skipped_steps" in (run.error or "")
        if not refused or run.attempts:
            saved = _counts_skipped(obs)
            what = "returned" if run.error_kind is None else run.error
            found.append(
                f"{where}: a checkpoint saved with count_skipped_steps={saved} after a skip, resumed with "
                f"count_skipped_steps={not saved}: {what} after {len(run.attempts)} attempt(s); due: an error naming "
                "count_skipped_steps, before any attempt"
            )
    return found if checked else None


def resume_past_max_steps(obs: Observation) -> list[str] | None:
    """A `max_steps` run resumed with `max_steps` at its checkpoint's step or below trains no further update: it
    returns at the checkpoint's step, with no optimizer attempt, and `train_loss` the release's 0.0 for a call that
    trained nothing. Series claim: 0008."""
    found = []
    checked = False
    for where, run in _runs(obs):
        if run.resumed_max_steps is None or run.other_reading:
            continue
        checked = True
        loss = (run.metrics or {}).get("train_loss")
        if run.error_kind is not None or run.attempts or run.global_step != run.initial_step or loss != 0.0:
            found.append(
                f"{where}: resumed from checkpoint-{run.initial_step} with max_steps {run.resumed_max_steps}: "
                f"{run.error or f'{len(run.attempts)} attempt(s), ended at global_step {run.global_step}'}, "
                f"train_loss {loss}; due: no attempt, global_step {run.initial_step}, train_loss 0.0"
            )
    return found if checked else None


def _resumes(obs: Observation) -> list[tuple[str, Run, dict[str, Any]]]:
    """The resumed runs that returned, with where each started (the first resume, and the second one)."""
    runs = [("resumed", obs.resumed, obs.resumed_from), ("resumed twice", obs.again, obs.again_from)]
    return [(where, run, since) for where, run, since in runs if run and since and not run.error_kind]


def resume_identical(obs: Observation) -> list[str] | None:
    """Resuming from a checkpoint with the same arguments (once, or twice) ends with bit-identical weights to the run
    that was not interrupted. Series claims: 0007 (exact next batch), 0010, 0022, 0026 (counts restored)."""
    if not _same_arguments(obs) or obs.first.error_kind:
        return None
    found = []
    checked = False
    for where, run, since in _resumes(obs):
        if run.global_step != obs.first.global_step:
            continue  # (a callback's stop rule can end a resumed run at another step: `run-length` judges that)
        checked = True
        differ = [
            i for i, (a, b) in enumerate(zip(obs.first.weights, run.weights, strict=True)) if not torch.equal(a, b)
        ]
        if differ:
            step = since["global_step"] if since else "?"
            found.append(f"{where} from checkpoint-{step}: {len(differ)} of {len(obs.first.weights)} tensors differ")
    return found if checked else None


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


def resume_logs(obs: Observation) -> list[str] | None:
    """After a resume with the same arguments, every training log equals the uninterrupted run's log at the same
    step, every key (`epoch` included; the first log after the resume holds only the steps since the checkpoint: its
    interval keys are not compared unless the uninterrupted run logged at the checkpoint). Series claims: 0007, 0009
    (the epoch of a stream's later pass), 0010, 0022, 0027."""
    if not _same_arguments(obs) or obs.first.error_kind:
        return None
    found = []
    checked = False
    for where, run, since in _resumes(obs):
        checked = True
        step = since["global_step"]
        # up to where the uninterrupted run ended (a callback's stop rule can take a resumed run further)
        end = obs.first.global_step or 0
        want = [log for log in obs.first.full_logs if log["step"] > step]
        got_logs = [log for log in run.full_logs if log["step"] <= end]
        # (with the option, skipped attempts after the last log may still precede the checkpoint: their window
        # belongs to the next log's interval, which the resumed run's first log then lacks)
        logged_at_checkpoint = (
            any(log["step"] == step and log["attempts"] == since["attempts"] for log in obs.first.logs) or step == 0
        )
        if [log["step"] for log in got_logs] != [log["step"] for log in want]:
            found.append(
                f"{where} from checkpoint-{step}: logs at steps {[g['step'] for g in got_logs]}, "
                f"uninterrupted {[w['step'] for w in want]}"
            )
            continue
        for i, (got, due) in enumerate(zip(got_logs, want, strict=True)):
            keys = {k for k in set(got) | set(due) if not k.endswith(TIMING_SUFFIXES)}
            if i == 0 and not logged_at_checkpoint:
                keys -= set(INTERVAL_KEYS)
            differ = sorted(k for k in keys if not _same_value(got.get(k), due.get(k)))
            if differ:
                pairs = ", ".join(f"{k} {got.get(k)!r} vs {due.get(k)!r}" for k in differ[:4])
                found.append(f"{where} from checkpoint-{step}: the log at step {got['step']} differs: {pairs}")
                break
    return found if checked else None


def _kept(obs: Observation, a: dict[str, Any]) -> bool:
    """Whether `logging_nan_inf_filter` keeps a window's loss: finite, and for a mean over targets, some target."""
    loss = a["expected"]["loss"]
    return math.isfinite(loss) and (a["expected"]["targets"] > 0 or not a["expected"].get("over_targets", True))


def logged_losses(obs: Observation) -> list[str] | None:
    """Each logged `loss` is the mean of the reference losses of the windows read since the previous log (those
    whose optimizer step was skipped too: their loss was measured on the same weights) that the filter keeps (a NaN
    loss, or no target in a mean over targets, is left out), NaN when it keeps none; nothing is logged when no update
    was applied since then. Series claims: 0006 (no leaked loss), 0026 (an interval's loss over its windows, none
    without an update; issue 27 item 9), 0019 (a window left out, never imputed)."""
    found = []
    checked = False
    fp16 = obs.config["fp16"]
    for where, run in _runs(obs):
        exp = expected(obs, run)
        if _leaked(obs, run, exp):
            continue  # a cut window's loss: the release's leak, see `contract`
        start = 0
        for log in run.logs:
            checked = True
            windows = run.attempts[start : log["attempts"]]
            start = log["attempts"]
            if not _counts_skipped(obs) and not any(a["applied"] for a in windows):
                found.append(
                    f"{where}: a loss is logged at global_step {log['step']} with no update since the last log"
                )
                break
            kept = [a for a in windows if _kept(obs, a)]
            if not kept:
                if not math.isnan(log["loss"]):
                    found.append(
                        f"{where}: loss {log['loss']:.6g} logged at global_step {log['step']}, but the filter keeps "
                        f"none of its {len(windows)} window(s) (expected NaN)"
                    )
                    break
                continue
            want = sum(a["expected"]["loss"] for a in kept) / len(kept)
            tolerance = _mean_loss_tolerance(kept, want, fp16)
            if not abs(log["loss"] - want) <= tolerance:
                found.append(
                    f"{where}: loss {log['loss']:.6g} logged at global_step {log['step']}, mean of its "
                    f"{len(windows)} window(s) {want:.6g}"
                )
                break
    return found if checked else None


def logged_loss_floats(obs: Observation) -> list[str] | None:
    """A logged `loss` whose interval needs no filtering (every window applied, every micro-batch loss finite, each
    window with targets) is exactly, float for float, what 5.25.0 logs: the losses `training_step` returned, added
    one by one in float32 from 0 in the order read, divided by the steps of the interval. A run the filter does not
    concern is unchanged byte for byte. Series claims: 0019 (a filtered window is taken back out; the others are
    added as before), and every patch that touches the running loss (0005, 0006, 0018, 0026)."""
    import numpy as np

    found = []
    checked = False
    for where, run in _runs(obs):
        exp = expected(obs, run)
        if _leaked(obs, run, exp):
            continue  # a cut window's loss: the release's leak, see `contract`
        start, previous = 0, run.initial_step
        for log in run.logs:
            windows = run.attempts[start : log["attempts"]]
            start, since = log["attempts"], previous
            previous = log["step"]
            plain = all(a["applied"] and _kept(obs, a) and a.get("step_losses") for a in windows)
            plain = plain and all(math.isfinite(x) for a in windows for x in a["step_losses"])
            if not windows or not plain or log["step"] <= since:
                continue
            total = np.float32(0.0)
            for attempt in windows:
                for value in attempt["step_losses"]:
                    total = np.float32(total + np.float32(value))
            want = float(total) / (log["step"] - since)
            checked = True
            if log["loss"] != want:
                found.append(
                    f"{where}: loss {log['loss']!r} logged at global_step {log['step']}, but its micro-batch losses "
                    f"added in float32 in the order read give {want!r} (5.25.0's float)"
                )
                break
    return found if checked else None


def train_metrics(obs: Observation) -> list[str] | None:
    """What `train()` returns: its `global_step` is where the contract ends, `train_loss` the mean of the reference
    losses of the windows this call read that the filter keeps (NaN when it left out every one; the release's 0.0 when
    the call read none, e.g. resumed at `max_steps`), and `total_nan_inf_filtered_windows` the number of those it left
    out (present when some were). Series claims: 0008, 0026, 0019."""
    found = []
    checked = False
    fp16 = obs.config["fp16"]
    for where, run, exp in _modelled(obs):
        if run.error_kind is not None or run.metrics is None or exp.cut:
            continue
        checked = True
        if run.metrics["global_step"] != exp.end_step:
            found.append(f"{where}: train() returned global_step {run.metrics['global_step']}, due {exp.end_step}")
        kept = [a for a in run.attempts if _kept(obs, a)]
        if not run.attempts:
            want = 0.0
        elif not kept:
            want = float("nan")
        else:
            want = sum(a["expected"]["loss"] for a in kept) / len(kept)
        got = float(run.metrics.get("train_loss", float("nan")))
        tolerance = _mean_loss_tolerance(kept, want, fp16)
        same = (math.isnan(got) and math.isnan(want)) or abs(got - want) <= tolerance
        if not same:
            found.append(f"{where}: train_loss {got:.6g}, due {want:.6g} (the mean of {len(kept)} window loss(es))")
        filtered = len(run.attempts) - len(kept)
        if run.metrics.get("total_nan_inf_filtered_windows") != (filtered or None):
            found.append(
                f"{where}: train() says total_nan_inf_filtered_windows "
                f"{run.metrics.get('total_nan_inf_filtered_windows')!r}, due {filtered or None!r} (windows left out)"
            )
    return found if checked else None


def input_tokens(obs: Observation) -> list[str] | None:
    """With `include_num_input_tokens_seen`, each training log's `num_input_tokens_seen` counts the main input of every
    micro-batch trained since the start of training (those of skipped steps too), going on after a resume; so do each
    evaluation's log entry (the count when it was logged) and `train()`'s metrics (at its end), which `log()` gives the
    same key: each is judged against the samples the harness saw read, never against the Trainer's own count."""
    if not obs.config.get("input_tokens"):
        return None
    per_sample = obs.config["seq_len"] * (models.FEATURES if obs.config["model"] in models.REGRESSIONS else 1)
    found = []
    checked = False
    for where, run in _runs(obs):
        exp = expected(obs, run)
        if exp is None or exp.cut:
            continue
        before = sum(len(b) for a in _attempts_before(obs, run) for b in a["samples"])
        checks = [
            (f"the log at global_step {log['step']}", log["attempts"], full)
            for log, full in zip(run.logs, run.full_logs, strict=True)
        ]
        checks += [(f"the evaluation log {i + 1}", log["attempts"], log) for i, log in enumerate(run.eval_logs)]
        if run.metrics is not None and run.error_kind is None:
            checks.append(("train()'s metrics", len(run.attempts), run.metrics))
        for what, attempts, values in checks:
            checked = True
            samples = before + sum(len(b) for a in run.attempts[:attempts] for b in a["samples"])
            want = samples * per_sample
            if values.get("num_input_tokens_seen") != want:
                found.append(
                    f"{where}: {what} says num_input_tokens_seen {values.get('num_input_tokens_seen')}, due {want} "
                    f"({samples} samples read)"
                )
                break
    return found if checked else None


def _attempts_before(obs: Observation, run: Run) -> list[dict[str, Any]]:
    """The attempts of the runs before the checkpoint `run` resumed from (none for the first run)."""
    if run is obs.first or obs.resumed_from is None:
        return []
    before = [a for a in obs.first.attempts if a["index"] < obs.resumed_from["attempts"]]
    if run is obs.again and obs.resumed is not None and obs.again_from is not None:
        before += [a for a in obs.resumed.attempts if a["index"] < obs.again_from["attempts"]]
    return before


def logged_counts(obs: Observation) -> list[str] | None:
    """In a run with a gradient scaler (fp16), each training log's `num_optimizer_steps_attempted`,
    `num_optimizer_steps_applied` and `num_batches_seen` equal the optimizer attempts the harness saw since the start
    of training (applied or skipped), the applied ones and the micro-batches of those attempts (those of skipped steps
    and short last windows too), going on after a resume (the first run's attempts before the checkpoint count too);
    a count equal to the step (the attempts, or with `count_skipped_steps=False` the applied ones) is left out. A run
    without a scaler logs none. After a resume with another
    batch size or accumulation the batches are not checked (a batch of another size is another unit). Series claim:
    0027."""
    found = []
    checked = False
    for where, run in _runs(obs):
        before = _attempts_before(obs, run)
        batches = run is obs.first or _same_arguments(obs)
        for log in run.logs:
            checked = True
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
            # the step as the drawn reading counts it, from the harness's attempts (never the Trainer's counter)
            step = expected["num_optimizer_steps_attempted" if _counts_skipped(obs) else "num_optimizer_steps_applied"]
            for name, count in expected.items():
                if name == "num_batches_seen" and not batches:
                    continue
                value = log.get(name)
                wanted = None if count == step else count
                if value != wanted:
                    found.append(
                        f"{where}: the log at global_step {log['step']} says {name} {value}, expected {wanted} "
                        f"({count} since the start of training, left out when equal to the step)"
                    )
                    break
            if found:
                break
    return found if checked else None


def target_tokens(obs: Observation) -> list[str] | None:
    """With `include_num_target_tokens_trained`, each training log's and `train()`'s `num_target_tokens_trained` is the
    number of targets (labels other than -100, the shifted ones of a causal LM) in the windows of the updates applied
    since the start of training, those before a resume's checkpoint too (a skipped step trained nothing). Series
    claim: 0025."""
    if not obs.config.get("target_tokens"):
        return None
    found: list[str] = []
    checked = False
    for where, run in _runs(obs):
        exp = expected(obs, run)
        if _leaked(obs, run, exp):
            continue  # a cut window's micro-batch trains with the next: the release's leak, see `contract`
        before = sum(a["expected"]["targets"] for a in _attempts_before(obs, run) if a["applied"])
        checks = [
            (f"the log at global_step {log['step']}", log["attempts"], full)
            for log, full in zip(run.logs, run.full_logs, strict=True)
        ]
        if run.metrics is not None:
            checks.append(("train()", len(run.attempts), run.metrics))
        for what, attempts, values in checks:
            checked = True
            want = before + sum(a["expected"]["targets"] for a in run.attempts[:attempts] if a["applied"])
            if values.get("num_target_tokens_trained") != want:
                found.append(
                    f"{where}: {what} says num_target_tokens_trained {values.get('num_target_tokens_trained')}, due "
                    f"{want} (the targets of the applied updates)"
                )
                break
    return found if checked else None


def _scale_after(obs: Observation, skips: int) -> float:
    """The gradient scaler's scale after `skips` skipped steps: its first scale halved in float32 at each (it grows
    again only after 2000 applied steps in a row, which no case reaches)."""
    scale = torch.tensor(obs.config.get("init_scale") or 16.0, dtype=torch.float32)
    for _ in range(skips):
        scale = scale * 0.5
    return float(scale)


def logged_fp16_counts(obs: Observation) -> list[str] | None:
    """Each training log says what the harness counted since the previous log of the same `train()` call: the
    skipped optimizer steps (`skipped_optimizer_steps`, present when some were skipped). Series claim: 0022."""
    found: list[str] = []
    checked = False
    for where, run in _runs(obs):
        exp = expected(obs, run)
        if _leaked(obs, run, exp):
            continue
        start = 0
        for log, full in zip(run.logs, run.full_logs, strict=True):
            checked = True
            skips = sum(1 for a in run.attempts[start : log["attempts"]] if not a["applied"])
            start = log["attempts"]
            logged = full.get("skipped_optimizer_steps")
            if not (logged == (skips or None) or (skips and _same_value(logged, skips))):
                found.append(
                    f"{where}: the log at global_step {log['step']} says skipped_optimizer_steps {logged!r}, "
                    f"due {skips or None!r}"
                )
                break
    return found if checked else None


def loss_scale(obs: Observation) -> list[str] | None:
    """An fp16 run's training logs carry `loss_scale`, the scaler's scale after the skips since the start of training
    (halved at each); a run without a scaler logs none. Series claim: 0023 (fork tier; declared on trees without it,
    `declared.LOSS_SCALE`)."""
    found: list[str] = []
    checked = False
    for where, run in _runs(obs):
        exp = expected(obs, run)
        if _leaked(obs, run, exp):
            continue
        skipped_before = _skipped_before(obs, run)
        for log, full in zip(run.logs, run.full_logs, strict=True):
            checked = True
            want = None
            if obs.config["fp16"]:
                want = _scale_after(
                    obs, skipped_before + sum(1 for a in run.attempts[: log["attempts"]] if not a["applied"])
                )
            logged = full.get("loss_scale")
            if not (logged == want or (want is not None and _same_value(logged, want))):
                found.append(f"{where}: the log at global_step {log['step']} says loss_scale {logged!r}, due {want!r}")
                break
    return found if checked else None


def logged_grad_norm(obs: Observation) -> list[str] | None:
    """Each training log's `grad_norm` is the norm of the last window's gradient before clipping (the reference's, in
    unscaled units), not finite when that window's step was skipped for inf gradients. Series claims: 0010 (the
    fp16 step), 0018 (the window's gradient), the clipping the Trainer does before the optimizer step."""
    found: list[str] = []
    checked = False
    fp16 = obs.config["fp16"]
    for where, run in _runs(obs):
        exp = expected(obs, run)
        if _leaked(obs, run, exp):
            continue
        for log, full in zip(run.logs, run.full_logs, strict=True):
            if "grad_norm" not in full or not log["attempts"]:
                continue
            a = run.attempts[log["attempts"] - 1]
            if a["injected"] or not a["applied"]:
                if a["injected"] and not a["finite"]:  # (an inf that reached only the outside parameter: no norm)
                    checked = True
                    if math.isfinite(full["grad_norm"]):
                        found.append(
                            f"{where}: the log at global_step {log['step']} says grad_norm {full['grad_norm']:.6g} "
                            f"for attempt {a['index']}, whose gradient held an inf"
                        )
                        break
                continue
            checked = True
            want = float(a["expected"]["grad"].norm())
            tolerance = 1e-6 + (_fp16_tolerance(a, "grad") if fp16 else GRAD_RTOL * want)
            if not abs(full["grad_norm"] - want) <= tolerance:
                found.append(
                    f"{where}: the log at global_step {log['step']} says grad_norm {full['grad_norm']:.6g}, the "
                    f"norm of attempt {a['index']}'s gradient is {want:.6g}"
                )
                break
    return found if checked else None


def progress_bar(obs: Observation) -> list[str] | None:
    """With the progress bar on, it stands at the step of `max_steps` at every step's end, both as the contract counts
    them (the steps as the drawn reading counts them; with `count_skipped_steps=False` an epoch run's total shrinks by
    one per skip, those before a resume's checkpoint too); `state.max_steps` is the same total. A run the contract
    does not model (a resume with other arguments) is held to the bar agreeing with the state. Series claim: 0026."""
    if not obs.config.get("progress"):
        return None
    found: list[str] = []
    checked = False
    for where, run in _runs(obs):
        exp = expected(obs, run)
        totals = exp.max_steps_at if exp is not None and not exp.cut else {}
        for step, n, total, max_steps in run.progress:
            checked = True
            want = totals.get(step, max_steps)
            if n != step or total != want or max_steps != want:
                found.append(
                    f"{where}: at the end of step {step} the progress bar stands at {n} of {total} (state.max_steps "
                    f"{max_steps}); due {step} of {want}"
                )
                break
    return found if checked else None


ALL_SKIPPED = "skipped all"


def all_skipped_warning(obs: Observation) -> list[str] | None:
    """With `count_skipped_steps=False`, a `train()` call that applied no update but skipped some warns that every
    step was skipped; a call that applied one does not. Series claim: 0026."""
    if _counts_skipped(obs) or not obs.config["fp16"]:
        return None
    found: list[str] = []
    checked = False
    for where, run in _runs(obs):
        if run.error_kind is not None:
            continue
        checked = True
        due = bool(run.attempts) and not any(a["applied"] for a in run.attempts)
        warned = any(ALL_SKIPPED in w for w in run.warnings)
        if due != warned:
            what = "no warning" if due else "a warning"
            found.append(
                f"{where}: {what} that every step was skipped, after {_applied(run)} applied update(s) of "
                f"{len(run.attempts)} attempt(s)"
            )
    return found if checked else None


def eval_metrics(obs: Observation) -> list[str] | None:
    """Hyperparameter search's default objective of an evaluation's metrics during training is its `eval_loss` (the
    harness has no `compute_metrics`): no training counter that `log()` wrote into them (`num_input_tokens_seen`, ...)
    is summed in. Series claim: 0021."""
    found: list[str] = []
    checked = False
    for where, run in _runs(obs):
        for objective, loss in run.eval_objectives:
            if loss is None:
                continue
            checked = True
            if objective != loss and not (objective != objective and loss != loss):  # NaN (no target) is NaN
                found.append(f"{where}: an evaluation's default objective is {objective}, its eval_loss {loss}")
                break
    return found if checked else None


LOADER: Callable[[str], dict[str, Any]] | None = None  # set by the worker: the release's TrainerState.load_from_json


FIELD_DEFAULTS: dict[str, Any] | None = None  # the tree's TrainerState field -> default (read once, when first needed)


def _field_defaults() -> dict[str, Any]:
    """The default of each field of the tree's `TrainerState` (a field saved only when set leaves the file at it)."""
    global FIELD_DEFAULTS
    if FIELD_DEFAULTS is None:
        import dataclasses

        from transformers.trainer_callback import TrainerState

        FIELD_DEFAULTS = {
            field.name: field.default
            for field in dataclasses.fields(TrainerState)
            if field.default is not dataclasses.MISSING
        }
    return FIELD_DEFAULTS


def release_loads(obs: Observation) -> list[str] | None:
    """Every checkpoint loads in the release as saved unless it holds new data: a key the release does not know is
    saved only when its value differs from the field's default (so a run that uses none of the new features saves the
    release's keys, and its checkpoints load in the release), and once such keys are dropped (`TrainerState.
    load_from_json` of the release on the known keys: the series' 0001) every checkpoint loads, also after skips.
    Series claims: 0001, 0007's `saved_when_set`, and every patch that adds a `TrainerState` field."""
    if LOADER is None:
        return None
    defaults = _field_defaults()
    found = []
    checked = False
    for where, run in _runs(obs):
        for save in run.saves:
            if save.get("state_json"):
                checked = True
                answer = LOADER(save["state_json"])
                name = f"{where}: checkpoint-{save['global_step']}"
                unset = [k for k, v in answer["unknown"].items() if k in defaults and v == defaults[k]]
                if answer["known_keys"]:
                    found.append(f"{name}: {answer['known_keys']}")
                elif unset:
                    found.append(
                        f"{name}: holds {unset} at the default: a run that does not use a new field must save the "
                        f"release's keys (the release: {answer['as_saved']})"
                    )
                elif answer["as_saved"] and not answer["unknown"]:
                    found.append(f"{name}: {answer['as_saved']}")
                if found:
                    break
    return found if checked else None


PASS_LENGTH_KEY = "train_dataloader_position"  # 0009: [pass, batches, the length of the pass before]


def first_pass_keys(obs: Observation) -> list[str] | None:
    """A stream's checkpoint saved in its first pass, or at that pass's end (an epoch's save, before a batch of the
    next pass is read), holds no stored position: the first pass counts its `epoch` against the stand-in, and the
    position (with the length) goes into the state from the first step of the next pass on, so a stream read once
    keeps the release's keys.
    Series claim: 0009."""
    if not obs.config["streamed"]:
        return None
    found = []
    checked = False
    for where, run in _runs(obs):
        exp = expected(obs, run)
        if exp is None or exp.cut or len(exp.saves) != len(run.saves) or run.error_kind is not None:
            continue
        for position, save in zip(exp.saves, run.saves, strict=True):
            if not save.get("state_json") or not (
                position.pass_index == 0 or (position.pass_index, position.window) == (1, 0)
            ):
                continue
            checked = True
            saved = json.loads(save["state_json"]).get(PASS_LENGTH_KEY)
            # 0026 (fork) also keeps a first pass's position where `epoch` does not give it, without a length
            if saved is not None and (len(saved) != 3 or saved[2] is not None):
                found.append(
                    f"{where}: checkpoint-{save['global_step']}, saved in the first pass or at its end, holds "
                    f"{PASS_LENGTH_KEY} {saved} with a pass length"
                )
                break
    return found if checked else None


def _short(values: list[int]) -> str:
    return str(values) if len(values) <= 12 else f"[{', '.join(map(str, values[:12]))}, ...]"


# invariant -> the `draw.FEATURES` entry a tree needs for it to be a claim there (the fork tier's option and
# counter): a tree without it is not searched for it
NEEDS = {
    "target-tokens": "include_num_target_tokens_trained",
    "all-skipped-warning": "count_skipped_steps",
    "progress-bar": "count_skipped_steps",
    "reading-refused": "count_skipped_steps",
}


def invariants_of(features: frozenset[str]) -> list[str]:
    """The invariants a tree with `features` is searched for."""
    return [name for name in INVARIANTS if NEEDS.get(name, "") in features or name not in NEEDS]


# name -> judge, in the order a report lists them
INVARIANTS: dict[str, Judge] = {
    "window-content": window_content,
    "window-gradient": window_gradient,
    "updates-counted": updates_counted,
    "skip-count": skip_count,
    "run-length": run_length,
    "step-callbacks": step_callbacks,
    "step-end-once": step_end_once,
    "epoch-callbacks": epoch_callbacks,
    "logs-due": logs_due,
    "evals-due": evals_due,
    "saves-due": saves_due,
    "logged-epoch": logged_epoch,
    "checkpoints-kept": checkpoints_kept,
    "learning-rate": learning_rates,
    "outside-parameter": outside_parameter,
    "bounded-run": bounded_run,
    "resume-identical": resume_identical,
    "resume-logs": resume_logs,
    "logged-loss": logged_losses,
    "logged-loss-floats": logged_loss_floats,
    "logged-counts": logged_counts,
    "input-tokens": input_tokens,
    "target-tokens": target_tokens,
    "logged-fp16-counts": logged_fp16_counts,
    "loss-scale": loss_scale,
    "logged-grad-norm": logged_grad_norm,
    "progress-bar": progress_bar,
    "all-skipped-warning": all_skipped_warning,
    "eval-metrics": eval_metrics,
    "train-metrics": train_metrics,
    "release-loads": release_loads,
    "first-pass-keys": first_pass_keys,
    "reading-refused": reading_refused,
    "resume-past-max-steps": resume_past_max_steps,
    "completes": completes,
}


def _some_skip_due(obs: Observation) -> bool:
    return any(not a["applied"] or a["injected"] for _, run in _runs(obs) for a in run.attempts)


def _decaying_schedule(obs: Observation) -> bool:
    """A schedule whose rate differs between applied updates: a wrong count of them shows."""
    config = obs.config
    updates = sum(_applied(run) for _, run in _runs(obs))
    return updates >= 2 and (config["schedule"] == "linear" or config["warmup"] >= 1)


# invariant -> when a check it made could tell right from wrong (absent: whenever it checked something). Coverage
# counts these, so that a floor of 3 examples is a floor of 3 that could have failed.
DISCRIMINATES: dict[str, Callable[[Observation], bool]] = {
    "updates-counted": _some_skip_due,
    "skip-count": _some_skip_due,
    "learning-rate": _decaying_schedule,
    "step-callbacks": lambda obs: _some_skip_due(obs) or obs.config["ga"] > 1,
    "logged-counts": lambda obs: obs.config["fp16"] and _some_skip_due(obs),
    "logged-fp16-counts": lambda obs: _some_skip_due(obs)
    or any(not _kept(obs, a) for _, run in _runs(obs) for a in run.attempts),
    "loss-scale": lambda obs: obs.config["fp16"],
    "checkpoints-kept": lambda obs: len({s for e, s in obs.first.events if e == "save"})
    > (obs.config.get("save_total_limit") or 0),
    "window-gradient": lambda obs: obs.config["ga"] > 1 or obs.config["batch_size"] > 1 or _clips(obs),
    "target-tokens": lambda obs: _some_skip_due(obs) or obs.config["resume"] is not None,
    "progress-bar": lambda obs: not _counts_skipped(obs) and _some_skip_due(obs),
    "all-skipped-warning": _some_skip_due,
    # a counter is logged into the evaluation's dict only when one is on
    "eval-metrics": lambda obs: bool(obs.config.get("input_tokens") or obs.config.get("target_tokens")),
    # None and zeros differ only under weight decay, in a window that does not reach the parameter
    "outside-parameter": lambda obs: bool(obs.config.get("outside_decay")) and obs.config.get("outside") != "reached",
}


def _clips(obs: Observation) -> bool:
    return bool(obs.config["max_grad_norm"]) and obs.config["max_grad_norm"] < 1


def facts(obs: Observation) -> dict[str, Any]:
    """What the case did that a declaration may be keyed on (`declared`, "happened"), observed, not configured:
    - epoch_stopped: the user callback ended some epoch early (set `should_epoch_stop`);
    - epoch_stopped_before_resume: it did so in the run a resume started from, before its checkpoint;
    - epoch_stopped_at_resume: it did so at a resumed run's first `on_epoch_begin` (the epoch the resume continues,
      a begin the uninterrupted run did not have there);
    - resumed_from_epoch_end: a resume started from a checkpoint saved at the end of an epoch."""
    stops = [(run, act) for _, run in _runs(obs) for act in run.callback_acts if act[0] == "epoch_stop"]
    before = False
    for run, since in ((obs.first, obs.resumed_from), (obs.resumed, obs.again_from)):
        if run is not None and since is not None:
            before = before or any(act[2] <= since["attempts"] for r, act in stops if r is run)
    at_resume = any(r is not obs.first and act[2] == r.first_attempt for r, act in stops)
    return {
        "epoch_stopped": bool(stops),
        "epoch_stopped_before_resume": before,
        "epoch_stopped_at_resume": at_resume,
        "resumed_from_epoch_end": any(
            since is not None and since.get("epoch_end") for since in (obs.resumed_from, obs.again_from)
        ),
    }


def judge(obs: Observation) -> Verdict:
    """Every invariant the observation breaks, with what each found; `checked`: those it gave something to check;
    `discriminating`: those of them whose check could fail there; `facts`: what the case did (see `facts`)."""
    out = Verdict()
    checked = set()
    for name, check in INVARIANTS.items():
        found = check(obs)
        if found is not None:
            checked.add(name)
        if found:
            out[name] = found
    out.checked = frozenset(checked)
    out.discriminating = frozenset(name for name in checked if name not in DISCRIMINATES or DISCRIMINATES[name](obs))
    out.facts = facts(obs)
    return out
