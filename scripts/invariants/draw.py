"""The configurations Hypothesis draws, and the profiles (how many examples, how long).

A configuration is a JSON object (what a violation prints and `--replay` takes). Every choice shrinks towards
the simplest case: the regression model with `**kwargs`, one sample, batch 1, no accumulation, fp32, no callback,
no checkpoint.
"""

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st


MODELS = ("reg_kw", "reg_nokw", "bert_cls", "llama_lm")
OPTIMIZERS = ("adamw_torch", "adamw_torch_fused")
SCHEDULES = ("constant", "linear", "constant_with_warmup")
KEYS = (
    "model", "targets", "seq_len", "batch_size", "ga", "streamed", "optim", "fp16", "inject", "schedule",
    "warmup", "learning_rate", "max_steps", "epochs", "logging", "save_steps", "callback", "resume",
    "max_grad_norm",
)  # fmt: skip


@dataclass(frozen=True)
class Profile:
    name: str
    max_examples: int  # examples drawn per tree, shrinking included
    seconds: float  # the search's budget per tree
    shrink_seconds: float  # the most one violation's shrinking may take
    case_seconds: float  # the wall-clock guard of one case


PROFILES = {
    "ci": Profile("ci", max_examples=150, seconds=180, shrink_seconds=15, case_seconds=30),
    "nightly": Profile("nightly", max_examples=1500, seconds=2400, shrink_seconds=120, case_seconds=60),
}


@st.composite
def configs(draw: Any) -> dict[str, Any]:
    model = draw(st.sampled_from(MODELS))
    seq_len = draw(st.integers(2, 4))
    n = draw(st.integers(1, 9))
    if model == "bert_cls":
        targets = [1] * n
    else:
        most = seq_len - 1 if model == "llama_lm" else seq_len
        # the number of positions without a target shrinks to 0: every position a target
        targets = [most - k for k in draw(st.lists(st.integers(0, most), min_size=n, max_size=n))]
    batch_size = draw(st.integers(1, 3))
    ga = draw(st.integers(1, 4))
    streamed = draw(st.booleans())
    fp16 = draw(st.booleans())
    inject = sorted(draw(st.sets(st.integers(0, 11), max_size=4))) if fp16 else []
    epochs_mode = False if streamed else draw(st.booleans())
    max_steps = 0 if epochs_mode else draw(st.integers(1, 8))
    epochs = draw(st.integers(1, 3)) if epochs_mode else 1
    save_steps = draw(st.sampled_from([0, 1, 2, 3]))
    resume = None
    if save_steps:
        resume = draw(
            st.none()
            | st.fixed_dictionaries(
                {
                    "checkpoint": st.integers(0, 5),
                    "batch_size": st.just(batch_size) | st.integers(1, 3),
                    "ga": st.just(ga) | st.integers(1, 4),
                }
            )
        )
    # a third of the cases each: no callback, one that stops epochs, one that stops training
    kind = draw(st.sampled_from([None, "epoch_stop", "train_stop"]))
    callback = None if kind is None else {"kind": kind, "k": draw(st.integers(0, 6))}
    config = {
        "model": model,
        "targets": targets,
        "seq_len": seq_len,
        "batch_size": batch_size,
        "ga": ga,
        "streamed": streamed,
        "optim": draw(st.sampled_from(OPTIMIZERS)),
        "fp16": fp16,
        "inject": inject,
        "schedule": draw(st.sampled_from(SCHEDULES)),
        "warmup": draw(st.integers(0, 3)),
        "learning_rate": 0.01,
        "max_steps": max_steps,
        "epochs": epochs,
        "logging": draw(st.sampled_from([1, 2, 3, 4, "epoch"])),
        "save_steps": save_steps,
        "callback": callback,
        "resume": resume,
        # fp16: a clip threshold no gradient reaches, so the gradients are unscaled before the harness reads them
        "max_grad_norm": 1e9 if fp16 else draw(st.sampled_from([0.0, 1e9])),
    }
    return config


def check(config: Any) -> dict[str, Any]:
    """A replayed configuration, checked: every key, nothing else (a ValueError names what is wrong)."""
    if not isinstance(config, dict):
        raise ValueError("the configuration is not a JSON object")
    missing = [k for k in KEYS if k not in config]
    extra = [k for k in config if k not in KEYS]
    if missing or extra:
        raise ValueError(f"configuration keys: missing {missing}, unknown {extra}")
    if config["model"] not in MODELS:
        raise ValueError(f"unknown model {config['model']!r} (one of {', '.join(MODELS)})")
    if len(config["targets"]) < 1 or config["batch_size"] < 1 or config["ga"] < 1:
        raise ValueError("targets, batch_size and ga need at least 1")
    return config
