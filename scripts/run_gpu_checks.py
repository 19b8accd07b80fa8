#!/usr/bin/env python3
"""Run the patch series' checks on this machine's GPU, from a bundle made by `series.py bundle`.

Unpack the bundle and run, in its folder:

    python3 run_gpu_checks.py              # every check on CUDA (exit 2 when no GPU is visible)
    python3 run_gpu_checks.py --cpu        # the same replay with the GPUs hidden: not a GPU verdict

Standard library only, Python 3.10+, no network, no pip. The tests run with the torch of this
interpreter (or of --python): the bundle holds no torch. It holds the pinned release sdists, each
patch's files after it, the series' new tests and the pure-Python packages the tests need; the
compiled ones (numpy, tokenizers, safetensors, ...) must be installed here.

For every patch, in order, on the release plus the earlier patches: its new test files without its
code change (red: they must fail), then with it (green: they must pass); then every test of a target
with its companions' patched sources (transformers with the patched accelerate); the tests that start
several processes; and seed 000's reproduction (fp16, the default GradScaler, natural overflows) on
the release and on the series. Prints a table like `series.py verify` and writes a JSON report.

exit status: 0 every check passed; 1 a check failed; 2 environment (no GPU, no or too old torch, a
missing dependency, a damaged bundle, bad arguments); 130 interrupted.
"""

import argparse
import ast
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn


JSON = dict[str, Any]  # what bundle.json and the report hold


BUNDLE_SCHEMA = 1
REPORT_SCHEMA = 1
MIN_PYTHON = (3, 10)
MIN_TORCH = (2, 6)
HERE = Path(__file__).resolve().parent
PROG = "run_gpu_checks"
IMPORT_ERRORS = ("ImportError", "ModuleNotFoundError")
TAIL_LINES = 40
WIDTH = 120
MIN_PATCH = 20
# The statuses of `series.py verify` (seriestool/statuses.py), as plain strings: labels in the table.
BASE_LABELS = {
    "clean": "yes",
    "3-way": "3-way",
    "conflict": "CONFLICT",
    "already-upstream": "upstream",
    "fixed-differently": "fixed upstream",
}
# Tests that start several processes, or need several devices (by their source).
# accelerate's `debug_launcher` / `notebook_launcher` start the processes in the test itself (accelerate 0002).
MULTI_PROCESS = re.compile(
    r"nproc_per_node|torch\.distributed\.run|torchrun|execute_subprocess_async|mp\.spawn"
    r"|\b(?:debug|notebook)_launcher\(|\bstart_processes\("
)
MULTI_DEVICE = re.compile(r"require_(?:torch_)?multi_(?:gpu|accelerator|device)|require_multi_(?:gpu|device)")
HIDES_GPUS = re.compile(r"CUDA_VISIBLE_DEVICES[\"']?\s*[:=]\s*[\"'][\"']")


class EnvironmentProblem(Exception):
    """Something about this machine or the bundle: exit 2, one line."""


# -- the interpreter with torch -----------------------------------------------------------------------

PROBE = r"""
import importlib.util, json, sys
info = {"python": sys.version.split()[0], "version_info": list(sys.version_info[:2])}
def found(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
info["found"] = {name: found(name) for name in json.loads(sys.argv[1])}
try:
    import pytest
    info["pytest"] = pytest.__version__
except Exception as exc:
    info["pytest"] = None
    info["pytest_error"] = f"{type(exc).__name__}: {exc}"
try:
    import torch
except Exception as exc:
    info["torch"] = None
    info["torch_error"] = f"{type(exc).__name__}: {exc}"
else:
    info["torch"] = torch.__version__
    info["cuda_build"] = torch.version.cuda
    try:
        info["cuda"] = bool(torch.cuda.is_available())
        count = torch.cuda.device_count() if info["cuda"] else 0
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(count)]
        if info["cuda"]:
            info["capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
            info["bf16"] = bool(torch.cuda.is_bf16_supported())
    except Exception as exc:
        info["cuda"] = False
        info["gpus"] = []
        info["cuda_error"] = f"{type(exc).__name__}: {exc}"
print("PROBE " + json.dumps(info))
"""

# Imports what the series' test files import (at module level) with the release sources: a missing or
# mismatched dependency shows here, once, rather than as every test failing.
IMPORT_PROBE = r"""
import importlib, json, sys
info = {}
args = json.loads(sys.argv[1])
own = set(args["own"])
for module, names in args["imports"]:
    try:
        mod = importlib.import_module(module)
        for name in names:
            try:
                getattr(mod, name)
            except AttributeError:
                pass  # a name the release lacks: the red run shows it, it is not the environment
    except Exception as exc:
        cause = exc
        while cause is not None and not isinstance(cause, ModuleNotFoundError):
            cause = cause.__cause__ or cause.__context__
        missing = cause.name if cause is not None else None
        if missing and missing.split(".")[0] in own:
            continue  # a module of a target that only a patch adds: the red run shows it
        info["error"] = f"{module}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        info["missing"] = missing
        break
try:
    from transformers import TrainingArguments
    import tempfile
    info["default_optim"] = str(TrainingArguments(output_dir=tempfile.mkdtemp()).optim.value)
except Exception:
    pass
try:
    from transformers.testing_utils import torch_device
    info["torch_device"] = torch_device
except Exception:
    pass
print("PROBE " + json.dumps(info))
"""


