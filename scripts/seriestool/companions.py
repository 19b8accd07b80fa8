"""The environment a target's verdict is judged in: the companion packages its users get (`verify_with`, e.g. the
accelerate a transformers release comes out with), released and with the companions' own patches, and what the
interpreter really imports from them.

Which version: `--with NAME==VERSION`, else the one the manifest pairs with the base's release
(`[targets.<t>.companions]`), else the companion's pin (a base of another version: upstream main, a fork). Each goes
on PYTHONPATH as the extracted sdist of that version (its `src/<name>.egg-info` makes `importlib.metadata` report
that version too), so one venv judges any companion version, and a run's outcome cache keys on the tree it used.
"""

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import base as base_mod
from . import preimages
from .am import am_series
from .context import Context
from .errors import SeriesError
from .git import Repo
from .manifest import VERSION, Manifest, Target


@dataclass(frozen=True)
class Companion:
    """One companion package a target is judged with."""

    target: Target  # the companion target, with `version` and `sha256` of the release judged
    why: str  # where the version comes from, for the first line and the report

    @property
    def version(self) -> str:
        return self.target.version


@dataclass
class CompanionTrees:
    """The source trees of one companion: as released, and with its patches (None when they do not go in)."""

    companion: Companion
    released: Path  # the folder put on PYTHONPATH (<tree>/<source_dir>)
    released_commit: str
    patched: Path | None = None
    patched_commit: str | None = None
    blocked: str | None = None  # why the companion's patches do not go in on this release

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.companion.target.name,
            "version": self.companion.version,
            "sha256": self.companion.target.sha256,
            "why": self.companion.why,
            "released": self.released_commit,
            "patched": self.patched_commit,
            "blocked": self.blocked,
        }


def parse_with(texts: Sequence[str] | None, manifest: Manifest, targets: Iterable[Target]) -> dict[str, str]:
    """`--with NAME==VERSION` (repeatable) -> {companion target name: version}; bad input is one error line."""
    chosen: dict[str, str] = {}
    allowed = {name for target in targets for name in target.verify_with}
    for text in texts or ():
        name, sep, version = text.partition("==")
        name, version = name.strip(), version.strip()
        if not sep or not name or not version:
            raise SeriesError(f"bad --with {text!r}: use NAME==VERSION, e.g. accelerate==1.15.0")
        if name not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            raise SeriesError(f"--with {text}: {name} is not a companion of the targets verified ({known})")
        if not VERSION.match(version):
            raise SeriesError(f"--with {text}: {version!r} is not a release version")
        if name in chosen and chosen[name] != version:
            raise SeriesError(f"--with names {name} twice ({chosen[name]} and {version})")
        chosen[name] = version
    return chosen


def unlisted_hashes(
    chosen: dict[str, str], manifest: Manifest, downloads: Path, log: Callable[[str], None]
) -> dict[tuple[str, str], str]:
    """The sdist sha256 of each `--with` release the manifest does not list, as for `--base sdist:VERSION`: recorded
    on its first use (trust on first use, said in one line), checked on every later one. Called before anything is
    made: a version the package index does not have is one error line."""
    found = {}
    for name, version in chosen.items():
        other = manifest.target(name)
        if version != other.version and version not in other.releases:
            spec = base_mod.resolve(base_mod.BaseSpec("sdist", version=version), other, downloads, log)
            found[(name, version)] = spec.sha256
    return found


def choose(
    manifest: Manifest,
    target: Target,
    base_version: str | None,
    chosen: dict[str, str],
    *,
    sha256_for: Callable[[Target, str], str] | None = None,
) -> list[Companion]:
    """The companions `target` is judged with on a base of `base_version` (see the module's docstring).
    `sha256_for(companion target, version)` gives the sdist hash of a version the manifest does not know; without
    it such a version is an error."""
    found = []
    for name in target.verify_with:
        other = manifest.target(name)
        if name in chosen:
            version, why = chosen[name], "--with"
        elif base_version is not None and name in target.companions.get(base_version, {}):
            version = target.companions[base_version][name]
            why = f"paired with {target.package} {base_version} in the manifest"
        else:
            version = other.version
            why = "the pin"
            if base_version != target.version:
                why += f": {target.package} {base_version or 'of no declared version'} has no pair in the manifest"
        if version == other.version:
            digest = other.sha256
        elif version in other.releases:
            digest = other.releases[version]
        elif sha256_for is not None:
            digest = sha256_for(other, version)
        else:
            raise SeriesError(
                f"{other.package} {version}: its sdist's sha256 is not in the manifest; add it to "
                f"[targets.{other.name}.releases]"
            )
        found.append(Companion(replace(other, version=version, sha256=digest), why))
    return found


