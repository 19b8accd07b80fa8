"""Declared limitations: violations that are known and explained, so that the verdict on the series counts only
the undeclared ones. Standard library only (the tool's unit tests import it).

Each declaration names an invariant, the trees it applies to ("release", "series", or "*"), a predicate on the
configuration (every key must match: a list is a set of allowed values, {"min": n} / {"max": n} a bound, a dict of
other keys a predicate on a drawn dict's keys, anything else equality), and the reason: the patch or limitation.
"""

from typing import Any


DECLARED: list[dict[str, Any]] = [
    {
        "invariant": "bounded-run",
        "trees": ["*"],
        "when": {"streamed": True, "callback": {"kind": "epoch_stop"}},
        "reason": (
            "release and series (no patch yet): a stream has no planned number of passes, so with max_steps a "
            "callback that stops every epoch before its first update (should_epoch_stop in on_epoch_begin) makes "
            "5.24.0 and the series read one micro-batch per pass forever; sized data ends (0012's pass bound)"
        ),
    },
    {
        "invariant": "step-begin-once",
        "trees": ["*"],
        "when": {"callback": {"kind": "epoch_stop"}, "ga": {"min": 2}},
        "reason": (
            "release and series (no patch yet): a callback that ends an epoch (should_epoch_stop) in the middle of an "
            "accumulation window cuts it, and the next pass begins the same step again; found once the skip-counting "
            "option was drawn (the landed series of 7f35813 does the same)"
        ),
    },
    {
        "invariant": "release-loads",
        "trees": ["series"],
        "when": {"streamed": True},
        "reason": (
            "0008, documented: a checkpoint of a stream read more than once stores its position "
            "(train_dataloader_batches_seen), which 5.24.0's TrainerState cannot load; sized data never does"
        ),
    },
    {
        "invariant": "logged-counts",
        "trees": ["release"],
        "when": {},  # every configuration (an empty predicate matches all)
        "reason": "5.24.0 logs no step or batch counts (0017)",
    },
]


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


def matches(declaration: dict[str, Any], invariant: str, tree: str, config: dict[str, Any]) -> bool:
    """Whether `declaration` covers a violation of `invariant` on `tree` (a label: release, series, path:...)."""
    trees = declaration["trees"]
    if declaration["invariant"] != invariant or ("*" not in trees and tree not in trees):
        return False
    return all(key in config and _matches(config[key], rule) for key, rule in declaration["when"].items())


def find(
    invariant: str, tree: str, config: dict[str, Any], declared: list[dict[str, Any]] | None = None
) -> str | None:
    """The reason of the first declaration that covers the violation, or None."""
    for declaration in DECLARED if declared is None else declared:
        if matches(declaration, invariant, tree, config):
            return str(declaration["reason"])
    return None
