"""Seed 004: the token count that normalises the loss, for context parallelism (cp=2) and DataParallel (n_gpu=2).

Prints the count `_get_num_items_in_batch` returns for 4, 3, 1, 7 and 0 valid targets against the true share
(unpatched 5.24.0 floors the DataParallel share: 3 -> 1.0, 1 -> 0.0). A step without targets keeps its count of 0:
`compute_loss` divides by 1 instead, so its loss is 0, not 0/0 = NaN.
"""

from types import SimpleNamespace

import torch
from transformers import Trainer


def make(cp, n_gpu, avg):
    trainer = Trainer.__new__(Trainer)
    trainer.args = SimpleNamespace(average_tokens_across_devices=avg, n_gpu=n_gpu, world_size=1)
    trainer.model_accepts_loss_kwargs = True
    trainer.compute_loss_func = None
    trainer._loss_shifts_labels = True
    trainer.get_tp_size = lambda: 1
    trainer.get_cp_size = lambda: cp
    trainer.get_sp_size = lambda: 1
    return trainer


def check(trainer, valid, divisor):
    labels = torch.full((1, 8), -100, dtype=torch.long)
    if valid:
        labels[:, -valid:] = 5
    result = trainer._get_num_items_in_batch([{"labels": labels}], torch.device("cpu"))
    vals = result.flatten().tolist()
    expected = valid / divisor
    print(f"  valid={valid} actual={vals} shape={tuple(result.shape)} expected={expected}")


if __name__ == "__main__":
    for cp, n_gpu, avg in [(2, 1, False), (1, 2, False), (1, 2, True), (1, 1, False)]:
        print(f"cp={cp} n_gpu={n_gpu} average_tokens_across_devices={avg}")
        trainer = make(cp, n_gpu, avg)
        for valid in (4, 3, 1, 7, 0):
            check(trainer, valid, cp * (n_gpu if not avg else 1))
