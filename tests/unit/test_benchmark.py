"""benchmark.py without running the Trainer: the steps of `bench` with a stub for the worker runs, the summary,
the tables, the verdict and the JSON report."""

from types import SimpleNamespace

import pytest
from seriestool import benchmark
from seriestool.benchmark import Measured, Plan


HOST = {"cpus": 2, "cpu_model": "cpu X", "system": "Linux 6"}
INFO = {"torch": "2.13.0", "threads": 1, "model": "tiny"}


def _counted(syncs, budget=0, steps=4):
    return {
        "optim": "adamw",
        "scaler": False,
        "accumulation": 1,
        "sync_budget": budget,
        "counted_steps": steps,
        "syncs": {"item": syncs},
        "torch_calls": 40,
        "python_calls": 400,
    }


def _timed(cpu, wall):
    return {"fp32": {"step_cpu_s": cpu, "step_s": wall}}


def test_plan_worker_args():
    assert Plan(reps=1, steps=2, warmup=3, count_steps=4).worker_args() == ["--warmup", "3", "--threads", "1"]
    plan = Plan(reps=1, steps=2, warmup=3, count_steps=4, threads=2, cases=["fp32", "ga4"])
    assert plan.worker_args() == ["--warmup", "3", "--threads", "2", "--case", "fp32", "--case", "ga4"]


def test_measure_counts_once_then_alternates_the_pairs(tmp_path, monkeypatch):
    calls = []

    def run_both(python, trees, targets, worker_args, *, logs, timeout, paired, lead="base", cpu=None):
        calls.append((worker_args, logs.name, timeout, paired, lead, cpu))
        if not paired:
            return {"base": (INFO, {"fp32": _counted(8)}), "series": ({}, {"fp32": _counted(12)})}
        number = len(calls) - 1
        return {"base": (INFO, _timed([number], [9])), "series": (INFO, _timed([number + 0.5], [9]))}

    monkeypatch.setattr(benchmark, "run_both", run_both)
    monkeypatch.setattr(benchmark.os, "sched_getaffinity", lambda pid: {5, 3}, raising=False)
    monkeypatch.setattr(benchmark, "loadavg", iter([1.0, None, 2.5, 0.5, 3.0, 9.9]).__next__)
    (tmp_path / "logs" / "bench").mkdir(parents=True)
    (tmp_path / "logs" / "bench" / "old.log").write_text("", encoding="utf-8")
    logged = []
    ctx = SimpleNamespace(work=tmp_path, log=logged.append)
    plan = Plan(reps=3, steps=7, warmup=2, count_steps=4, cases=["fp32"], timeout=60)
    measured = benchmark.measure(ctx, "py", {}, [], plan)
    assert not (tmp_path / "logs" / "bench").exists()  # the old logs are gone; run_both makes the folders
    common = ["--warmup", "2", "--threads", "1", "--case", "fp32"]
    assert calls == [
        ([*common, "--count-syncs", "--steps", "4"], "count", 60, False, "base", None),
        ([*common, "--steps", "7"], "pair1", 60, True, "base", 3),
        ([*common, "--steps", "7"], "pair2", 60, True, "series", 3),
        ([*common, "--steps", "7"], "pair3", 60, True, "base", 5),
    ]
    assert logged == [
        "counting host syncs and calls per optimizer step",
        "timed pair 1/3 on CPU 3 (unpatched steps first)",
        "timed pair 2/3 on CPU 3 (patched steps first)",
        "timed pair 3/3 on CPU 5 (unpatched steps first)",
    ]
    assert measured.info == INFO and measured.loads == [1.0, 2.5, 0.5, 3.0]
    assert measured.counts == {"base": {"fp32": _counted(8)}, "series": {"fp32": _counted(12)}}
    assert [run["fp32"]["step_cpu_s"] for run in measured.timings["series"]] == [[1.5], [2.5], [3.5]]
    assert measured.host == benchmark.machine()


def test_measure_without_timed_pairs(tmp_path, monkeypatch):
    calls = []

    def run_both(python, trees, targets, worker_args, **kwargs):
        calls.append(kwargs["paired"])
        return {"base": (INFO, {}), "series": (INFO, {})}

    monkeypatch.setattr(benchmark, "run_both", run_both)
    ctx = SimpleNamespace(work=tmp_path, log=lambda line: None)
    measured = benchmark.measure(ctx, "py", {}, [], Plan(reps=0, steps=1, warmup=1, count_steps=1))
    assert calls == [False] and measured.timings == {"base": [], "series": []}


def _rows(base_syncs=8, series_syncs=12, budget=1, base_cpu=(0.010, 0.012), series_cpu=(0.0101, 0.013)):
    counts = {"base": {"fp32": _counted(base_syncs)}, "series": {"fp32": _counted(series_syncs, budget)}}
    counts["series"]["fp32"]["sync_budget"] = counts["base"]["fp32"]["sync_budget"] = budget
    timings = {
        "base": [_timed([cpu, cpu * 3], [cpu * 2]) for cpu in base_cpu],
        "series": [_timed([cpu, cpu * 3], [cpu * 2]) for cpu in series_cpu],
    }
    return benchmark.summarize(counts, timings)


