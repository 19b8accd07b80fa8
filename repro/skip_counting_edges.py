"""The edges of skip counting (issue 37): what a run with fp16 skips does at the end of training, on resume, at an
epoch boundary, in its progress bar and checkpoints, on whatever transformers is first on PYTHONPATH.

Every scenario runs a tiny regressor with a CPU GradScaler (scale 16, so that only the injected inf gradients are
skipped), once with the default and once with `count_skipped_steps=False` (set after construction: a tree without
the option ignores it, and both lines then show the same run). One line per scenario and mode, `name | mode | what`.

    python3 scripts/series.py python -- repro/skip_counting_edges.py [--release-src PATH]

`--release-src` (the `src` folder of an unpatched 5.24.0) also loads each fp16 checkpoint with that release's
`TrainerState.load_from_json`, in a subprocess.
"""

import argparse
import contextlib
import dataclasses
import io
import json
import os
import subprocess
import sys
import tempfile

import torch
from torch import nn
from transformers import Trainer, TrainerCallback, TrainingArguments
from transformers.trainer_callback import ProgressCallback, TrainerState
from transformers.utils import logging


# the dataclass fields of 5.24.0's TrainerState
RELEASE_FIELDS = {
    "epoch", "global_step", "max_steps", "logging_steps", "eval_steps", "save_steps", "train_batch_size",
    "num_train_epochs", "num_input_tokens_seen", "total_flos", "log_history", "best_metric", "best_global_step",
    "best_model_checkpoint", "is_local_process_zero", "is_world_process_zero", "is_hyper_param_search", "trial_name",
    "trial_params", "stateful_callbacks",
}  # fmt: skip


class Regressor(nn.Module):
    def __init__(self, poisoned_backwards=(), poisoned_samples=()):
        super().__init__()
        torch.manual_seed(0)
        self.first, self.second = nn.Linear(4, 8), nn.Linear(8, 1)
        self.poisoned_backwards, self.poisoned_samples = set(poisoned_backwards), set(poisoned_samples)
        self.num_backwards, self.seen = 0, []
        self.first.weight.register_hook(self._poison)

    def _poison(self, grad):
        self.num_backwards += 1
        poisoned = self.num_backwards in self.poisoned_backwards or self.poisoned_samples & set(self.seen[-1])
        return torch.full_like(grad, float("inf")) if poisoned else grad

    def forward(self, x, y, idx):
        self.seen.append(idx.tolist())
        return {"loss": nn.functional.mse_loss(self.second(torch.tanh(self.first(x))), y)}


def sample(i):
    x = torch.randn(4, generator=torch.Generator().manual_seed(i))
    return {"x": x, "y": x.sum(0, keepdim=True), "idx": torch.tensor(i)}


class Data(torch.utils.data.Dataset):
    def __init__(self, length):
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        return sample(i)


class Stream(torch.utils.data.IterableDataset):
    def __init__(self, length):
        self.length = length

    def __iter__(self):
        return (sample(i) for i in range(self.length))


class Events(TrainerCallback):
    def __init__(self):
        self.saves, self.evals, self.epoch_begins = [], [], 0

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.epoch_begins += 1

    def on_save(self, args, state, control, **kwargs):
        self.saves.append(state.global_step)

    def on_evaluate(self, args, state, control, **kwargs):
        self.evals.append(state.global_step)


class Bar(ProgressCallback):
    def on_train_end(self, args, state, control, **kwargs):
        self.end = (self.training_bar.n, self.training_bar.total)
        super().on_train_end(args, state, control, **kwargs)


def train(applied, model, data, resume=None, output_dir=None, callbacks=(), **kwargs):
    args = {
        "output_dir": output_dir or tempfile.mkdtemp(),
        "per_device_train_batch_size": 2,
        "learning_rate": 1e-2,
        "optim": "adamw_torch",
        "fp16": True,
        "use_cpu": True,
        "report_to": [],
        "save_strategy": "no",
        "disable_tqdm": True,
        "train_sampling_strategy": "sequential",
        **kwargs,
    }
    training_args = TrainingArguments(**args)
    training_args.count_skipped_steps = not applied
    events = Events()
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=data,
        eval_dataset=Data(2) if args.get("eval_strategy", "no") != "no" else None,
        callbacks=[events, *callbacks],
    )
    if args["fp16"]:
        trainer.accelerator.scaler = torch.amp.GradScaler("cpu", init_scale=16.0)
        trainer.accelerator.native_amp = True
    error = None
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            trainer.train(resume_from_checkpoint=resume)
    except RuntimeError as e:
        error = str(e).split(" because")[0]
    return trainer, events, error


def updates(trainer):
    return max((int(s["step"]) for s in trainer.optimizer.optimizer.state.values()), default=0)


def last_window_skipped(applied):
    # one epoch of 10 windows, the last skipped; save and evaluate every 4 steps
    trainer, events, _ = train(
        applied, Regressor({10}), Data(20), num_train_epochs=1, save_strategy="steps", save_steps=4,
        eval_strategy="steps", eval_steps=4,
    )  # fmt: skip
    return f"saves {events.saves}, evals {events.evals}, global_step {trainer.state.global_step}"


