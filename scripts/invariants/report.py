"""What a violation prints and what the worker hands back to the tool. Standard library only."""

import json
import shlex
from typing import Any


# invariants whose violations are told apart by the model (one head's known defect must not hide another's) or by
# the data (a stream's defect must not hide a sized dataset's: they take other paths through the loop); a logged
# loss is wrong for every head alike when the gradient is right, so it is not told apart by the model
BY_MODEL = ("window-gradient",)
BY_DATA = ("bounded-run", "run-length")
# and a skip count off in a run without faults (phantom skips) from one off in a run with some (lost or extra ones)
BY_FAULTS = ("skip-count",)


def key(invariant: str, config: dict[str, Any]) -> str:
    """What makes two violations different findings: the invariant, and the model, the data or the faults."""
    if invariant in BY_MODEL:
        wrapped = f"/{config['wrap']}" if config.get("wrap") else ""  # a compiled or wrapped head apart
        return f"{invariant}[{config['model']}{wrapped}]"
    if invariant in BY_DATA:
        return f"{invariant}[{'stream' if config['streamed'] else 'sized'}]"
    if invariant in BY_FAULTS:
        return f"{invariant}[{'infs' if config['fp16'] and config['inject'] else 'no infs'}]"
    return invariant


def config_json(config: dict[str, Any]) -> str:
    """The configuration as one line of JSON, keys in a stable order (what --replay takes)."""
    return json.dumps(config, separators=(",", ":"), sort_keys=True)


def replay_command(tree: str, config: dict[str, Any]) -> str:
    """The one command line that replays `config` on `tree` (a --tree value)."""
    return (
        f"python3 scripts/series.py invariants --tree {shlex.quote(tree)} --replay {shlex.quote(config_json(config))}"
    )


def violation_lines(entry: dict[str, Any]) -> list[str]:
    """The lines of one violation: invariant, tree, what it found, the shrunk configuration, the replay command."""
    head = f"VIOLATION {entry['invariant']} on {entry['tree']}"
    if entry.get("declared"):
        head = f"declared {entry['invariant']} on {entry['tree']} ({entry['declared']})"
    lines = [head]
    lines += [f"  {text}" for text in entry["found"]]
    found = entry.get("examples")
    if found is not None:
        lines.append(
            f"  found after {found} example(s), {entry.get('seconds', 0):.1f}s; "
            f"shrunk in {entry.get('shrink_calls', 0)} call(s)"
        )
    lines.append(f"  config: {config_json(entry['config'])}")
    lines.append(f"  replay: {entry['replay']}")
    return lines
