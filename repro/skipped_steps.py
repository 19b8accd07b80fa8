"""Seed 000: an fp16 step that GradScaler skips is not a completed update step.

12 samples, batch 2, max_steps=6, an inf gradient in the 3rd backward; on CPU a GradScaler is installed on the
Accelerator, which takes the CUDA fp16 code path. Prints, per optimizer and reading of a step (the default, and
seed 000's `count_skipped_steps=False`, which the release ignores): global_step, the updates the optimizer applied,
the scheduler's step count and the skipped steps (unpatched 5.24.0: 6 / 5 / 5 or 6 / -).
"""

import tempfile

import torch
from torch import nn
from transformers import Trainer, TrainingArguments
from transformers.utils import logging


class InfOnThirdBackward(torch.autograd.Function):
    calls = 0

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        InfOnThirdBackward.calls += 1
        if InfOnThirdBackward.calls == 3:
            grad = grad.clone()
            grad.view(-1)[0] = float("inf")
        return grad


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.first, self.second = nn.Linear(4, 8), nn.Linear(8, 1)

    def forward(self, x, y):
        hidden = InfOnThirdBackward.apply(self.first(x))
        return {"loss": nn.functional.mse_loss(self.second(torch.tanh(hidden)).float(), y)}


def main():
    logging.set_verbosity_error()
    generator = torch.Generator().manual_seed(0)
    xs = torch.randn(12, 4, generator=generator)
    data = [{"x": x, "y": x.sum(0, keepdim=True)} for x in xs]
    for optim, count_skipped_steps in [(o, c) for c in (True, False) for o in ("adamw_torch", "adamw_torch_fused")]:
        InfOnThirdBackward.calls = 0
        args = TrainingArguments(
            output_dir=tempfile.mkdtemp(),
            per_device_train_batch_size=2,
            max_steps=6,
            learning_rate=1e-2,
            fp16=True,
            use_cpu=True,
            optim=optim,
            report_to=[],
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
        )
        args.count_skipped_steps = count_skipped_steps
        trainer = Trainer(model=Regressor(), args=args, train_dataset=data)
        trainer.accelerator.scaler = torch.amp.GradScaler("cpu", init_scale=16.0)
        trainer.accelerator.native_amp = True
        trainer.train()
        optimizer = trainer.optimizer.optimizer
        applied = max(int(state["step"]) for state in optimizer.state.values())
        skipped = getattr(trainer.state, "skipped_optimizer_steps", "-")
        print(
            f"{optim:18s} count_skipped_steps={count_skipped_steps!s:5s} global_step={trainer.state.global_step} "
            f"updates applied={applied} "
            f"scheduler steps={trainer.lr_scheduler.last_epoch} skipped={skipped}"
        )


if __name__ == "__main__":
    main()
