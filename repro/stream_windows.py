"""Gradient accumulation over a stream: the short last window of a pass gets its own step, nothing leaks.

One weight w, loss (w*x - 2x)^2 at w=0, a 5-sample IterableDataset, batch 1, gradient_accumulation_steps=2, SGD
with lr 0 and no clipping: the gradient before each optimizer step must be -10, -50, -100, -10, -50 (unpatched
5.24.0: -10, -50, -110, -50, -110). Also a stream that cannot be read twice: the last window is applied and
training ends with one warning.
"""

import tempfile

import torch
from torch import nn
from torch.utils.data import IterableDataset
from transformers import Trainer, TrainerCallback, TrainingArguments
from transformers.utils import logging


class Stream(IterableDataset):
    def __init__(self, length, restartable=True):
        self.length, self.restartable, self.passes = length, restartable, 0

    def __iter__(self):
        self.passes += 1
        if not self.restartable and self.passes > 1:
            return iter(())
        return iter(
            {"x": torch.tensor([float(i)]), "labels": torch.tensor([2.0 * i])} for i in range(1, self.length + 1)
        )


class Linear(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(1))

    def forward(self, x, labels=None):
        return {"loss": ((self.w * x - labels) ** 2).mean()}


class GradientRecorder(TrainerCallback):
    def __init__(self, model):
        self.model, self.gradients = model, []

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.gradients.append(self.model.w.grad.item())


def main():
    logging.set_verbosity_error()
    for restartable, dispatch in ((True, None), (False, False), (False, None)):
        model = Linear()
        recorder = GradientRecorder(model)
        args = TrainingArguments(
            tempfile.mkdtemp(),
            per_device_train_batch_size=1,
            gradient_accumulation_steps=2,
            max_steps=5,
            learning_rate=0.0,
            optim="sgd",
            lr_scheduler_type="constant",
            report_to="none",
            use_cpu=True,
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
            max_grad_norm=0.0,
            accelerator_config={"dispatch_batches": dispatch},
        )
        trainer = Trainer(model=model, args=args, train_dataset=Stream(5, restartable), callbacks=[recorder])
        label = f"restartable={restartable!s:5} dispatch_batches={dispatch!s:5}"
        try:
            output = trainer.train()
        except ValueError as exc:
            print(f"{label} gradients {recorder.gradients}, then ValueError: {exc}")
            continue
        leftover = None if model.w.grad is None else model.w.grad.item()
        steps = output.global_step
        print(f"{label} gradients {recorder.gradients}, global_step={steps}, leftover gradient={leftover}")


if __name__ == "__main__":
    main()
