"""Declared limitations: violations that are known and explained, so that the verdict on the series counts only
the undeclared ones. Standard library only (the tool's unit tests import it).

Each declaration names an invariant, the trees it applies to ("release", "series", or "*"), a predicate on the
configuration (every key must match: a list is a set of allowed values, {"min": n} / {"max": n} a bound, anything
else equality), and the reason: the issue or patch that will remove it.
"""

from typing import Any


DECLARED: list[dict[str, Any]] = [
    {
        "invariant": "window-gradient",
        "trees": ["series"],
        "when": {"model": ["bert_cls", "bert_tok"], "ga": {"min": 2}},
        "reason": "issue 28: a head whose loss ignores num_items_in_batch gets x GA (not in the series yet)",
    },
    {
        "invariant": "logged-loss",
        "trees": ["series"],
        "when": {"model": ["bert_cls", "bert_tok"], "ga": {"min": 2}},
        "reason": "issue 28: the logged loss of such a head is x GA too",
    },
    {
        "invariant": "window-gradient",
        "trees": ["series"],
        "when": {"model": ["reg_nokw"]},
        "reason": "issue 28 (transformers#37766): a model without **kwargs gets the mean of micro-batch means",
    },
    {
        "invariant": "logged-loss",
        "trees": ["series"],
        "when": {"model": ["reg_nokw"]},
        "reason": "issue 28 (transformers#37766): the mean of micro-batch means is what is logged, too",
    },
]


def _matches(value: Any, rule: Any) -> bool:
    if isinstance(rule, list):
        return value in rule
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