def _version_tuple(text: str | None) -> tuple[int, int]:
    numbers = re.match(r"(\d+)\.(\d+)", text or "")
    return (int(numbers.group(1)), int(numbers.group(2))) if numbers else (0, 0)


def _probe(python: str | Path, script: str, args: object, env: dict[str, str] | None, timeout: float = 600) -> JSON:
    try:
        proc = subprocess.run(
            [str(python), "-c", script, json.dumps(args)],
            capture_output=True,
            text=True,
            env=env,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(f"cannot run {python}: {exc}") from None
    for line in proc.stdout.splitlines():
        if line.startswith("PROBE "):
            return json.loads(line[6:])
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    raise EnvironmentProblem(f"cannot run {python}: {lines[-1] if lines else f'exit {proc.returncode}'}")


# -- the bundle ---------------------------------------------------------------------------------------


def load_bundle(root: Path) -> JSON:
    path = root / "bundle.json"
    try:
        bundle = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EnvironmentProblem(f"{path} is missing: run this script inside an unpacked bundle") from None
    except (OSError, ValueError) as exc:
        raise EnvironmentProblem(f"cannot read {path}: {exc}") from None
    if bundle.get("schema") != BUNDLE_SCHEMA:
        raise EnvironmentProblem(f"{path} has schema {bundle.get('schema')}, this runner reads {BUNDLE_SCHEMA}")
    return bundle


def check_files(root: Path, bundle: JSON) -> None:
    """Every file the bundle lists is there with its sha256 (a cut-short copy or an edit is caught here)."""
    bad = []
    for rel, digest in bundle["files"].items():
        path = root / rel
        try:
            actual = _sha256(path)
        except OSError:
            bad.append(f"{rel} (missing)")
            continue
        if actual != digest:
            bad.append(f"{rel} (sha256 differs)")
    if bad:
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        raise EnvironmentProblem(f"the bundle is damaged: {', '.join(bad[:3])}{more}; copy it again")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def extract_sdist(archive: Path, dest: Path) -> Path:
    """Extract a .tar.gz whose members share one top-level folder into the new folder `dest`."""
    staging = dest.with_name(dest.name + ".extract")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = tar.getmembers()
            tops = set()
            for member in members:
                parts = [p for p in member.name.split("/") if p not in ("", ".")]
                if member.name.startswith("/") or ".." in parts or not (member.isreg() or member.isdir()):
                    raise EnvironmentProblem(f"{archive.name}: refusing member {member.name!r}")
                if parts:
                    tops.add(parts[0])
            if len(tops) != 1:
                raise EnvironmentProblem(f"{archive.name}: expected one top-level folder")
            if hasattr(tarfile, "data_filter"):
                tar.extractall(staging, members=members, filter="data")
            else:
                tar.extractall(staging, members=members)
        os.rename(staging / tops.pop(), dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest


class Tree:
    """A target's source tree in the work folder, moved from the release through each patch's stage."""

    def __init__(self, root: Path, bundle_root: Path, target: JSON) -> None:
        self.root = root
        self.bundle_root = bundle_root
        self.target = target

    @property
    def source(self) -> Path:
        return self.root / self.target["source_dir"]

    def put(self, patch: JSON, paths: Iterable[str] | None = None) -> None:
        """Write the files of `patch`'s stage (all, or only `paths`) and delete the ones it deletes (all only)."""
        stage = self.bundle_root / patch["stage"]
        wanted = None if paths is None else set(paths)
        for entry in patch["changed"]:
            if wanted is not None and entry["path"] not in wanted:
                continue
            dest = self.root / entry["path"]
            dest.parent.mkdir(parents=True, exist_ok=True)
            if dest.exists() or dest.is_symlink():
                dest.unlink()
            shutil.copyfile(stage / entry["path"], dest)
            os.chmod(dest, 0o755 if entry.get("executable") else 0o644)
            _drop_bytecode(dest)
        if wanted is None:
            for rel in patch["deleted"]:
                path = self.root / rel
                if path.exists():
                    path.unlink()
                _drop_bytecode(path)


def _drop_bytecode(path: Path) -> None:
    """Python trusts a `__pycache__` file while size and mtime in whole seconds match: drop it for a changed file."""
    if path.suffix == ".py":
        for pyc in path.parent.glob(f"__pycache__/{path.stem}.*.pyc"):
            pyc.unlink()


# -- pytest runs ----------------------------------------------------------------------------------------


def stop_group(proc: "subprocess.Popen[Any]", grace: float = 3.0) -> None:
    try:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def run_logged(
    cmd: Sequence[str], *, cwd: Path, env: dict[str, str], log_path: Path, timeout: float | None
) -> tuple[int | None, float]:
    """Run `cmd` in its own process group, output to `log_path`: (exit code or None on timeout, seconds)."""
    start = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_group(proc, grace=0)
            code = None
        except BaseException:
            stop_group(proc)
            raise
    return code, round(time.monotonic() - start, 2)


def parse_junit(path: Path) -> tuple[dict[str, int], list[str], list[str], dict[str, tuple[str, list[str]]]]:
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failing: list[str] = []
    kinds: list[str] = []
    cases: dict[str, tuple[str, list[str]]] = {}
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return counts, failing, kinds, cases
    for case in root.iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        case_id = f"{classname}::{name}" if classname else name
        failure, error, skipped = case.find("failure"), case.find("error"), case.find("skipped")
        if failure is not None:
            counts["failed"] += 1
            failing.append(case_id)
            kinds.append((failure.get("message") or "").split(":", 1)[0].strip())
            cases[case_id] = ("failed", (failure.get("message") or "").splitlines()[:1])
        elif error is not None:
            counts["errors"] += 1
            failing.append(case_id)
            cases[case_id] = ("error", (error.get("message") or "").splitlines()[:1])
        elif skipped is not None:
            counts["skipped"] += 1
            cases[case_id] = ("skipped", (skipped.get("message") or "").splitlines()[:1])
        else:
            counts["passed"] += 1
            cases[case_id] = ("passed", [])
    return counts, failing, kinds, cases


def classify(code: int | None, junit: Path, expect: str) -> tuple[JSON, dict[str, tuple[str, list[str]]]]:
    """The outcome of one pytest run, as `series.py verify` judges it (seriestool/runners.py)."""
    counts, failing, kinds, cases = parse_junit(junit)
    run: JSON = {"status": "error", "exit_code": code, **counts, "total": sum(counts.values()), "failing": failing}
    if code is None:
        run["status"] = "timeout"
    elif code == 5:
        run["status"] = "no-tests"
    elif expect == "red":
        if code == 1 and counts["failed"]:
            real = [kind for kind in kinds if kind not in IMPORT_ERRORS]
            run["status"] = "red" if real else "import-only"
        elif code == 0:
            run["status"] = "not-red" if counts["passed"] else "skipped"
    else:
        if code == 0:
            run["status"] = "green"
        elif code == 1:
            run["status"] = "failed"
    return run, cases


def _tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class Runner:
    """Runs pytest for the checks, with this machine's interpreter and the bundle's PYTHONPATH."""

    def __init__(
        self, python: str | Path, work: Path, *, cpu: bool, timeout: float, log: Callable[[str], None]
    ) -> None:
        self.python = python
        self.work = work
        self.cpu = cpu
        # One GPU for the checks, as upstream's single-GPU CI: with several, the Trainer wraps the model in
        # DataParallel and batches grow. The tests that need several get them in their own run (multi_gpu_run).
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        self.first_gpu = visible.split(",")[0].strip() if visible and visible.strip() else "0"
        self.timeout = timeout
        self.log = log
        self.logs = work / "logs"
        self.cases: dict[str, tuple[str, list[str]]] = {}  # test id -> (outcome, message) of the green runs

    def env(self, paths: Iterable[str | Path], all_gpus: bool = False) -> dict[str, str]:
        env = dict(os.environ)
        for key in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE"):
            env.pop(key, None)
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in paths)
        env["PYTHONUNBUFFERED"] = "1"
        # The machine's own pytest plugins stay out: the bundle's pytest runs the tests as `verify` does.
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        # Offline machine: nothing may wait on the Hub; its cache stays in the work folder.
        env["HF_HUB_OFFLINE"] = "1"
        env["HF_DATASETS_OFFLINE"] = "1"
        # hub kernels come from the Hub too: from 5.25.0 `from_pretrained` raises without them unless told not to ask
        env["USE_HUB_KERNELS"] = "NO"
        env["HF_HOME"] = str(self.work / "hf-home")
        if self.cpu:
            env["CUDA_VISIBLE_DEVICES"] = ""
        elif not all_gpus:
            env["CUDA_VISIBLE_DEVICES"] = self.first_gpu
        return env

    def pytest(
        self,
        tree: Tree,
        files: Sequence[str],
        paths: Iterable[str | Path],
        stem: str,
        expect: str,
        *,
        select: str | None = None,
        all_gpus: bool = False,
    ) -> JSON:
        log_path = self.logs / f"{stem}.log"
        junit = self.logs / f"{stem}.xml"
        junit.unlink(missing_ok=True)
        cmd = [str(self.python), "-m", "pytest", "-p", "no:cacheprovider", "-rfE", f"--junitxml={junit}"]
        cmd += ["-k", select] if select else []
        env = self.env(paths, all_gpus=all_gpus)
        code, seconds = run_logged([*cmd, *files], cwd=tree.root, env=env, log_path=log_path, timeout=self.timeout)
        run, cases = classify(code, junit, expect)
        run.update(duration_s=seconds, log=str(log_path), output_tail="", cached=False)
        if run["status"] not in ("red", "green"):
            run["output_tail"] = _tail(log_path)
        if expect == "green" and not all_gpus:
            self.cases.update(cases)
        self.last_cases = cases
        return run


# -- the report ---------------------------------------------------------------------------------------


def red_cell(run: JSON | None) -> str:
    if not run:
        return "-"
    if run["status"] == "red":
        return f"yes {run['failed']}/{run['total']}"
    if run["total"]:
        return f"NO: {run['status']} {run['failed']}/{run['total']}"
    return f"NO: {run['status']}"


def green_cell(run: JSON | None) -> str:
    if not run:
        return "-"
    if run["status"] == "green":
        return f"yes {run['passed']}/{run['skipped']}"
    return f"NO: {run['status']} {run['passed']}/{run['skipped']}"


def _numbers(names: Sequence[str]) -> str:
    numbers = [name[:4] for name in names]
    if len(numbers) > 2 and all(n.isdigit() for n in numbers):
        values = [int(n) for n in numbers]
        if values == list(range(values[0], values[0] + len(values))):
            return f"{numbers[0]}-{numbers[-1]}"
    return ",".join(numbers)


def check_cells(patch: JSON) -> tuple[Any, ...]:
    """The cells of `series.py verify`'s table (seriestool/render.py) for a patch in the JSON form."""
    status = patch.get("base_status")
    if patch.get("depends_on"):
        alone = "needs " + _numbers(patch["depends_on"])
    else:
        alone = "-" if patch.get("applies_alone") is None else ("yes" if patch["applies_alone"] else "no")
    style = "-" if patch.get("style") is None else ("clean" if patch["style_clean"] else "NOT CLEAN")
    verdict = "FAIL" if patch["verdict"] == "fail" else patch["verdict"]
    return (
        BASE_LABELS.get(status, status) if status else "-",
        alone,
        red_cell(patch.get("red")),
        green_cell(patch.get("green")),
        style,
        verdict,
    )


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 3, 0)].rstrip() + "..."


