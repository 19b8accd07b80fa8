"""The configurations Hypothesis draws, and the profiles (how many examples, how long).

A configuration is a JSON object (what a violation prints and `--replay` takes). Every choice shrinks towards
the simplest case: the regression model with `**kwargs`, one sample, batch 1, no accumulation, fp32, no callback,
no checkpoint.
"""

import math
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from .models import PER_SAMPLE_LABEL, REGRESSIONS, WRAPPED


MODELS = (
    "reg_kw", "reg_nokw", "reg_func", "bert_cls", "bert_tok", "llama_lm", "reg_sample", "llama_cls", "llama_tok",
)  # fmt: skip
OPTIMIZERS = ("adamw_torch", "adamw_torch_fused")
SCHEDULES = ("constant", "linear", "constant_with_warmup")
KEYS = (
    "model", "targets", "seq_len", "batch_size", "ga", "streamed", "optim", "fp16", "inject", "schedule",
    "warmup", "learning_rate", "max_steps", "epochs", "logging", "save_steps", "callback", "resume",
    "max_grad_norm", "count_skipped_steps", "save", "save_total_limit", "eval", "eval_steps", "input_tokens",
    "inf_from", "wrap", "init_scale", "target_tokens", "progress", "outside", "focus", "outside_decay",
    "nan_part", "label_smoothing",
)  # fmt: skip
# keys a replayed configuration may leave out, with the value they then take (configurations recorded before them)
OPTIONAL = {
    "count_skipped_steps": True,
    "save": "steps",
    "save_total_limit": None,
    "eval": None,
    "eval_steps": 1,
    "input_tokens": False,
    "inf_from": None,
    "wrap": None,
    "init_scale": 16.0,
    "target_tokens": False,
    "progress": False,
    "outside": False,
    "focus": None,
    "outside_decay": 0.0,
    "nan_part": False,
    "label_smoothing": 0.0,
}
# What a tree's Trainer may lack (the release, the upstream tier): the choices that need it are drawn there as their
# plain value, so that each tree is searched on what it claims
FEATURES = ("count_skipped_steps", "include_num_target_tokens_trained")
# The gradient scaler's first scale: 16 (the scale falls to 0 at the 154th skip), or one 10 skips take to 0 (2**-150
# rounds to 0 in float32), drawn with faults on every attempt: the scale reaches 0 inside any run
TINY_SCALE = 2.0**-140
TINY_SCALE_SKIPS = 10


@dataclass(frozen=True)
class Profile:
    name: str
    max_examples: int  # examples drawn per tree, shrinking included
    seconds: float  # the search's budget per tree
    shrink_seconds: float  # the most one violation's shrinking may take
    case_seconds: float  # the wall-clock guard of one case
    processes: int = 0  # configurations run on 2 processes after the search (`processes.py`), all in one launch


PROFILES = {
    # (a case takes about 0.06 s on one core once the imports are frozen, `__main__._freeze_imports`; 0.4 s before)
    "ci": Profile("ci", max_examples=300, seconds=180, shrink_seconds=10, case_seconds=30, processes=12),
    "nightly": Profile("nightly", max_examples=1500, seconds=2400, shrink_seconds=120, case_seconds=60, processes=48),
    # the mutation check: the ci examples, with time enough that a slower machine runs them all (its score then
    # does not depend on the machine's speed); it stops at the first violation and shrinks nothing, and runs the
    # 2-process configurations only when the search found none
    "mutants": Profile("mutants", max_examples=300, seconds=480, shrink_seconds=0, case_seconds=30, processes=12),
}


