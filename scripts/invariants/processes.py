"""The step loop on two processes (gloo, CPU): each window's gradient and logged loss when the processes' targets are
uneven, one process without any in a window included (issue 38), and in fp16 a window whose gradient one process
makes inf (issue 54): the gradient scaler skips it on both processes, the learning rate waits for the next applied
update, and `train()` counts the windows the log filter left out.

On P processes, batch i of the sequential sampler goes to process i % P, and window j of the run holds the samples
[j * W, (j + 1) * W), W = batch size * accumulation steps * P: the expected content comes from that schedule, not from
what the Trainer fed. DDP averages the processes' gradients. The objective a window's update follows:

- a model whose loss the Trainer takes as a mean over targets (it takes the count, or is a head declared so): with
  `average_tokens_across_devices`, the sum of every process's per-target losses over the window's targets on all
  processes; without it, the mean over the processes of each one's mean over its own targets (a process without
  targets adds 0, as its gradient does);
- any other module (the release's rule, `reference.per_micro_batch`): the mean over the processes of the mean of its
  micro-batches' own losses.

The logged loss is the mean of those objectives over the steps since the last log. Each process computes its part of
the reference (`reference.window` on its own micro-batches, at the weights before the update); the parent combines
them.

The parent runs every configuration in one launch of 2 processes (one import of transformers each), with the
variables `torch.distributed.run` would set: `python -m invariants.processes RUN.json OUT_DIR` is the program each
process runs.
"""

import json
import math
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


PROCESSES = 2
MODELS = ("reg_kw", "reg_func", "reg_nokw", "reg_sample", "llama_lm", "bert_tok")
# those whose loss the Trainer takes as a mean over targets (not `reference.PER_MICRO_BATCH`)
OVER_TARGETS = ("reg_kw", "reg_func", "llama_lm", "bert_tok")
KEYS = ("processes", "model", "targets", "seq_len", "batch_size", "ga", "windows", "logging", "average_tokens")
# drawn later (issue 54), optional in a replayed configuration: fp16 with the CPU gradient scaler, and the window
# (and the process) whose gradient the harness makes inf, None for none
FP16_KEYS = {"fp16": False, "skip": None, "skip_process": 0}
# drawn later still, optional too: a head's `label_smoothing_factor` (the Trainer's label smoother computes its loss)
SMOOTHING_KEYS = {"label_smoothing": 0.0}
HEADS = ("llama_lm", "bert_tok")
INIT_SCALE = 16.0
INVARIANTS = (
    "processes-window-content",
    "processes-gradient",
    "processes-update",
    "processes-logged-loss",
    "processes-train-loss",
    "processes-completes",
)
TRAIN_LOSS_RTOL = 1e-5
LEARNING_RATE = 0.01
# fp32 on both sides: the difference is rounding (relative to the terms summed) and the logged loss's 4 decimals
GRAD_RTOL = 1e-5
LOSS_ATOL = 6e-5


