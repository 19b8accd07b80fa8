"""Make a git repository holding a target's base: the pinned sdist, the sdist of another release, a local clone's
HEAD or a git ref."""

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import archive, fetch
from .errors import SeriesError
from .git import GitError, Repo
from .manifest import VERSION, Target


BASE_TAG = "series/base"
BRANCH = "patches"
EXCLUDES = "__pycache__/\n*.pyc\n.pytest_cache/\n"
# Fixed identity and date: the same sdist always gives the same base commit id.
BASE_DATE = "2000-01-01T00:00:00+0000"


@dataclass(frozen=True)
class BaseSpec:
    """Where a tree comes from: `--base` (a base to put the series on) and `--upstream-tests` (upstream's tests)."""

    kind: str  # "sdist", "path" or "git"
    location: str = ""
    ref: str = ""
    version: str = ""  # "sdist": a release other than the pinned one ("" for the pin)
    sha256: str = ""  # "sdist" of another release: the hash of its sdist once known (see `resolve`)

    @property
    def moved(self) -> bool:
        """Whether the base is not the pinned sdist (a clone's HEAD, a git ref, another release's sdist): the
        patches are placed one by one there, with 3-way merges from the pinned sdist's blobs, and judged by their
        base statuses."""
        return self.kind != "sdist" or bool(self.version)

    def sdist(self, target: Target) -> tuple[str, str]:
        """(version, sha256) of the sdist of an "sdist" base: the pin's, or the other release's."""
        return (self.version, self.sha256) if self.version else (target.version, target.sha256)

    def describe(self, target: Target) -> str:
        if self.kind == "sdist":
            version, sha256 = self.sdist(target)
            return f"{target.package} {version} sdist" + (f" (sha256 {sha256[:12]}...)" if sha256 else "")
        if self.kind == "path":
            return f"HEAD of {self.location}"
        return f"{self.location}@{self.ref}"

    def key(self, target: Target) -> str:
        """What identifies the base for a reused scratch repository: the sdist's name and hash, or the spec."""
        if self.kind == "sdist":
            version, sha256 = self.sdist(target)
            return f"sdist:{target.package}=={version}:{sha256}"
        return f"{self.kind}:{self.location}@{self.ref}"

    def report_fields(self, target: Target) -> dict[str, Any]:
        """What the JSON report adds to its base entry: the version and sha256 of an sdist base (what was judged)."""
        if self.kind != "sdist":
            return {}
        version, sha256 = self.sdist(target)
        return {"version": version, "sha256": sha256}


SDIST = BaseSpec("sdist")
# What each option accepts, in its one error line.
USAGE = {
    "--base": "bad base {spec!r}: use sdist, sdist:VERSION, path:DIR or git:URL@REF",
    "--upstream-tests": "bad --upstream-tests {spec!r}: use path:DIR (a tree with tests/) or git:URL@REF",
}


def parse_spec(spec: str | None, target: Target, *, option: str = "--base") -> BaseSpec:
    """The one syntax of `--base` and `--upstream-tests` (docs/user.md, "Specs"): `sdist` (only `--base`; also
    None or ""), `sdist:VERSION` (only `--base`; the pinned version is `sdist`), `path:DIR` (made absolute) or
    `git:URL[@REF]` (REF defaults to HEAD, the remote's default branch; `{version}` in REF is `target`'s pinned
    version). The sha256 of another release's sdist is the manifest's (`[targets.<name>.releases]`) or, for one it
    does not list, found by `resolve`."""
    if option == "--base" and spec in (None, "", "sdist"):
        return SDIST
    kind, _, rest = (spec or "").partition(":")
    if kind == "sdist" and option == "--base" and rest:
        if not VERSION.match(rest):
            raise SeriesError(
                f"bad base {spec!r}: {rest!r} is not a release version of {target.package} "
                f"(sdist:VERSION, e.g. sdist:{target.version})"
            )
        if rest == target.version:
            return SDIST
        return BaseSpec("sdist", version=rest, sha256=target.releases.get(rest, ""))
    if kind == "path" and rest:
        return BaseSpec("path", str(Path(rest).expanduser().resolve()))
    if kind == "git":
        url, ref = _split_ref(rest)
        if url and ref:
            return BaseSpec("git", url, ref.replace("{version}", target.version))
    raise SeriesError(USAGE[option].format(spec=spec))


