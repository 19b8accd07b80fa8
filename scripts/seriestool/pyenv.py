"""The pinned Python environment the tests and ruff run in."""

import fcntl
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .digests import sha256_of
from .errors import SeriesError
from .progress import heartbeat, pip_detail
from .render import shown_path


MARKER = ".series-complete"
RUFF_VERSION = "0.14.10"


def venv_key(requirements: str | Path) -> str:
    """The venv's name: the requirements file and the Python that makes it."""
    python = f"{platform.python_implementation()}-{platform.python_version()}-{sys.platform}"
    return sha256_of(Path(requirements), python)[:16]


def venv_python(venv_dir: str | Path) -> Path:
    sub = "Scripts/python.exe" if os.name == "nt" else "bin/python"
    return Path(venv_dir) / sub


def interpreter(
    work: Path, requirements: str | Path, given: str | None = None, *, log: Callable[[str], None] = print
) -> Path:
    """The interpreter a command runs tests or scripts with: `given` (`--python`), else the pinned venv's."""
    if given:
        python = Path(given)
        if not python.exists():
            raise SeriesError(f"--python {python} does not exist")
        return python
    return ensure_venv(work, requirements, log=log)


def pinned_count(requirements: str | Path) -> int:
    """How many packages a requirements file pins (one `name==version` line each)."""
    text = Path(requirements).read_text(encoding="utf-8")
    return sum(1 for line in text.splitlines() if re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*\s*(\[[^\]]*\])?\s*==", line))