@st.composite
def configs(draw: Any, features: frozenset[str] = frozenset(FEATURES), steered: bool = False) -> dict[str, Any]:
    """A configuration. `steered`: no edge is drawn (the search moves each example onto the next row of the coverage
    table, `steer`), so that every edge and reading gets its share of the examples."""
    # Every choice is drawn in every case, in the same order, whether it matters or not (a choice that does not
    # apply is then set to its plain value): each one shrinks on its own, across models and modes.
    model = draw(st.sampled_from(MODELS))
    seq_len = draw(st.integers(2, 4))
    n = draw(st.integers(1, 9))
    # how many positions of each sample have no target; shrinks to 0: every position a target
    masked = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    batch_size = draw(st.integers(1, 3))
    ga = draw(st.integers(1, 4))
    streamed = draw(st.booleans())
    optim = draw(st.sampled_from(OPTIMIZERS))
    fp16 = draw(st.booleans())
    inject = sorted(draw(st.sets(st.integers(0, 11), max_size=4)))
    schedule = draw(st.sampled_from(SCHEDULES))
    warmup = draw(st.integers(0, 3))
    epochs_mode = draw(st.booleans())
    max_steps = draw(st.integers(1, 8))
    epochs = draw(st.integers(1, 3))
    half_epoch = draw(st.booleans())  # a fractional last epoch (0.5, 1.5, 2.5)
    logging = draw(st.sampled_from([1, 2, 3, 4, "epoch"]))
    save_steps = draw(st.sampled_from([0, 1, 2, 3]))
    save = draw(st.sampled_from(["steps", "epoch"]))
    save_total_limit = draw(st.sampled_from([None, 1, 2]))
    evaluate = draw(st.sampled_from([None, "steps", "epoch"]))
    eval_steps = draw(st.integers(1, 3))
    resume = draw(st.booleans())
    resume_from = draw(st.integers(0, 5))
    again = draw(st.sampled_from([None, 0, 1]))  # a second resume, from a checkpoint of the resumed run
    # two thirds of the resumes keep each argument: the contract models a resume with the same ones
    resume_batch_size = draw(st.just(batch_size) | st.just(batch_size) | st.integers(1, 3))
    resume_ga = draw(st.just(ga) | st.just(ga) | st.integers(1, 4))
    # a third of the cases each: no callback, one that stops epochs, one that stops training
    kind = draw(st.sampled_from([None, "epoch_stop", "train_stop", "save_at"]))
    k = draw(st.integers(0, 6))
    # 0.05 clips about every gradient of these models; 1e9 none; 0 turns clipping off
    clip = draw(st.sampled_from([0.0, 1e9, 0.05]))
    # `TrainingArguments.count_skipped_steps` (0026): shrinks to the default, a skipped optimizer step is a step
    applied_steps = draw(st.booleans())
    input_tokens = draw(st.booleans())
    target_tokens = draw(st.booleans()) and "include_num_target_tokens_trained" in features
    progress = draw(st.booleans())  # the progress bar on (`disable_tqdm=False`)
    # a parameter the optimizer holds outside the model (0020); how the losses reach it is drawn last (below)
    outside = draw(st.booleans())
    # fp16: an inf in every attempt from this one on (the loss scale falls to 0 after 154 skips)
    inf_from = draw(st.sampled_from([None, None, None, None, None, None, 0, 2]))
    # a transformers head trained compiled, or through a wrapper that delegates to it (models.WRAPPED)
    wrap = draw(st.sampled_from([None, None, "compiled", "delegating"]))
    # unsteered (a replay's `draw.configs()`): eight in fourteen cases aim at an edge the plain draw reaches too
    # rarely (see `_focus`); shrinks to none. The search steers instead (`steer`): each edge and reading in turn
    # (the option's edge twice: its reading has the most claims, 0026's)
    focus = draw(st.sampled_from([None] * 6 + list(FOCUS) + ["option-skips"]))
    # drawn last, so that the choices above come out as before they were added (issue 54 items 2 and 5):
    # - the outside parameter: `reached` is in the loss times 0 (its gradient is 0, NaN once a fault reaches the
    #   loss), `unreached` in no loss (its gradient stays None), `alternate` in the loss of the even attempts only;
    #   its group's weight decay (AdamW decays a parameter only on a step that gives it a gradient: a gradient left
    #   at zeros instead of None decays it in a window that does not reach it)
    outside_mode = draw(st.sampled_from(["reached", "unreached", "alternate"]))
    outside_decay = draw(st.sampled_from([0.0, 0.1]))
    # - the checkpoint a resume starts from holds a key this tree does not know (a later version's field): the
    #   tree's own loader (0001) must drop it and resume as from the checkpoint as saved
    resume_unknown_key = draw(st.booleans())
    # - the resume counts steps the other way (`count_skipped_steps` flipped): a checkpoint with skips is refused
    resume_other_reading = draw(st.booleans()) and "count_skipped_steps" in features
    # - a `max_steps` run resumed with `max_steps` at the checkpoint's step or below it: it trains no further update
    resume_max_steps = draw(st.sampled_from([None, None, None, "at", "below"]))
    # - how `include_num_input_tokens_seen` counts, when on: the samples have no padding, so both count the same
    input_tokens_mode = draw(st.sampled_from(["all", "non_padding"]))
    # - fp32: the NaN of an injected window is in the loss of its first micro-batch only (a mean over no labels is NaN
    #   with a finite gradient): the window's loss is the mean of its other micro-batches' (0019)
    nan_part = draw(st.booleans())
    if nan_part and not fp16 and ga > 1 and not inject:
        inject = [1]  # a window with a NaN micro-batch to leave out
    if "count_skipped_steps" not in features:
        applied_steps = False

    most = {"llama_lm": seq_len - 1}.get(model, seq_len)
    targets = [1] * n if model in PER_SAMPLE_LABEL else [most - min(m, most) for m in masked]
    wrap = wrap if model in WRAPPED else None
    epochs_mode = epochs_mode and not streamed  # a stream has no length: max_steps
    config = {
        "model": model,
        "targets": targets,
        "seq_len": seq_len,
        "batch_size": batch_size,
        "ga": ga,
        "streamed": streamed,
        "optim": optim,
        "fp16": fp16,
        # fp16: an inf in the gradient of these attempts; fp32: a NaN loss (the gradient unchanged)
        "inject": inject,
        "schedule": schedule,
        "warmup": warmup,
        "learning_rate": 0.01,
        "max_steps": 0 if epochs_mode else max_steps,
        "epochs": (epochs - 0.5 if half_epoch else epochs) if epochs_mode else 1,
        "logging": logging,
        "save_steps": save_steps,
        "save": save,
        "save_total_limit": save_total_limit if save_steps else None,
        "eval": evaluate,
        "eval_steps": eval_steps,
        "input_tokens": input_tokens_mode if input_tokens else False,
        "target_tokens": target_tokens,
        "progress": progress,
        "outside": outside_mode if outside else False,
        "outside_decay": outside_decay if outside else 0.0,
        "nan_part": nan_part and not fp16 and ga > 1,
        # not drawn (a draw here changed the search's examples: the mutation check lost its catches of 0008 and
        # 0019); the 2-process configurations train smoothed copies (`processes.configs`), `--replay` takes it
        "label_smoothing": 0.0,
        "init_scale": 16.0,
        "inf_from": inf_from if fp16 else None,
        "wrap": wrap,
        "callback": None if kind is None else {"kind": kind, "k": k},
        "resume": (
            {
                "checkpoint": resume_from,
                "batch_size": resume_batch_size,
                "ga": resume_ga,
                "again": again,
                "unknown_key": resume_unknown_key,
                "other_reading": resume_other_reading,
                **({"max_steps": resume_max_steps} if resume_max_steps else {}),
            }
            if resume and save_steps
            else None
        ),
        # fp16: a clip threshold (none that no gradient reaches: 0), so the gradients are unscaled before the harness
        # reads them
        "max_grad_norm": (clip or 1e9) if fp16 else clip,
        "count_skipped_steps": not applied_steps,
    }
    if steered:
        focus = None
    config = _focus(config, focus) if focus else config
    if "count_skipped_steps" not in features:
        config["count_skipped_steps"] = True
    config["focus"] = focus  # the edge it was moved onto (the coverage table's row), None for a plain draw
    return config


