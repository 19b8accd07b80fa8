"""The tree's own census of the heads the Trainer hands `num_items_in_batch` (issue 54 item 5).

The search draws BERT, Llama and regression heads only: a declaration (`accepts_loss_kwargs`) flipped in a vision,
audio or multimodal head is invisible to it. The series' repository check (0017,
`utils/check_loss_kwargs_declarations.py`) reads every head of the auto mappings; the checker runs the tree's own copy
of it (the command takes it from the tree's commit) and reports its figures beside the search: a head handed the count
although its loss ignores it is the violation `declarations-census`. A tree without the check (the release) has none.
"""

import os
import subprocess
import sys
import time
from typing import Any


INVARIANT = "declarations-census"


def run(script: str, timeout: float = 300.0) -> dict[str, Any]:
    """Run the check `script` on the transformers this process imports (its PYTHONPATH): its exit status, the heads it
    fails on, the number it could not check and the number it lists as averaged although their loss uses the count."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            # --verbose: the lists of the classes not checked and of the heads declared averaged, besides the failures
            [sys.executable, script, "--verbose"],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=dict(os.environ),
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return {"exit": None, "failing": [], "error": f"the census took more than {timeout:.0f}s", "seconds": timeout}
    sections: dict[str, list[str]] = {}
    current = None
    # the check prints a heading per list (not checked, declared although averaged, the failures last), each head on
    # a line of its own below it: "- Name" (or "- Name: why")
    for line in done.stdout.splitlines():
        if line.startswith("- ") and current is not None:
            sections[current].append(line[2:].split(":", 1)[0].strip())
        elif line.strip():
            current = line.strip()
            sections[current] = []
    failing = sections[current] if done.returncode == 1 and current is not None else []
    out: dict[str, Any] = {
        "exit": done.returncode,
        "failing": failing,
        "not_checked": next((len(v) for k, v in sections.items() if k.startswith("Not checked")), 0),
        "declared_averaged": next((len(v) for k, v in sections.items() if k.startswith("Declared")), 0),
        "seconds": round(time.monotonic() - started, 1),
    }
    if done.returncode not in (0, 1) or (done.returncode == 1 and not failing):  # a crash exits 1 too
        # a crash says why on stderr; a check that could check nothing (no PyTorch, no class) says it on stdout
        out["error"] = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no output"])[-1]
    return out


def found(result: dict[str, Any]) -> list[str]:
    """What the census found wrong (empty: nothing)."""
    if result.get("error"):
        return [f"the census did not run to its end: {result['error']}"]
    if result["exit"] == 1:
        heads = result["failing"]
        shown = ", ".join(heads[:8]) + (f" and {len(heads) - 8} more" if len(heads) > 8 else "")
        return [f"{len(heads)} head(s) handed num_items_in_batch although their loss ignores it: {shown}"]
    return []