def test_summarize():
    [row] = _rows()
    assert row["case"] == "fp32" and row["optim"] == "adamw" and row["sync_budget"] == 1
    assert row["base"]["syncs_per_step"] == 2 and row["series"]["syncs_per_step"] == 3
    assert row["base"]["torch_calls_per_step"] == 10 and row["base"]["python_calls_per_step"] == 100
    assert row["added_syncs_per_step"] == 1 and row["syncs_ok"] is True
    assert row["base"]["cpu"] == {"run_medians_ms": [20.0, 24.0], "median_ms": 22.0, "min_ms": 20.0, "max_ms": 24.0}
    assert row["series"]["cpu"]["median_ms"] == 23.1
    assert row["ratio_cpu"] == round(23.1 / 22.0, 4)
    assert row["pair_ratios_cpu"] == [round(20.2 / 20.0, 4), round(26.0 / 24.0, 4)]
    assert row["ratio_wall"] == round(row["series"]["wall"]["median_ms"] / row["base"]["wall"]["median_ms"], 4)
    [over] = _rows(series_syncs=16)
    assert over["added_syncs_per_step"] == 2 and over["syncs_ok"] is False
    assert benchmark._stats([]) == {"run_medians_ms": [], "median_ms": None, "min_ms": None, "max_ms": None}


def test_the_tables_and_the_verdict():
    rows = _rows()
    assert benchmark.count_table(rows).splitlines() == [
        "| case | optimizer | host syncs/step | added (budget) | torch calls/step | Python calls/step |",
        "|---|---|---|---|---|---|",
        "| fp32 | adamw | 2 -> 3 | 1 (1) | 10 -> 10 | 100 -> 100 |",
    ]
    time_lines = benchmark.time_table(rows).splitlines()
    assert time_lines[2].startswith("| fp32 | adamw | 22.00 (20.00-24.00) | 23.10 (20.20-26.00) | 1.050 |")
    plan = Plan(reps=2, steps=5, warmup=1, count_steps=4)
    assert benchmark.verdict(rows, plan) == (
        "host syncs within budget; CPU-time ratio <= 1.01 in 0 of 1 cases, per pair (median) in 0 of 1"
    )
    fast = _rows(series_cpu=(0.010, 0.012))
    assert benchmark.verdict(fast, plan).endswith("in 1 of 1 cases, per pair (median) in 1 of 1")
    over = _rows(series_syncs=16)
    assert "over budget" in benchmark.count_table(over)
    assert benchmark.verdict(over, Plan(reps=0, steps=5, warmup=1, count_steps=4)) == "host syncs OVER BUDGET"
    gradscaler = dict(rows[0], scaler=True, accumulation=4)
    assert benchmark._label(gradscaler) == "adamw, GradScaler, accumulation 4"


@pytest.mark.parametrize("reps", [0, 2])
def test_result_lines_and_report(reps):
    rows = _rows()
    measured = Measured(INFO, {}, {}, [0.5, 2.25], HOST)
    plan = Plan(reps=reps, steps=5, warmup=1, count_steps=4)
    lines = benchmark.result_lines(rows, measured, plan)
    tables = [benchmark.time_table(rows), ""] if reps else []
    assert lines[: len(tables) + 2] == [*tables, benchmark.count_table(rows), ""]
    assert lines[len(tables) + 2] == (
        "Machine: 2 CPUs (cpu X), Linux 6, 1-minute load average 0.5-2.2 during the run (the benchmark's own "
        "process included). torch 2.13.0, 1 thread(s) per process. Model: tiny."
    )
    assert any(line.startswith("Time: 2 pairs of runs") for line in lines) == bool(reps)
    assert lines[-1].startswith("Counts per optimizer step over 4 steps after the warm-up")
    unknown = benchmark.result_lines(rows, Measured(INFO, {}, {}, [], HOST), plan)
    assert "1-minute load average unknown during" in unknown[len(tables) + 2]
    data = benchmark.report(rows, measured, plan, "/py", 12.5)
    assert data == {
        "schema_version": benchmark.SCHEMA_VERSION,
        "syncs_ok": True,
        "machine": dict(HOST, load_average_1m=[0.5, 2.25]),
        "setup": {"reps": reps, "steps": 5, "warmup": 1, "count_steps": 4, "threads": 1, "torch": "2.13.0",
                  "model": "tiny"},
        "python": "/py",
        "cases": rows,
        "duration_s": 12.5,
    }  # fmt: skip
    assert benchmark.report(_rows(series_syncs=16), measured, plan, "/py", 1)["syncs_ok"] is False


def test_rounding_the_boundary_and_the_labels():
    [row] = _rows(base_cpu=(0.003, 0.003), series_cpu=(0.0031, 0.0031))
    assert row["ratio_cpu"] == 1.0333 and row["pair_ratios_cpu"] == [1.0333, 1.0333]  # 4 decimals
    [odd] = _rows(base_syncs=3, series_syncs=4, budget=1)
    assert odd["added_syncs_per_step"] == 0.25 and odd["syncs_ok"]
    counts = {"base": {"fp32": _counted(1, steps=3)}, "series": {"fp32": _counted(2, steps=3)}}
    [thirds] = benchmark.summarize(counts, {"base": [], "series": []})
    assert thirds["added_syncs_per_step"] == 0.333333  # 6 decimals
    [edge] = _rows(base_cpu=(0.1, 0.1), series_cpu=(0.101, 0.101))
    assert edge["ratio_cpu"] == benchmark.GOAL_RATIO
    plan = Plan(reps=2, steps=5, warmup=1, count_steps=4)
    assert benchmark.verdict([edge], plan).endswith("<= 1.01 in 1 of 1 cases, per pair (median) in 1 of 1")
    assert benchmark.time_table([edge]).splitlines()[0] == (
        "| case | optimizer | unpatched CPU ms/step | patched CPU ms/step | ratio | ratio per pair | wall-time ratio |"
    )
    assert benchmark._label(dict(edge, accumulation=1)) == "adamw"
    assert benchmark._label(dict(edge, accumulation=2)) == "adamw, accumulation 2"
    assert Plan(reps=1, steps=1, warmup=1, count_steps=1).timeout == 900
