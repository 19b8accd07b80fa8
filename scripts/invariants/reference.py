"""What a case should give, computed without the Trainer: the plain PyTorch gradient and loss of a window (the
token-weighted mean over every target of its micro-batches), the closed-form learning rate of the n-th applied
update, the number of windows of a pass, and the bound on the samples a run may read."""

import copy
import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from .models import IGNORE


def _token_loss_sum(kind: str, model: nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, int]:
    """The sum of the per-target losses of one micro-batch and its number of targets (the model's own loss code
    is not used: the logits or predictions are)."""
    labels = batch["labels"]
    if kind in ("reg_kw", "reg_nokw", "reg_func"):
        pred = model.lin(batch["x"].float()).squeeze(-1)
        mask = labels.ne(IGNORE)
        return (((pred - labels) ** 2) * mask).sum(), int(mask.sum())
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.float()
    if kind == "llama_lm":
        logits, labels = logits[:, :-1, :], labels[:, 1:]
    flat = logits.reshape(-1, logits.shape[-1])
    target = labels.reshape(-1)
    return F.cross_entropy(flat, target, ignore_index=IGNORE, reduction="sum"), int(target.ne(IGNORE).sum())


def window(kind: str, model: nn.Module, batches: list[dict[str, torch.Tensor]]) -> dict[str, Any]:
    """The reference update of one window at `model`'s current weights: gradient (flat, float64), loss, targets."""
    ref = copy.deepcopy(model).float()
    ref.zero_grad(set_to_none=True)
    total: torch.Tensor = torch.zeros(())
    count = 0
    for batch in batches:
        part, n = _token_loss_sum(kind, ref, batch)
        total, count = total + part, count + n
    loss = total / max(count, 1)
    if loss.requires_grad:
        loss.backward()
    return {"grad": flat_grad(ref), "loss": float(loss), "targets": count}


def flat_grad(model: nn.Module) -> torch.Tensor:
    parts = [
        (p.grad if p.grad is not None else torch.zeros_like(p)).detach().double().reshape(-1)
        for p in model.parameters()
        if p.requires_grad
    ]
    return torch.cat(parts)


def windows_per_pass(config: dict[str, Any], batch_size: int | None = None, ga: int | None = None) -> int:
    """Optimizer windows of one pass over the data, the short last one included."""
    batches = math.ceil(len(config["targets"]) / (batch_size or config["batch_size"]))
    return math.ceil(batches / (ga or config["ga"]))


def total_steps(config: dict[str, Any]) -> int:
    """The schedule's length: `max_steps`, else the epochs times the windows of a pass."""
    return config["max_steps"] if config["max_steps"] > 0 else config["epochs"] * windows_per_pass(config)


def learning_rate(config: dict[str, Any], n: int) -> float:
    """The closed form of the schedule at the n-th applied update (0-based), as documented by transformers."""
    base, warmup, total = config["learning_rate"], config["warmup"], total_steps(config)
    kind = config["schedule"]
    if kind == "constant":
        return base
    if n < warmup:
        return base * n / max(1, warmup)
    if kind == "constant_with_warmup":
        return base
    return base * max(0.0, (total - n) / max(1, total - warmup))


def read_bound(config: dict[str, Any], batch_size: int, ga: int, injected: int) -> int:
    """The most samples one `train()` may read: every pass a run needs, one more for each skip to make up, one spare.

    A pass holds at least its full windows; a stream's short last window may not count (the release).
    """
    n = len(config["targets"])
    full = max(1, math.ceil(n / batch_size) // ga)
    passes = math.ceil(config["max_steps"] / full) if config["max_steps"] > 0 else config["epochs"]
    return n * (passes + injected + 1)