def _pip_error(log_path: Path) -> str:
    """The line of pip's log that says what went wrong."""
    try:
        lines = [line.strip() for line in log_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError:
        return "no log"
    errors = [line for line in lines if line.startswith("ERROR:")]
    return errors[0] if errors else (lines[-1] if lines else "no output")


def built_venv(work: str | Path, requirements: str | Path) -> Path | None:
    """The interpreter of `<work>/venv-<key>` when it is built whole, else None (nothing is built)."""
    venv_dir = Path(work) / f"venv-{venv_key(requirements)}"
    python = venv_python(venv_dir)
    return python if (venv_dir / MARKER).is_file() and python.exists() else None


def ensure_venv(work: str | Path, requirements: str | Path, *, log: Callable[[str], None] = print) -> Path:
    """Return the interpreter of `<work>/venv-<key>`, building it first when needed.

    The marker file is written only after a successful install, so a half-built venv (interrupted
    or failed install) is removed and rebuilt on the next run. Two runs that need it at once (`selftest` beside
    `verify`) build it once: the second waits for the first (`<work>/.venv-<key>.lock`), then uses it.
    """
    requirements = Path(requirements)
    key = venv_key(requirements)
    venv_dir = Path(work) / f"venv-{key}"
    python = venv_python(venv_dir)
    if (venv_dir / MARKER).is_file() and python.exists():
        return python
    Path(work).mkdir(parents=True, exist_ok=True)
    with open(Path(work) / f".venv-{key}.lock", "ab") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"venv: another run is building {venv_dir}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv_dir / MARKER).is_file() and python.exists():
            return python
        return _build_venv(work, requirements, key, venv_dir, python, log)


def ensure_ruff(work: str | Path, requirements: str | Path, *, log: Callable[[str], None] = print) -> list[str]:
    """The command of the ruff that `requirements` pins: the pinned venv's when it is built, else a venv of its own
    that holds only that ruff (`<work>/venv-<key>` of a one-line requirements file, built once)."""
    python = built_venv(work, requirements)
    if python is None:
        lines = Path(requirements).read_text(encoding="utf-8").splitlines()
        pins = [line.split("#")[0].strip() for line in lines if line.strip().startswith("ruff==")]
        if not pins:
            raise SeriesError(f"{requirements} pins no ruff (a `ruff==X` line): nothing to format the tests with")
        version = pins[0].split("==", 1)[1]
        # the ruff this interpreter or PATH already has, when it is the pinned version
        for command in ([sys.executable, "-m", "ruff"], [shutil.which("ruff") or ""]):
            if command[0] and _ruff_version(command) == version:
                return command
        only = Path(work) / "ruff-requirements.txt"
        only.parent.mkdir(parents=True, exist_ok=True)
        if not only.is_file() or only.read_text(encoding="utf-8") != pins[0] + "\n":
            only.write_text(pins[0] + "\n", encoding="utf-8")
        python = ensure_venv(work, only, log=log)
    return [str(python), "-m", "ruff"]


def _ruff_version(command: list[str]) -> str | None:
    """The version `command --version` prints (`ruff 0.14.10`), None when it does not run."""
    try:
        proc = subprocess.run([*command, "--version"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    except OSError:
        return None
    words = proc.stdout.split()
    return words[-1] if proc.returncode == 0 and words else None


def _build_venv(
    work: str | Path, requirements: Path, key: str, venv_dir: Path, python: Path, log: Callable[[str], None]
) -> Path:
    if venv_dir.exists():
        log(f"removing incomplete virtualenv {venv_dir}")
        shutil.rmtree(venv_dir)
    venv_dir.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    log(f"venv: creating {venv_dir} (once, for {requirements.name})")
    proc = subprocess.run(
        [sys.executable, "-m", "venv", str(venv_dir)], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if proc.returncode != 0:
        shutil.rmtree(venv_dir, ignore_errors=True)
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise SeriesError(
            f"cannot create a virtualenv with {sys.executable} (on Debian/Ubuntu: apt install python3-venv): "
            f"{detail[-1] if detail else 'no output'}"
        )
    # pip's output (a hundred lines) goes to a log file; the console gets one line per stage.
    log_path = Path(work) / "logs" / f"pip-{key}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    count = pinned_count(requirements)
    log(f"venv: installing {count} pinned package(s) with pip, log {shown_path(log_path)} ...")
    cmd = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off"]
    cmd += ["-r", str(requirements)]
    with open(log_path, "w", encoding="utf-8") as fh, heartbeat(lambda m: log(f"venv: pip {m}"), pip_detail(log_path)):
        pip = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if pip.returncode != 0:
        raise SeriesError(
            f"installing {requirements.name} into {venv_dir} failed (pip exit {pip.returncode}): "
            f"{_pip_error(log_path)}; full log {log_path}; it is rebuilt on the next run"
        )
    log(f"venv: done in {time.monotonic() - started:.0f}s")
    info = {"requirements": str(requirements), "key": key, "python": platform.python_version()}
    (venv_dir / MARKER).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return python


# The one question the tool asks an interpreter (verify's report and checks, the keys of the outcome caches).
PROBE = r"""
import hashlib, importlib.metadata, importlib.util, json, subprocess, sys
info = {"python": sys.version.split()[0], "version": sys.version, "prefix": sys.prefix}
for mod in ("pytest", "torch"):
    spec = importlib.util.find_spec(mod)
    info[mod] = None
    if spec is not None:
        info[mod] = __import__(mod).__version__
info["cuda"] = None
if info["torch"]:
    import torch
    info["cuda"] = bool(torch.cuda.is_available())
    if info["cuda"]:
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
dists = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions())
info["packages"] = hashlib.sha256("\n".join(dists).encode()).hexdigest()
try:
    out = subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True, text=True)
    info["ruff"] = out.stdout.split()[-1] if out.returncode == 0 else None
except Exception:
    info["ruff"] = None
print(json.dumps(info))
"""


def describe(python: str | Path) -> dict[str, Any]:
    """What `python` holds (PROBE): its version and build, prefix, pytest, torch (and CUDA), ruff, and a digest of
    every installed distribution with its version. A SeriesError when it cannot be asked."""
    try:
        proc = subprocess.run(
            [str(python), "-c", PROBE], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SeriesError(f"cannot run {python}: {exc}") from None
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        raise SeriesError(f"cannot probe {python}: {lines[-1] if lines else 'no output'}")
    try:
        info = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        info = None
    if not isinstance(info, dict):
        raise SeriesError(f"cannot probe {python}: no answer")
    return info


def probe(python: str | Path, device: str = "cpu") -> dict[str, Any]:
    """`describe(python)`; an error when pytest or the pinned ruff is missing, or `device` is cuda and its torch
    has no CUDA."""
    info = describe(python)
    if not info.get("pytest"):
        raise SeriesError(f"{python} has no pytest; use the tool's own environment (omit --python)")
    if info.get("ruff") != RUFF_VERSION:
        raise SeriesError(f"{python} needs ruff=={RUFF_VERSION} (found {info.get('ruff') or 'none'})")
    if device == "cuda" and not info.get("cuda"):
        torch = info.get("torch") or "missing"
        raise SeriesError(f"--device cuda needs a CUDA build of torch, but {python} has torch {torch} without CUDA")
    return info