def resolve(spec: BaseSpec, target: Target, downloads: Path, log: Callable[[str], None]) -> BaseSpec:
    """`spec` with the sha256 of its sdist known. For the sdist of a release the manifest does not list: the one
    recorded on its first use (`<downloads>/recorded.json`), or else it is downloaded now without a known hash
    (trust on first use), and its sha256 said in one line and recorded; every later use is checked against it.
    Any other spec is returned as it is. Nothing is recorded or left in the cache when the download fails."""
    if spec.kind != "sdist" or not spec.version or spec.sha256:
        return spec
    recorded = fetch.recorded_sha256(downloads, target.package, spec.version)
    if recorded:
        return replace(spec, sha256=recorded)
    _, sha256 = fetch.fetch_unpinned(target.package, spec.version, downloads, log=log)
    path = fetch.record_sha256(downloads, target.package, spec.version, sha256)
    log(f"sdist {target.package}=={spec.version}: sha256 {sha256} (not in the manifest; recorded in {path})")
    return replace(spec, sha256=sha256)


def _hash_origin(spec: BaseSpec, target: Target, downloads: Path) -> str:
    """Where the sha256 of an sdist base comes from, for its error lines."""
    if not spec.version:
        return ""
    if spec.version in target.releases:
        return f"[targets.{target.name}.releases] of the manifest"
    return f"recorded on first use in {fetch.recorded_path(downloads)}"


def _split_ref(text: str) -> tuple[str, str]:
    """(URL, REF) of `URL@REF`, (URL, "HEAD") without one. The last `@` belongs to the URL when what follows it
    holds a `:` (`git@host:org/x.git`) or when it ends the user of `scheme://user@host/...`."""
    url, at, ref = text.rpartition("@")
    if not at or ":" in ref or ("://" in url and "/" not in url.split("://", 1)[1]):
        return text, "HEAD"
    return url, ref


def _fetch_commit(repo: Repo, url: str, ref: str) -> str:
    try:
        repo.run("fetch", "--quiet", "--depth=1", "--no-tags", url, ref)
    except GitError as exc:
        raise SeriesError(f"cannot fetch {ref} from {url}: {exc}") from None
    return repo.out("rev-parse", "--verify", "FETCH_HEAD^{commit}")


def check_spec(spec: BaseSpec) -> None:
    """Error out on a base that cannot work, before anything is made or removed: a `path:` that is not a
    folder, not a git repository, a bare one, or one without commits."""
    if spec.kind == "path":
        _git_source(spec)


def _git_source(spec: BaseSpec) -> tuple[str, str]:
    if spec.kind == "path":
        src = Path(spec.location)
        if not src.exists():
            raise SeriesError(f"base path {src} does not exist")
        if not src.is_dir():
            raise SeriesError(f"base path {src} is not a folder")
        if Repo(src).is_bare():
            raise SeriesError(
                f"base path {src} is a bare git repository (no work tree): use git:{src.as_uri()}@BRANCH for it"
            )
        if not Repo(src).is_work_tree():
            raise SeriesError(f"base path {src} is not a git repository")
        top = Repo(src).toplevel()
        if Repo(top).head() is None:
            raise SeriesError(f"base path {top} has no commits")
        return top.as_uri(), "HEAD"
    return spec.location, spec.ref