def table(patches: Sequence[JSON], width: int = WIDTH) -> str:
    """The console table of `series.py verify`, line for line."""
    head = ("patch", "applies", "alone", "red fail/all", "green pass/skip", "style", "verdict")
    rest = [check_cells(p) for p in patches]
    widths = [max(len(row[i]) for row in [head[1:], *rest]) for i in range(len(head) - 1)]
    room = max(width - sum(widths) - 2 * len(widths), MIN_PATCH)
    names = []
    for p in patches:
        subject = p.get("subject") or p["name"][5:].removesuffix(".patch")
        fork = " (fork)" if p.get("tier") == "fork" else ""  # the fork tier, after the number
        names.append(_fit(f"{p['target']} {p['name'][:4]}{fork} {subject}", room))
    first = max(len(name) for name in [head[0], *names])
    rows = [head, *[(name, *cells) for name, cells in zip(names, rest, strict=True)]]
    widths = [first, *widths]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def problem_lines(patches: Iterable[JSON]) -> list[str]:
    lines = []
    for p in patches:
        where = f"{p['target']} {p['name'][:4]}"
        lines += [f"  {where}: {problem}" for problem in p["problems"]]
        lines += [f"  {where}: note: {note}" for note in p.get("notes", [])]
    return lines


def run_detail(run: JSON, limit: int = 5) -> str:
    parts = []
    if run.get("failing"):
        more = f" and {len(run['failing']) - limit} more" if len(run["failing"]) > limit else ""
        parts.append("failing: " + ", ".join(run["failing"][:limit]) + more)
    elif run["status"] == "not-red" and run.get("passed"):
        parts.append(f"all {run['passed']} pass")
    if run.get("log"):
        parts.append(f"log {run['log']}")
    return f" ({'; '.join(parts)})" if parts else ""


