"""`bench`: the unpatched and the patched Trainer side by side: time per optimizer step and host syncs.

The driver (standard library only) makes two source trees per target under <work>/bench/<target>/:
`base` (the pinned sdist) and `series` (the series applied). It runs `scripts/trainer_bench.py` in the
test venv, one process per variant with PYTHONPATH on that variant's trees: first a counting run each
(host syncs, torch and Python calls per optimizer step), then timed pairs of runs whose processes take
turns step by step, unpatched/patched/unpatched/patched, the variant that starts alternating per pair.
"""

import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import base as base_mod
from .am import am_series, check_patches
from .context import Context
from .digests import sha256_of
from .errors import SeriesError
from .git import GitError, Repo, StrPath
from .manifest import Target


JSON = dict[str, Any]
Trees = dict[str, dict[str, Path]]  # target name -> {variant: source tree}


VARIANTS = ("base", "series")
LABELS = {"base": "unpatched", "series": "patched"}
WORKER = Path(__file__).resolve().parents[1] / "trainer_bench.py"
SCHEMA_VERSION = 1
PREFIX = "trainer-bench: "  # the worker's result lines
GOAL_RATIO = 1.01  # patched/unpatched time per optimizer step


# -- the two source trees per target -----------------------------------------------------------------


def tree_key(target: Target) -> str:
    """What the bench trees of `target` are made from: the pinned base and the bytes of every patch."""
    parts: list[str | Path] = [base_mod.SDIST.key(target)]
    for path in target.patch_paths():
        parts += [path.name, "\0", path, "\0"]
    return sha256_of(*parts)[:16]


def _trees_ok(folder: Path, key: str) -> bool:
    series, base = Repo(folder / "series", isolated=True), Repo(folder / "base", isolated=True)
    try:
        if not (series.is_work_tree() and base.is_work_tree()) or series.config("series.benchkey") != key:
            return False
        return base.head() == series.rev(base_mod.BASE_TAG) and not series.status() and not base.status()
    except GitError:
        return False


def prepare_trees(ctx: Context, target: Target) -> dict[str, Path]:
    """<work>/bench/<target>/{base,series}: reused while the pin and the patches are unchanged."""
    check_patches(target)
    folder = ctx.work / "bench" / target.name
    key = tree_key(target)
    if _trees_ok(folder, key):
        return {"base": folder / "base", "series": folder / "series"}
    if folder.exists():
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=folder.parent))
    try:
        spec = base_mod.SDIST
        base_mod.create(target, spec, staging / "series", downloads=ctx.downloads, log=ctx.log)
        repo = Repo(staging / "series", isolated=True)
        failed, files = am_series(repo, target, target.patches)
        if failed:
            where = f" ({', '.join(files)})" if files else ""
            raise SeriesError(f"patch {failed} does not apply on {spec.describe(target)}{where}")
        repo.run("config", "series.benchkey", key)
        folder.mkdir()
        os.rename(staging / "series", folder / "series")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    # A linked work tree records absolute paths: add it once the repository is in place.
    Repo(folder / "series", isolated=True).run("worktree", "add", "--quiet", "--detach", "../base", base_mod.BASE_TAG)
    return {"base": folder / "base", "series": folder / "series"}


# -- running the worker ------------------------------------------------------------------------------


