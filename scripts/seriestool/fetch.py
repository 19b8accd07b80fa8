"""Fetch a pinned sdist with pip into a content-addressed cache, hash-checked."""

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from .digests import sha256_file
from .errors import SeriesError
from .progress import download_detail, heartbeat


def _cached_file(slot: Path) -> Path | None:
    if not slot.is_dir():
        return None
    files = [p for p in slot.iterdir() if p.is_file() and not p.name.startswith(".")]
    if len(files) > 1:
        raise SeriesError(f"download cache {slot} holds several files; delete the folder to download again")
    return files[0] if files else None


def _pip_failure(package: str, version: str, output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if any("DO NOT MATCH THE HASHES" in line for line in lines):
        got = next((line.split()[-1] for line in lines if line.startswith("Got")), "something else")
        return (
            f"sha256 mismatch for the {package}=={version} sdist from the package index: got {got}; "
            "nothing was extracted"
        )
    errors = [line for line in lines if line.startswith("ERROR:")]
    detail = errors[-1] if errors else (lines[-1] if lines else "no output")
    indexes = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("Looking in indexes:")), None)
    where = f" from {indexes}" if indexes else ""
    return f"could not fetch the {package}=={version} sdist with pip{where} (is the index reachable?): {detail}"


def fetch_sdist(
    package: str,
    version: str,
    sha256: str,
    cache_dir: str | Path,
    *,
    python: str | None = None,
    log: Callable[[str], None] | None = None,
) -> Path:
    """Return the path of the verified sdist `package==version`, downloading it when not cached.

    The cache holds one folder per sha256. A cached file is re-hashed on every use; a mismatch is an
    error (never extracted, never silently replaced). pip runs in hash-checking mode, so a file with
    the wrong hash is refused before pip builds its metadata, and the saved file is hashed again here.
    """
    cache_dir = Path(cache_dir)
    slot = cache_dir / sha256
    cached = _cached_file(slot)
    if cached is not None:
        actual = sha256_file(cached)
        if actual != sha256:
            raise SeriesError(
                f"cached sdist {cached} has sha256 {actual}, expected {sha256}; delete it to download again"
            )
        return cached

    python = python or sys.executable
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".download-", dir=cache_dir))
    try:
        req = tmp / "requirements.txt"
        req.write_text(f"{package}=={version} --hash=sha256:{sha256}\n", encoding="utf-8")
        out_dir = tmp / "out"
        cmd = [python, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--require-hashes"]
        cmd += ["--disable-pip-version-check", "--progress-bar", "off", "-r", str(req), "-d", str(out_dir)]
        if log:
            log(f"downloading {package}=={version} sdist with pip")
        # pip's output goes to files and its temporary files below `tmp`, so the progress lines can say how far
        # it got (its last step, the bytes it saved so far).
        out_path, err_path, pip_tmp = tmp / "pip.out", tmp / "pip.err", tmp / "pip-tmp"
        pip_tmp.mkdir()
        env = dict(os.environ, TMPDIR=str(pip_tmp))
        say = (lambda message: log(f"downloading {package}=={version} sdist: {message}")) if log else None
        try:
            with (
                open(out_path, "w", encoding="utf-8") as out,
                open(err_path, "w", encoding="utf-8") as err,
                heartbeat(say, download_detail(out_path, pip_tmp)),
            ):
                proc = subprocess.run(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, check=False)
        except OSError as exc:
            raise SeriesError(f"cannot run pip with {python}: {exc}") from None
        stdout = out_path.read_text(encoding="utf-8", errors="replace")
        stderr = err_path.read_text(encoding="utf-8", errors="replace")
        if proc.returncode != 0:
            if "No module named pip" in stderr:
                raise SeriesError(f"pip is not available for {python}; install it (python3 -m ensurepip) and retry")
            raise SeriesError(_pip_failure(package, version, stdout + "\n" + stderr))
        files = sorted(out_dir.iterdir()) if out_dir.is_dir() else []
        if len(files) != 1:
            raise SeriesError(f"pip downloaded {len(files)} files for {package}=={version}, expected one sdist")
        actual = sha256_file(files[0])
        if actual != sha256:
            raise SeriesError(
                f"sha256 mismatch for {files[0].name}: got {actual}, expected {sha256}; nothing was extracted"
            )
        slot.mkdir(exist_ok=True)
        final = slot / files[0].name
        files[0].rename(final)
        return final
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