# -- the checks ---------------------------------------------------------------------------------------


def patch_result(target: JSON, patch: JSON) -> JSON:
    return {
        "name": patch["name"],
        "target": target["name"],
        "index": patch["index"],
        "sha256": patch["sha256"],
        "subject": patch["subject"],
        "tier": patch.get("tier", "upstream"),
        "verdict": "fail",
        "ok": False,
        "base_status": patch["base_status"],
        "applies": True,
        "applies_alone": patch.get("applies_alone"),
        "depends_on": patch.get("depends_on", []),
        "red_without_fix": False,
        "green_with_fix": False,
        "style_clean": None,  # ruff does not depend on the device: `verify` checks it
        "test_files": patch["test_files"],
        "conflict_files": [],
        "conflicts": [],
        "skipped_before": [],
        "red": None,
        "green": None,
        "style": None,
        "hidden_dependency": False,
        "problems": [],
        "notes": [],
    }


def replay_target(
    runner: Runner,
    bundle_root: Path,
    target: JSON,
    trees: dict[str, Tree],
    paths_for: Callable[[str], list[Path]],
    only: set[str] | None,
) -> list[JSON]:
    """Each patch of `target`, in order: its new tests without its code change (red), then with it (green)."""
    tree = trees[target["name"]]
    results = []
    count = len(target["patches"])
    for patch in target["patches"]:
        res = patch_result(target, patch)
        results.append(res)
        where = f"[{target['name']} {patch['index']}/{count}]"
        stem = f"{target['name']}/{patch['name'].removesuffix('.patch')}"
        (runner.logs / target["name"]).mkdir(parents=True, exist_ok=True)
        if only is not None and patch["name"][:4] not in only and patch["name"] not in only:
            tree.put(patch)
            res["verdict"] = "not checked"
            continue
        runner.log(f"{where} {patch['name']}")
        if not patch["test_files"]:
            res["red"] = _empty_run()
            res["green"] = _empty_run()
            res["problems"].append(f"adds no test files under {target['tests']}")
            tree.put(patch)
            continue
        paths = paths_for(target["name"])
        tree.put(patch, patch["support"])
        res["red"] = runner.pytest(tree, patch["test_files"], paths, f"{stem}.red", "red")
        runner.log(f"{where} red: {_progress(res['red'], 'failed', 'total')}")
        tree.put(patch)
        res["green"] = runner.pytest(tree, patch["test_files"], paths, f"{stem}.green", "green")
        runner.log(f"{where} green: {_progress(res['green'], 'passed', 'skipped')}")
        res["red_without_fix"] = res["red"]["status"] == "red"
        res["green_with_fix"] = res["green"]["status"] == "green"
        if not res["red_without_fix"]:
            res["problems"].append(
                f"without its fix the tests are {res['red']['status']}, not red{run_detail(res['red'])}"
            )
        if not res["green_with_fix"]:
            res["problems"].append(
                f"with the patch the tests are {res['green']['status']}, not green{run_detail(res['green'])}"
            )
        res["verdict"] = "ok" if res["red_without_fix"] and res["green_with_fix"] else "fail"
        res["ok"] = res["verdict"] == "ok"
    return results


