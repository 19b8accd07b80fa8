"""Declared limitations: violations that are known and explained, so that the verdict on the series counts only
the undeclared ones. Standard library only (the tool's unit tests import it).

Each declaration names an invariant, the trees it applies to, a predicate on the configuration (every key must
match: a list is a set of allowed values, {"min": n} / {"max": n} a bound, a dict of other keys a predicate on a
drawn dict's keys, anything else equality), what the case must have done ("happened": facts the judges observed,
`judges.facts`, each equal; a declaration about a behaviour covers only the cases that showed it, not every
configuration that could), and the reason: the patch or limitation.

The trees are told apart by what their Trainer's source holds, not by their label, so that `--tree path:DIR` of a
tree is judged as that tree is: `"tree": {"has": TEXT}` (or `"lacks"`) applies where the source of
`transformers/trainer.py` and `trainer_callback.py` holds (or lacks) TEXT, the code of the patch that explains the
violation; a declaration without "tree" applies to every tree.
"""

import sys
from pathlib import Path
from typing import Any


# What 0009 adds to the saved state of a stream read more than once, and what 0027 logs
STREAM_POSITION = "train_dataloader_position"
LOGGED_COUNTS = "num_optimizer_steps_attempted"
# What 0023 (fork tier) logs
LOSS_SCALE = 'logs["loss_scale"]'
# 0018 before issue 38: the token-weighted mean for any module without **kwargs
GUESSED_MEAN = (
    "Only the default `compute_loss` is known to return the model's (or label smoother's) mean over the targets"
)

DECLARED: list[dict[str, Any]] = [
    {
        "invariant": "bounded-run",
        "when": {"streamed": True, "callback": {"kind": "epoch_stop"}},
        "happened": {"epoch_stopped": True},
        "reason": (
            "release and series (no patch yet): a stream has no planned number of passes, so with max_steps a "
            "callback that stops every epoch before its first update (should_epoch_stop in on_epoch_begin) makes "
            "the release and the series read one micro-batch per pass forever; sized data ends (0026's pass bound)"
        ),
    },
    *(
        {
            "invariant": invariant,
            "when": {"streamed": True, "resume": {"ga": {"min": 1}}},
            "happened": {"resumed_from_epoch_end": True},
            "reason": (
                "release and series (no patch yet): a checkpoint a stream saves at the end of a pass (epoch "
                "strategy) holds the position of that pass's last batch, since a stream's end is known only once a "
                "read comes back empty: the resumed run reads the pass again to its end and ends that epoch again "
                "(its epoch-strategy log, evaluation and save come twice; the contract does not model that re-read, "
                "so the epoch it expects of the next pass counts against a length the resumed run has learned by "
                "then)"
            ),
        }
        for invariant in ("epoch-callbacks", "logs-due", "evals-due", "saves-due", "logged-epoch")
    ),
    *(
        {
            "invariant": invariant,
            "when": {"callback": {"kind": "epoch_stop"}, "resume": {"ga": {"min": 1}}},
            "happened": {"epoch_stopped_before_resume": True},
            "reason": (
                "release and series (no patch yet): a run resumed after a callback ended an epoch early "
                "(should_epoch_stop) goes on where the optimizer steps taken say, as if every pass had been read "
                "whole, not after the batches the cut pass read (the contract does not model such a resume): "
                "its steps, epochs, logs, evaluations and saves differ from the contract's, and over sized data its "
                "batch count (0027 keeps no count of a cut pass in a checkpoint that the release must load)"
            ),
        }
        for invariant in (
            "resume-identical",
            "resume-logs",
            "step-callbacks",
            "epoch-callbacks",
            "logs-due",
            "evals-due",
            "saves-due",
            "logged-counts",
        )  # fmt: skip
    ),
    *(
        {
            "invariant": invariant,
            "tree": {"has": GUESSED_MEAN},
            "when": {"model": ["reg_nokw", "reg_sample"]},
            "reason": (
                "0018 (issue 38, open): a module without **kwargs is taken to return a mean over its targets and its "
                "loss is weighted by them; a custom loss that averages over samples (or anything else) gets a wrong "
                "gradient and logged loss, where the release averaged its micro-batch losses"
            ),
        }
        for invariant in ("window-gradient", "logged-loss", "train-metrics")
    ),
    *(
        {
            "invariant": invariant,
            "when": {"callback": {"kind": "epoch_stop"}, "resume": {"ga": {"min": 1}}},
            "happened": {"epoch_stopped_at_resume": True},
            "reason": (
                "release and series (no patch yet): a resumed run calls on_epoch_begin for the epoch it continues, "
                "where the uninterrupted run began none, so a callback that stops epochs once global_step >= k "
                "stops that one: the uninterrupted run is no reference for it (the contract models it)"
            ),
        }
        for invariant in ("resume-identical", "resume-logs")
    ),
    {
        "invariant": "logged-counts",
        "tree": {"lacks": LOGGED_COUNTS},
        "when": {},  # every configuration (an empty predicate matches all)
        "reason": "a tree without 0027 (the release) logs no step or batch counts",
    },
    {
        "invariant": "loss-scale",
        "tree": {"lacks": LOSS_SCALE},
        "when": {},
        "reason": "a tree without 0023 (the release, the upstream tier) logs no loss scale",
    },
]


