"""What a case should give, computed without the Trainer: the plain PyTorch gradient and loss of a window (the
token-weighted mean over every target of its micro-batches), the closed-form learning rate of the n-th applied
update, the number of windows of a pass, and the bound on the samples a run may read."""

import copy
import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from .models import IGNORE, REGRESSIONS


# Models whose loss the Trainer may take as a mean over the targets of a micro-batch: it passes them the window's
# count (`num_items_in_batch`), or they declare their loss is one mean over the targets (`loss_is_mean_over_targets`,
# BertForTokenClassification; compiled or behind a delegating wrapper too, through which the declaration reaches the
# Trainer). Any other module keeps the release's rule: its micro-batch losses are averaged over the window (a custom
# one without `**kwargs`, and the sequence classifiers, whose heads declare no such mean).
# (`llama_cls`, GenericForSequenceClassification, hands the count to its loss since 0012: a mean over the window's
# labels, one a sample)
PER_MICRO_BATCH = ("reg_nokw", "reg_sample", "bert_cls")


def per_micro_batch(config: dict[str, Any]) -> bool:
    """Whether the Trainer averages the window's micro-batch losses (their own means), not the window's targets. With
    `label_smoothing_factor` the Trainer's label smoother computes a head's loss over the window's targets, whatever
    the head declares (0011; on 5.25.0 every head drawn here takes the count)."""
    return config["model"] in PER_MICRO_BATCH and not config.get("label_smoothing")


def _token_loss_sum(
    kind: str, model: nn.Module, batch: dict[str, torch.Tensor], smoothing: float = 0.0
) -> tuple[torch.Tensor, int]:
    """The sum of the per-target losses of one micro-batch and its number of targets (the model's own loss code
    is not used: the logits or predictions are). `smoothing`: a head's cross-entropy against the targets smoothed
    uniformly over the classes (`label_smoothing_factor`; PyTorch's own, not the Trainer's `LabelSmoother`)."""
    labels = batch["labels"]
    if kind in REGRESSIONS:
        pred = model.lin(batch["x"].float()).squeeze(-1)
        mask = labels.ne(IGNORE)
        return (((pred - labels) ** 2) * mask).sum(), int(mask.sum())
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.float()
    if kind == "llama_lm":
        logits, labels = logits[:, :-1, :], labels[:, 1:]
    flat = logits.reshape(-1, logits.shape[-1])
    target = labels.reshape(-1)
    total = F.cross_entropy(flat, target, ignore_index=IGNORE, reduction="sum", label_smoothing=smoothing)
    return total, int(target.ne(IGNORE).sum())


def _micro_batch_loss(
    kind: str, model: nn.Module, batch: dict[str, torch.Tensor], smoothing: float = 0.0
) -> torch.Tensor:
    """The loss a module averaged per micro-batch defines for one micro-batch (written here, not its own code): a
    head's, the mean over the micro-batch's targets."""
    labels = batch["labels"]
    if kind not in REGRESSIONS:
        total, count = _token_loss_sum(kind, model, batch, smoothing)
        return total / max(count, 1)
    pred = model.lin(batch["x"].float()).squeeze(-1)
    mask = labels.ne(IGNORE)
    squares = ((pred - labels) ** 2) * mask
    if kind == "reg_sample":
        return (squares.sum(-1) / mask.sum(-1).clamp(min=1)).mean()
    return squares.sum() / max(int(mask.sum()), 1)


