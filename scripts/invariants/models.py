"""The tiny models and datasets a case trains, built in code from a configuration (no download, CPU).

Each sample has `seq_len` positions and `targets[i]` of them carry a target (the rest are -100), so a micro-batch
can have none. The datasets count the samples read and raise `ReadBound` past the case's bound, so a run that
never ends is a violation, not a hang.
"""

from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset, IterableDataset


FEATURES = 4
VOCAB = 24
CLASSES = 3
IGNORE = -100
REGRESSIONS = ("reg_kw", "reg_nokw", "reg_func", "reg_sample")


class ReadBound(Exception):
    """The run read more samples than the reference allows."""


class RegressionWithKwargs(nn.Module):
    """Per-position linear regression whose loss divides by the Trainer's `num_items_in_batch` (as a causal LM's)."""

    main_input_name = "x"  # what `include_num_input_tokens_seen` counts

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(FEATURES, 1)

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None, **kwargs: Any) -> dict[str, Any]:
        pred = self.lin(x).squeeze(-1)
        out: dict[str, Any] = {"logits": pred}
        if labels is not None:
            mask = labels.ne(IGNORE)
            total = ((pred - labels.clamp(min=-10)) ** 2 * mask).sum()
            count = kwargs.get("num_items_in_batch")
            if count is None:
                out["loss"] = total / torch.clamp(mask.sum().to(total.dtype), min=1)
            else:  # as transformers' losses do: the Trainer's count must not be 0 (0005)
                out["loss"] = total / torch.as_tensor(count, dtype=total.dtype)
        return out


class RegressionWithoutKwargs(nn.Module):
    """The same regression with a plain `forward(x, labels)`: its loss is the mean over its own micro-batch."""

    main_input_name = "x"

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(FEATURES, 1)

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, Any]:
        pred = self.lin(x).squeeze(-1)
        out: dict[str, Any] = {"logits": pred}
        if labels is not None:
            mask = labels.ne(IGNORE)
            total = ((pred - labels.clamp(min=-10)) ** 2 * mask).sum()
            out["loss"] = total / torch.clamp(mask.sum().to(total.dtype), min=1)
        return out


class RegressionPerSampleMean(RegressionWithoutKwargs):
    """A custom module whose loss is a mean per sample (each sample's mean over its own targets, then the mean over
    the micro-batch's samples), not per target: what the Trainer cannot know it averages over."""

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, Any]:
        pred = self.lin(x).squeeze(-1)
        out: dict[str, Any] = {"logits": pred}
        if labels is not None:
            mask = labels.ne(IGNORE)
            per_sample = ((pred - labels.clamp(min=-10)) ** 2 * mask).sum(-1) / mask.sum(-1).clamp(min=1)
            out["loss"] = per_sample.mean()
        return out


def regression_loss(outputs: Any, labels: torch.Tensor, num_items_in_batch: Any = None) -> torch.Tensor:
    """The `compute_loss_func` of `reg_func`: the squared errors over the targets, divided by the Trainer's count."""
    pred = outputs["logits"]
    mask = labels.ne(IGNORE)
    total = ((pred - labels) ** 2 * mask).sum()
    if num_items_in_batch is None:
        return total / torch.clamp(mask.sum().to(total.dtype), min=1)
    return total / torch.as_tensor(num_items_in_batch, dtype=total.dtype)  # the count must not be 0 (0005)


def _bert_config() -> Any:
    from transformers import BertConfig

    return BertConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=16,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        num_labels=CLASSES,
    )