def steer(config: dict[str, Any], row: str, features: frozenset[str] = frozenset(FEATURES)) -> dict[str, Any]:
    """`config` (drawn `steered`) moved onto a row of the coverage table, `edge/reading`: the reading set, then the
    edge's focus (which may fix the reading); a tree without the option keeps the release's reading."""
    edge, reading_name = row.split("/")
    out = dict(config, count_skipped_steps=reading_name != "option")
    if edge != "plain":
        out = _focus(out, edge)
    if "count_skipped_steps" not in features:
        out["count_skipped_steps"] = True
    out["focus"] = None if edge == "plain" else edge
    return out


# The edges a plain draw reaches in about one case in a hundred or less (the mutation check missed each in 150);
# eight in fourteen cases are moved onto one (`option-skips` twice):
# - last-skip: an epoch run whose last planned window is skipped, steps counting applied updates, its final step
#   no multiple of the save and evaluation intervals (the final save and evaluation are still due, and the run
#   reads no window more);
# - later-pass-resume: a stream resumed, with the same arguments, from a checkpoint in its second pass;
# - skip-schedule: a decaying schedule with skipped attempts (it advances on applied updates only);
# - empty-window: an fp32 run of a regression model that takes the count whose first window has no target (its loss
#   is 0, not 0 / 0, and its update changes nothing).
# - skip-resume: an fp16 run with a skip before its first checkpoint, resumed from it with the same arguments (the
#   position, the counts and `train_loss` after a skip), in either reading;
# - scale-zero: faults on every attempt of a scaler that starts at 2**-140: its scale is 0 from the 10th skip on,
#   inside any run (an epoch run whose every step is skipped ends with a warning, a max_steps run with
#   `count_skipped_steps=False` raises, the logged scale is 0).
# - option-skips: the option's reading (`count_skipped_steps=False`) over sized data with skips, the progress bar on
#   and no callback: an epoch run (one update step less per skip, its end, saves, logs and the bar's total) or a
#   max_steps run of whole passes, whose skipped steps need further windows.
FOCUS = (
    "last-skip", "later-pass-resume", "skip-schedule", "empty-window", "skip-resume", "scale-zero", "option-skips",
)  # fmt: skip