def _worker_env(trees: Trees, targets: Sequence[Target], variant: str) -> dict[str, str]:
    env = dict(os.environ)
    # The trees are only ever made whole, never edited: their bytecode can be kept.
    for key in ("PYTHONSTARTUP", "PYTHONHOME", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE"):
        env.pop(key, None)
    env["PYTHONPATH"] = os.pathsep.join(str(trees[t.name][variant] / t.source_dir) for t in targets)
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _results(output: str, trees: Trees, targets: Sequence[Target], variant: str) -> tuple[JSON, dict[str, JSON]]:
    lines = [json.loads(line[len(PREFIX) :]) for line in output.splitlines() if line.startswith(PREFIX)]
    info = next((line["info"] for line in lines if "info" in line), None)
    if info is None:
        raise SeriesError(f"the {LABELS[variant]} benchmark run printed no result")
    # The run must have imported each target from this variant's tree, not from the venv.
    for target in targets:
        module = info.get("modules", {}).get(target.package)
        tree = trees[target.name][variant].resolve()
        if module is not None and not Path(module).resolve().is_relative_to(tree):
            raise SeriesError(f"the {LABELS[variant]} run imported {target.package} from {module}, not from {tree}")
    return info, {line["case"]: line for line in lines if "case" in line}


def run_both(
    python: StrPath,
    trees: Trees,
    targets: Sequence[Target],
    worker_args: Sequence[str],
    *,
    logs: Path,
    timeout: float,
    paired: bool,
    lead: str = "base",
    cpu: int | None = None,
) -> dict[str, tuple[JSON, dict[str, JSON]]]:
    """Run the worker for both variants at once; `paired` makes them alternate their optimizer steps,
    and `cpu` puts both on that CPU (CPUs of a machine differ: one may share its core with a busy neighbour).
    Their output goes to `<logs>-<variant>.log`.

    Returns {variant: (info, {case: result})}.
    """
    fds = {}
    if paired:
        # base -> series and series -> base
        to_series, to_base = os.pipe(), os.pipe()
        fds = {"base": (to_base[0], to_series[1]), "series": (to_series[0], to_base[1])}
    outputs, procs = {}, {}
    Path(logs).parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp, contextlib.ExitStack() as files:
        try:
            for variant in VARIANTS:
                cmd = [str(python), str(WORKER), *worker_args]
                if paired:
                    cmd += ["--baton-in", str(fds[variant][0]), "--baton-out", str(fds[variant][1])]
                    cmd += ["--lead"] if variant == lead else []
                if cpu is not None:
                    cmd += ["--cpu", str(cpu)]
                log = Path(f"{logs}-{variant}.log")
                outputs[variant] = files.enter_context(open(log, "w+", encoding="utf-8"))
                procs[variant] = subprocess.Popen(
                    cmd,
                    cwd=tmp,
                    env=_worker_env(trees, targets, variant),
                    stdout=outputs[variant],
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    pass_fds=fds.get(variant, ()),
                )
        finally:
            # Only the workers hold the pipes now: when one dies, the other reads end-of-file and stops.
            for pair in fds.values():
                for fd in pair:
                    os.close(fd)
        deadline = time.monotonic() + timeout
        try:
            for proc in procs.values():
                try:
                    proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
                except subprocess.TimeoutExpired:
                    raise SeriesError(f"the benchmark runs took longer than {timeout}s") from None
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        results = {}
        for variant in VARIANTS:
            outputs[variant].seek(0)
            output = outputs[variant].read()
            if procs[variant].returncode != 0:
                lines = output.strip().splitlines() or ["no output"]
                raise SeriesError(
                    f"the {LABELS[variant]} benchmark run failed (exit {procs[variant].returncode}): {lines[-1]} "
                    f"(log: {logs}-{variant}.log)"
                )
            results[variant] = _results(output, trees, targets, variant)
    return results


def loadavg() -> float | None:
    try:
        return float(Path("/proc/loadavg").read_text(encoding="utf-8").split()[0])
    except (OSError, ValueError, IndexError):
        return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def machine() -> JSON:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpus": cpus, "cpu_model": model, "system": f"{platform.system()} {platform.release()}"}


# -- the measurements --------------------------------------------------------------------------------


@dataclass
class Plan:
    """What `bench` measures: `reps` timed pairs (0: only the counting run) of `steps` optimizer steps after
    `warmup`, the counting run over `count_steps`, torch threads per process, the cases (all when empty) and the
    limit per benchmark process."""

    reps: int
    steps: int
    warmup: int
    count_steps: int
    threads: int = 1
    cases: list[str] = field(default_factory=list)
    timeout: int = 900

    def worker_args(self) -> list[str]:
        """The arguments every worker run gets."""
        args = ["--warmup", str(self.warmup), "--threads", str(self.threads)]
        for case in self.cases:
            args += ["--case", case]
        return args


@dataclass
class Measured:
    """What the runs gave: the counting run's info (torch, threads, model) and counts per variant, the results of
    each timed run per variant, the 1-minute load average along the way and the machine."""

    info: JSON
    counts: dict[str, dict[str, JSON]]  # variant -> case -> counts
    timings: dict[str, list[dict[str, JSON]]]  # variant -> one {case: result} per timed run
    loads: list[float]
    host: JSON  # machine()


def measure(ctx: Context, python: StrPath, trees: Trees, targets: Sequence[Target], plan: Plan) -> Measured:
    """The counting run of both variants, then `plan.reps` timed pairs, each on one CPU (the variant that starts
    alternates every pair, the CPU every two). Logs under <work>/logs/bench/."""
    loads = [loadavg()]
    ctx.log("counting host syncs and calls per optimizer step")
    logs = ctx.work / "logs" / "bench"
    if logs.exists():
        shutil.rmtree(logs)
    count_args = [*plan.worker_args(), "--count-syncs", "--steps", str(plan.count_steps)]
    counted = run_both(python, trees, targets, count_args, logs=logs / "count", timeout=plan.timeout, paired=False)
    loads.append(loadavg())
    timings: dict[str, list[dict[str, JSON]]] = {variant: [] for variant in VARIANTS}
    cpus: list[int | None] = [*sorted(os.sched_getaffinity(0))] if hasattr(os, "sched_getaffinity") else [None]
    for rep in range(plan.reps):
        lead, cpu = VARIANTS[rep % 2], cpus[(rep // 2) % len(cpus)]
        where = "" if cpu is None else f" on CPU {cpu}"
        ctx.log(f"timed pair {rep + 1}/{plan.reps}{where} ({LABELS[lead]} steps first)")
        timed = run_both(
            python,
            trees,
            targets,
            [*plan.worker_args(), "--steps", str(plan.steps)],
            logs=logs / f"pair{rep + 1}",
            timeout=plan.timeout,
            paired=True,
            lead=lead,
            cpu=cpu,
        )
        for variant in VARIANTS:
            timings[variant].append(timed[variant][1])
        loads.append(loadavg())
    counts = {variant: counted[variant][1] for variant in VARIANTS}
    return Measured(counted["base"][0], counts, timings, [load for load in loads if load is not None], machine())


# -- summary -----------------------------------------------------------------------------------------


METRICS = {"cpu": "step_cpu_s", "wall": "step_s"}


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _stats(values: Sequence[float]) -> JSON:
    if not values:
        return {"run_medians_ms": [], "median_ms": None, "min_ms": None, "max_ms": None}
    return {
        "run_medians_ms": [_ms(v) for v in values],
        "median_ms": _ms(statistics.median(values)),
        "min_ms": _ms(min(values)),
        "max_ms": _ms(max(values)),
    }


def summarize(counts: dict[str, dict[str, JSON]], timings: dict[str, list[dict[str, JSON]]]) -> list[JSON]:
    """Per case: for each variant the counts per step and, for CPU and wall time, the median step time of
    every timed run with their median and range; the ratios patched/unpatched of those medians."""
    rows = []
    for name, base_counts in counts["base"].items():
        row = {key: base_counts[key] for key in ("optim", "scaler", "accumulation", "sync_budget")}
        row["case"] = name
        for variant in VARIANTS:
            counted = counts[variant][name]
            steps = counted["counted_steps"]
            row[variant] = {
                "syncs": counted["syncs"],
                "syncs_per_step": sum(counted["syncs"].values()) / steps,
                "torch_calls_per_step": counted["torch_calls"] / steps,
                "python_calls_per_step": counted["python_calls"] / steps,
            }
            for metric, key in METRICS.items():
                row[variant][metric] = _stats([statistics.median(run[name][key]) for run in timings[variant]])
        for metric in METRICS:
            base, series = row["base"][metric], row["series"][metric]
            row[f"ratio_{metric}"] = round(series["median_ms"] / base["median_ms"], 4) if base["median_ms"] else None
            # The two runs of a pair ran side by side: their ratio leaves out what changed between pairs.
            pairs = zip(base["run_medians_ms"], series["run_medians_ms"], strict=True)
            row[f"pair_ratios_{metric}"] = [round(s / b, 4) for b, s in pairs]
        added = row["series"]["syncs_per_step"] - row["base"]["syncs_per_step"]
        row["added_syncs_per_step"] = round(added, 6)
        row["syncs_ok"] = added <= row["sync_budget"]
        rows.append(row)
    return rows


def _label(row: JSON) -> str:
    label = row["optim"] + (", GradScaler" if row["scaler"] else "")
    return label + (f", accumulation {row['accumulation']}" if row["accumulation"] > 1 else "")


def _markdown(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return "\n".join(lines + ["| " + " | ".join(cells) + " |" for cells in rows])


def _time_cell(stats: JSON) -> str:
    return f"{stats['median_ms']:.2f} ({stats['min_ms']:.2f}-{stats['max_ms']:.2f})"


def time_table(rows: Sequence[JSON]) -> str:
    head = ["case", "optimizer", "unpatched CPU ms/step", "patched CPU ms/step", "ratio", "ratio per pair"]
    head.append("wall-time ratio")
    body = []
    for row in rows:
        pairs = row["pair_ratios_cpu"]
        per_pair = f"{statistics.median(pairs):.3f} ({min(pairs):.3f}-{max(pairs):.3f})"
        cells = [row["case"], _label(row), _time_cell(row["base"]["cpu"]), _time_cell(row["series"]["cpu"])]
        cells += [f"{row['ratio_cpu']:.3f}", per_pair, f"{row['ratio_wall']:.3f}"]
        body.append(cells)
    return _markdown(head, body)


def count_table(rows: Sequence[JSON]) -> str:
    head = ["case", "optimizer", "host syncs/step", "added (budget)", "torch calls/step", "Python calls/step"]
    body = []
    for row in rows:
        base, series = row["base"], row["series"]
        added = f"{row['added_syncs_per_step']:g} ({row['sync_budget']:g})"
        body.append(
            [
                row["case"],
                _label(row),
                f"{base['syncs_per_step']:g} -> {series['syncs_per_step']:g}",
                added if row["syncs_ok"] else f"**{added}, over budget**",
                f"{base['torch_calls_per_step']:g} -> {series['torch_calls_per_step']:g}",
                f"{base['python_calls_per_step']:g} -> {series['python_calls_per_step']:g}",
            ]
        )
    return _markdown(head, body)


def result_lines(rows: Sequence[JSON], measured: Measured, plan: Plan) -> list[str]:
    """docs/contributor.md's Performance tables (times only after timed pairs), the machine, what was measured
    and how."""
    host, info, loads = measured.host, measured.info, measured.loads
    load = f"{min(loads):.1f}-{max(loads):.1f}" if loads else "unknown"
    lines = [time_table(rows), ""] if plan.reps else []
    lines += [count_table(rows), ""]
    lines.append(
        f"Machine: {host['cpus']} CPUs ({host['cpu_model']}), {host['system']}, 1-minute load average {load} "
        f"during the run (the benchmark's own process included). torch {info['torch']}, {info['threads']} "
        f"thread(s) per process. Model: {info['model']}."
    )
    if plan.reps:
        lines.append(
            f"Time: {plan.reps} pairs of runs, one process per variant, taking turns step by step on one CPU "
            "(A/B/A/B; the variant that starts alternates, the CPU every two pairs). A run's time is its median "
            f"over {plan.steps} optimizer steps after {plan.warmup} warm-up steps; a cell is the median over the "
            "runs (lowest-highest run in brackets). Ratio: patched/unpatched of those medians; per pair: the "
            "median (lowest-highest) of the ratios within a pair. CPU time is the process's own; the wall-time "
            "ratio is computed the same way from wall-clock times."
        )
    lines.append(
        f"Counts per optimizer step over {plan.count_steps} steps after the warm-up: host syncs are calls that "
        "read a tensor on the host (item, bool, tolist, cpu, ...); torch calls are those made from Python; "
        "Python calls are function calls. Budget: host syncs per step the series may add."
    )
    return lines


def verdict(rows: Sequence[JSON], plan: Plan) -> str:
    """Whether the host syncs are within budget, and with timed pairs in how many cases the CPU-time ratio is."""
    syncs_ok = all(row["syncs_ok"] for row in rows)
    text = f"host syncs {'within budget' if syncs_ok else 'OVER BUDGET'}"
    if plan.reps:
        within = sum(row["ratio_cpu"] <= GOAL_RATIO for row in rows)
        within_pairs = sum(statistics.median(row["pair_ratios_cpu"]) <= GOAL_RATIO for row in rows)
        text += (
            f"; CPU-time ratio <= {GOAL_RATIO} in {within} of {len(rows)} cases, per pair (median) in "
            f"{within_pairs} of {len(rows)}"
        )
    return text


def report(rows: list[JSON], measured: Measured, plan: Plan, python: StrPath, duration: float) -> JSON:
    """`bench --json`'s report."""
    info = measured.info
    return {
        "schema_version": SCHEMA_VERSION,
        "syncs_ok": all(row["syncs_ok"] for row in rows),
        "machine": dict(measured.host, load_average_1m=measured.loads),
        "setup": {
            "reps": plan.reps,
            "steps": plan.steps,
            "warmup": plan.warmup,
            "count_steps": plan.count_steps,
            "threads": info["threads"],
            "torch": info["torch"],
            "model": info["model"],
        },
        "python": str(python),
        "cases": rows,
        "duration_s": duration,
    }