def _loss_magnitude(
    kind: str, model: nn.Module, batch: dict[str, torch.Tensor], part: torch.Tensor, mean: bool
) -> float:
    """What a float16 error of one micro-batch's loss term `part` scales with: for a regression, each squared error
    `r**2` of `r = pred - y` plus `2 |r| (|pred| + |y|)` (float16 rounds `pred` and `y` before they cancel, so a small
    residual of large operands carries a large relative error), summed (`mean`: averaged) as the term is; for a head,
    the term itself."""
    if kind not in REGRESSIONS:
        return abs(float(part))
    with torch.no_grad():
        labels = batch["labels"]
        pred = model.lin(batch["x"].float()).squeeze(-1)
        mask = labels.ne(IGNORE)
        r = (pred - labels) * mask
        bound = (r**2 + 2 * r.abs() * (pred.abs() + labels.abs())) * mask
        if not mean:
            return float(bound.sum())
        if kind == "reg_sample":
            return float((bound.sum(-1) / mask.sum(-1).clamp(min=1)).mean())
        return float(bound.sum()) / max(int(mask.sum()), 1)


def window(
    kind: str,
    model: nn.Module,
    batches: list[dict[str, torch.Tensor]],
    over_targets: bool | None = None,
    smoothing: float = 0.0,
) -> dict[str, Any]:
    """The reference update of one window at `model`'s current weights: gradient (flat, float64), loss (and each
    micro-batch's part of it, `terms`), targets (`smoothing`: a head's `label_smoothing_factor`),
    whether the loss is a mean over the window's targets (else the mean of its micro-batches' own losses), and the
    sums of the magnitudes of the micro-batches' terms (`grad_terms`, `loss_terms`: what a float16 error scales
    with)."""
    ref = copy.deepcopy(model).float()
    ref.zero_grad(set_to_none=True)
    over_targets = kind not in PER_MICRO_BATCH if over_targets is None else over_targets
    parts = []
    magnitudes = []
    count = 0
    for batch in batches:
        if over_targets:
            part, n = _token_loss_sum(kind, ref, batch, smoothing)
        else:
            part, n = _micro_batch_loss(kind, ref, batch, smoothing), int(batch["labels"].ne(IGNORE).sum())
        parts.append(part)
        magnitudes.append(_loss_magnitude(kind, ref, batch, part, mean=not over_targets))
        count += n
    denominator = max(count, 1) if over_targets else max(len(batches), 1)
    loss, grad_terms, loss_terms = 0.0, 0.0, 0.0
    terms = []  # each micro-batch's part of the loss
    before = flat_grad(ref)
    for part, magnitude in zip(parts, magnitudes, strict=True):
        term = part / denominator
        if term.requires_grad:
            term.backward()
        after = flat_grad(ref)
        # a regression's float16 gradient `2 r x` carries the error of `r = pred - y`, which scales with the operands
        # (see `_loss_magnitude`), not with `r`: the term's gradient grows by the loss's bound over the loss itself
        cancels = kind in REGRESSIONS and abs(float(part)) > 0
        grad_terms += float((after - before).norm()) * (max(1.0, magnitude / abs(float(part))) if cancels else 1.0)
        before = after
        loss += float(term)
        terms.append(float(term))
        loss_terms += magnitude / denominator
    return {
        "grad": before,
        "loss": loss,
        "terms": terms,
        "targets": count,
        "over_targets": over_targets,
        "grad_terms": grad_terms,
        "loss_terms": loss_terms,
    }


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
    return config["max_steps"] if config["max_steps"] > 0 else math.ceil(config["epochs"] * windows_per_pass(config))


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
    """The most samples one `train()` may read: every pass a run needs, one more for each skip to make up, one spare,
    and with faults on every attempt from one on (`inf_from`), the windows until the loss scale falls to 0.

    A pass holds at least its full windows; a stream's short last window may not count (the release).
    """
    n = len(config["targets"])
    full = max(1, math.ceil(n / batch_size) // ga)
    passes = math.ceil(config["max_steps"] / full) if config["max_steps"] > 0 else math.ceil(config["epochs"])
    # only a max_steps run that counts applied updates reads on while every step is skipped (until the scale is 0)
    always = (
        config.get("inf_from") is not None and config["max_steps"] > 0 and not config.get("count_skipped_steps", True)
    )
    return n * (passes + injected + 1) + (160 * ga * batch_size if always else 0)