def _windows_per_pass(config: dict[str, Any]) -> int:
    return math.ceil(math.ceil(len(config["targets"]) / config["batch_size"]) / config["ga"])


def _off(step: int, interval: int) -> int:
    """The first interval from `interval` on that `step` is no multiple of (any, when `step` is 0)."""
    while step and step % interval == 0:
        interval += 1
    return interval


def _focus(config: dict[str, Any], focus: str) -> dict[str, Any]:
    """`config` moved onto the edge `focus`; the choices the edge does not fix stay as drawn."""
    out = dict(config)
    if focus == "last-skip":
        # the option's reading (a skipped step is no step): the end of training moves with the skip; no callback
        out.update(streamed=False, fp16=True, inf_from=None, max_grad_norm=1e9, save="steps", callback=None)
        out.update(count_skipped_steps=False, eval="steps", eval_steps=max(2, out["eval_steps"]))
        if out["max_steps"]:  # a max_steps draw becomes an epoch run of as many whole passes
            out.update(max_steps=0, epochs=max(1, min(3, math.ceil(out["max_steps"] / _windows_per_pass(out)))))
        # every micro-batch holds a target: an inf on the loss of one without targets reaches no weight (no skip)
        out["targets"] = [max(1, t) for t in out["targets"]]
        if out["epochs"] * _windows_per_pass(out) < 2:  # at least one window before the last, to be applied
            out["epochs"] = 2
        total = math.ceil(out["epochs"] * _windows_per_pass(out))
        inject = sorted({i for i in out["inject"] if i < total - 1} | {total - 1})
        out["inject"] = inject if len(inject) < total else [total - 1]
        # the final step (the updates applied) is no multiple of the intervals: only the end of training saves and
        # evaluates there
        final = total - len(out["inject"])
        out["save_steps"] = _off(final, max(2, out["save_steps"]))
        out["eval_steps"] = _off(final, out["eval_steps"])
        out["resume"] = None
    elif focus == "later-pass-resume":
        per_pass = _windows_per_pass(out)
        # no callback: one that ends an epoch early makes a resume go on elsewhere (declared), one that stops the
        # run may stop it before the checkpoint
        out.update(streamed=True, save="steps", save_steps=per_pass + 1, save_total_limit=None, callback=None)
        out.update(inf_from=None)
        out.update(max_steps=max(out["max_steps"] or 1, per_pass + 2), epochs=1)
        out["resume"] = {"checkpoint": 0, "batch_size": out["batch_size"], "ga": out["ga"], "again": None}
    elif focus == "skip-schedule":
        out.update(fp16=True, schedule="linear", max_grad_norm=1e9)
        out["inject"] = out["inject"] or [0]
    elif focus == "empty-window":
        # the regression models: a causal LM's gradient over ignored targets is 0 even when divided by 0
        model = out["model"] if out["model"] in ("reg_kw", "reg_func") else ("reg_kw", "reg_func")[out["ga"] % 2]
        first = out["batch_size"] * out["ga"]
        targets = [0] * min(first, len(out["targets"])) + out["targets"][first:]
        # no callback: one may stop the run or the epoch before the window is read
        out.update(model=model, targets=targets, fp16=False, inf_from=None, wrap=None, callback=None)
        out["inject"] = [i for i in out["inject"] if i > 0]  # the first window's loss is its own
    elif focus == "skip-resume":
        # every micro-batch holds a target (an inf on a loss without one reaches no weight); a checkpoint each step
        out["targets"] = [max(1, t) for t in out["targets"]]
        out.update(fp16=True, inf_from=None, save="steps", save_steps=1, callback=None)
        out["max_grad_norm"] = out["max_grad_norm"] or 1e9
        out["inject"] = sorted({0} | {i for i in out["inject"] if i < 6})
        if out["max_steps"]:
            out["max_steps"] = max(out["max_steps"], 3)
        elif out["epochs"] * _windows_per_pass(out) < 3:
            out["epochs"] = 3
        out["resume"] = {"checkpoint": 0, "batch_size": out["batch_size"], "ga": out["ga"], "again": None}
    elif focus == "option-skips":
        out["targets"] = [max(1, t) for t in out["targets"]]
        # the progress bar on: its total follows the steps the option counts
        out.update(count_skipped_steps=False, fp16=True, streamed=False, inf_from=None, callback=None, progress=True)
        out["max_grad_norm"] = out["max_grad_norm"] or 1e9
        per_pass = _windows_per_pass(out)
        if out["max_steps"]:  # whole passes: a skipped step makes up its update in a further pass
            out["max_steps"] = per_pass * math.ceil(out["max_steps"] / per_pass)
        total = out["max_steps"] or math.ceil(out["epochs"] * per_pass)
        inject = sorted({i for i in out["inject"] if i < total} | {(total - 1) // 2})
        out["inject"] = inject if len(inject) < total else inject[:1]
    elif focus == "scale-zero":
        # faults on every attempt (torch's scaler at scale 0 applies an update of NaN gradients to an attempt without
        # one, 0 * inf: the contract does not model that, and no draw makes such an attempt)
        out["targets"] = [max(1, t) for t in out["targets"]]
        out.update(fp16=True, init_scale=TINY_SCALE, inf_from=0, inject=[])
        out["max_grad_norm"] = out["max_grad_norm"] or 1e9
        if not out["max_steps"] and out["epochs"] * _windows_per_pass(out) <= TINY_SCALE_SKIPS:
            # an epoch run long enough that its scale reaches 0 before its last planned window
            out["epochs"] = math.ceil((TINY_SCALE_SKIPS + 2) / _windows_per_pass(out))
        elif out["max_steps"] and out["max_steps"] <= TINY_SCALE_SKIPS:
            out["max_steps"] += TINY_SCALE_SKIPS
    return out


def check(config: Any) -> dict[str, Any]:
    """A replayed configuration, checked: every key, nothing else (a ValueError names what is wrong)."""
    if not isinstance(config, dict):
        raise ValueError("the configuration is not a JSON object")
    config = {**OPTIONAL, **config}
    missing = [k for k in KEYS if k not in config]
    extra = [k for k in config if k not in KEYS]
    if missing or extra:
        raise ValueError(f"configuration keys: missing {missing}, unknown {extra}")
    if config["model"] not in MODELS:
        raise ValueError(f"unknown model {config['model']!r} (one of {', '.join(MODELS)})")
    if len(config["targets"]) < 1 or config["batch_size"] < 1 or config["ga"] < 1:
        raise ValueError("targets, batch_size and ga need at least 1")
    if config["outside"] not in OUTSIDE:
        raise ValueError(f"outside: one of {', '.join(map(repr, OUTSIDE))}")
    # a regression has no logits to smooth; a wrapper's or compiled module's class name hides a causal LM from the
    # smoother's shift, which the reference does not model
    if config["label_smoothing"] and (config["model"] in REGRESSIONS or config["wrap"]):
        raise ValueError("label_smoothing: only for a head trained as itself (no regression, no wrap)")
    return config


# the outside parameter (0020): none, or how the losses reach it (True: every loss, as recorded before the modes)
OUTSIDE = (False, True, "reached", "unreached", "alternate")


# ---- the coverage table: what the search drew, per edge and reading --------------------------------------------

# The features a row counts, each read from a configuration
CELL_FEATURES = {
    "fp16": lambda c: bool(c["fp16"]),
    "resume": lambda c: c["resume"] is not None,
    "stream": lambda c: bool(c["streamed"]),
}
# What each edge fixes of those features and of the reading (the rest is drawn): a fixed cell is not held to the floor
EDGE_FIXED: dict[str, dict[str, bool]] = {
    "plain": {},
    "last-skip": {"option": True, "fp16": True, "resume": False, "stream": False},
    "later-pass-resume": {"resume": True, "stream": True},
    "skip-schedule": {"fp16": True},
    "empty-window": {"fp16": False},
    "skip-resume": {"fp16": True, "resume": True},
    "scale-zero": {"fp16": True},
    "option-skips": {"option": True, "fp16": True, "stream": False},
}


def reading(config: dict[str, Any]) -> str:
    """`option`: a step counts applied updates only (`count_skipped_steps=False`, 0026); `release`: every step."""
    return "release" if config.get("count_skipped_steps", True) else "option"


def cell_row(config: dict[str, Any]) -> str:
    return f"{config.get('focus') or 'plain'}/{reading(config)}"


def count_cells(cells: dict[str, dict[str, int]], config: dict[str, Any]) -> None:
    """Add one drawn configuration to `cells` (row -> {"examples": n, feature: n with it on})."""
    row = cells.setdefault(cell_row(config), {"examples": 0, **dict.fromkeys(CELL_FEATURES, 0)})
    row["examples"] += 1
    for name, on in CELL_FEATURES.items():
        row[name] += on(config)


def expected_rows(features: frozenset[str]) -> list[str]:
    """The rows a search on a tree with `features` can draw: every edge in each reading it does not fix (the option's
    reading only where the tree has the option)."""
    rows = []
    for edge, fixed in EDGE_FIXED.items():
        readings = ["option"] if fixed.get("option") else ["release", "option"]
        if "count_skipped_steps" not in features:
            readings = ["release"]  # the option's edges are drawn in the release's reading there
        rows += [f"{edge}/{r}" for r in readings]
    return rows


def cell_gaps(cells: dict[str, dict[str, int]], features: frozenset[str], floor: int = 1) -> list[str]:
    """The cells drawn fewer than `floor` times: a row's examples, and each feature it does not fix, on and off."""
    gaps = []
    for row in expected_rows(features):
        got = cells.get(row, {"examples": 0})
        if got["examples"] < floor:
            gaps.append(f"{row}: {got['examples']} example(s)")
            continue
        fixed = EDGE_FIXED[row.split("/")[0]]
        for name in CELL_FEATURES:
            if name in fixed:
                continue
            on, off = got.get(name, 0), got["examples"] - got.get(name, 0)
            if on < floor or off < floor:
                gaps.append(f"{row}: {name} on {on}, off {off}")
    return gaps