def _empty_run() -> JSON:
    return {
        "status": "no-tests",
        "exit_code": None,
        "passed": 0,
        "failed": 0,
        "errors": 0,
        "skipped": 0,
        "total": 0,
        "failing": [],
        "duration_s": 0.0,
        "log": None,
        "output_tail": "",
        "cached": False,
    }


def _progress(run: JSON, first: str, second: str) -> str:
    return f"{run['status']} {run[first]}/{run[second]} {first}/{second} ({run['duration_s']:.1f}s)"


def companion_runs(
    runner: Runner,
    bundle: JSON,
    trees: dict[str, Tree],
    results: list[JSON],
    final_paths: Callable[[str, list[str]], list[Path]],
) -> list[JSON]:
    """All tests of a target with `verify_with`, on its patched tree with the companions' patched sources."""
    out = []
    for target in bundle["targets"]:
        others = [name for name in target.get("verify_with", []) if name in trees]
        own = [res for res in results if res["target"] == target["name"]]
        if not others or not own or not all(res["verdict"] == "ok" for res in own):
            continue
        files = [path for res in own for path in res["test_files"]]
        label = f"{target['name']} + patched {', '.join(others)}"
        runner.log(f"[{label}] all {len(files)} test file(s) of {target['name']}")
        paths = final_paths(target["name"], others)
        run = runner.pytest(trees[target["name"]], files, paths, f"{target['name']}/with-companions", "green")
        out.append(
            {
                "target": target["name"],
                "with": others,
                "label": label,
                "green": run["status"] == "green",
                "run": run,
            }
        )
    return out


def multi_process_tests(bundle_root: Path, bundle: JSON) -> list[JSON]:
    """The series' tests that start several processes or need several devices (by their source)."""
    found = []
    for target in bundle["targets"]:
        for patch in target["patches"]:
            for rel in patch["test_files"]:
                source = (bundle_root / patch["stage"] / rel).read_text(encoding="utf-8", errors="replace")
                for name, text in _test_functions(source):
                    multi_device = bool(MULTI_DEVICE.search(text))
                    if multi_device or MULTI_PROCESS.search(text):
                        found.append(
                            {
                                "target": target["name"],
                                "patch": patch["name"],
                                "file": rel,
                                "test": name,
                                "needs_gpus": 2 if multi_device else 0,
                                "hides_gpus": bool(HIDES_GPUS.search(text)),
                            }
                        )
    return found


def _outcomes(entry: JSON, cases: dict[str, tuple[str, list[str]]]) -> dict[str, tuple[str, list[str]]]:
    """The outcomes of `entry`'s test (and its parameterized expansions) among a run's test cases."""
    module = entry["file"].removesuffix(".py").replace("/", ".")
    found = {}
    for case_id, outcome in cases.items():
        name = case_id.rsplit("::", 1)[-1]
        if case_id.startswith((module + ".", module + "::")) and (
            name == entry["test"] or name.startswith(entry["test"] + "_")
        ):
            found[case_id] = outcome
    return found


def _state(outcomes: dict[str, tuple[str, list[str]]], where: str) -> str:
    if not outcomes:
        return "not run (the run did not reach it)"
    states = sorted({outcome[0] for outcome in outcomes.values()})
    if states == ["skipped"]:
        reason = next((outcome[1][0] for outcome in outcomes.values() if outcome[1]), "")
        return "skipped" + (f" ({reason})" if reason else "")
    return f"{', '.join(states)} {where}"


def multi_gpu_run(
    runner: Runner,
    found: list[JSON],
    trees: dict[str, Tree],
    paths_for: Callable[[str], list[Path]],
    gpus: list[str],
    results: list[JSON],
    *,
    whole: bool = True,
) -> list[JSON]:
    """The multi-process tests once more with every GPU visible, on the patched trees, where 2 or more exist.

    Each entry of `found` gets `single` (its outcome in its patch's green run, on one GPU or the CPU) and
    `multi_gpu` (this run's, or why it did not run). `whole`: every patch was checked (not --patch). Returns the
    runs, one per target."""
    runs: list[JSON] = []
    for entry in found:
        outcomes = _outcomes(entry, runner.cases)
        if entry["hides_gpus"]:
            where = "(CPU processes: the test hides the GPUs)"
        elif runner.cpu:
            where = "(GPUs hidden: --cpu)"
        else:
            where = "(one GPU visible)"
        entry["single"] = _state(outcomes, where)
        entry["multi_gpu"] = f"not run: {len(gpus)} GPU(s) visible, it takes 2" if len(gpus) < 2 else None
        if not whole:
            entry["multi_gpu"] = "not run: --patch"
    if len(gpus) < 2 or not whole:
        return runs
    for name in dict.fromkeys(entry["target"] for entry in found):
        own = [entry for entry in found if entry["target"] == name]
        if any(res["target"] == name and res["verdict"] != "ok" for res in results):
            for entry in own:
                entry["multi_gpu"] = "not run: a patch of its target failed"
            continue
        files = sorted({entry["file"] for entry in own})
        select = " or ".join(sorted({entry["test"] for entry in own}))
        runner.log(f"[{name} on {len(gpus)} GPUs] {select}")
        run = runner.pytest(
            trees[name], files, paths_for(name), f"{name}/multi-gpu", "green", select=select, all_gpus=True
        )
        run["target"] = name
        runs.append(run)
        for entry in own:
            entry["multi_gpu"] = _state(_outcomes(entry, runner.last_cases), f"(on {len(gpus)} GPUs)")
    return runs


