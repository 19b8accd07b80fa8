"""The contract of the step loop, simulated without the Trainer: which samples each optimizer attempt's window holds
(from the sampler order: passes, windows, the short last one, the continuation after a skip, a cut epoch or a
resume), which attempts are applied, what `global_step` is after each, the callback events in order (epoch and step
begin/end, optimizer steps, logs, evaluations, saves) and where `train()` ends.

Inputs are the configuration, the arguments of the `train()` call (batch size, accumulation), where it starts (a
resume), and which attempts the harness's injected fault reached (an observation of the fault, not of the Trainer).
Everything else is the contract as the series documents it:

- the data: a pass has `ceil(n / batch)` batches in order (sequential sampler, or the stream's order); a window is
  `ga` of them, the last one of a pass short; attempt `j` of a run reads window `j` of the passes laid end to end;
- the step (0010, 0026): by default every optimizer step taken is a step (the release's); with
  `count_skipped_steps=False` only an applied update is, a skipped one calls no `on_optimizer_step`/`on_step_end`, the
  next window does not begin the step again, an epoch run reads its planned windows (one update step less per skip) and
  a `max_steps` run reads further windows until `max_steps` updates (the further passes belong to the last planned
  epoch: no `on_epoch_begin`, and its `on_epoch_end` comes after them); an fp16 run's gradient scaler skips every
  attempt once its scale fell to 0 (from 16: the 154th skip), which a `max_steps` run with the option ends with an
  error (the draw reaches a scale of 0 only with faults on every attempt: torch's scaler at scale 0 applies an
  update of NaN gradients, 0 * inf, to an attempt without a fault, which is not modelled);
- the flow (the release's `DefaultFlowCallback`): a log, evaluation or save when `global_step` is a multiple of its
  interval at the end of a step, all three at the end of an epoch with the epoch strategy, an evaluation and a save
  at the end of training with the steps strategy; a log only when `global_step` moved since the last one (the request
  stands until the next step begins: `on_step_begin` clears it); with the option, a pass whose every attempt was
  skipped logs, evaluates and saves nothing at its end;
- the user callbacks drawn: `should_save` at the first `on_step_end` with `global_step >= k` (a checkpoint there,
  whatever the save strategy); `should_training_stop` at `on_step_end` once `global_step >= k`; `should_epoch_stop` at
  `on_epoch_begin` once `global_step >= k`, which ends the pass after its next micro-batch (a window of more than one
  is cut: its micro-batch's gradient stays for the next window, the release's behaviour).
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


# A CPU GradScaler that starts at 16 halves its (float32) scale at each skip: 2**-150 rounds to 0 at the 154th
SCALE_ZERO_SKIPS = 154


def scale_zero_skips(config: dict[str, Any]) -> int:
    """The skip at which the scale of a scaler starting at the drawn power of two (16 unless drawn) is 0."""
    return round(math.log2(config.get("init_scale") or 16.0)) + 150


# The contract of a run that never ends (a stream whose every epoch a callback stops) is followed this far
MAX_PASSES = 1000


@dataclass
class Position:
    """Where the data and the counters are between two attempts."""

    attempt: int = 0  # attempts made since the start of training
    global_step: int = 0
    skipped: int = 0  # skipped optimizer steps since the start of training
    pass_index: int = 0
    window: int = 0  # the next window of the pass
    consecutive_skips: int = 0
    # the micro-batches of cut windows, trained with the next window (one each: two passes cut in a row leak two)
    leaked: list[list[int]] = field(default_factory=list)


@dataclass
class Expected:
    """What one `train()` call must show."""

    windows: list[list[list[int]]] = field(default_factory=list)  # per attempt: its micro-batches' sample indices
    applied: list[bool] = field(default_factory=list)
    step_after: list[int] = field(default_factory=list)  # global_step after each attempt
    events: list[tuple[str, int]] = field(default_factory=list)  # (event, global_step)
    end_step: int = 0
    error: str | None = None  # "scale": the RuntimeError of a max_steps run whose loss scale fell to 0
    saves: list[Position] = field(default_factory=list)  # where data and counters are at each save (a resume's start)
    log_epochs: list[float | None] = field(default_factory=list)  # the `epoch` each training log carries
    cut: bool = False  # a window was cut by the epoch-stopping callback (its micro-batch leaks into the next)
    epoch_cut: bool = False  # a pass was ended early by the epoch-stopping callback (a resume cannot know it)
    endless: bool = False  # the contract never ends the run (followed for MAX_PASSES passes)
    # `max_steps` at each step's end (global_step -> max_steps): the plan, less one per skip of an epoch run with
    # `count_skipped_steps=False` (those before a resume's checkpoint too)
    max_steps_at: dict[int, int] = field(default_factory=dict)


def batches_of_pass(n: int, batch_size: int) -> list[list[int]]:
    return [list(range(i, min(n, i + batch_size))) for i in range(0, n, batch_size)]


def windows_of_pass(n: int, batch_size: int, ga: int) -> list[list[list[int]]]:
    batches = batches_of_pass(n, batch_size)
    return [batches[i : i + ga] for i in range(0, len(batches), ga)]


def plan(config: dict[str, Any], batch_size: int, ga: int) -> tuple[int, float, int]:
    """(max_steps, planned passes, windows per pass) as the Trainer sets them up: `max_steps`, or the epochs
    (fractional ones too) times the windows of a pass; a stream with `max_steps` has no planned number of passes."""
    per_pass = len(windows_of_pass(len(config["targets"]), batch_size, ga))
    if config["max_steps"] > 0:
        planned = math.inf if config["streamed"] else math.ceil(config["max_steps"] / per_pass)
        return config["max_steps"], planned, per_pass
    epochs = config["epochs"]
    return math.ceil(epochs * per_pass), math.ceil(epochs), per_pass


def simulate(
    config: dict[str, Any],
    batch_size: int,
    ga: int,
    fault: Callable[[int], bool],
    start: Position | None = None,
) -> Expected:
    """The contract of one `train()` call from `start` (None: the start of training). `fault(j)`: whether the
    harness's fault reached attempt j's gradient."""
    n = len(config["targets"])
    windows = windows_of_pass(n, batch_size, ga)
    per_pass = len(windows)
    max_steps, planned, _ = plan(config, batch_size, ga)
    counts_skipped = bool(config.get("count_skipped_steps", True))
    epoch_run = config["max_steps"] <= 0
    callback = config["callback"] or {}
    log_every = config["logging"]
    save = config.get("save", "steps") if config["save_steps"] else "no"
    evaluate = config.get("eval")
    eval_steps = config.get("eval_steps") or 1
    save_steps = config["save_steps"]

    pos = Position() if start is None else Position(**{**start.__dict__, "leaked": list(start.leaked)})
    pos.consecutive_skips = 0  # a new `train()` call
    out = Expected()
    ev = out.events
    # `state.epoch` (0009): the batches read in the pass over the pass's batches; a stream's first pass counts against
    # `max_steps * ga` (its length unknown) and a later one against the pass before it, which a resume reads back from
    # its checkpoint unless that was saved at a pass's start or end; never past the next epoch, or the planned ones
    batches = [len(w) for w in windows]
    length = sum(batches)
    known = None if config["streamed"] else length
    if config["streamed"] and pos.pass_index >= 1 and 0 < sum(batches[: pos.window]) < length:
        known = length
    stand_in = max_steps * ga if config["streamed"] else length
    read = {"batches": sum(batches[: pos.window])}
    epoch_now: list[float | None] = [None]

    def epoch_after_attempt() -> float:
        fraction = min(read["batches"] / (known or stand_in), 1.0)
        return min(pos.pass_index + fraction, planned)

    state_max = max_steps - (pos.skipped if epoch_run and not counts_skipped else 0)
    last_logged = pos.global_step
    flags = {"log": False, "eval": False, "save": False}
    stop = False
    zero_at = scale_zero_skips(config)
    asked_save = False  # the save callback asks once per `train()` call

    def act() -> None:
        """`_maybe_log_save_evaluate`: log (when the step moved), evaluate, save."""
        nonlocal last_logged
        if flags["log"] and pos.global_step > last_logged:
            ev.append(("log", pos.global_step))
            out.log_epochs.append(epoch_now[0])
            last_logged = pos.global_step
            flags["log"] = False
        if flags["eval"]:
            ev.append(("eval", pos.global_step))
            flags["eval"] = False
        if flags["save"]:
            ev.append(("save", pos.global_step))
            out.saves.append(_copy(pos))
            flags["save"] = False

    def end_of_training_flags(step: int, *, after_skip: bool) -> None:
        if evaluate == "steps" and step % eval_steps != 0:
            flags["eval"] = True
        if save == "steps" and (not after_skip or (step and step % save_steps != 0)):
            flags["save"] = True

    def passes_needed() -> float:
        if counts_skipped or epoch_run:
            return planned
        return max(planned, math.ceil((max_steps + pos.skipped) / per_pass))

    first_pass = pos.pass_index
    while not stop:
        if pos.pass_index >= passes_needed() or pos.global_step >= state_max:
            break
        if pos.pass_index - first_pass >= MAX_PASSES:
            out.endless = True
            break
        cut = False
        if pos.pass_index < planned:
            ev.append(("epoch_begin", pos.global_step))
            cut = callback.get("kind") == "epoch_stop" and pos.global_step >= callback["k"]
            out.epoch_cut = out.epoch_cut or (cut and per_pass > 1)
        step_at_pass_start, skipped_at_pass_start = pos.global_step, pos.skipped
        while pos.window < per_pass:
            window = windows[pos.window]
            pos.window += 1
            read["batches"] += 1 if (cut and len(window) > 1) else len(window)
            if pos.consecutive_skips == 0 or counts_skipped:
                ev.append(("begin", pos.global_step))
                # `CallbackHandler.on_step_begin` clears the requests: a log asked for when the step had not moved
                # since the last one (the end of a pass a resume read again) is dropped, not made at the next step
                flags["log"] = flags["eval"] = flags["save"] = False
            if cut and len(window) > 1:
                # the epoch ends after the window's first micro-batch: no optimizer step, its gradient stays
                pos.leaked.append(window[0])
                out.cut = True
                break
            content = pos.leaked + window
            pos.leaked = []
            scale_zero = config["fp16"] and pos.skipped >= zero_at
            skipped = bool(config["fp16"] and (fault(pos.attempt) or scale_zero))
            epoch_now[0] = epoch_after_attempt()
            out.windows.append(content)
            out.applied.append(not skipped)
            pos.attempt += 1
            if skipped:
                pos.skipped += 1
            if skipped and not counts_skipped:
                pos.consecutive_skips += 1
                if not epoch_run and pos.skipped >= zero_at:
                    out.error = "scale"
                    out.step_after.append(pos.global_step)
                    out.end_step = pos.global_step
                    return out
                if epoch_run:
                    state_max -= 1
                    if pos.global_step >= state_max:
                        stop = True
                        end_of_training_flags(pos.global_step, after_skip=True)
                        act()
            else:
                ev.append(("optimizer", pos.global_step))
                pos.global_step += 1
                pos.consecutive_skips = 0
                ev.append(("end", pos.global_step))
                out.max_steps_at[pos.global_step] = state_max
                step = pos.global_step
                if log_every != "epoch" and step % log_every == 0:
                    flags["log"] = True
                if evaluate == "steps" and step % eval_steps == 0:
                    flags["eval"] = True
                if save == "steps" and step % save_steps == 0:
                    flags["save"] = True
                if step >= state_max:
                    stop = True
                    end_of_training_flags(step, after_skip=False)
                if callback.get("kind") == "train_stop" and step >= callback["k"]:
                    stop = True
                if callback.get("kind") == "save_at" and step >= callback["k"] and not asked_save:
                    asked_save = True
                    flags["save"] = True
                act()
            out.step_after.append(pos.global_step)
            if stop or cut:
                break
        if pos.window >= per_pass or cut:
            if pos.window >= per_pass and not (cut and config["streamed"]):
                # the pass ran out: its length is known from now on (a stream's only once a read came back empty,
                # which a pass a callback ended after its last window never tried)
                known = length
            pos.pass_index, pos.window = pos.pass_index + 1, 0
            read["batches"] = 0
        further = pos.pass_index < passes_needed() and pos.pass_index >= planned
        if further and pos.global_step < state_max and not stop:
            continue  # a further pass goes on with the last planned epoch
        ev.append(("epoch_end", pos.global_step))
        if log_every == "epoch":
            flags["log"] = True
        if evaluate == "epoch":
            flags["eval"] = True
        if save == "epoch":
            flags["save"] = True
        if not counts_skipped and pos.global_step == step_at_pass_start and pos.skipped > skipped_at_pass_start:
            flags["log"] = flags["eval"] = flags["save"] = False
        act()
    out.end_step = pos.global_step
    return out


def _copy(pos: Position) -> Position:
    return Position(**{**pos.__dict__, "leaked": list(pos.leaked)})
