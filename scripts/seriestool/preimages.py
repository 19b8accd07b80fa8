"""The blobs a 3-way merge needs: the files the series touches, as in the pinned sdist and after each patch.

A base fetched from a git URL or another clone (shallow) lacks the blobs the patches were made against, which
`git am --3way` needs to merge a patch into a file that has moved on. They are kept in the repository under
`refs/series/preimages`.
"""

import re
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from . import fetch, patchfile
from .digests import sha256_of
from .errors import SeriesError
from .git import Repo
from .manifest import Target


PREIMAGES_REF = "refs/series/preimages"


def preimages_key(target: Target) -> str:
    """What the stored blobs are made from: the pinned sdist and the bytes of every patch."""
    return sha256_of(target.sha256, *(Path(path) for path in target.patch_paths()))[:16]


def _cached_sdists(downloads: str | Path, target: Target) -> list[Path]:
    """Other sdists of the target's package in the download cache (earlier pins), newest file first."""
    prefix = re.sub(r"[-_.]+", "-", target.package).lower() + "-"
    found = []
    for slot in Path(downloads).glob("*/"):
        if slot.name == target.sha256:
            continue
        for path in slot.iterdir():
            if path.is_file() and re.sub(r"[-_.]+", "-", path.name).lower().startswith(prefix):
                found.append(path)
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def _stack(repo: Repo, sdist: Path, target: Target, wanted: set[str], tmp: Path) -> tuple[str | None, int]:
    """Commits holding `wanted` files of `sdist`, then the tree after each patch while they apply: (last commit
    or None, how many patches applied)."""
    entries = []
    with tarfile.open(sdist, "r:*") as tar:
        for number, member in enumerate(tar):
            name = member.name.split("/", 1)[1] if "/" in member.name else ""
            if name not in wanted or not member.isreg():
                continue
            blob = tmp / f"{number}.blob"
            src = tar.extractfile(member)
            assert src is not None  # a regular file
            with src, open(blob, "wb") as dst:
                shutil.copyfileobj(src, dst)
            mode = "100755" if member.mode & 0o111 else "100644"
            entries.append((mode, blob, name))
    index = tmp / "index"
    index.unlink(missing_ok=True)
    env = {"GIT_INDEX_FILE": str(index)}
    if entries:
        ids = repo.out("hash-object", "-w", "--no-filters", "--", *[str(e[1]) for e in entries]).split()
        info = "".join(f"{mode} {blob} 0\t{name}\n" for (mode, _, name), blob in zip(entries, ids, strict=True))
        repo.run("update-index", "--add", "--index-info", input=info, env=env)
    commit, applied = None, 0
    for path in target.patch_paths():
        if not repo.ok("apply", "--cached", str(Path(path).resolve()), env=env):
            break
        tree = repo.out("write-tree", env=env)
        parents: list[str] = ["-p", commit] if commit else []
        commit = repo.out("commit-tree", tree, *parents, "-m", f"preimages: {Path(path).name}")
        applied += 1
    for blob in tmp.glob("*.blob"):
        blob.unlink()
    return commit, applied


def load_preimages(repo: Repo, target: Target, downloads: str | Path, log: Callable[[str], None]) -> str | None:
    """Store, in `repo`, the blobs of the files the series touches: as in the sdist the series was made on and
    after each patch.

    A base fetched from a git URL or another clone (shallow), or a new release the pin moved to, lacks the
    blobs the patches were made against, which `git am --3way` needs to merge a patch into a file that has
    moved on. They are taken from the pinned sdist (the download cache, or pip) and, when the series does not
    apply to it (the pin moved), from the other sdists of the package in the download cache (earlier pins).
    Kept under `refs/series/preimages`. Returns None, or why they could not be loaded.
    """
    key = preimages_key(target)
    if repo.config("series.preimages") == key and repo.rev(PREIMAGES_REF):
        return None
    try:
        pinned = fetch.fetch_sdist(target.package, target.version, target.sha256, downloads, log=log)
    except SeriesError as exc:
        pinned = None
        missing = f"the pinned sdist is not available ({exc})"
    wanted = set()
    for path in target.patch_paths():
        wanted.update(patchfile.read(path).paths())
    tmp = Path(tempfile.mkdtemp(prefix=".preimages-", dir=repo.git_dir()))
    best: tuple[str | None, int, Path | None] = (None, 0, None)
    try:
        for sdist in ([pinned] if pinned else []) + _cached_sdists(downloads, target):
            try:
                commit, applied = _stack(repo, sdist, target, wanted, tmp)
            except (OSError, tarfile.TarError) as exc:
                log(f"cannot read {sdist.name} for 3-way merges ({exc})")
                continue
            if applied > best[1]:
                best = (commit, applied, sdist)
            if applied == len(target.patches):
                break
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    commit, applied, chosen = best
    if commit is None:
        if pinned is None:
            return f"no 3-way merges: {missing}"
        return "no 3-way merges: the series does not apply to the pinned sdist, nor to another one in the cache"
    if chosen is not None and chosen != pinned:
        log(f"3-way merges use the blobs of {chosen.name} (the series does not apply to the pinned sdist)")
    repo.run("update-ref", PREIMAGES_REF, commit)
    repo.run("config", "series.preimages", key)
    return None


def loader(
    repo: Repo,
    target: Target,
    downloads: str | Path,
    log: Callable[[str], None],
    report: Callable[[str], None] | None = None,
) -> Callable[[], None]:
    """A function that runs `load_preimages` on its first call only (a 3-way merge needs the blobs, most runs never
    do), passing a problem to `report` (default: `log`)."""
    tried: list[bool] = []

    def load() -> None:
        if not tried:
            tried.append(True)
            problem = load_preimages(repo, target, downloads, log)
            if problem:
                (report or log)(problem)

    return load