def configs(seed: int, count: int) -> list[dict[str, Any]]:
    """`count` configurations, the same for a seed: every model in turn, both values of
    `average_tokens_across_devices`, a log every step or one for the run, in every other one a window (the first
    or the last) where the second process has no target, and in every sixth (from the fourth) a first window where
    neither has one (and a later one that has), for a model whose loss is a mean over targets. Every third (from the
    second) runs in fp16 over 2 windows or more, three of four such with an inf gradient on one process in one
    window: one before the last (twice) or the last (the process and window drawn apart from the rest)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        model = MODELS[(i + seed + i // 6) % len(MODELS)]  # shifted each round: the one displaced below comes back
        if i % 6 == 3:  # a window without targets on both: a model whose loss is a mean over them (0019 leaves it out)
            model = OVER_TARGETS[(i // 6 + seed) % len(OVER_TARGETS)]
        seq_len = rng.randint(2, 4)
        batch_size, ga, windows = rng.randint(1, 2), rng.randint(1, 3), rng.randint(1, 3)
        if i % 6 == 3 or i % 3 == 1:  # a first window without targets (fp16: one with a skip), and one after it
            windows = max(windows, 2)
        most = seq_len - 1 if model == "llama_lm" else seq_len
        n = batch_size * ga * PROCESSES * windows
        targets = [rng.randint(0, most) for _ in range(n)]
        if i % 2 == 0:  # the second process's micro-batches of a window: its global batches 1, 3, ...
            first = 0 if i % 4 == 0 else (windows - 1) * ga * PROCESSES
            for m in range(ga):
                for s in range((first + 2 * m + 1) * batch_size, (first + 2 * m + 2) * batch_size):
                    targets[s] = 0
        if i % 6 == 3:  # no process has a target in the first window
            targets[: batch_size * ga * PROCESSES] = [0] * (batch_size * ga * PROCESSES)
        if not any(targets):  # some target in the run (the last window's, where the first window has none)
            targets[-1 if i % 6 == 3 else 0] = most
        out.append(
            {
                "processes": PROCESSES,
                "model": model,
                "targets": targets,
                "seq_len": seq_len,
                "batch_size": batch_size,
                "ga": ga,
                "windows": windows,
                "logging": rng.choice([1, windows]),
                "average_tokens": i % 4 >= 2,
            }
        )
        fp16 = random.Random(f"{seed}/{i}/fp16")
        if i % 3 == 1:  # an inf gradient in a window before the last, in the last, or none
            skip = {1: fp16.randrange(windows - 1), 4: fp16.randrange(windows - 1), 7: windows - 1}.get(i % 12)
            process = fp16.randrange(PROCESSES)
            if skip is not None and not _targets_of(out[-1], skip)[process]:  # a loss without targets has no gradient
                process = max(range(PROCESSES), key=lambda r: _targets_of(out[-1], skip)[r])
            out[-1].update(fp16=True, skip=skip, skip_process=process)
        else:
            out[-1].update(FP16_KEYS)
        out[-1]["label_smoothing"] = 0.0
    # and a copy of the first configuration of each head with `label_smoothing_factor` (copies: a smoothed loss takes
    # another path, and each configuration above is some mutant's only catch)
    for head in HEADS:
        original = next((c for c in out if c["model"] == head and not c["label_smoothing"]), None)
        if original is not None:
            out.append({**original, "label_smoothing": 0.1})
    return out


def cells(configs: list[dict[str, Any]]) -> dict[str, int]:
    """The coverage table's row of the 2-process configurations: how many had each feature on."""
    row = {"examples": len(configs)}
    for name, on in CELL_FEATURES.items():
        row[name] = sum(1 for c in configs if on(c))
    # counted, not held to the floor (`cell_gaps`): few of the configurations are heads'
    row["label_smoothing"] = sum(1 for c in configs if c.get("label_smoothing"))
    return row


def _targets_of(config: dict[str, Any], j: int) -> list[int]:
    """The targets of window `j` on each process."""
    per = [0] * PROCESSES
    for m in range(config["ga"] * PROCESSES):
        first = (j * config["ga"] * PROCESSES + m) * config["batch_size"]
        per[m % PROCESSES] += sum(config["targets"][first : first + config["batch_size"]])
    return per


def _without_targets(config: dict[str, Any], every: bool) -> bool:
    """Whether some window has no target on one process (`every`: on both)."""
    for j in range(config["windows"]):
        per = _targets_of(config, j)
        if (all if every else any)(t == 0 for t in per) and (every or any(per)):
            return True
    return False


CELL_FEATURES = {
    "fp16": lambda c: bool(c.get("fp16")),
    "skip": lambda c: c.get("skip") is not None,
    "no_target_one": lambda c: _without_targets(c, every=False),
    "no_target_all": lambda c: c["model"] in OVER_TARGETS and _without_targets(c, every=True),
    "average_tokens": lambda c: bool(c["average_tokens"]),
}


def cell_gaps(row: dict[str, int], floor: int = 1) -> list[str]:
    """The features of the 2-process row drawn on, or off, fewer than `floor` times."""
    return [
        f"processes/2: {name} on {row[name]}, off {row['examples'] - row[name]}"
        for name in CELL_FEATURES
        if row[name] < floor or row["examples"] - row[name] < floor
    ]