def prepare(ctx: Context, companion: Companion, pinned: Target) -> CompanionTrees:
    """The released and the patched trees of `companion` under <work>/companions/<name>-<version>/ (made anew each
    run: an sdist of a few MB; the same bytes give the same commits, so the outcome cache still hits).
    `pinned`: the companion target as the manifest pins it (the blobs its patches were made against)."""
    other = companion.target
    folder = ctx.work / "companions" / f"{other.name}-{other.version}"
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{other.name}-{other.version}.", dir=folder.parent))
    try:
        released = base_mod.create(other, base_mod.SDIST, staging / "released", downloads=ctx.downloads, log=ctx.log)
        shutil.copytree(staging / "released", staging / "patched", symlinks=True)
        repo = Repo(staging / "patched", isolated=True)
        blocked = None
        if other.version != pinned.version:
            problem = preimages.load_preimages(repo, pinned, ctx.downloads, ctx.log)
            if problem:
                ctx.log(f"{other.package} {other.version}: {problem}")
        failed, paths = am_series(repo, pinned, pinned.patches)
        if failed is not None:
            blocked = f"{failed[:4]} does not apply to {other.package} {other.version} ({', '.join(paths or [])})"
        patched = None if blocked else repo.out("rev-parse", "HEAD")
        if folder.exists():
            shutil.rmtree(folder)
        os.rename(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return CompanionTrees(
        companion,
        released=folder / "released" / other.source_dir,
        released_commit=released,
        patched=None if blocked else folder / "patched" / other.source_dir,
        patched_commit=patched,
        blocked=blocked,
    )


_PROBE = r"""
import importlib, importlib.metadata, json, sys
out = {}
for name in sys.argv[1:]:
    module = importlib.import_module(name)
    try:
        metadata = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        metadata = None
    out[name] = {"version": getattr(module, "__version__", None), "file": module.__file__, "metadata": metadata}
print(json.dumps(out))
"""


def imported(python: Path, paths: Sequence[Path], names: Sequence[str]) -> dict[str, dict[str, str | None]]:
    """What `python` imports for each module of `names` with `paths` first on PYTHONPATH: its `__version__`, file and
    the version `importlib.metadata` reports (what `is_accelerate_available(...)` reads)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, paths)), CUDA_VISIBLE_DEVICES="")
    env.pop("PYTHONSTARTUP", None)
    try:
        proc = subprocess.run(
            [str(python), "-c", _PROBE, *names],
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=600,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SeriesError(f"cannot ask {python} what it imports: {exc}") from None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        detail = proc.stderr.strip().splitlines()
        raise SeriesError(f"{python} cannot import {', '.join(names)}: {detail[-1] if detail else 'no output'}")
    data: dict[str, dict[str, str | None]] = json.loads(lines[-1])
    return data


def check_imported(python: Path, trees: Sequence[CompanionTrees]) -> None:
    """Bad environment (one error line) unless `python` imports each companion from its released tree at the
    version judged, in code (`__version__`) and in its metadata: a verdict must name the world it ran in."""
    if not trees:
        return
    names = [base_mod.import_name(tree.companion.target) for tree in trees]
    found = imported(python, [tree.released for tree in trees], names)
    for tree, name in zip(trees, names, strict=True):
        got = found.get(name, {})
        version = tree.companion.version
        where = str(got.get("file") or "")
        # a package that declares no __version__ or ships no metadata (a test's) is judged by where it comes from
        said = [got.get("version"), got.get("metadata")]
        if any(found_version not in (None, version) for found_version in said) or not where.startswith(
            str(tree.released)
        ):
            raise SeriesError(
                f"{python} does not import {name} {version} from {tree.released}: it imports "
                f"{got.get('version')} (metadata {got.get('metadata')}) from {where or 'nowhere'}"
            )


def describe(trees: Sequence[CompanionTrees]) -> str:
    """`accelerate 1.16.0 (released and patched; paired with transformers 5.25.0 in the manifest)`."""
    parts = []
    for tree in trees:
        how = "released and patched" if tree.patched else f"released; patched: blocked, {tree.blocked}"
        parts.append(f"{tree.companion.target.package} {tree.companion.version} ({how}; {tree.companion.why})")
    return ", ".join(parts)


def versions_line(info: dict[str, Any]) -> str:
    """`torch 2.13.0+cpu, Python 3.11.7` from pyenv.describe's answer."""
    torch = info.get("torch") or "none"
    return f"torch {torch}, Python {info.get('python')}"