class Delegating(nn.Module):
    """A wrapper that hands `forward` and every attribute it lacks to the model inside (as a user's adapter or a
    remote-code wrapper does): the Trainer sees the head's declarations through it, but not its class."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, **kwargs: Any) -> Any:
        return self.inner(**kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["inner"], name)


# What a transformers head may be trained through: itself, `torch.compile` (the eager backend: dynamo's graph
# capture without a compiler, seconds on CPU) or a delegating wrapper
WRAPPED = ("bert_cls", "bert_tok", "llama_lm")
# one label a sample (sequence classification), and one a position (token classification); `llama_cls` and
# `llama_tok` are the generic heads of `modeling_layers.py` (GenericForSequenceClassification and
# GenericForTokenClassification)
PER_SAMPLE_LABEL = ("bert_cls", "llama_cls")
PER_POSITION_LABEL = ("bert_tok", "llama_tok")


def wrap(model: nn.Module, how: str | None) -> nn.Module:
    """The module the Trainer gets for `model` (whose parameters it shares)."""
    if how == "compiled":
        return torch.compile(model, backend="eager", dynamic=True)
    if how == "delegating":
        return Delegating(model)
    return model


def build_model(kind: str) -> nn.Module:
    """A fresh model of `kind`, the same weights every time (seeded)."""
    torch.manual_seed(0)
    if kind in ("reg_kw", "reg_func"):
        return RegressionWithKwargs()
    if kind == "reg_nokw":
        return RegressionWithoutKwargs()
    if kind == "reg_sample":
        return RegressionPerSampleMean()
    if kind == "bert_cls":
        from transformers import BertForSequenceClassification

        return BertForSequenceClassification(_bert_config())
    if kind == "bert_tok":
        from transformers import BertForTokenClassification

        return BertForTokenClassification(_bert_config())
    if kind in ("llama_lm", "llama_cls", "llama_tok"):
        import transformers

        config = transformers.LlamaConfig(
            vocab_size=VOCAB,
            hidden_size=16,
            intermediate_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=16,
            num_labels=CLASSES,
            pad_token_id=0,  # no sample holds it: the sequence head pools the last position
            classifier_dropout=0.0,  # the token head drops out 0.1 by default: the reference must see the same
        )
        head = {"llama_lm": "LlamaForCausalLM", "llama_cls": "LlamaForSequenceClassification"}
        return getattr(transformers, head.get(kind, "LlamaForTokenClassification"))(config)
    raise ValueError(f"unknown model {kind!r}")


def samples(kind: str, targets: list[int], seq_len: int) -> list[dict[str, torch.Tensor]]:
    """One sample per entry of `targets` (how many of its positions carry a target), the same every time."""
    gen = torch.Generator().manual_seed(1)
    out = []
    for count in targets:
        if kind in REGRESSIONS:
            labels = torch.randn(seq_len, generator=gen)
            labels[count:] = IGNORE
            out.append({"x": torch.randn(seq_len, FEATURES, generator=gen), "labels": labels})
        elif kind in PER_SAMPLE_LABEL:
            ids = torch.randint(1, VOCAB, (seq_len,), generator=gen)
            label = torch.randint(0, CLASSES, (), generator=gen)
            out.append({"input_ids": ids, "attention_mask": torch.ones(seq_len, dtype=torch.long), "labels": label})
        elif kind in PER_POSITION_LABEL:
            ids = torch.randint(1, VOCAB, (seq_len,), generator=gen)
            labels = torch.randint(0, CLASSES, (seq_len,), generator=gen)
            labels[count:] = IGNORE
            out.append({"input_ids": ids, "attention_mask": torch.ones(seq_len, dtype=torch.long), "labels": labels})
        else:
            ids = torch.randint(1, VOCAB, (seq_len,), generator=gen)
            labels = ids.clone()
            # position 0 is never a target of a causal LM (the loss shifts); `count` of the others are
            labels[: max(seq_len - count, 1)] = IGNORE
            out.append({"input_ids": ids, "attention_mask": torch.ones(seq_len, dtype=torch.long), "labels": labels})
    return out


class Counter:
    """Samples read across every pass and resume of one case; raises `ReadBound` past `bound`."""

    def __init__(self, bound: int) -> None:
        self.bound, self.reads = bound, 0

    def read(self) -> None:
        self.reads += 1
        if self.reads > self.bound:
            raise ReadBound(f"read more than {self.bound} samples")


class SizedData(Dataset):
    def __init__(self, items: list[dict[str, torch.Tensor]], counter: Counter) -> None:
        self.items, self.counter = items, counter

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        self.counter.read()
        return self.items[index]


class StreamedData(IterableDataset):
    def __init__(self, items: list[dict[str, torch.Tensor]], counter: Counter) -> None:
        self.items, self.counter = items, counter

    def __iter__(self) -> Any:
        for item in self.items:
            self.counter.read()
            yield item


def dataset(config: dict[str, Any], counter: Counter) -> Dataset:
    items = samples(config["model"], config["targets"], config["seq_len"])
    return StreamedData(items, counter) if config["streamed"] else SizedData(items, counter)


def eval_dataset(config: dict[str, Any]) -> Dataset:
    """The evaluation set of a case that evaluates: the training samples, without a read bound."""
    return SizedData(samples(config["model"], config["targets"], config["seq_len"]), Counter(10**9))


def _content(item: dict[str, torch.Tensor]) -> tuple[tuple[str, bytes], ...]:
    return tuple((k, item[k].detach().cpu().contiguous().numpy().tobytes()) for k in sorted(item))


def sample_index(config: dict[str, Any]) -> dict[tuple[tuple[str, bytes], ...], int]:
    """Each sample's content -> its index (the first of equal samples: equal samples are one sample to a window)."""
    index: dict[tuple[tuple[str, bytes], ...], int] = {}
    for i, item in enumerate(samples(config["model"], config["targets"], config["seq_len"])):
        index.setdefault(_content(item), i)
    return index


def canonical(config: dict[str, Any]) -> list[int]:
    """Sample index -> the index `sample_index` gives its content."""
    index = sample_index(config)
    return [index[_content(item)] for item in samples(config["model"], config["targets"], config["seq_len"])]


def identify(index: dict[tuple[tuple[str, bytes], ...], int], batch: dict[str, torch.Tensor]) -> list[int]:
    """The sample indices of a collated micro-batch's rows (-1 for a row that is no sample)."""
    keys = [k for k in batch if torch.is_tensor(batch[k])]
    rows = len(batch[keys[0]]) if keys else 0
    return [index.get(_content({k: batch[k][r] for k in keys}), -1) for r in range(rows)]