def check_config(config: Any) -> dict[str, Any]:
    """A replayed two-process configuration, checked (a ValueError names what is wrong)."""
    optional = {**FP16_KEYS, **SMOOTHING_KEYS}
    if not isinstance(config, dict) or not set(KEYS) <= set(config) <= set(KEYS) | set(optional):
        raise ValueError(f"a two-process configuration has the keys {', '.join(KEYS)} (and {', '.join(optional)})")
    config = {**optional, **config}
    if not isinstance(config["fp16"], bool):
        raise ValueError("fp16: true or false")
    skip = config["skip"]
    if skip is not None and not (config["fp16"] and isinstance(skip, int) and 0 <= skip < config["windows"]):
        raise ValueError("skip: null, or (with fp16) the index of one of the windows")
    if config["skip_process"] not in range(PROCESSES):
        raise ValueError(f"skip_process: 0 to {PROCESSES - 1}")
    if config["label_smoothing"] not in (0, 0.0, 0.1) or (config["label_smoothing"] and config["model"] not in HEADS):
        raise ValueError(f"label_smoothing: 0.0, or 0.1 for {' or '.join(HEADS)}")
    if config["processes"] != PROCESSES:
        raise ValueError(f"processes: {PROCESSES} only")
    if config["model"] not in MODELS:
        raise ValueError(f"model: one of {', '.join(MODELS)}")
    for key in ("seq_len", "batch_size", "ga", "windows", "logging"):
        if not isinstance(config[key], int) or isinstance(config[key], bool) or config[key] < 1:
            raise ValueError(f"{key}: a positive integer")
    if len(config["targets"]) != config["batch_size"] * config["ga"] * PROCESSES * config["windows"]:
        raise ValueError("targets: batch_size * ga * processes * windows samples (every window full)")
    return config


# ---- the parent: run every configuration on 2 processes, then judge ----


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(configs: list[dict[str, Any]], timeout: float) -> list[dict[Any, Any]]:
    """Each process's record of each configuration: [{rank: record}] (an `error` record when the run failed).

    The processes are started here, in this process's group (the tool stops the worker's whole group on Ctrl-C or
    its time limit), with the variables `torch.distributed.run` would set; past `timeout` they are killed."""
    with tempfile.TemporaryDirectory(prefix="invariants-processes-") as tmp:
        folder = Path(tmp)
        (folder / "run.json").write_text(json.dumps({"configs": configs, "timeout": timeout}), encoding="utf-8")
        port = _free_port()
        procs = []
        for rank in range(PROCESSES):
            env = dict(os.environ, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="", MASTER_ADDR="127.0.0.1")
            env.update(MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(PROCESSES))
            env.update(LOCAL_WORLD_SIZE=str(PROCESSES))
            with open(folder / f"rank{rank}.log", "w", encoding="utf-8") as log:
                command = [sys.executable, "-m", "invariants.processes", str(folder / "run.json"), str(folder)]
                procs.append(subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT))
        failure = None
        try:
            deadline = time.monotonic() + timeout + 30
            for proc in procs:
                code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                if code and failure is None:
                    failure = f"process {procs.index(proc)} exited {code}"
        except subprocess.TimeoutExpired:
            failure = f"the 2 processes took more than {timeout + 30:.0f}s"
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        records: list[dict[Any, Any]] = [{} for _ in configs]
        for rank in range(PROCESSES):
            path = folder / f"rank{rank}.json"
            done = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
            for i, record in enumerate(done):
                records[i][rank] = record
        tail = " | ".join(_what_ended(folder / f"rank{rank}.log") for rank in range(PROCESSES))
        for by_rank in records:
            if len(by_rank) < PROCESSES:
                by_rank["error"] = f"{failure or 'a process gave no record'}: {tail}"
        return records


