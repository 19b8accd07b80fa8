"""The step loop on two processes (gloo, CPU): each window's gradient and logged loss when the processes' targets are
uneven, one process without any in a window included (issue 38).

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
KEYS = ("processes", "model", "targets", "seq_len", "batch_size", "ga", "windows", "logging", "average_tokens")
INVARIANTS = (
    "processes-window-content",
    "processes-gradient",
    "processes-logged-loss",
    "processes-train-loss",
    "processes-completes",
)
TRAIN_LOSS_RTOL = 1e-5
# fp32 on both sides: the difference is rounding (relative to the terms summed) and the logged loss's 4 decimals
GRAD_RTOL = 1e-5
LOSS_ATOL = 6e-5


def configs(seed: int, count: int) -> list[dict[str, Any]]:
    """`count` configurations, the same for a seed: every model in turn, both values of
    `average_tokens_across_devices`, a log every step or one for the run, in every other one a window (the first
    or the last) where the second process has no target, and in every sixth (from the fourth) a first window where
    neither has one."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        model = MODELS[(i + seed) % len(MODELS)]
        seq_len = rng.randint(2, 4)
        batch_size, ga, windows = rng.randint(1, 2), rng.randint(1, 3), rng.randint(1, 3)
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
    return out


def check_config(config: Any) -> dict[str, Any]:
    """A replayed two-process configuration, checked (a ValueError names what is wrong)."""
    if not isinstance(config, dict) or sorted(config) != sorted(KEYS):
        raise ValueError(f"a two-process configuration has the keys {', '.join(KEYS)}")
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


def judge(config: dict[str, Any], record: dict[Any, Any]) -> tuple[dict[str, list[str]], set[str]]:
    """The invariants one configuration's run breaks (with what each found), and those it gave something to check."""
    if "error" in record or any(r.get("error") for r in record.values() if isinstance(r, dict)):
        error = record.get("error") or next(r["error"] for r in record.values() if isinstance(r, dict) and r["error"])
        return {"processes-completes": [f"the run failed: {error}"]}, {"processes-completes"}
    from . import models

    canonical = models.canonical({key: config[key] for key in ("model", "targets", "seq_len")})
    ranks = [record[r] for r in range(PROCESSES)]
    broken: dict[str, list[str]] = {}
    checked = {"processes-completes", "processes-window-content", "processes-gradient", "processes-logged-loss"}
    width = config["batch_size"] * config["ga"] * PROCESSES
    attempts = [len(r["attempts"]) for r in ranks]
    if set(attempts) != {config["windows"]}:
        broken.setdefault("processes-window-content", []).append(
            f"optimizer steps per process {attempts}, {config['windows']} windows expected"
        )
    logs = {int(step): loss for step, loss in ranks[0]["logs"]}
    losses: list[float | None] = []
    for j in range(min(attempts)):
        parts = [r["attempts"][j] for r in ranks]
        seen = sorted(s for p in parts for micro in p["samples"] for s in micro)
        expected = sorted(canonical[s] for s in range(j * width, (j + 1) * width))
        if seen != expected:
            found = f"window {j}: samples {seen}, expected {expected}"
            broken.setdefault("processes-window-content", []).append(found)
            break
        grad, loss = _objective(config, parts)
        scale = max(1.0, sum(p["grad_terms"] for p in parts))
        for rank, part in enumerate(parts):
            worst = max((abs(a - b) for a, b in zip(part["grad"], grad, strict=True)), default=0.0)
            if not worst <= GRAD_RTOL * scale:  # a NaN fails too
                norm = math.sqrt(sum(g * g for g in grad))
                got = math.sqrt(sum(g * g for g in part["grad"]))
                broken.setdefault("processes-gradient", []).append(
                    f"window {j}, process {rank}: gradient off by {worst:.3g} (norm {got:.6g}, objective's {norm:.6g})"
                )
        # a mean over targets leaves a window out of the log when no process has a target in it (0017)
        losses.append(None if parts[0]["over_targets"] and not sum(p["targets"] for p in parts) else loss)
    # a log every `logging` steps (1, or the whole run): the mean of the objectives of the windows since the last one
    # that are kept, NaN when none is
    for step in range(config["logging"], len(losses) + 1, config["logging"]):
        kept = [x for x in losses[step - config["logging"] : step] if x is not None]
        loss = sum(kept) / len(kept) if kept else math.nan
        logged = logs.get(step)
        both_nan = logged is not None and math.isnan(logged) and math.isnan(loss)
        if not both_nan and (logged is None or not abs(logged - loss) <= LOSS_ATOL + 1e-5 * abs(loss)):
            broken.setdefault("processes-logged-loss", []).append(
                f"step {step}: logged loss {logged}, the objective's {loss:.6g} "
                f"(the mean of the {len(kept)} window(s) kept of steps {step - config['logging'] + 1}-{step})"
            )
    # train()'s train_loss: the mean of the objectives of every window kept, NaN when none is (0017)
    if "train_loss" in ranks[0] and len(losses) == config["windows"]:
        checked.add("processes-train-loss")
        kept = [x for x in losses if x is not None]
        want = sum(kept) / len(kept) if kept else math.nan
        got = ranks[0]["train_loss"]
        same = got is not None and (
            (math.isnan(got) and math.isnan(want)) or abs(got - want) <= 1e-6 + TRAIN_LOSS_RTOL * abs(want)
        )
        if not same:
            broken.setdefault("processes-train-loss", []).append(
                f"train_loss {got}, the objective's {want:.6g} (the mean of the {len(kept)} window(s) kept of "
                f"{len(losses)})"
            )
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
            ref = reference.window(config["model"], model, pending, over_targets)
            record["attempts"].append(
                {
                    "samples": [models.identify(index, batch) for batch in pending],
                    "grad": reference.flat_grad(model).tolist(),
                    "ref_grad": ref["grad"].tolist(),
                    "ref_loss": ref["loss"],
                    "targets": ref["targets"],
                    "over_targets": ref["over_targets"],
                    "grad_terms": ref["grad_terms"],
                }
            )
            pending.clear()

    args = TrainingArguments(
        output_dir=folder,
        per_device_train_batch_size=config["batch_size"],
        gradient_accumulation_steps=config["ga"],
        max_steps=config["windows"],
        learning_rate=0.01,
        optim="sgd",
        max_grad_norm=0.0,
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
    original = trainer.compute_loss

    def compute_loss(model_: Any, inputs: dict[str, Any], *a: Any, **kw: Any) -> Any:
        if model_.training and torch.is_grad_enabled():
            pending.append({k: v.detach().clone() for k, v in inputs.items() if torch.is_tensor(v)})
        return original(model_, inputs, *a, **kw)

    trainer.compute_loss = compute_loss
    try:
        output = trainer.train()
        record["train_loss"] = float(output.metrics["train_loss"])
    except Exception as exc:  # a crash on a valid configuration is a finding
        record["error"] = f"{type(exc).__name__}: {exc}"
    record["logs"] = [[log["step"], log["loss"]] for log in trainer.state.log_history if "loss" in log]
    return record


def _rank_main(run_file: str, out_dir: str) -> None:
    import faulthandler

    import torch

    spec = json.loads(Path(run_file).read_text(encoding="utf-8"))
    # a process left waiting in a collective exits instead of blocking the check
    faulthandler.dump_traceback_later(spec["timeout"], exit=True)
    rank = int(os.environ["RANK"])
    records = []
    for i, config in enumerate(spec["configs"]):
        records.append(_train_one(config, os.path.join(out_dir, f"case{i}")))
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
