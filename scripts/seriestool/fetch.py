"""Fetch an sdist with pip into a content-addressed cache (one folder per sha256), hash-checked.

The hash comes from the manifest (the pin, `[targets.<name>.releases]`); an sdist of another release is
downloaded without one the first time (trust on first use), and its sha256 kept in `recorded.json` in the cache:
every later use is checked against it.
"""

import fcntl
import json
import os
import re
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


# The versions shown when the index has not the one asked for (the newest ones).
VERSIONS_SHOWN = 5


def _pip_failure(package: str, version: str, output: str, expected: str = "") -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if any("DO NOT MATCH THE HASHES" in line for line in lines):
        got = next((line.split()[-1] for line in lines if line.startswith("Got")), "something else")
        return (
            f"sha256 mismatch for the {package}=={version} sdist from the package index: got {got}{expected}; "
            "nothing was extracted"
        )
    indexes = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("Looking in indexes:")), None)
    where = f" from {indexes}" if indexes else ""
    # The index answered with other versions (none: it may not have answered at all): the one asked for is not there.
    listed = next((m.group(1) for line in lines if (m := re.search(r"\(from versions: ([^)]*)\)", line))), "")
    versions = [v.strip() for v in listed.split(",") if v.strip() and v.strip() != "none"]
    if versions and any("No matching distribution found" in line for line in lines):
        shown = ", ".join(versions[-VERSIONS_SHOWN:])
        more = "..., " if len(versions) > VERSIONS_SHOWN else ""
        return f"no {package}=={version} sdist on the package index{where} (it has {more}{shown})"
    errors = [line for line in lines if line.startswith("ERROR:")]
    detail = errors[-1] if errors else (lines[-1] if lines else "no output")
    return f"could not fetch the {package}=={version} sdist with pip{where} (is the index reachable?): {detail}"


def fetch_sdist(
    package: str,
    version: str,
    sha256: str,
    cache_dir: str | Path,
    *,
    python: str | None = None,
    log: Callable[[str], None] | None = None,
    expected: str = "",
) -> Path:
    """Return the path of the verified sdist `package==version`, downloading it when not cached.

    The cache holds one folder per sha256. A cached file is re-hashed on every use; a mismatch is an
    error (never extracted, never silently replaced). pip runs in hash-checking mode, so a file with
    the wrong hash is refused before pip builds its metadata, and the saved file is hashed again here.
    `expected`: where the sha256 comes from, for the error lines (`recorded on first use in ...`).
    """
    cache_dir = Path(cache_dir)
    said = f" ({expected})" if expected else ""
    cached = _cached_file(cache_dir / sha256)
    if cached is not None:
        actual = sha256_file(cached)
        if actual != sha256:
            raise SeriesError(
                f"cached sdist {cached} has sha256 {actual}, expected {sha256}{said}; delete it to download again"
            )
        return cached
    return _download(package, version, sha256, cache_dir, python=python, log=log, expected=said)


def fetch_unpinned(
    package: str,
    version: str,
    cache_dir: str | Path,
    *,
    python: str | None = None,
    log: Callable[[str], None] | None = None,
) -> tuple[Path, str]:
    """Download the sdist `package==version`, whose sha256 nobody knows yet (trust on first use), into the cache
    folder of its sha256: (its path, its sha256). Record the hash (`record_sha256`) for every later use."""
    path = _download(package, version, None, Path(cache_dir), python=python, log=log)
    return path, path.parent.name


def _download(
    package: str,
    version: str,
    sha256: str | None,
    cache_dir: Path,
    *,
    python: str | None,
    log: Callable[[str], None] | None,
    expected: str = "",
) -> Path:
    """pip download of the sdist into `cache_dir/<its sha256>/`: in hash-checking mode when `sha256` is known."""
    python = python or sys.executable
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".download-", dir=cache_dir))
    try:
        req = tmp / "requirements.txt"
        pinned = f" --hash=sha256:{sha256}" if sha256 else ""
        req.write_text(f"{package}=={version}{pinned}\n", encoding="utf-8")
        out_dir = tmp / "out"
        cmd = [python, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
        cmd += ["--require-hashes"] if sha256 else []
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
            hashed = f", expected {sha256}{expected}" if sha256 else ""
            raise SeriesError(_pip_failure(package, version, stdout + "\n" + stderr, hashed))
        files = sorted(out_dir.iterdir()) if out_dir.is_dir() else []
        if len(files) != 1:
            raise SeriesError(f"pip downloaded {len(files)} files for {package}=={version}, expected one sdist")
        actual = sha256_file(files[0])
        if sha256 and actual != sha256:
            raise SeriesError(
                f"sha256 mismatch for {files[0].name}: got {actual}, expected {sha256}{expected}; "
                "nothing was extracted"
            )
        slot = cache_dir / actual
        cached = _cached_file(slot)
        if cached is not None and sha256_file(cached) == actual:
            return cached  # content-addressed: the same bytes are there already
        if cached is not None:
            raise SeriesError(f"cached sdist {cached} does not have sha256 {actual}; delete it to download again")
        slot.mkdir(exist_ok=True)
        final = slot / files[0].name
        files[0].rename(final)
        return final
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


RECORDED = "recorded.json"


def recorded_path(cache_dir: str | Path) -> Path:
    """The sha256 of the sdists downloaded on first use, kept beside them: {"<package>==<version>": sha256}."""
    return Path(cache_dir) / RECORDED


def _key(package: str, version: str) -> str:
    return f"{re.sub(r'[-_.]+', '-', package).lower()}=={version}"


def _read_recorded(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise SeriesError(f"cannot read the recorded sdist hashes {path}: {exc}; repair or delete it") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise SeriesError(f'the recorded sdist hashes {path} are not a table of "package==version": "sha256"')
    return data


def recorded_sha256(cache_dir: str | Path, package: str, version: str) -> str | None:
    """The sha256 recorded on the first use of the sdist `package==version`, or None."""
    return _read_recorded(recorded_path(cache_dir)).get(_key(package, version))


def record_sha256(cache_dir: str | Path, package: str, version: str, sha256: str) -> Path:
    """Keep the sha256 of the sdist `package==version` downloaded on first use (a recorded one is never replaced:
    another one is an error). Returns the file."""
    path = recorded_path(cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)  # two runs sharing the cache ($SERIES_DOWNLOADS) do not lose an entry
        data = _read_recorded(path)
        key = _key(package, version)
        if data.get(key, sha256) != sha256:
            raise SeriesError(
                f"the {key} sdist downloaded now has sha256 {sha256}, but {data[key]} is recorded in {path}; "
                "nothing was extracted"
            )
        data[key] = sha256
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    finally:
        os.close(folder)
    return path