def fractional_epochs(applied):
    # 1.5 epochs of 4 windows: 6 attempts, the last skipped; save every 3 steps
    trainer, events, _ = train(
        applied, Regressor({6}), Data(8), num_train_epochs=1.5, save_strategy="steps", save_steps=3
    )
    return f"saves {events.saves}, global_step {trainer.state.global_step}"


def stream_resume(applied, ga):
    kwargs = {
        "max_steps": 4, "per_device_train_batch_size": 1, "gradient_accumulation_steps": ga,
        "save_strategy": "steps", "save_steps": 3,
    }  # fmt: skip
    full, _, _ = train(applied, Regressor(poisoned_samples={1}), Stream(10), **kwargs)
    checkpoint = os.path.join(full.args.output_dir, "checkpoint-3")
    resumed, _, _ = train(applied, Regressor(poisoned_samples={1}), Stream(10), resume=checkpoint, **kwargs)
    same = all(torch.equal(a, b) for a, b in zip(resumed.model.parameters(), full.model.parameters(), strict=True))
    return f"resumed at sample {resumed.model.seen[0][0]}, weights equal to the uninterrupted run's: {same}"


def one_epoch_plus_a_skip(applied):
    # 6 windows per epoch, max_steps 6, the 3rd window skipped
    trainer, events, _ = train(applied, Regressor({3}), Data(12), max_steps=6)
    epoch = trainer.state.epoch
    return (
        f"on_epoch_begin x{events.epoch_begins}, epoch {epoch:g}, num_train_epochs {trainer.state.num_train_epochs}, "
        f"updates {updates(trainer)}"
    )


def progress_bar(applied):
    bar = Bar()
    trainer, _, _ = train(applied, Regressor({3}), Data(20), num_train_epochs=1, callbacks=[bar])
    trainer.remove_callback(bar)
    return f"bar at the end {bar.end[0]}/{bar.end[1]}, global_step {trainer.state.global_step}"


def always_inf(applied, epochs):
    kwargs = {"num_train_epochs": 2} if epochs else {"max_steps": 6}
    trainer, _, error = train(applied, Regressor(range(1, 100000)), Data(400), **kwargs)
    end = error or "finished"
    return f"{end}, backwards {trainer.model.num_backwards}, global_step {trainer.state.global_step}"


def checkpoint_state(applied, release_src):
    output_dir = tempfile.mkdtemp()
    train(applied, Regressor({3}), Data(12), max_steps=6, save_strategy="steps", save_steps=4, output_dir=output_dir)
    path = os.path.join(output_dir, "checkpoint-4", "trainer_state.json")
    with open(path, encoding="utf-8") as f:
        saved = json.load(f)
    fields = [f.name for f in dataclasses.fields(TrainerState)]
    new = [f"{name} ({i + 1})" for i, name in enumerate(fields) if name not in RELEASE_FIELDS]
    line = f"top-level keys {len(saved)}, new TrainerState fields (position of {len(fields)}): {new or 'none'}"
    if release_src:
        code = "import sys; from transformers.trainer_callback import TrainerState as S; S.load_from_json(sys.argv[1])"
        env = dict(os.environ, PYTHONPATH=release_src)
        proc = subprocess.run([sys.executable, "-c", code, path], env=env, capture_output=True, text=True)
        loaded = "loads" if proc.returncode == 0 else proc.stderr.strip().splitlines()[-1][:100]
        line += f"; 5.24.0: {loaded}"
    return line


def fp32_logs(applied):
    trainer, _, _ = train(
        applied, Regressor(), Data(12), max_steps=4, fp16=False, logging_steps=2, include_num_input_tokens_seen=True
    )
    release = {"loss", "grad_norm", "learning_rate", "epoch", "step", "num_input_tokens_seen", "train_runtime"}
    release.add("train_tokens_per_second")
    logs = [log for log in trainer.state.log_history if "loss" in log]
    keys = sorted({key for log in logs for key in log} - release)
    return f"keys beyond 5.24.0's in an fp32 run's logs: {keys or 'none'}"


SCENARIOS = [
    ("last window of an epoch run skipped", last_window_skipped),
    ("fractional epochs, last attempt skipped", fractional_epochs),
    ("stream resumed after a skip, GA 1", lambda applied: stream_resume(applied, 1)),
    ("stream resumed after a skip, GA 2", lambda applied: stream_resume(applied, 2)),
    ("max_steps = one epoch + a skip", one_epoch_plus_a_skip),
    ("progress bar of an epoch run with a skip", progress_bar),
    ("always inf, epoch run", lambda applied: always_inf(applied, True)),
    ("always inf, max_steps run", lambda applied: always_inf(applied, False)),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release-src", help="the src folder of an unpatched 5.24.0, to load the checkpoints with")
    args = parser.parse_args()
    logging.set_verbosity_error()
    scenarios = SCENARIOS + [
        ("fp16 checkpoint with a skip", lambda applied: checkpoint_state(applied, args.release_src)),
        ("fp32 run, input tokens tracked", fp32_logs),
    ]
    for name, scenario in scenarios:
        for applied in (False, True):
            mode = "count_skipped_steps=False" if applied else "default"
            print(f"{name} | {mode} | {scenario(applied)}", flush=True)


if __name__ == "__main__":
    main()