def create(
    target: Target, spec: BaseSpec, dest: str | Path, *, downloads: Path, log: Callable[[str], None] = print
) -> str:
    """Create the new repository `dest` holding the base, on branch `patches`, tagged `series/base`. An sdist
    base is extracted from the download cache (pip fills it), hash-checked; the same sdist gives the same commit.

    Returns the base commit id. `dest` must not exist; nothing is left behind on failure.
    """
    dest = Path(dest)
    try:
        if spec.kind == "sdist":
            spec = resolve(spec, target, downloads, log)
            version, sha256 = spec.sdist(target)
            origin = _hash_origin(spec, target, downloads)
            sdist = fetch.fetch_sdist(target.package, version, sha256, downloads, log=log, expected=origin)
            log(f"extracting {sdist.name}")
            try:
                archive.extract_stripped(sdist, dest)
            except archive.UnsafeArchive as exc:
                raise SeriesError(f"refusing to extract {sdist.name}: {exc}") from None
            repo = Repo.init(dest)
            repo.run("checkout", "--quiet", "-b", BRANCH)
            base = repo.commit_all(f"{target.package} {version}\n\nsdist sha256 {sha256}\n", date=BASE_DATE)
            stray = repo.status()
            if stray:
                raise SeriesError(f"the extracted sdist does not round-trip through git: {stray[0]}")
        else:
            url, ref = _git_source(spec)
            repo = Repo.init(dest)
            log(f"fetching {ref} from {url}")
            base = _fetch_commit(repo, url, ref)
            repo.run("checkout", "--quiet", "-b", BRANCH, base)
        repo.run("tag", "-f", BASE_TAG, base)
        set_excludes(repo)
        repo.run("config", "series.target", target.name)
        return base
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise


def set_excludes(repo: Repo) -> None:
    exclude = repo.git_dir() / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    exclude.write_text(EXCLUDES, encoding="utf-8")


def fetch_into(repo: Repo, spec: BaseSpec) -> str:
    """For a reused scratch repository: fetch a git base again and return its commit id."""
    url, ref = _git_source(spec)
    return _fetch_commit(repo, url, ref)


_VERSION = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']""", re.MULTILINE)
_PKG_INFO_VERSION = re.compile(r"^Version:\s*(\S+)\s*$", re.MULTILINE)


def import_name(target: Target) -> str:
    """The top-level module of the target's package (`transformers`, `accelerate`)."""
    return re.sub(r"[-.]+", "_", target.package).lower()


def version_of(repo: Repo, commit: str, target: Target) -> str | None:
    """The package version the base `commit` declares: `__version__` of `<source_dir>/<package>/__init__.py`, else
    the `Version:` of its PKG-INFO (an sdist). None when it says none."""
    init = repo.run("show", f"{commit}:{target.source_dir}/{import_name(target)}/__init__.py", check=False)
    match = _VERSION.search(init.stdout) if init.returncode == 0 else None
    if match is None:
        info = repo.run("show", f"{commit}:PKG-INFO", check=False)
        match = _PKG_INFO_VERSION.search(info.stdout) if info.returncode == 0 else None
    return match.group(1) if match else None


def _version_key(version: str) -> tuple[tuple[int, ...], int] | None:
    """(release numbers, 0 for a pre-release or dev version else 1): `5.25.0.dev0` sorts after `5.24.0`, before
    `5.25.0`."""
    match = re.match(r"v?(\d+(?:\.\d+)*)(.*)$", version.strip())
    if match is None:
        return None
    numbers = [int(part) for part in match.group(1).split(".")]
    numbers += [0] * (3 - len(numbers))
    rest = match.group(2).lower()
    pre = bool(re.match(r"[.\-_]?(dev|a|alpha|b|beta|rc|pre|c)\d*", rest))
    return tuple(numbers), 0 if pre else 1


def older_than(version: str | None, pinned: str) -> bool:
    """Whether a base declaring `version` is older than the pinned release (an upstream `main` that has not
    reached the pin yet): the series was made on newer code, its statuses there say little."""
    if not version:
        return False
    mine, pin = _version_key(version), _version_key(pinned)
    return mine is not None and pin is not None and mine < pin
