"""Seed 000 without an injected fault: fp16 with the default GradScaler (init_scale=65536), whose first steps
overflow on their own.

12 samples, batch 2, max_steps=6, for the default optimizer and `adamw_torch`. On CUDA the accelerator's own
GradScaler runs; with --device cpu a CPU GradScaler with the same default scale is installed on the Accelerator,
which takes the CUDA fp16 code path. Prints, per optimizer: global_step, the updates the optimizer applied, the
scheduler's steps and the optimizer step attempts. It asks for seed 000's reading of a step,
`count_skipped_steps=False` (the series' option; the release ignores it): the release counts the overflowed
attempts in global_step (global_step > applied updates); with the series, global_step = applied updates = max_steps.

    python3 scripts/series.py python --with accelerate -- repro/skipped_steps_natural.py --device cpu

`run_gpu_checks.py` (in the bundle of `series.py bundle`) runs it on CUDA on the release and on the series.
"""

import argparse
import json
import tempfile

import torch
import transformers
from torch import nn
from transformers import Trainer, TrainerCallback, TrainingArguments
from transformers.utils import logging


MAX_STEPS = 6


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.first, self.second = nn.Linear(4, 8), nn.Linear(8, 1)

    def forward(self, x, y):
        return {"loss": nn.functional.mse_loss(self.second(torch.tanh(self.first(x))).float(), y)}


class Attempts(TrainerCallback):
    """Counts optimizer step attempts, applied or skipped by the scaler."""

    def __init__(self):
        self.attempts = 0

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.attempts += 1


def train(optim, device):
    generator = torch.Generator().manual_seed(0)
    xs = torch.randn(12, 4, generator=generator)
    data = [{"x": x, "y": x.sum(0, keepdim=True)} for x in xs]
    kwargs = {} if optim is None else {"optim": optim}
    args = TrainingArguments(
        output_dir=tempfile.mkdtemp(),
        per_device_train_batch_size=2,
        max_steps=MAX_STEPS,
        learning_rate=1e-2,
        fp16=True,
        use_cpu=device == "cpu",
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        seed=0,
        **kwargs,
    )
    # seed 000's reading of a step (0026's option), set after construction: the release ignores it
    args.count_skipped_steps = False
    attempts = Attempts()
    trainer = Trainer(model=Regressor(), args=args, train_dataset=data, callbacks=[attempts])
    if device == "cpu":
        # accelerate makes no scaler for fp16 on CPU: one with the default scale takes the same code path
        trainer.accelerator.scaler = torch.amp.GradScaler("cpu")
        trainer.accelerator.native_amp = True
    scaler = trainer.accelerator.scaler
    if scaler is None:
        raise SystemExit(f"no GradScaler on the accelerator for fp16 on {device}")
    init_scale = float(scaler.get_scale())
    trainer.train()
    optimizer = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
    applied = max((int(state["step"]) for state in optimizer.state.values() if "step" in state), default=0)
    return {
        "optim": args.optim.value,
        "global_step": trainer.state.global_step,
        "applied_updates": applied,
        "scheduler_steps": trainer.lr_scheduler.last_epoch,
        "attempts": attempts.attempts,
        "skipped_counted": getattr(trainer.state, "skipped_optimizer_steps", None),
        "max_steps": MAX_STEPS,
        "init_scale": init_scale,
        "final_scale": float(scaler.get_scale()),
        "model_device": str(next(trainer.model.parameters()).device),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--json", metavar="FILE", help="write the results here")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no GPU visible to torch (use --device cpu)")
    logging.set_verbosity_error()
    results = {}
    for optim in (None, "adamw_torch"):
        run = train(optim, args.device)
        if run["optim"] in results:
            continue
        results[run["optim"]] = run
        print(
            f"{run['optim']:18s} global_step={run['global_step']} updates applied={run['applied_updates']} "
            f"scheduler steps={run['scheduler_steps']} attempts={run['attempts']} "
            f"skipped={run['skipped_counted'] if run['skipped_counted'] is not None else '-'}",
            flush=True,
        )
    if args.json:
        report = {
            "device": args.device,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else None,
            "optimizers": results,
        }
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2)


if __name__ == "__main__":
    main()