def tree_source() -> str:
    """The source the declarations are keyed on: the imported transformers' trainer.py and trainer_callback.py."""
    spec = sys.modules.get("transformers")
    if spec is None:
        import transformers  # noqa: F401  (the worker has it on its path)
    folder = Path(sys.modules["transformers"].__file__ or "").parent
    return "\n".join(
        (folder / name).read_text(encoding="utf-8")
        for name in ("trainer.py", "trainer_callback.py")
        if (folder / name).is_file()
    )


def _matches(value: Any, rule: Any) -> bool:
    if isinstance(rule, list):
        return value in rule
    if isinstance(rule, dict) and not set(rule) <= {"min", "max"}:
        # a nested predicate on a drawn dict (e.g. the callback's kind)
        return isinstance(value, dict) and all(key in value and _matches(value[key], r) for key, r in rule.items())
    if isinstance(rule, dict):
        if not isinstance(value, int | float) or isinstance(value, bool):
            return False
        return value >= rule.get("min", value) and value <= rule.get("max", value)
    return bool(value == rule)


def matches(
    declaration: dict[str, Any],
    invariant: str,
    tree: str,
    config: dict[str, Any],
    source: str = "",
    facts: dict[str, Any] | None = None,
) -> bool:
    """Whether `declaration` covers a violation of `invariant` on the tree labelled `tree` whose Trainer source is
    `source`, in a case that did `facts` (see the module docstring; the label only matters to a declaration with
    "trees", kept for tests)."""
    if declaration["invariant"] != invariant:
        return False
    trees = declaration.get("trees", ["*"])
    if "*" not in trees and tree not in trees:
        return False
    rule = declaration.get("tree", {})
    if "has" in rule and rule["has"] not in source:
        return False
    if "lacks" in rule and rule["lacks"] in source:
        return False
    happened = facts or {}
    if any(happened.get(key) != value for key, value in declaration.get("happened", {}).items()):
        return False
    return all(key in config and _matches(config[key], rule) for key, rule in declaration["when"].items())


def find(
    invariant: str,
    tree: str,
    config: dict[str, Any],
    declared: list[dict[str, Any]] | None = None,
    source: str = "",
    facts: dict[str, Any] | None = None,
) -> str | None:
    """The reason of the first declaration that covers the violation, or None."""
    for declaration in DECLARED if declared is None else declared:
        if matches(declaration, invariant, tree, config, source, facts):
            return str(declaration["reason"])
    return None
