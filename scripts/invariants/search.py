"""The Hypothesis search on one tree: find a configuration that breaks an invariant, shrink it, record it, and go
on looking for the invariants not broken yet, until the profile's examples or seconds are spent.

A round fails on the first undeclared violation it sees and then shrinks for that invariant only (so the minimal
configuration breaks the same one); declared violations are recorded once per invariant and never fail a round.
Runs are reproducible: the rounds use `seed`, `seed + 1`, ...; no example database.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as seed_of

from . import declared, draw, report


Runner = Callable[[dict[str, Any]], dict[str, list[str]]]


class Found(Exception):
    """A round's test fails with this: the configuration breaks the round's invariant."""


@dataclass
class Search:
    tree: str  # the label declarations match: release, series, path:...
    spec: str  # the --tree value of the replay command
    profile: draw.Profile
    seed: int
    runner: Runner
    log: Callable[[str], None] = print
    examples: int = 0
    started: float = field(default_factory=time.monotonic)
    violations: list[dict[str, Any]] = field(default_factory=list)
    declared: list[dict[str, Any]] = field(default_factory=list)
    rounds: int = 0
    source: str = ""  # the tree's Trainer source, which declarations are keyed on (see `declared`)
    first_only: bool = False  # stop at the first undeclared violation, without shrinking it
    features: frozenset[str] = frozenset(draw.FEATURES)  # what the tree's Trainer has (`draw.FEATURES`)
    checked: dict[str, int] = field(default_factory=dict)  # invariant -> examples that gave it something to check
    discriminating: dict[str, int] = field(default_factory=dict)  # ... whose check there could tell right from wrong
    cells: dict[str, dict[str, int]] = field(default_factory=dict)  # the coverage table (`draw.count_cells`)
    seen: set[str] = field(default_factory=set)  # the configurations searched: each runs once

    def entry(self, invariant: str, config: dict[str, Any], found: list[str], reason: str | None) -> dict[str, Any]:
        return {
            "invariant": invariant,
            "key": report.key(invariant, config),
            "tree": self.tree,
            "config": config,
            "found": found,
            "declared": reason,
            "replay": report.replay_command(self.spec, config),
        }

    def over(self) -> bool:
        return self.examples >= self.profile.max_examples or time.monotonic() - self.started > self.profile.seconds

    def round(self) -> bool:
        """One Hypothesis run; True when it found a new undeclared violation."""
        known = {report.key(v["invariant"], v["config"]) for v in self.violations}
        noted = {report.key(d["invariant"], d["config"]) for d in self.declared}
        state: dict[str, Any] = {"target": None, "key": None, "best": None, "first_at": None, "calls": 0}
        state["failing"] = set()

        rows = draw.expected_rows(self.features)

        @settings(
            max_examples=max(1, self.profile.max_examples - self.examples),
            deadline=None,
            database=None,
            derandomize=False,
            phases=[Phase.generate] if self.first_only else [Phase.generate, Phase.shrink],
            suppress_health_check=list(HealthCheck),
            report_multiple_bugs=False,
            print_blob=False,
        )
        @seed_of(self.seed + self.rounds)
        @given(draw.configs(self.features, steered=True))
        def prop(config: dict[str, Any]) -> None:
            target = state["target"]
            # each new example goes to the next row of the coverage table; a shrunk one stays on the row that failed
            row = rows[self.examples % len(rows)] if target is None else state["row"]
            config = draw.steer(config, row, self.features)
            key = report.config_json(config)
            if target is None and self.over():
                return
            if target is not None and key not in state["failing"] and self._shrink_over(state):
                return  # shrinking took its time: only the examples known to fail run again (the final replay)
            if target is None and key in self.seen:
                return  # drawn before (Hypothesis repeats small configurations): the search spends no example on it
            state["calls"] += 1
            if target is None:
                self.examples += 1
                self.seen.add(key)
                draw.count_cells(self.cells, config)
            broken = self.runner(config)
            facts = getattr(broken, "facts", None)
            if target is None:
                for name in getattr(broken, "checked", ()):
                    self.checked[name] = self.checked.get(name, 0) + 1
                for name in getattr(broken, "discriminating", ()):
                    self.discriminating[name] = self.discriminating.get(name, 0) + 1
            for invariant, found in broken.items():
                reason = declared.find(invariant, self.tree, config, source=self.source, facts=facts)
                if reason and report.key(invariant, config) not in noted:
                    noted.add(report.key(invariant, config))
                    self.declared.append(self.entry(invariant, config, found, reason))
            fresh = [
                i
                for i in broken
                if report.key(i, config) not in known
                and not declared.find(i, self.tree, config, source=self.source, facts=facts)
            ]
            if target is None and fresh:
                state["target"] = target = fresh[0]
                state["row"] = row
                state["key"] = report.key(target, config)
                state["first_at"] = self.examples
                state["seconds"] = time.monotonic() - self.started
                state["shrink_from"] = time.monotonic()
                self.log(f"invariants: {self.tree}: {state['key']} broken at example {self.examples}; shrinking")
            if target is not None and target in fresh and report.key(target, config) == state["key"]:
                # Hypothesis replays the minimal failing example last: the last one recorded is the shrunk one
                state["failing"].add(key)
                state["best"] = (key, config, broken[target])
                raise Found(target)

        self.rounds += 1
        try:
            prop()
        except Found:
            pass
        except Exception as exc:  # Hypothesis' own verdicts (a flaky replay): the last failing example stands
            if state["best"] is None:
                raise
            self.log(f"invariants: {self.tree}: {type(exc).__name__} while shrinking; the last failing example stands")
        if state["best"] is None:
            return False
        _, config, found = state["best"]
        entry = self.entry(state["target"], config, found, None)
        entry.update(examples=state["first_at"], seconds=round(state["seconds"], 1), shrink_calls=state["calls"] - 1)
        self.violations.append(entry)
        for line in report.violation_lines(entry):
            self.log(line)
        return True

    def _shrink_over(self, state: dict[str, Any]) -> bool:
        return time.monotonic() - state["shrink_from"] > self.profile.shrink_seconds

    def run(self) -> None:
        while not self.over():
            before = self.examples
            if self.round() and self.first_only:
                break
            if self.examples == before:
                break  # a round that drew nothing new: the space (or the budget) is spent


def observe(run_case: Callable[[dict[str, Any]], Any], judge: Callable[[Any], dict[str, list[str]]]) -> Runner:
    """The runner of a search: run a configuration, then judge what it showed."""

    def runner(config: dict[str, Any]) -> dict[str, list[str]]:
        return judge(run_case(config))

    return runner
