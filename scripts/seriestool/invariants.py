"""`invariants`: property-based checks of the Trainer's step loop, on the release and on the series.

The checks themselves live in the worker package `scripts/invariants/` (Hypothesis, torch, the Trainer), which
runs in the pinned venv with one tree on PYTHONPATH; this module (standard library only) owns what is around it:

- the trees: `release` and `series` are the first and the last point of `downstream`'s series (the source trees
  made from the pinned sdist and the manifest's patches, the companion targets' patches included), `path:DIR` a
  checkout's `src/`;
- the worker run of each tree (its lines go to the console as they come; its result is a JSON file);
- the verdict (undeclared violations on any tree but the release fail), the report and the console summary.
"""

import datetime
import json
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import downstream
from .context import Context
from .errors import SeriesError
from .manifest import Target
from .progress import Say, heartbeat
from .runners import stop_group


JSON = dict[str, Any]
SCRIPTS = Path(__file__).resolve().parents[1]
PACKAGE = SCRIPTS / "invariants"
SCHEMA_VERSION = 1
PROFILES = ("ci", "nightly")
TREES = ("release", "series")
RELEASE = "release"
EXIT_BAD_INPUT = 2  # the worker's exit status for a configuration it cannot take


@dataclass(frozen=True)
class Tree:
    """A --tree value: its label (what declarations and reports name), the spec as given, a checkout folder."""

    label: str
    spec: str
    folder: Path | None = None


def parse_tree(spec: str) -> Tree:
    """`release`, `series` or `path:DIR` (a checkout: DIR/src goes on PYTHONPATH); a SeriesError otherwise."""
    if spec in TREES:
        return Tree(spec, spec)
    if spec.startswith("path:") and spec[5:]:
        folder = Path(spec[5:]).expanduser().resolve()
        if not (folder / "src" / "transformers" / "trainer.py").is_file():
            raise SeriesError(f"--tree {spec}: {folder} is not a transformers checkout (no src/transformers/)")
        return Tree(spec, f"path:{folder}", folder)
    raise SeriesError(f"--tree {spec!r}: use release, series or path:DIR")


def parse_replay(text: str | None) -> JSON | None:
    """The --replay configuration: a JSON object (the worker checks its keys)."""
    if text is None:
        return None
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise SeriesError(f"--replay is not JSON: {exc}") from None
    if not isinstance(config, dict):
        raise SeriesError("--replay must be a JSON object (a configuration a violation printed)")
    return config


def tree_paths(ctx: Context, target: Target, trees: Sequence[Tree]) -> tuple[dict[str, list[Path]], list[Path]]:
    """PYTHONPATH entries of each tree, and the release's (for the release-loads invariant)."""
    series = downstream.series_points(ctx, target)
    release = series.paths(series.points[0])
    out: dict[str, list[Path]] = {}
    for tree in trees:
        if tree.label == RELEASE:
            out[tree.label] = release
        elif tree.label == "series":
            out[tree.label] = series.paths(series.points[-1])
        else:
            assert tree.folder is not None
            out[tree.label] = [tree.folder / "src"]
    return out, release


# The most a worker may take: the profile's search budget per tree (scripts/invariants/draw.py) and a margin.
WORKER_SECONDS = {"ci": 600, "nightly": 3600}


def worker_timeout(profile: str) -> float:
    return float(WORKER_SECONDS[profile])


def worker_command(
    python: Path, tree: Tree, profile: str, seed: int, result: Path, *, replay: JSON | None, release: Sequence[Path]
) -> list[str]:
    cmd = [str(python), "-m", "invariants", "--tree-label", tree.label, "--tree-spec", tree.spec]
    cmd += ["--profile", profile, "--seed", str(seed), "--result", str(result)]
    cmd += ["--release-path", ":".join(map(str, release))]
    if replay is not None:
        cmd += ["--replay", json.dumps(replay)]
    return cmd


def run_worker(
    python: Path,
    tree: Tree,
    paths: Sequence[Path],
    release: Sequence[Path],
    *,
    profile: str,
    seed: int,
    replay: JSON | None,
    timeout: float,
    out: Callable[[str], None],
    log_path: Path,
    say: Say | None = None,
) -> JSON:
    """Run the worker on `tree`; its lines go to `out` (and `log_path`) as they come, `say` gets a progress line
    while it runs (with its last line). Returns its result, or a result with `crashed` when it gave none. A
    configuration the worker refuses is a SeriesError."""
    with tempfile.TemporaryDirectory(prefix="invariants-") as tmp:
        result = Path(tmp) / "result.json"
        cmd = worker_command(python, tree, profile, seed, result, replay=replay, release=release)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "w", encoding="utf-8") as log:
            proc = subprocess.Popen(
                cmd,
                cwd=tmp,
                env=downstream.worker_env([*paths, SCRIPTS]),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                start_new_session=True,
            )
            lines: list[str] = []

            def detail() -> str:
                last = next((line.strip() for line in reversed(lines[-5:]) if line.strip()), "")
                return f"last: {last[:100]}" if last else ""

            try:
                assert proc.stdout is not None
                with heartbeat(say, detail):
                    for line in proc.stdout:
                        log.write(line)
                        lines.append(line.rstrip("\n"))
                        shown = line.startswith(("invariants:", "VIOLATION", "declared", "  "))
                        if shown and "error:" not in line[:18]:
                            out(line.rstrip("\n"))
                    code = proc.wait(timeout=timeout)
            except (KeyboardInterrupt, subprocess.TimeoutExpired):
                stop_group(proc)
                raise
        if code == EXIT_BAD_INPUT:
            tail = lines[-1] if lines else "no output"
            raise SeriesError(tail.removeprefix("invariants: error: "))
        if code != 0 or not result.is_file():
            tail = next((line for line in reversed(lines) if line.strip()), "no output")
            return {"tree": tree.label, "crashed": f"the worker ended with exit {code}: {tail}; see {log_path}"}
        data: JSON = json.loads(result.read_text(encoding="utf-8"))
        return data


def verdict(trees: Sequence[JSON]) -> bool:
    """True when no tree but the release has an undeclared violation and every worker gave its result."""
    return all(not t.get("crashed") and (t["tree"] == RELEASE or not t.get("violations")) for t in trees)


def make_report(profile: str, seed: int, trees: Sequence[JSON], loads: Sequence[float], seconds: float) -> JSON:
    return {
        "schema_version": SCHEMA_VERSION,
        "ok": verdict(trees),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "profile": profile,
        "seed": seed,
        "trees": list(trees),
        "load_average_1m": list(loads),
        "duration_s": round(seconds, 1),
    }


def summary_lines(report: JSON) -> list[str]:
    """One line per tree: examples, seconds, the invariants it breaks (undeclared, then declared)."""
    lines = []
    for tree in report["trees"]:
        if tree.get("crashed"):
            lines.append(f"  {tree['tree']}: NOT RUN: {tree['crashed']}")
            continue
        broken = ", ".join(v.get("key", v["invariant"]) for v in tree["violations"]) or "none"
        known = ", ".join(v.get("key", v["invariant"]) for v in tree["declared"]) or "none"
        lines.append(
            f"  {tree['tree']}: {tree['examples']} example(s) in {tree['seconds']:.0f}s; broken: {broken}; "
            f"declared: {known}"
        )
    return lines


def rerun_command(profile: str, seed: int, trees: Sequence[Tree]) -> str:
    """The command that runs the same search again (the seed printed with every run)."""
    tree_args = " ".join(f"--tree {shlex.quote(t.spec)}" for t in trees)
    return f"python3 scripts/series.py invariants {tree_args} --profile {profile} --seed {seed}"