def _test_functions(source: str) -> list[tuple[str, str]]:
    """(name, source) of each test function of a test file, with its decorators and its class's decorators."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    lines = source.splitlines()
    found: list[tuple[str, str]] = []

    def text(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        return "\n".join(lines[start - 1 : node.end_lineno])

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            found.append((node.name, text(node)))
        elif isinstance(node, ast.ClassDef):
            decorators = "\n".join(ast.get_source_segment(source, d) or "" for d in node.decorator_list)
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test"):
                    found.append((item.name, decorators + "\n" + text(item)))
    return found


def seed_check(
    runner: Runner, bundle_root: Path, bundle: JSON, paths: dict[str, list[Path]], device: str
) -> JSON | None:
    """Seed 000 on the release and on the series: fp16 with the default GradScaler, natural overflows only."""
    seed = bundle.get("seed")
    if not seed:
        return None
    script = bundle_root / seed["script"]
    out = {"script": seed["script"], "device": device, "runs": {}, "problems": [], "notes": []}
    for state in ("release", "series"):
        report = runner.logs / f"seed-{state}.json"
        report.unlink(missing_ok=True)
        runner.log(f"[seed 000] {state} on {device}")
        cmd = [str(runner.python), str(script), "--device", device, "--json", str(report)]
        env = runner.env(paths[state])
        code, seconds = run_logged(
            cmd, cwd=runner.work, env=env, log_path=runner.logs / f"seed-{state}.log", timeout=runner.timeout
        )
        try:
            data = json.loads(report.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        if code != 0 or data is None:
            why = "timed out" if code is None else f"exit {code}"
            out["problems"].append(f"the {state} run failed ({why}; log {runner.logs / f'seed-{state}.log'})")
            out["runs"][state] = {
                "exit_code": code,
                "duration_s": seconds,
                "tail": _tail(runner.logs / f"seed-{state}.log"),
            }
            continue
        data["duration_s"] = seconds
        out["runs"][state] = data
    series = out["runs"].get("series", {}).get("optimizers")
    release = out["runs"].get("release", {}).get("optimizers")
    if series:
        for optim, r in series.items():
            if not (r["global_step"] == r["applied_updates"] == r["scheduler_steps"] == r["max_steps"]):
                out["problems"].append(
                    f"series, {optim}: global_step={r['global_step']}, applied updates={r['applied_updates']}, "
                    f"scheduler steps={r['scheduler_steps']}; all must be max_steps={r['max_steps']}"
                )
    if release:
        counted = [optim for optim, r in release.items() if r["global_step"] > r["applied_updates"]]
        out["reproduced"] = bool(counted)
        if not counted:
            out["notes"].append(
                "no natural overflow on the release here: it shows nothing to fix (global_step = applied updates)"
            )
    out["ok"] = not out["problems"]
    return out


def seed_lines(seed: JSON | None) -> list[str]:
    if seed is None:
        return ["seed 000: not in this bundle"]
    lines = [f"seed 000 (fp16, default GradScaler init_scale=65536, no injected inf) on {seed['device']}:"]
    for state in ("release", "series"):
        run = seed["runs"].get(state) or {}
        for optim, r in (run.get("optimizers") or {}).items():
            lines.append(
                f"  {state:7s} {optim:18s} global_step={r['global_step']} applied updates={r['applied_updates']} "
                f"scheduler steps={r['scheduler_steps']} attempts={r['attempts']} "
                f"init_scale={r['init_scale']:g} skipped counted="
                f"{'-' if r['skipped_counted'] is None else r['skipped_counted']}"
            )
    lines += [f"  problem: {problem}" for problem in seed["problems"]]
    lines += [f"  note: {note}" for note in seed["notes"]]
    if seed.get("reproduced"):
        lines.append("  the release counts the overflowed steps in global_step; the series does not")
    lines.append(f"  seed 000: {'ok' if seed['ok'] else 'FAIL'}")
    return lines


# -- main ---------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="run_gpu_checks.py",
        description=__doc__.split("\n\n")[0],
        epilog="exit status: 0 every check passed; 1 a check failed; 2 environment or bad input; 130 interrupted.",
    )
    parser.add_argument(
        "--cpu", action="store_true", help="hide the GPUs and replay on CPU: tests the machinery, not a GPU verdict"
    )
    parser.add_argument("--python", metavar="PATH", help="the interpreter with torch (default: this one)")
    parser.add_argument("--work", metavar="DIR", help="trees and logs (default: <bundle>/work, replaced each run)")
    parser.add_argument("--json", metavar="FILE", help="the JSON report (default: <work>/report.json)")
    parser.add_argument("--patch", action="append", metavar="NNNN", help="red/green only this patch (repeatable)")
    parser.add_argument("--test-timeout", type=int, default=1800, metavar="S", help="limit per pytest run (1800)")
    return parser.parse_args(argv)


def _interrupt(signum: int, frame: FrameType | None) -> NoReturn:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    if sys.version_info < MIN_PYTHON:
        print(f"{PROG}: error: Python 3.10 or newer is needed (this is {sys.version.split()[0]})", file=sys.stderr)
        return 2
    args = parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return run(args)
    except EnvironmentProblem as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: error: interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


def _log(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def _writable_file(path: Path) -> None:
    """Check early that the report can be written (its folder exists and takes a file)."""
    folder = path.parent
    if not folder.is_dir():
        raise EnvironmentProblem(f"cannot write the report {path}: {folder} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot write the report {path}: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    root = HERE
    bundle = load_bundle(root)
    python = Path(args.python).expanduser() if args.python else Path(sys.executable)
    if args.python and not python.exists():
        raise EnvironmentProblem(f"--python {python} does not exist")
    if args.test_timeout < 1:
        raise EnvironmentProblem("--test-timeout must be at least 1")
    work = Path(args.work).expanduser().resolve() if args.work else root / "work"
    report_path = Path(args.json).expanduser().resolve() if args.json else work / "report.json"
    only = None
    if args.patch:
        known = {p["name"][:4] for t in bundle["targets"] for p in t["patches"]}
        known |= {p["name"] for t in bundle["targets"] for p in t["patches"]}
        unknown = [name for name in args.patch if name not in known]
        if unknown:
            raise EnvironmentProblem(f"unknown patch {unknown[0]!r} (patches: {', '.join(sorted(known))})")
        only = set(args.patch)
    check_files(root, bundle)
    deps = root / bundle["deps"]["site"]

    # The interpreter: torch, its CUDA and the compiled packages the targets need.
    compiled = bundle["deps"]["compiled"]
    modules = sorted({m for dep in compiled for m in dep["modules"] if "." not in m})
    env = dict(os.environ, PYTHONPATH=str(deps), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    if args.cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    info = _probe(python, PROBE, modules, env)
    needs = _version_tuple(bundle.get("python_requires", "3.10"))
    if tuple(info["version_info"]) < needs:
        raise EnvironmentProblem(
            f"{python} is Python {info['python']}; the checks need Python {needs[0]}.{needs[1]} or newer (the pinned "
            "releases and their packages require it): use --python for another interpreter"
        )
    if not info.get("torch"):
        raise EnvironmentProblem(
            f"no torch in {python} ({info.get('torch_error', 'not installed')}): run with the Python of this "
            "machine's CUDA torch (--python PATH), torch 2.6 or newer"
        )
    torch_version = info["torch"]
    _log(f"torch {torch_version} (CUDA build {info.get('cuda_build') or 'none'}) in {python}, Python {info['python']}")
    if _version_tuple(torch_version) < MIN_TORCH:
        raise EnvironmentProblem(f"torch {torch_version} in {python} is older than 2.6, which the checks need")
    if not args.cpu and not info.get("cuda"):
        why = info.get("cuda_error") or (
            "this torch is a CPU build" if not info.get("cuda_build") else "torch.cuda.is_available() is False"
        )
        hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
        if hidden is not None and not hidden.strip():
            why += "; CUDA_VISIBLE_DEVICES is empty"
        raise EnvironmentProblem(
            f"no GPU visible to torch {torch_version} in {python} ({why}); nothing was run. "
            "Use --python for another interpreter, or --cpu to exercise the checks on CPU (not a GPU verdict)"
        )
    if not info.get("pytest"):
        raise EnvironmentProblem(f"the bundle's pytest does not import with {python}: {info.get('pytest_error')}")
    missing = [dep for dep in compiled if dep["required"] and not any(info["found"].get(m) for m in dep["modules"])]
    if missing:
        names = ", ".join(f"{dep['name']} (verify uses {dep['version']})" for dep in missing)
        raise EnvironmentProblem(
            f"{python} lacks compiled packages the targets need: {names}; install them (wheels for this Python) "
            "and run again"
        )
    optional = [
        dep for dep in compiled if not dep["required"] and not any(info["found"].get(m) for m in dep["modules"])
    ]
    device = "cpu" if args.cpu else "cuda"
    gpus = [] if args.cpu else info.get("gpus", [])
    if args.cpu:
        _log("--cpu: the GPUs are hidden; this run tests the machinery and is not a GPU verdict")
    else:
        _log(f"{len(gpus)} GPU(s): {', '.join(gpus)}")

    # The trees: each target's release, and a copy that goes through the patches.
    if work.exists() and not (work / ".gpu-checks-work").is_file() and any(work.iterdir()):
        raise EnvironmentProblem(f"--work {work} is a folder this runner did not make; pick an empty or new one")
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    (work / ".gpu-checks-work").write_text("made by run_gpu_checks.py; replaced on each run\n", encoding="utf-8")
    _writable_file(report_path)
    release, trees = {}, {}
    for target in bundle["targets"]:
        sdist = root / target["sdist"]
        _log(f"extracting {sdist.name}")
        release[target["name"]] = Tree(extract_sdist(sdist, work / "trees" / target["name"] / "release"), root, target)
        trees[target["name"]] = Tree(extract_sdist(sdist, work / "trees" / target["name"] / "series"), root, target)
    by_name = {target["name"]: target for target in bundle["targets"]}

    def paths_for(name: str) -> list[Path]:
        """A target's own tree, then the releases of the targets `verify`'s environment holds, then the deps."""
        env_targets = by_name[name].get("environment", [])
        return [trees[name].source, *(release[other].source for other in env_targets), deps]

    def final_paths(name: str, companions: list[str]) -> list[Path]:
        env_targets = [other for other in by_name[name].get("environment", []) if other not in companions]
        return [
            trees[name].source,
            *(trees[other].source for other in companions),
            *(release[other].source for other in env_targets),
            deps,
        ]

    runner = Runner(python, work, cpu=args.cpu, timeout=args.test_timeout, log=_log)
    runner.logs.mkdir(parents=True)
    release_paths = [tree.source for tree in release.values()] + [deps]
    own = sorted({p.name.removesuffix(".py") for tree in release.values() for p in tree.source.iterdir()})
    probe_args = {"imports": bundle.get("imports", []), "own": own}
    imports = _probe(python, IMPORT_PROBE, probe_args, runner.env(release_paths))
    if "error" in imports:
        absent = imports.get("missing")
        hint = f" (module {absent} is not installed here)" if absent else ""
        raise EnvironmentProblem(f"the release does not import with {python}: {imports['error']}{hint}")

    results = []
    for target in bundle["targets"]:
        results += replay_target(runner, root, target, trees, paths_for, only)
    companions = companion_runs(runner, bundle, trees, results, final_paths) if only is None else []
    multi = multi_process_tests(root, bundle)
    multi_runs = multi_gpu_run(runner, multi, trees, paths_for, gpus, results, whole=only is None)
    seed = None
    if only is None:
        seed = seed_check(
            runner,
            root,
            bundle,
            {"release": release_paths, "series": [tree.source for tree in trees.values()] + [deps]},
            device,
        )

    ok = all(res["verdict"] != "fail" for res in results)
    ok = ok and all(companion["green"] for companion in companions)
    ok = ok and (seed is None or seed["ok"])
    ok = ok and all(run["status"] == "green" for run in multi_runs)
    duration = round(time.monotonic() - started, 2)

    if args.cpu:
        header = "device cpu (--cpu: GPUs hidden; NOT A GPU VERDICT)"
    else:
        header = (
            f"device cuda: {gpus[0]} (CUDA_VISIBLE_DEVICES={runner.first_gpu} for the checks; {len(gpus)} visible)"
        )
    print(f"{header}; torch {torch_version}, Python {info['python']}, pytest {info['pytest']}")
    if imports.get("default_optim"):
        print(
            f"default optimizer {imports['default_optim']}; transformers' torch_device {imports.get('torch_device')}"
        )
    if results:
        print(table(results))
        for line in problem_lines(results):
            print(line)
    for companion in companions:
        c = companion["run"]
        verdict = "ok" if companion["green"] else f"FAIL ({c['status']}{run_detail(c)})"
        print(f"{companion['label']}: {verdict}, {c['passed']} passed, {c['skipped']} skipped, {c['failed']} failed")
    for entry in multi:
        print(f"multi-process {entry['target']} {entry['patch'][:4]} {entry['file']}::{entry['test']}:")
        print(f"  in its green run: {entry['single']}; with every GPU: {entry['multi_gpu'] or '-'}")
    for run in multi_runs:
        if run["status"] != "green":
            print(f"  {run['target']} on several GPUs: FAIL ({run['status']}{run_detail(run)})")
    if only is None:
        for line in seed_lines(seed):
            print(line)
    if optional:
        names = ", ".join(dep["name"] for dep in optional)
        print(f"not installed here (the imports did not need them): {names}")
    verdict = "OK" if ok else "FAILED"
    if args.cpu:
        verdict += " on CPU (not a GPU verdict)"
    print(f"gpu checks: {verdict} ({len(results)} patch(es), {duration:.1f}s, logs in {runner.logs})")

    report = {
        "schema_version": REPORT_SCHEMA,
        "ok": ok,
        "gpu_verdict": not args.cpu,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "device": device,
        "python": str(python),
        "tools": {
            "python": info["python"],
            "pytest": info["pytest"],
            "torch": torch_version,
            "cuda": bool(gpus),
            "cuda_build": info.get("cuda_build"),
            "gpus": gpus,
            "capability": info.get("capability"),
            "default_optim": imports.get("default_optim"),
            "torch_device": imports.get("torch_device"),
        },
        "bundle": {key: bundle.get(key) for key in ("tool_commit", "tool_dirty", "manifest_sha256")},
        "targets": [
            {"name": t["name"], "version": t["version"], "sha256": t["sha256"], "patches": len(t["patches"])}
            for t in bundle["targets"]
        ],
        "patches": results,
        "companions": companions,
        "multi_process": multi,
        "multi_gpu_runs": multi_runs,
        "seed000": seed,
        "not_installed": [dep["name"] for dep in optional],
        "duration_s": duration,
    }
    tmp = report_path.with_name(f".{report_path.name}.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, report_path)
    print(f"report: {report_path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