def _what_ended(log: Path) -> str:
    """The line of a process's output that says how it ended: its error, or its guard's timeout, else its last."""
    lines = [line.strip() for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    told = [line for line in lines if line.startswith("Timeout (") or "Error" in line.split(":", 1)[0]]
    return (told or lines or ["no output"])[-1]


def _objective(config: dict[str, Any], parts: list[dict[str, Any]]) -> tuple[list[float], float]:
    """The gradient (flat) and loss of one window's objective, from each process's part of the reference."""
    size = len(parts[0]["ref_grad"])
    if parts[0]["over_targets"] and config["average_tokens"]:
        total = max(sum(p["targets"] for p in parts), 1)
        grad = [sum(p["ref_grad"][k] * max(p["targets"], 1) for p in parts) / total for k in range(size)]
        loss = sum(p["ref_loss"] * max(p["targets"], 1) for p in parts) / total
        return grad, loss
    # each process's own mean (over its targets, or of its micro-batch losses), averaged over the processes
    grad = [sum(p["ref_grad"][k] for p in parts) / len(parts) for k in range(size)]
    return grad, sum(p["ref_loss"] for p in parts) / len(parts)


def _update_finding(j: int, rank: int, part: dict[str, Any], lr: float, applied: int) -> str | None:
    """What is wrong with one process's optimizer step of window `j` (None: nothing): its learning rate is `lr`, a
    window whose gradient is not finite moves no weight, any other moves each by SGD's `-lr * gradient`."""
    if not abs(part["lr"] - lr) <= 1e-9 * LEARNING_RATE:
        return f"window {j}, process {rank}: learning rate {part['lr']:.6g}, {lr:.6g} after {applied} update(s)"
    step = [a - b for a, b in zip(part["after"], part["before"], strict=True)]
    if not part["finite"]:
        moved = max((abs(d) for d in step), default=0.0)
        return f"window {j}, process {rank}: an inf gradient, yet a weight moved by {moved:.3g}" if moved else None
    off = max((abs(d + lr * g) for d, g in zip(step, part["grad"], strict=True)), default=0.0)
    size = max((abs(b) for b in part["before"]), default=0.0)
    if not off <= 1e-6 * (1.0 + size):
        return f"window {j}, process {rank}: the update is off SGD's (-lr x gradient) by {off:.3g}"
    return None


def judge(config: dict[str, Any], record: dict[Any, Any]) -> tuple[dict[str, list[str]], set[str]]:
    """The invariants one configuration's run breaks (with what each found), and those it gave something to check."""
    if "error" in record or any(r.get("error") for r in record.values() if isinstance(r, dict)):
        error = record.get("error") or next(r["error"] for r in record.values() if isinstance(r, dict) and r["error"])
        return {"processes-completes": [f"the run failed: {error}"]}, {"processes-completes"}
    from . import judges, models

    config = {**FP16_KEYS, **config}
    fp16_units = judges.FP16_UNITS * judges.FP16_EPS if config["fp16"] else 0.0
    canonical = models.canonical({key: config[key] for key in ("model", "targets", "seq_len")})
    ranks = [record[r] for r in range(PROCESSES)]
    broken: dict[str, list[str]] = {}
    checked = {"processes-completes", "processes-window-content", "processes-gradient", "processes-logged-loss"}
    checked.add("processes-update")
    applied = 0
    width = config["batch_size"] * config["ga"] * PROCESSES
    attempts = [len(r["attempts"]) for r in ranks]
    if set(attempts) != {config["windows"]}:
        broken.setdefault("processes-window-content", []).append(
            f"optimizer steps per process {attempts}, {config['windows']} windows expected"
        )
    logs = {int(step): loss for step, loss in ranks[0]["logs"]}
    losses: list[float | None] = []
    loss_terms: list[float] = []  # what a float16 error of each window's loss scales with
    for j in range(min(attempts)):
        parts = [r["attempts"][j] for r in ranks]
        seen = sorted(s for p in parts for micro in p["samples"] for s in micro)
        expected = sorted(canonical[s] for s in range(j * width, (j + 1) * width))
        if seen != expected:
            found = f"window {j}: samples {seen}, expected {expected}"
            broken.setdefault("processes-window-content", []).append(found)
            break
        grad, loss = _objective(config, parts)
        # a mean over targets leaves a window out of the log when no process has a target in it (0019)
        losses.append(None if parts[0]["over_targets"] and not sum(p["targets"] for p in parts) else loss)
        loss_terms.append(sum(p["loss_terms"] for p in parts) / len(parts))
        # the update: none where the gradient is inf (the scaler skips the window on every process), else SGD's at
        # the learning rate of the linear schedule after the updates applied so far (a skip does not advance it)
        finite = [p["finite"] for p in parts]
        lr = LEARNING_RATE * (config["windows"] - applied) / config["windows"]
        update = [_update_finding(j, rank, part, lr, applied) for rank, part in enumerate(parts)]
        if len(set(finite)) > 1:
            update.insert(0, f"window {j}: gradient finite on processes {finite} (DDP shares one gradient)")
        if any(update):
            broken.setdefault("processes-update", []).append(next(u for u in update if u))
        if not all(finite):
            continue
        applied += 1
        scale = max(1.0, sum(p["grad_terms"] for p in parts))
        tolerance = GRAD_RTOL * scale + fp16_units * sum(p["grad_terms"] for p in parts)
        for rank, part in enumerate(parts):
            worst = max((abs(a - b) for a, b in zip(part["grad"], grad, strict=True)), default=0.0)
            if not worst <= tolerance:  # a NaN fails too
                norm = math.sqrt(sum(g * g for g in grad))
                got = math.sqrt(sum(g * g for g in part["grad"]))
                broken.setdefault("processes-gradient", []).append(
                    f"window {j}, process {rank}: gradient off by {worst:.3g} (norm {got:.6g}, objective's {norm:.6g})"
                )
    # a log every `logging` steps (1, or the whole run): the mean of the objectives of the windows since the last one
    # that are kept, NaN when none is
    for step in range(config["logging"], len(losses) + 1, config["logging"]):
        span = range(step - config["logging"], step)
        kept = [x for x in (losses[k] for k in span) if x is not None]
        loss = sum(kept) / len(kept) if kept else math.nan
        terms = fp16_units * max((loss_terms[k] for k in span if losses[k] is not None), default=0.0)
        logged = logs.get(step)
        both_nan = logged is not None and math.isnan(logged) and math.isnan(loss)
        if not both_nan and (logged is None or not abs(logged - loss) <= LOSS_ATOL + 1e-5 * abs(loss) + terms):
            broken.setdefault("processes-logged-loss", []).append(
                f"step {step}: logged loss {logged}, the objective's {loss:.6g} "
                f"(the mean of the {len(kept)} window(s) kept of steps {step - config['logging'] + 1}-{step})"
            )
    # train()'s train_loss: the mean of the objectives of every window kept, NaN when none is (0019)
    if "train_loss" in ranks[0] and len(losses) == config["windows"]:
        checked.add("processes-train-loss")
        kept = [x for x in losses if x is not None]
        want = sum(kept) / len(kept) if kept else math.nan
        got = ranks[0]["train_loss"]
        terms = fp16_units * max((t for t, x in zip(loss_terms, losses, strict=True) if x is not None), default=0.0)
        same = got is not None and (
            (math.isnan(got) and math.isnan(want)) or abs(got - want) <= 1e-6 + TRAIN_LOSS_RTOL * abs(want) + terms
        )
        if not same:
            broken.setdefault("processes-train-loss", []).append(
                f"train_loss {got}, the objective's {want:.6g} (the mean of the {len(kept)} window(s) kept of "
                f"{len(losses)})"
            )
        # and the windows it left out, counted once however many processes hold them (0019; absent when none)
        left_out = len(losses) - len(kept)
        for rank, part in enumerate(ranks):
            if part.get("filtered") != (left_out or None):
                broken.setdefault("processes-train-loss", []).append(
                    f"process {rank}: train() says total_nan_inf_filtered_windows {part.get('filtered')!r}, due "
                    f"{left_out or None!r} (windows no process has a target in)"
                )
                break
    return broken, checked


# ---- each process ----


def _train_one(config: dict[str, Any], folder: str) -> dict[str, Any]:
    import torch
    from transformers import Trainer, TrainerCallback, TrainingArguments
    from transformers.trainer_callback import PrinterCallback

    from . import models, reference

    over_targets = not reference.per_micro_batch(config)
    model = models.build_model(config["model"])
    index = models.sample_index({key: config[key] for key in ("model", "targets", "seq_len")})
    record: dict[str, Any] = {"attempts": [], "logs": [], "error": None}
    pending: list[dict[str, Any]] = []

    class Recorder(TrainerCallback):
        def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            ref = reference.window(config["model"], model, pending, over_targets, config.get("label_smoothing", 0.0))
            record["attempts"].append(
                {
                    "samples": [models.identify(index, batch) for batch in pending],
                    "grad": reference.flat_grad(model).tolist(),
                    "ref_grad": ref["grad"].tolist(),
                    "ref_loss": ref["loss"],
                    "targets": ref["targets"],
                    "over_targets": ref["over_targets"],
                    "grad_terms": ref["grad_terms"],
                    "loss_terms": ref["loss_terms"],
                    "finite": bool(torch.isfinite(reference.flat_grad(model)).all()),
                    "lr": float(kwargs["optimizer"].param_groups[0]["lr"]),
                    "before": _weights(model),
                }
            )
            pending.clear()

        def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            record["attempts"][-1]["after"] = _weights(model)

    args = TrainingArguments(
        output_dir=folder,
        per_device_train_batch_size=config["batch_size"],
        gradient_accumulation_steps=config["ga"],
        max_steps=config["windows"],
        learning_rate=LEARNING_RATE,
        label_smoothing_factor=config.get("label_smoothing", 0.0),
        optim="sgd",
        # fp16: a clip no gradient reaches, so that the gradients are unscaled before the harness reads them
        max_grad_norm=1e9 if config["fp16"] else 0.0,
        fp16=config["fp16"],
        logging_steps=config["logging"],
        save_strategy="no",
        average_tokens_across_devices=config["average_tokens"],
        train_sampling_strategy="sequential",
        report_to="none",
        disable_tqdm=True,
        use_cpu=True,
        seed=0,
        dataloader_num_workers=0,
        remove_unused_columns=False,
    )
    items = models.samples(config["model"], config["targets"], config["seq_len"])
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=models.SizedData(items, models.Counter(10**9)),
        compute_loss_func=models.regression_loss if config["model"] == "reg_func" else None,
        callbacks=[Recorder()],
    )
    trainer.remove_callback(PrinterCallback)
    if config["fp16"]:  # on CPU, fp16 makes no scaler: the one CUDA would have
        trainer.accelerator.scaler = torch.amp.GradScaler("cpu", init_scale=INIT_SCALE)
        trainer.accelerator.native_amp = True
    original = trainer.compute_loss
    poisons = config["skip"] is not None and int(os.environ["RANK"]) == config["skip_process"]

    def compute_loss(model_: Any, inputs: dict[str, Any], *a: Any, **kw: Any) -> Any:
        training = model_.training and torch.is_grad_enabled()
        if training:
            pending.append({k: v.detach().clone() for k, v in inputs.items() if torch.is_tensor(v)})
        out = original(model_, inputs, *a, **kw)
        loss = out[0] if isinstance(out, tuple) else out
        if training and poisons and len(record["attempts"]) == config["skip"] and loss.requires_grad:
            loss.register_hook(lambda grad: torch.full_like(grad, float("inf")))
        return out

    trainer.compute_loss = compute_loss
    try:
        output = trainer.train()
        record["train_loss"] = float(output.metrics["train_loss"])
        record["filtered"] = output.metrics.get("total_nan_inf_filtered_windows")
    except Exception as exc:  # a crash on a valid configuration is a finding
        record["error"] = f"{type(exc).__name__}: {exc}"
    record["logs"] = [[log["step"], log["loss"]] for log in trainer.state.log_history if "loss" in log]
    return record


def _weights(model: Any) -> list[float]:
    import torch

    return torch.cat([p.detach().float().flatten() for p in model.parameters()]).tolist()


def _rank_main(run_file: str, out_dir: str) -> None:
    import faulthandler

    import torch

    spec = json.loads(Path(run_file).read_text(encoding="utf-8"))
    # a process left waiting in a collective exits instead of blocking the check
    faulthandler.dump_traceback_later(spec["timeout"], exit=True)
    rank = int(os.environ["RANK"])
    records = []
    for i, config in enumerate(spec["configs"]):
        records.append(_train_one({**FP16_KEYS, **config}, os.path.join(out_dir, f"case{i}")))
        # written after each configuration: a later hang keeps the earlier records
        Path(out_dir, f"rank{rank}.part").write_text(json.dumps(records), encoding="utf-8")
        os.replace(Path(out_dir, f"rank{rank}.part"), Path(out_dir, f"rank{rank}.json"))
        torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # gloo's threads can keep the interpreter from exiting


if __name__ == "__main__":
    _rank_main(*sys.argv[1:3])
