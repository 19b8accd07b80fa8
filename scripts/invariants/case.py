"""One configuration run through the Trainer and observed: every optimizer attempt (its window's reference
gradient and loss, the gradient and learning rate the Trainer applies, whether it was applied), the step events,
the logs and checkpoints, the final counters and weights; then, when the configuration says so, a resume from one
of the checkpoints written (same arguments, or another batch size or accumulation).

The harness injects the faults itself: in an fp16 case, an inf gradient in the windows of the attempts listed in
`inject` (a hook on the loss of the window's micro-batches), so the reference knows which attempts must be skipped.
"""

import contextlib
import io
import json
import logging
import signal
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from . import models, reference


INIT_SCALE = 16.0  # the gradient scaler's first scale, unless a configuration draws another (`init_scale`)
# the step and batch counts a training log carries in the series (0027), read by `judges.logged_counts`
COUNT_KEYS = ("num_batches_seen", "num_optimizer_steps_attempted", "num_optimizer_steps_applied")


class CaseTimeout(Exception):
    """The case ran past its wall-clock guard."""


@dataclass
class Run:
    """What one `train()` call showed."""

    batch_size: int
    ga: int
    first_attempt: int = 0  # attempts made before this call (a resume continues the count)
    initial_step: int = 0
    attempts: list[dict[str, Any]] = field(default_factory=list)
    step_begin: list[int] = field(default_factory=list)
    step_end: list[int] = field(default_factory=list)
    events: list[tuple[str, int]] = field(default_factory=list)  # (callback event, global_step), see `contract`
    logs: list[dict[str, Any]] = field(default_factory=list)
    full_logs: list[dict[str, Any]] = field(default_factory=list)  # every key of each training log
    saves: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    error_kind: str | None = None  # "bound", "timeout", "crash"
    global_step: int | None = None
    skipped: int | None = None  # the Trainer's skip count, None where it has none
    optimizer_steps: int = 0
    weights: list[torch.Tensor] = field(default_factory=list)
    reads: int = 0
    read_bound: int = 0
    metrics: dict[str, Any] | None = None  # what `train()` returned: its global_step and metrics
    checkpoints: list[int] = field(default_factory=list)  # the checkpoint folders left at the end (their steps)
    # what the drawn user callback did: (event, global_step, attempts made) each time it set a control flag
    callback_acts: list[tuple[str, int, int]] = field(default_factory=list)
    # the progress bar (ProgressCallback) at each `on_step_end`: (global_step, bar position, bar total, max_steps)
    progress: list[tuple[int, int, int, int]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what the Trainer's logger warned during the call
    # resumed with `count_skipped_steps` flipped from a checkpoint with skips (drawn `other_reading`): due to refuse
    other_reading: bool = False
    # resumed with `max_steps` lowered to this (the drawn resume's `max_steps`: at the checkpoint's step, or below)
    resumed_max_steps: int | None = None
    eval_metrics: list[list[str]] = field(default_factory=list)  # the keys of each evaluation's metrics
    # each evaluation's (hyperparameter search's default objective of its metrics, its `eval_loss`)
    eval_objectives: list[tuple[float, float | None]] = field(default_factory=list)
    outside: float | None = None  # the outside parameter's value at the end (`outside`, 0020)
    # each evaluation's log entry (every key), with the harness's attempts when it was logged
    eval_logs: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Observation:
    config: dict[str, Any]
    first: Run
    resumed: Run | None = None
    resumed_from: dict[str, Any] | None = None
    again: Run | None = None  # a second resume, from a checkpoint of the resumed run
    again_from: dict[str, Any] | None = None


def _optimizer_steps(optimizer: Any) -> int:
    inner = getattr(optimizer, "optimizer", optimizer)
    steps = [float(s["step"]) for s in inner.state.values() if "step" in s]
    return int(max(steps)) if steps else 0


def lowers_max_steps(config: dict[str, Any]) -> bool:
    """Whether the drawn resume lowers `max_steps` to its checkpoint's step or below (a `max_steps` run only)."""
    resume = config.get("resume") or {}
    return bool(resume.get("max_steps")) and config["max_steps"] > 0


def outside_reaches(config: dict[str, Any], attempt: int) -> bool:
    """Whether the losses of optimizer attempt `attempt` reach the outside parameter (`outside`; True: a configuration
    recorded before the modes, reached by every loss)."""
    mode = config.get("outside")
    return mode in (True, "reached") or (mode == "alternate" and attempt % 2 == 0)


class Harness:
    """The recording callback, the fault injection and the window's micro-batches of one `train()` call."""

    def __init__(self, config: dict[str, Any], run: Run, model: torch.nn.Module) -> None:
        self.config, self.run, self.model = config, run, model
        self.pending: list[dict[str, torch.Tensor]] = []
        self.pending_samples: list[list[int]] = []
        self.poison = False
        self.nan_loss = False
        self.nan_parts: list[bool] = []  # fp32: which micro-batches of the window the harness made NaN
        self.counted = False  # whether the Trainer handed the window's loss a count (`num_items_in_batch`)
        self.index = models.sample_index(config)
        self.trainer: Any = None
        self.at_epoch_end = False
        # a parameter the optimizer holds outside the model (`outside`, 0020), at 1 so that its weight decay shows:
        # `reached`, the loss adds it times 0, so its gradient is 0, and inf * 0 = NaN when the harness's fault reaches
        # the loss; `unreached` (no loss uses it), its gradient stays None; `alternate`, the even attempts' losses add
        # it (`outside_reaches`)
        self.outside = torch.nn.Parameter(torch.ones(1)) if config.get("outside") else None
        # the loss `training_step` returned for each micro-batch of the open window, as the float32 it is
        self.step_losses: list[float] = []

    def progress_bar(self) -> Any:
        from transformers.trainer_callback import ProgressCallback

        for callback in self.trainer.callback_handler.callbacks:
            if isinstance(callback, ProgressCallback):
                return callback.training_bar
        return None

    @property
    def attempt(self) -> int:
        return self.run.first_attempt + len(self.run.attempts)

    def callback(self) -> Any:
        from transformers import TrainerCallback

        harness = self

        class Recorder(TrainerCallback):
            def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                harness.run.events.append(("epoch_begin", state.global_step))

            def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                harness.run.events.append(("epoch_end", state.global_step))
                harness.at_epoch_end = True

            def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                harness.at_epoch_end = False
                harness.run.step_begin.append(state.global_step)
                harness.run.events.append(("begin", state.global_step))

            def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                harness.run.events.append(("optimizer", state.global_step))

            def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Any = None, **kwargs: Any) -> None:
                harness.run.events.append(("eval", state.global_step))
                harness.run.eval_metrics.append(sorted(metrics or {}))
                if metrics:
                    from transformers.trainer_utils import default_compute_objective

                    harness.run.eval_objectives.append((default_compute_objective(metrics), metrics.get("eval_loss")))

            def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                harness.pre_optimizer_step(state)

            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                harness.run.step_end.append(state.global_step)
                harness.run.events.append(("end", state.global_step))
                bar = harness.progress_bar()
                if bar is not None:  # the ProgressCallback ran before this one (callbacks run in order)
                    harness.run.progress.append((state.global_step, int(bar.n), int(bar.total), state.max_steps))

            def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
                if logs and "loss" in logs and "train_loss" not in logs:  # a training log, not train()'s metrics
                    harness.run.events.append(("log", state.global_step))
                    harness.run.full_logs.append(dict(logs, step=state.global_step))
                    harness.run.logs.append({"step": state.global_step, "loss": float(logs["loss"])})
                    harness.run.logs[-1]["attempts"] = len(harness.run.attempts)
                    # the counts the series logs since the start of training (0027); None where a log has none
                    for name in COUNT_KEYS:
                        harness.run.logs[-1][name] = logs.get(name)
                elif logs and any(key.startswith("eval_") for key in logs):
                    harness.run.eval_logs.append(dict(logs, attempts=len(harness.run.attempts)))

            def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                harness.run.events.append(("save", state.global_step))
                folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
                state_file = folder / "trainer_state.json"
                harness.run.saves.append(
                    {
                        "global_step": state.global_step,
                        "attempts": harness.attempt,
                        "dir": str(folder),
                        # saved by the end of an epoch (its log, evaluation and save), before the next step began
                        "epoch_end": harness.at_epoch_end,
                        # read now: a `save_total_limit` may remove the folder later
                        "state_json": state_file.read_text(encoding="utf-8") if state_file.is_file() else None,
                    }
                )

        return Recorder()

    def pre_optimizer_step(self, state: Any) -> None:
        optimizer = self.trainer.optimizer
        grad = reference.flat_grad(self.model)
        # the outside parameter's gradient is inf * 0 = NaN once the fault reaches the loss, targets or not
        outside_finite = (
            self.outside is None or self.outside.grad is None or bool(torch.isfinite(self.outside.grad).all())
        )
        over_targets = not reference.per_micro_batch(self.config)
        smoothing = self.config.get("label_smoothing", 0.0)
        expected = reference.window(self.config["model"], self.model, self.pending, over_targets, smoothing)
        self._close_last()
        self.run.attempts.append(
            {
                "index": self.attempt,
                "global_step": state.global_step,
                "lr": float(optimizer.param_groups[0]["lr"]),
                # a fault counts when it took effect: an inf on the loss of a micro-batch without targets
                # reaches no weight of the model (its gradient is 0 whatever comes in), but the outside parameter
                "injected": self.poison and not (bool(torch.isfinite(grad).all()) and outside_finite),
                "finite": bool(torch.isfinite(grad).all()),
                "grad": grad,
                "expected": expected,
                "micro_batches": len(self.pending),
                # the samples of each micro-batch, identified by their content (see `models.sample_index`)
                "samples": self.pending_samples,
                # fp32: the harness made the loss of the window's micro-batches NaN (their gradient is unchanged)
                "nan_loss": self.nan_loss,
                "step_losses": self.step_losses,
                "steps_before": _optimizer_steps(optimizer),
                "applied": None,
            }
        )
        if self.nan_loss:
            # the mean of the micro-batches the filter keeps, scaled to the window (0019); NaN when it keeps none, or
            # when their losses are shares of the Trainer's count (no part of them is the window's mean)
            terms = self.run.attempts[-1]["expected"]["terms"]
            kept = [t for t, nan in zip(terms, self.nan_parts, strict=True) if not nan and not self.counted]
            self.run.attempts[-1]["expected"]["loss"] = sum(kept) * len(terms) / len(kept) if kept else float("nan")
        self.pending, self.pending_samples, self.poison, self.nan_loss = [], [], False, False
        self.nan_parts, self.counted = [], False
        self.step_losses = []

    def _close_last(self) -> None:
        """Whether the previous attempt was applied: the optimizer's own step count moved."""
        if self.run.attempts and self.run.attempts[-1]["applied"] is None:
            last = self.run.attempts[-1]
            last["applied"] = _optimizer_steps(self.trainer.optimizer) > last["steps_before"]

    def faulty(self, attempt: int) -> bool:
        """Whether the configuration puts a fault on `attempt`: listed in `inject`, or at or after `inf_from`."""
        start = self.config.get("inf_from")
        return attempt in self.config["inject"] or (start is not None and attempt >= start)

    def compute_loss(self, original: Any) -> Any:
        harness = self

        def wrapped(model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            training = model.training and torch.is_grad_enabled()
            if training:  # before compute_loss, which takes the labels out for a compute_loss_func
                harness.counted = harness.counted or kwargs.get("num_items_in_batch") is not None
                batch = {k: v.detach().clone() for k, v in inputs.items() if torch.is_tensor(v)}
                harness.pending.append(batch)
                harness.pending_samples.append(models.identify(harness.index, batch))
            out = original(model, inputs, *args, **kwargs)
            if training and harness.outside is not None and outside_reaches(harness.config, harness.attempt):
                loss = out[0] if isinstance(out, tuple) else out
                loss = loss + (harness.outside * 0).sum()
                out = (loss, *out[1:]) if isinstance(out, tuple) else loss
            nan = False
            if training and harness.faulty(harness.attempt):
                loss = out[0] if isinstance(out, tuple) else out
                if harness.config["fp16"] and loss.requires_grad:
                    harness.poison = True
                    loss.register_hook(lambda grad: torch.full_like(grad, float("inf")))
                elif not harness.config["fp16"] and (len(harness.pending) == 1 or not harness.config.get("nan_part")):
                    # a NaN loss whose gradient is the model's own (adding a constant): what the log filter sees; with
                    # `nan_part`, in the window's first micro-batch only
                    harness.nan_loss = nan = True
                    loss = loss + torch.tensor(float("nan"), device=loss.device)
                    out = (loss, *out[1:]) if isinstance(out, tuple) else loss
            if training:
                harness.nan_parts.append(nan)
            return out

        return wrapped

    def training_step(self, original: Any) -> Any:
        """The Trainer's `training_step`, recording the loss it returns for the micro-batch (what the Trainer adds
        to its running total, which `logged-loss-floats` adds up again in float32)."""
        harness = self

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            loss = original(*args, **kwargs)
            if torch.is_tensor(loss):
                harness.step_losses.append(float(loss.detach().float().item()))
            return loss

        return wrapped

    def create_optimizer(self, original: Any) -> Any:
        """The Trainer's `create_optimizer`, with the outside parameter added to the optimizer as a group of its
        own (as a loss module's parameters are)."""
        harness = self

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            optimizer = original(*args, **kwargs)
            if harness.outside is not None and not any(
                p is harness.outside for g in optimizer.param_groups for p in g["params"]
            ):
                decay = float(harness.config.get("outside_decay") or 0.0)
                optimizer.add_param_group({"params": [harness.outside], "weight_decay": decay})
            return optimizer

        return wrapped


def _user_callback(config: dict[str, Any], run: Run, harness: "Harness") -> Any:
    from transformers import TrainerCallback

    spec = config["callback"]
    if spec is None:
        return None
    k = spec["k"]

    class EpochStop(TrainerCallback):
        def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step >= k:
                control.should_epoch_stop = True
                run.callback_acts.append(("epoch_stop", state.global_step, harness.attempt))

    class TrainStop(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step >= k:
                control.should_training_stop = True
                run.callback_acts.append(("train_stop", state.global_step, harness.attempt))

    class SaveAt(TrainerCallback):
        """Asks for a checkpoint at the first step end from `k` on (a user's `should_save`)."""

        def __init__(self) -> None:
            self.done = False

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step >= k and not self.done:
                self.done = True
                control.should_save = True
                run.callback_acts.append(("save", state.global_step, harness.attempt))

    return {"epoch_stop": EpochStop, "train_stop": TrainStop, "save_at": SaveAt}[spec["kind"]]()


def _arguments(config: dict[str, Any], folder: Path, batch_size: int, ga: int) -> Any:
    from transformers import TrainingArguments

    logging = config["logging"]
    extra: dict[str, Any] = {}
    if not config["streamed"]:
        extra["train_sampling_strategy"] = "sequential"
    if config["fp16"]:
        extra.update(fp16=True, bf16=False)
    args = TrainingArguments(
        output_dir=str(folder),
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=ga,
        max_steps=config["max_steps"] if config["max_steps"] > 0 else -1,
        num_train_epochs=config["epochs"],
        learning_rate=config["learning_rate"],
        label_smoothing_factor=config.get("label_smoothing", 0.0),
        lr_scheduler_type=config["schedule"],
        warmup_steps=config["warmup"],
        optim=config["optim"],
        max_grad_norm=config["max_grad_norm"],
        logging_strategy="epoch" if logging == "epoch" else "steps",
        logging_steps=logging if logging != "epoch" else 500,
        save_strategy=config.get("save", "steps") if config["save_steps"] else "no",
        save_steps=config["save_steps"] or 500,
        save_total_limit=config.get("save_total_limit"),
        eval_strategy=config.get("eval") or "no",
        eval_steps=config.get("eval_steps") or 1,
        include_num_input_tokens_seen=(
            "non_padding"
            if config.get("input_tokens") == "non_padding"
            else "all"
            if config.get("input_tokens")
            else "no"
        ),
        report_to="none",
        disable_tqdm=not config.get("progress"),
        use_cpu=True,
        seed=0,
        data_seed=0,
        dataloader_num_workers=0,
        remove_unused_columns=False,
        **extra,
    )
    # set after construction: a tree without the option (the release) ignores it and is judged by what it claims
    args.count_skipped_steps = config.get("count_skipped_steps", True)
    args.include_num_target_tokens_trained = bool(config.get("target_tokens"))
    return args


def _train(config: dict[str, Any], folder: Path, run: Run, checkpoint: str | None, seconds: float) -> None:
    from transformers import Trainer
    from transformers.utils import logging as hf_logging

    model = models.build_model(config["model"])
    trained = models.wrap(model, config.get("wrap"))  # the Trainer's module; the harness reads `model`
    injected = len(config["inject"])
    run.read_bound = reference.read_bound(config, run.batch_size, run.ga, injected)
    counter = models.Counter(run.read_bound)
    trainer = Trainer(
        model=trained,
        args=_arguments(config, folder, run.batch_size, run.ga),
        train_dataset=models.dataset(config, counter),
        eval_dataset=models.eval_dataset(config) if config.get("eval") else None,
        compute_loss_func=models.regression_loss if config["model"] == "reg_func" else None,
    )
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    harness = Harness(config, run, model)
    harness.trainer = trainer
    trainer.add_callback(harness.callback())
    user = _user_callback(config, run, harness)
    if user is not None:
        trainer.add_callback(user)
    if config["fp16"]:
        trainer.accelerator.scaler = torch.amp.GradScaler("cpu", init_scale=config.get("init_scale") or INIT_SCALE)
        trainer.accelerator.native_amp = True
    trainer.compute_loss = harness.compute_loss(trainer.compute_loss)
    trainer.create_optimizer = harness.create_optimizer(trainer.create_optimizer)
    trainer.training_step = harness.training_step(trainer.training_step)
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    warned = _WarningRecorder(run)
    hf_logger = hf_logging.get_logger("transformers.trainer")
    level, propagate = hf_logger.level, hf_logger.propagate
    hf_logger.setLevel(logging.WARNING)
    hf_logger.propagate = False  # kept here, not printed
    hf_logger.addHandler(warned)
    try:
        # the progress bar (when drawn) writes itself to stderr and each log to stdout: kept out of the output
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            output = trainer.train(resume_from_checkpoint=checkpoint)
        run.metrics = {"global_step": output.global_step, **output.metrics}
    except models.ReadBound as exc:
        run.error, run.error_kind = str(exc), "bound"
    except CaseTimeout as exc:
        run.error, run.error_kind = str(exc), "timeout"
    except Exception as exc:  # a crash of the Trainer on a valid configuration is a finding too
        run.error, run.error_kind = f"{type(exc).__name__}: {exc}", "crash"
    finally:
        hf_logger.removeHandler(warned)
        hf_logger.setLevel(level)
        hf_logger.propagate = propagate
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if trainer.optimizer is not None:
        harness._close_last()
        run.optimizer_steps = _optimizer_steps(trainer.optimizer)
    run.reads = counter.reads
    state = trainer.state
    run.global_step = state.global_step
    run.skipped = getattr(state, "skipped_optimizer_steps", None)
    run.weights = [p.detach().clone() for p in model.parameters()]
    if harness.outside is not None:
        run.outside = float(harness.outside.detach()[0])
    run.checkpoints = sorted(int(d.name.split("-")[1]) for d in folder.glob("checkpoint-*") if d.is_dir())


class _WarningRecorder(logging.Handler):
    """Keeps the Trainer logger's warnings of one `train()` call (the worker's verbosity hides them)."""

    def __init__(self, run: Run) -> None:
        super().__init__(level=logging.WARNING)
        self.run = run

    def emit(self, record: logging.LogRecord) -> None:
        self.run.warnings.append(record.getMessage())


def _on_alarm(signum: int, frame: Any) -> None:
    raise CaseTimeout("the case ran past its wall-clock guard")


def run_case(config: dict[str, Any], seconds: float = 60.0) -> Observation:
    """Run `config` (and its resume) in a scratch folder that is removed afterwards."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    with tempfile.TemporaryDirectory(prefix="invariants-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        folder = Path(tmp)
        first = Run(config["batch_size"], config["ga"])
        _train(config, folder / "first", first, None, seconds)
        obs = Observation(config, first)
        resume = config["resume"]
        save = _checkpoint(first, resume)
        if save is not None:
            skipped = sum(1 for a in first.attempts if a["index"] < save["attempts"] and not a["applied"])
            obs.resumed_from, obs.resumed = _resume(config, folder / "first", save, seconds, skipped)
            # a second resume, with the resumed run's arguments, from a checkpoint it wrote
            again_from = None if resume.get("again") is None else {"checkpoint": resume["again"]}
            save = _checkpoint(obs.resumed, again_from, after=save)
            if save is not None:
                obs.again_from, obs.again = _resume(config, folder / "first", save, seconds)
        return obs


# the key a later version's field would add to `trainer_state.json` (the drawn resume's `unknown_key`)
UNKNOWN_KEY = "a_field_of_a_later_version"


def _resume(
    config: dict[str, Any], folder: Path, save: dict[str, Any], seconds: float, skipped: int = 0
) -> tuple[dict[str, Any], Run]:
    """Train from the checkpoint `save` with the drawn resume's arguments: (where it started, the run). The drawn
    `unknown_key` adds a key the tree does not know to the checkpoint's state first; `other_reading` resumes a
    checkpoint saved after `skipped` > 0 skips with `count_skipped_steps` flipped (a run due to be refused)."""
    resume = config["resume"]
    run = Run(resume["batch_size"], resume["ga"], first_attempt=save["attempts"])
    run.initial_step = save["global_step"]
    state_file = Path(save["dir"]) / "trainer_state.json"
    if resume.get("unknown_key") and state_file.is_file():
        state = json.loads(state_file.read_text(encoding="utf-8"))
        state[UNKNOWN_KEY] = 1
        state_file.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if resume.get("other_reading") and skipped:
        run.other_reading = True
        config = {**config, "count_skipped_steps": not config.get("count_skipped_steps", True)}
    if lowers_max_steps(config):
        step = save["global_step"]
        run.resumed_max_steps = step - 1 if resume["max_steps"] == "below" and step > 1 else step
        config = {**config, "max_steps": run.resumed_max_steps}
    _train(config, folder, run, save["dir"], seconds)
    return {k: save[k] for k in ("global_step", "attempts", "epoch_end")}, run


def _checkpoint(run: Run, resume: dict[str, Any] | None, after: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The checkpoint a resume drawn as `resume` starts from: one of `run`'s saves still on disk (a
    `save_total_limit` removes older ones), after `after`'s attempts when given; None when there is none."""
    if resume is None or run.error is not None:
        return None
    saves = [s for s in run.saves if Path(s["dir"]).is_dir() and (after is None or s["attempts"] > after["attempts"])]
    # the last save of each step (a step saved twice has one folder, the later save's)
    latest = {s["global_step"]: s for s in saves}
    saves = [s for s in saves if latest[s["global_step"]] is s]
    return saves[resume["checkpoint"] % len(saves)] if saves else None
