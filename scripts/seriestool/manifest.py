"""The series manifest (`patches/series.toml`): pinned targets and their ordered patch lists."""

import difflib
import re
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import SeriesError


PATCH_NAME = re.compile(r"^[0-9]{4}-[A-Za-z0-9._+-]+\.patch$")
# Every key the manifest knows, in one place: any other key is a typo (`soruce_dir`) and bad input.
TOP_KEYS = ("schema", "targets")
# key of a [targets.<name>] table -> whether it is required
TARGET_KEYS = {
    "package": True,
    "version": True,
    "sha256": True,
    "git_url": True,
    "tests": True,
    "patches": True,
    "source_dir": False,
    "verify_with": False,
    "reviewers": False,
    "depends": False,
    "upstream_tests": False,
    "upstream_tests_changed": False,
    "downstream": False,
    "issues": False,
    "test_homes": False,
    "shared_helpers": False,
    "saved_state": False,
    "releases": False,
    "companions": False,
    "backports": False,
    "fork": False,
    "cuts": False,
    "repo_checks": False,
}
REQUIRED = tuple(key for key, required in TARGET_KEYS.items() if required)
# What a `downstream` scenario's outcome holds, in the order differences are reported. A declaration without
# `fields` covers all but the last two: a new error or gradients left non-finite are declared only by name.
DOWNSTREAM_FIELDS = (
    "global_step",
    "updates",
    "scheduler_steps",
    "events",
    "weights",
    "log_history",
    "error",
    "nonfinite_grads",
)
DOWNSTREAM_DEFAULT_FIELDS = DOWNSTREAM_FIELDS[:-2]
# A patch's tier: `upstream` (a pull request we submit; every patch not in [targets.<name>.fork]) or `fork` (carried
# for forks, proposed upstream as an issue first).
UPSTREAM_TIER = "upstream"
FORK_TIER = "fork"


@dataclass
class Target:
    """One package the series patches."""

    name: str
    package: str
    version: str
    sha256: str
    git_url: str
    tests: str  # path prefix of the regression tests a patch adds
    source_dir: str  # put on PYTHONPATH for the tests
    patches: list[str] = field(default_factory=list)  # file names, in order
    patch_dir: Path = field(default_factory=Path)  # patches/<name>/
    # targets whose patched sources this target's tests also run against (e.g. a companion accelerate patch)
    verify_with: list[str] = field(default_factory=list)
    reviewers: list[str] = field(default_factory=list)  # GitHub handles for the "Who can review?" line of `pr`
    # patch -> the earlier patches of the series it needs to apply or to work ([targets.<name>.depends])
    depends: dict[str, list[str]] = field(default_factory=dict)
    # upstream's own test files `verify --upstream-tests` runs on the base and with the whole series
    upstream_tests: list[str] = field(default_factory=list)
    # patch -> the upstream tests it intends to make fail, whose pull request updates them
    # ([targets.<name>.upstream_tests_changed]): a list of {"test": pytest node id, "reason": one line, and
    # optionally "diff": the path (below the manifest's folder) of the change to upstream's test file it needs}
    upstream_tests_changed: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    # patch -> the upstream issue its pull request answers ([targets.<name>.issues]): {"issue": "#N" or
    # "owner/name#N"} and/or {"text": path below the manifest's folder of the issue to open first}
    issues: dict[str, dict[str, str]] = field(default_factory=dict)
    # a new test file (`tests/x.py`) or one of its classes (`tests/x.py::Class`) -> the upstream test file it
    # belongs in ([targets.<name>.test_homes])
    test_homes: dict[str, str] = field(default_factory=dict)
    # upstream's module of shared test helpers (`tests/trainer/trainer_test_utils.py`) and, per new test file, its
    # local helpers that one of them replaces when `homes` moves it ([targets.<name>.shared_helpers]): local -> shared
    shared_helpers_module: str = ""
    shared_helpers: dict[str, dict[str, str]] = field(default_factory=dict)
    # the class a checkpoint saves, for `pr` ([targets.<name>.saved_state]): file, class and the release's facts
    saved_state: dict[str, str] = field(default_factory=dict)
    # patch -> the differences it intends in `downstream` scenarios ([targets.<name>.downstream]): a list of
    # {"scenarios": [glob patterns], "reason": one line, "fields": [outcome fields it may change]}
    downstream: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # other releases of the package whose sdist hash the manifest knows ([targets.<name>.releases]): version -> sha256
    releases: dict[str, str] = field(default_factory=dict)
    # a release of this package -> the version of each companion (`verify_with`) its users get
    # ([targets.<name>.companions]); a base of a version not listed gets the companions' pinned versions
    companions: dict[str, dict[str, str]] = field(default_factory=dict)
    # a release older than the pin -> {patch: why it does not go in there as it is} ([targets.<name>.backports])
    backports: dict[str, dict[str, str]] = field(default_factory=dict)
    # patch -> why it is carried for forks and not submitted as a pull request ([targets.<name>.fork]): the fork tier
    fork: dict[str, str] = field(default_factory=dict)
    # upstream-tier patch -> its pull request's cut ([targets.<name>.cuts]): {"needs": [the earlier patches whose code
    # it needs to work], "reason": why the series patch needs more (one line)}; the cut itself is the file
    # `cut_path(name)`: the same change made on the bare release and those patches only, the overlap resolved
    cuts: dict[str, dict[str, Any]] = field(default_factory=dict)
    # patch -> the lines that run its repository checks where upstream runs them ([targets.<name>.repo_checks]): a list
    # of {"make_target": a target of upstream's root Makefile (`check-repo`), "command": the command its recipe runs
    # (`python utils/check_x.py`)}; `branches` adds each to the pull request's commit (the sdist has no Makefile)
    repo_checks: dict[str, list[dict[str, str]]] = field(default_factory=dict)

    def tier(self, name: str) -> str:
        """`fork` for a patch of [targets.<name>.fork], else `upstream`."""
        return FORK_TIER if name in self.fork else UPSTREAM_TIER

    def upstream_tier(self) -> list[str]:
        """The upstream-tier patches, in series order."""
        return [name for name in self.patches if name not in self.fork]

    def patch_path(self, name: str) -> Path:
        return self.patch_dir / name

    def patch_paths(self) -> list[Path]:
        return [self.patch_path(name) for name in self.patches]

    def cut_path(self, name: str) -> Path:
        """The file of `name`'s cut (`patches/<target>/cuts/<name>`), declared in [targets.<name>.cuts]."""
        return self.patch_dir / "cuts" / name

    def pr_needs(self, name: str) -> list[str]:
        """The earlier patches the pull request of `name` holds under it, with theirs, in series order: its cut's
        `needs` when it has a cut, else what it depends on in the series."""
        if name not in self.cuts:
            return self.depends_on(name)
        needed = set(self.cuts[name]["needs"])
        for need in self.cuts[name]["needs"]:
            needed.update(self.depends_on(need))
        return [patch for patch in self.patches if patch in needed]

    def depends_on(self, name: str) -> list[str]:
        """The earlier patches `name` needs (recorded in the manifest), with theirs, in series order."""
        needed: set[str] = set()
        todo = list(self.depends.get(name, []))
        while todo:
            dep = todo.pop()
            if dep not in needed:
                needed.add(dep)
                todo += self.depends.get(dep, [])
        return [patch for patch in self.patches if patch in needed]


@dataclass
class Manifest:
    path: Path
    targets: dict[str, Target]  # name -> Target, in file order

    def target(self, name: str) -> Target:
        if name not in self.targets:
            known = ", ".join(self.targets) or "none"
            raise SeriesError(f"unknown target {name!r} (targets in {self.path.name}: {known})")
        return self.targets[name]

    def select(self, name: str | None = None) -> list[Target]:
        """All targets, or the one named."""
        return list(self.targets.values()) if name is None else [self.target(name)]

    def default_target(self, name: str | None = None) -> Target:
        if name is not None:
            return self.target(name)
        if not self.targets:
            raise SeriesError(f"{self.path} declares no targets")
        return next(iter(self.targets.values()))


def load(path: str | Path) -> Manifest:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SeriesError(f"manifest {path} does not exist") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SeriesError(f"manifest {path} is not valid TOML: {exc}") from None
    _known_keys(path, "the top level", data, TOP_KEYS)
    tables = data.get("targets")
    if not isinstance(tables, dict) or not tables:
        raise SeriesError(f"manifest {path} has no [targets.<name>] tables")
    targets = {}
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise SeriesError(f"manifest {path}: targets.{name} must be a table ([targets.{name}])")
        _known_keys(path, f"[targets.{name}]", table, TARGET_KEYS)
        missing = [key for key in REQUIRED if key not in table]
        if missing:
            raise SeriesError(f"manifest {path}: [targets.{name}] lacks {', '.join(missing)}")
        if not re.fullmatch(r"[0-9a-f]{64}", str(table["sha256"])):
            raise SeriesError(f"manifest {path}: [targets.{name}] sha256 is not 64 lowercase hex digits")
        tests = str(table["tests"])
        if tests.startswith("/") or ".." in tests.split("/"):
            raise SeriesError(f"manifest {path}: [targets.{name}] tests must be a relative path prefix")
        patches = table["patches"]
        if not isinstance(patches, list) or not all(isinstance(p, str) for p in patches):
            raise SeriesError(f"manifest {path}: [targets.{name}] patches must be a list of file names")
        for patch in patches:
            if not PATCH_NAME.match(patch):
                raise SeriesError(f"manifest {path}: [targets.{name}] bad patch file name {patch!r}")
        if len(set(patches)) != len(patches):
            raise SeriesError(f"manifest {path}: [targets.{name}] lists a patch twice")
        verify_with = table.get("verify_with", [])
        if not isinstance(verify_with, list) or not all(w in tables and w != name for w in verify_with):
            raise SeriesError(f"manifest {path}: [targets.{name}] verify_with must list other targets")
        reviewers = table.get("reviewers", [])
        if not isinstance(reviewers, list) or not all(isinstance(r, str) and r.startswith("@") for r in reviewers):
            raise SeriesError(f"manifest {path}: [targets.{name}] reviewers must be a list of @handles")
        depends = _depends(path, name, table.get("depends", {}), patches)
        upstream_tests = table.get("upstream_tests", [])
        if not isinstance(upstream_tests, list) or not all(_relative_py(t) for t in upstream_tests):
            raise SeriesError(
                f"manifest {path}: [targets.{name}] upstream_tests must list relative .py files (tests/...)"
            )
        issues = _issues(path, name, table.get("issues", {}), patches)
        targets[name] = Target(
            name=name,
            package=str(table["package"]),
            version=str(table["version"]),
            sha256=str(table["sha256"]),
            git_url=str(table["git_url"]),
            tests=tests,
            source_dir=str(table.get("source_dir", "src")),
            patches=list(patches),
            patch_dir=path.parent / name,
            verify_with=list(verify_with),
            reviewers=list(reviewers),
            depends=depends,
            upstream_tests=list(upstream_tests),
            upstream_tests_changed=_upstream_tests_changed(
                path, name, table.get("upstream_tests_changed", {}), patches, upstream_tests
            ),
            downstream=_downstream(path, name, table.get("downstream", {}), patches),
            issues=issues,
            test_homes=_test_homes(path, name, table.get("test_homes", {}), tests),
            **_shared_helpers(path, name, table.get("shared_helpers", {}), tests),
            saved_state=_saved_state(path, name, table.get("saved_state", {})),
            releases=_releases(path, name, table.get("releases", {}), str(table["version"])),
            companions=_companions(path, name, table.get("companions", {}), list(verify_with)),
            backports=_backports(path, name, table.get("backports", {}), patches),
            fork=_fork(path, name, table.get("fork", {}), patches, depends, issues),
            repo_checks=_repo_checks(path, name, table.get("repo_checks", {}), patches),
        )
        targets[name].cuts = _cuts(path, targets[name], table.get("cuts", {}))
    for target in targets.values():
        for version, pins in target.companions.items():
            for other, other_version in pins.items():
                known = targets[other]
                if other_version != known.version and other_version not in known.releases:
                    raise SeriesError(
                        f"manifest {path}: [targets.{target.name}.companions] {version!r} names {other} "
                        f"{other_version}, whose sha256 is neither the pin nor in [targets.{other}.releases]"
                    )
    return Manifest(path=path, targets=targets)


VERSION = re.compile(r"^[0-9]+(\.[0-9]+)*([.-]?(a|b|rc|dev|post)[0-9]*)*$")


def _releases(path: Path, name: str, table: object, pinned: str) -> dict[str, str]:
    """Validate `[targets.<name>.releases]`: version -> sha256 of its sdist, for releases other than the pin."""
    where = f"manifest {path}: [targets.{name}.releases]"
    if not isinstance(table, dict):
        raise SeriesError(f'{where} must be a table of "version" = "sha256"')
    for version, digest in table.items():
        if not VERSION.match(version) or version == pinned:
            raise SeriesError(f"{where}: {version!r} is not a release version other than the pinned {pinned}")
        if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise SeriesError(f"{where}: {version!r}: the sha256 is not 64 lowercase hex digits")
    return dict(table)


# A line a cut declares its own ([targets.<name>.cuts], `own`): "path: " then the line with its `+` or `-`, as `verify`
# names a difference between a cut and its series patch
OWN_LINE = re.compile(r"^\S[^:]*: [+-]")


def _valid_own(own: object) -> bool:
    """Whether a cut's `own` is {lines = ["path: +line", ...] (at least one), reason = one line}."""
    if not isinstance(own, dict) or sorted(own) != ["lines", "reason"]:
        return False
    lines, reason = own["lines"], own["reason"]
    if not isinstance(lines, list) or not lines or not all(isinstance(x, str) and OWN_LINE.match(x) for x in lines):
        return False
    return isinstance(reason, str) and bool(reason.strip()) and "\n" not in reason.strip()


def _cuts(path: Path, target: Target, table: object) -> dict[str, dict[str, Any]]:
    """Validate `[targets.<name>.cuts]`: upstream-tier patch -> {needs = [earlier patches it depends on], reason =
    one line, and optionally own = {lines = [the lines in which the cut differs from the series patch, as `verify`
    names them], reason = one line}} (its cut file is verify's to check: `checkout --cut` makes it from the
    declaration)."""
    where = f"manifest {path}: [targets.{target.name}.cuts]"
    if not isinstance(table, dict):
        raise SeriesError(f'{where} must be a table of "NNNN-....patch" = {{ needs = [...], reason = "..." }}')
    found: dict[str, dict[str, Any]] = {}
    for patch, entry in table.items():
        if patch not in target.patches:
            raise SeriesError(f"{where}: {patch!r} is not a patch of the list")
        if target.tier(patch) != UPSTREAM_TIER:
            raise SeriesError(f"{where}: {patch} is fork tier: only a pull request has a cut")
        if not isinstance(entry, dict) or sorted(set(entry) - {"own"}) != ["needs", "reason"]:
            raise SeriesError(f'{where}: {patch}: the entry is {{ needs = [...], reason = "...", own = {{...}} }}')
        needs, reason = entry["needs"], entry["reason"]
        own = entry.get("own", {"lines": [], "reason": ""})
        if "own" in entry and not _valid_own(own):
            raise SeriesError(
                f'{where}: {patch}: own is {{ lines = ["path: +line", "path: -line", ...], reason = "one line" }}'
            )
        depends = target.depends_on(patch)
        if not isinstance(needs, list) or not all(need in depends for need in needs):
            raise SeriesError(
                f"{where}: {patch}: needs lists only patches it depends on ([targets.{target.name}.depends])"
            )
        if not isinstance(reason, str) or not reason.strip() or "\n" in reason.strip():
            raise SeriesError(f"{where}: {patch}: the reason must be one line")
        found[patch] = {
            "needs": [p for p in target.patches if p in needs],
            "reason": reason.strip(),
            "own": {"lines": list(own["lines"]), "reason": own["reason"].strip()},
        }
    return found


# A target of a Makefile ([targets.<name>.repo_checks], `make_target`): no blank, colon, `=` or `#`
MAKE_TARGET = re.compile(r"^[^\s:=#]+$")


def _valid_repo_check(entry: object) -> bool:
    """Whether a repo_checks entry is {make_target = a make target, command = one line not starting with make's
    prefix (`-`, `@`, `+`: the line takes its neighbours')}."""
    if not isinstance(entry, dict) or sorted(entry) != ["command", "make_target"]:
        return False
    target, command = entry["make_target"], entry["command"]
    if not isinstance(target, str) or not MAKE_TARGET.match(target) or not isinstance(command, str):
        return False
    return bool(command.strip()) and "\n" not in command.strip() and not command.strip().startswith(("-", "@", "+"))


def _repo_checks(path: Path, name: str, table: object, patches: list[str]) -> dict[str, list[dict[str, str]]]:
    """Validate `[targets.<name>.repo_checks]`: patch -> [{make_target, command}], the lines that run the repository
    checks it adds where upstream runs them (a target of its root Makefile, `check-repo`, and the command of the
    recipe line, `python utils/check_x.py`, without make's `-` prefix). A malformed entry is one error that shows the
    entry's shape."""
    where = f"manifest {path}: [targets.{name}.repo_checks]"
    shape = '{ make_target = "check-repo", command = "python utils/check_x.py" }'
    if not isinstance(table, dict):
        raise SeriesError(f'{where} must be a table of "NNNN-....patch" = [{shape}, ...]')
    found: dict[str, list[dict[str, str]]] = {}
    for patch, entries in table.items():
        if patch not in patches:
            raise SeriesError(f"{where}: {patch!r} is not in the patches list")
        if not isinstance(entries, list) or not entries:
            raise SeriesError(f"{where}: {patch!r} must map to a list of {shape} tables")
        for entry in entries:
            if not _valid_repo_check(entry):
                raise SeriesError(
                    f"{where}: {patch!r}: each entry is {shape} (a make target, and one line without make's prefix), "
                    f"not {entry!r}"
                )
            target, command = entry["make_target"], entry["command"]
            check = {"make_target": target, "command": command.strip()}
            if check in found.get(patch, []):
                raise SeriesError(f"{where}: {patch!r}: {command.strip()!r} is declared twice for {target}")
            found.setdefault(patch, []).append(check)
    return found


def _backports(path: Path, name: str, table: object, patches: list[str]) -> dict[str, dict[str, str]]:
    """Validate `[targets.<name>.backports]`: version -> [{patch, reason}], the patches that need a backport to go
    in on that (older) release."""
    where = f"manifest {path}: [targets.{name}.backports]"
    if not isinstance(table, dict):
        raise SeriesError(f'{where} must be a table of "version" = [{{ patch = "...", reason = "..." }}, ...]')
    found: dict[str, dict[str, str]] = {}
    for version, entries in table.items():
        if not VERSION.match(version):
            raise SeriesError(f"{where}: {version!r} is not a release version")
        if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
            raise SeriesError(f"{where}: {version!r} must map to a list of {{ patch, reason }} tables")
        for entry in entries:
            patch, reason = entry.get("patch"), entry.get("reason")
            if sorted(entry) != ["patch", "reason"] or patch not in patches:
                raise SeriesError(f"{where}: {version!r}: each entry is {{ patch, reason }} with a patch of the list")
            if not isinstance(reason, str) or not reason.strip() or "\n" in reason.strip():
                raise SeriesError(f"{where}: {version!r}: {patch}: the reason must be one line")
            found.setdefault(version, {})[patch] = reason.strip()
    return found


def _companions(path: Path, name: str, table: object, verify_with: list[str]) -> dict[str, dict[str, str]]:
    """Validate `[targets.<name>.companions]`: version -> {companion target: its version}, for `verify_with`
    targets."""
    where = f"manifest {path}: [targets.{name}.companions]"
    if not isinstance(table, dict):
        raise SeriesError(f'{where} must be a table of "version" = {{ companion = "version" }}')
    for version, pins in table.items():
        if not VERSION.match(version):
            raise SeriesError(f"{where}: {version!r} is not a release version")
        if not isinstance(pins, dict) or not pins:
            raise SeriesError(f'{where}: {version!r} must map to a table of companion = "version"')
        for other, other_version in pins.items():
            if other not in verify_with:
                raise SeriesError(f"{where}: {version!r} names {other!r}, which is not in verify_with")
            if not isinstance(other_version, str) or not VERSION.match(other_version):
                raise SeriesError(f"{where}: {version!r}: {other} {other_version!r} is not a release version")
    return {version: dict(pins) for version, pins in table.items()}


def _known_keys(path: Path, where: str, table: dict[str, Any], known: Iterable[str]) -> None:
    """Bad input when `table` has a key the manifest does not know (a typo would otherwise be ignored)."""
    unknown = [key for key in table if key not in known]
    if unknown:
        close = difflib.get_close_matches(unknown[0], known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(known)})"
        raise SeriesError(f"manifest {path}: {where} has an unknown key {unknown[0]!r}{hint}")


def _relative_py(path: object) -> bool:
    return isinstance(path, str) and path.endswith(".py") and not path.startswith("/") and ".." not in path.split("/")


def _depends(path: Path, name: str, table: object, patches: list[str]) -> dict[str, list[str]]:
    """Validate `[targets.<name>.depends]`: patch -> earlier patches of the same target it needs."""
    where = f"manifest {path}: [targets.{name}.depends]"
    if not isinstance(table, dict):
        raise SeriesError(f"{where} must be a table of patch = [earlier patches]")
    order = {patch: index for index, patch in enumerate(patches)}
    depends = {}
    for patch, needs in table.items():
        if patch not in order:
            raise SeriesError(f"{where}: {patch!r} is not in the patches list")
        if not isinstance(needs, list) or not all(isinstance(n, str) for n in needs):
            raise SeriesError(f"{where}: {patch!r} must map to a list of patch file names")
        for need in needs:
            if need not in order:
                raise SeriesError(f"{where}: {patch!r} needs {need!r}, which is not in the patches list")
            if order[need] >= order[patch]:
                raise SeriesError(f"{where}: {patch!r} needs {need!r}, which does not come before it")
        if len(set(needs)) != len(needs):
            raise SeriesError(f"{where}: {patch!r} lists a patch twice")
        depends[patch] = list(needs)
    return depends


def _fork(
    path: Path, name: str, table: object, patches: list[str], depends: dict[str, list[str]], issues: dict[str, Any]
) -> dict[str, str]:
    """Validate `[targets.<name>.fork]`: patch -> why it is carried for forks and not submitted as a pull request
    (one line). A fork-tier patch is proposed upstream as an issue first, so it needs the text of one
    ([targets.<name>.issues]); an upstream-tier patch (any other) depends on upstream-tier patches only."""
    where = f"manifest {path}: [targets.{name}.fork]"
    if not isinstance(table, dict):
        raise SeriesError(f'{where} must be a table of patch = "why it is carried for forks, not submitted as a PR"')
    for patch, reason in table.items():
        if patch not in patches:
            raise SeriesError(f"{where}: {patch!r} is not in the patches list")
        if not isinstance(reason, str) or not reason.strip() or "\n" in reason.strip():
            raise SeriesError(f"{where}: {patch!r}: the reason must be one line of text")
        if not issues.get(patch, {}).get("text"):
            raise SeriesError(
                f"{where}: {patch!r} has no issue text in [targets.{name}.issues]: a fork-tier patch is proposed "
                'upstream as an issue first (give it { text = "issues/<topic>.md" })'
            )
    for patch, needs in depends.items():
        if patch in table:
            continue
        fork = [need for need in needs if need in table]
        if fork:
            raise SeriesError(
                f"manifest {path}: [targets.{name}.depends]: {patch!r} is upstream tier but needs {fork[0]!r}, which "
                f"is fork tier ([targets.{name}.fork]): an upstream-tier patch depends on upstream-tier patches only"
            )
    return {patch: reason.strip() for patch, reason in table.items()}


def _declarations(
    where: str, table: object, patches: list[str], keys: tuple[str, ...], shape: str
) -> Iterator[tuple[str, dict[str, Any], str]]:
    """The entries of a declaration table `patch = [{...}, ...]` (downstream, upstream_tests_changed): checks what
    both share (a table, patches of the series, lists of tables with known keys, a reason of one line) and yields
    (patch, entry, reason); `shape` is the table's example for the error message, e.g. `scenarios = [...]`."""
    if not isinstance(table, dict):
        raise SeriesError(f'{where} must be a table of patch = [{{ {shape}, reason = "..." }}, ...]')
    names = ", ".join(key for key in keys if key not in ("fields", "diff"))  # the optional keys are left out
    for patch, entries in table.items():
        if patch not in patches:
            raise SeriesError(f"{where}: {patch!r} is not in the patches list")
        if not isinstance(entries, list) or not entries:
            raise SeriesError(f"{where}: {patch!r} must map to a list of {{ {names} }} tables")
        for entry in entries:
            if not isinstance(entry, dict):
                raise SeriesError(f"{where}: {patch!r} lists {entry!r}, not a {{ {names} }} table")
            unknown = sorted(set(entry) - set(keys))
            if unknown:
                raise SeriesError(f"{where}: {patch!r}: unknown key(s) {', '.join(unknown)} ({', '.join(keys)})")
            reason = entry.get("reason")
            if not isinstance(reason, str) or not reason.strip() or "\n" in reason.strip():
                raise SeriesError(f"{where}: {patch!r}: every declaration needs a reason of one line")
            yield patch, entry, reason.strip()


def _downstream(path: Path, name: str, table: object, patches: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Validate `[targets.<name>.downstream]`: patch -> [{scenarios, reason, fields}], the downstream differences
    the patch intends. `scenarios` is a glob pattern or a list of them (`trl/sft-stream*`), `reason` one line,
    `fields` (optional) the outcome fields that may differ (default: all but error and nonfinite_grads)."""
    where = f"manifest {path}: [targets.{name}.downstream]"
    declared: dict[str, list[dict[str, Any]]] = {}
    keys = ("scenarios", "reason", "fields")
    for patch, entry, reason in _declarations(where, table, patches, keys, "scenarios = [...]"):
        scenarios = entry.get("scenarios")
        scenarios = [scenarios] if isinstance(scenarios, str) else scenarios
        if not isinstance(scenarios, list) or not scenarios or not all(isinstance(s, str) and s for s in scenarios):
            raise SeriesError(f"{where}: {patch!r}: scenarios must be a pattern or a list of patterns")
        fields = entry.get("fields", list(DOWNSTREAM_DEFAULT_FIELDS))
        if not isinstance(fields, list) or not fields or not all(f in DOWNSTREAM_FIELDS for f in fields):
            known = ", ".join(DOWNSTREAM_FIELDS)
            raise SeriesError(f"{where}: {patch!r}: fields must list outcome fields ({known})")
        declared.setdefault(patch, []).append({"scenarios": list(scenarios), "reason": reason, "fields": list(fields)})
    return declared


def _upstream_tests_changed(
    path: Path, name: str, table: object, patches: list[str], upstream_tests: list[str]
) -> dict[str, list[dict[str, str]]]:
    """Validate `[targets.<name>.upstream_tests_changed]`: patch -> [{test, reason}], the upstream tests that
    assert the behaviour the patch changes (its pull request updates them). `test` is a pytest node id in one of
    the target's `upstream_tests` files (`tests/trainer/test_trainer.py::TrainerLoggingTest::test_x`), `reason`
    one line; a test is declared once."""
    where = f"manifest {path}: [targets.{name}.upstream_tests_changed]"
    declared: dict[str, list[dict[str, str]]] = {}
    seen: dict[str, str] = {}
    keys = ("test", "reason", "diff")
    for patch, entry, reason in _declarations(where, table, patches, keys, 'test = "tests/...py::..."'):
        test = entry.get("test")
        parts = test.split("::") if isinstance(test, str) else []
        if not isinstance(test, str) or len(parts) < 2 or not all(part and part == part.strip() for part in parts):
            raise SeriesError(
                f"{where}: {patch!r}: test must be a pytest node id (tests/...py::Class::test_name), not {test!r}"
            )
        if parts[0] not in upstream_tests:
            listed = ", ".join(upstream_tests) or "none"
            raise SeriesError(
                f"{where}: {patch!r}: {test} is not in a file of [targets.{name}] upstream_tests ({listed})"
            )
        if test in seen:
            raise SeriesError(f"{where}: {patch!r}: {test} is declared twice (also by {seen[test]!r})")
        seen[test] = patch
        change = {"test": test, "reason": reason}
        if "diff" in entry:
            change["diff"] = _material(where, patch, "diff", entry["diff"], path.parent)
        declared.setdefault(patch, []).append(change)
    return declared


ISSUE_REF = re.compile(r"^(?:[\w.-]+/[\w.-]+)?#[0-9]+$")
SAVED_STATE_KEYS = {
    "file": True,
    "class": True,
    "saved_when_set": False,
    "unknown_field": False,
    "loaded_by": False,
    "kept_in": False,
    "kept_in_loads": False,
}


def _material(where: str, patch: str, key: str, value: object, folder: Path) -> str:
    """A file of submission material named in the manifest: a relative path below the manifest's folder that
    exists."""
    if not isinstance(value, str) or not value or value.startswith("/") or ".." in value.split("/"):
        raise SeriesError(f"{where}: {patch!r}: {key} must be a relative path below {folder}, not {value!r}")
    if not (folder / value).is_file():
        raise SeriesError(f"{where}: {patch!r}: {key} {value!r} does not exist in {folder}")
    return value


def _issues(path: Path, name: str, table: object, patches: list[str]) -> dict[str, dict[str, str]]:
    """Validate `[targets.<name>.issues]`: patch -> { issue = "#N" } (the upstream issue its pull request answers)
    and/or { text = "issues/x.md" } (the issue to open first, a file below the manifest's folder: title line, blank
    line, body)."""
    where = f"manifest {path}: [targets.{name}.issues]"
    if not isinstance(table, dict):
        raise SeriesError(f'{where} must be a table of patch = {{ issue = "#N" }} or {{ text = "issues/x.md" }}')
    issues: dict[str, dict[str, str]] = {}
    for patch, entry in table.items():
        if patch not in patches:
            raise SeriesError(f"{where}: {patch!r} is not in the patches list")
        if not isinstance(entry, dict) or not entry or set(entry) - {"issue", "text"}:
            raise SeriesError(f'{where}: {patch!r} must map to {{ issue = "#N" }} and/or {{ text = "issues/x.md" }}')
        out: dict[str, str] = {}
        if "issue" in entry:
            if not isinstance(entry["issue"], str) or not ISSUE_REF.match(entry["issue"]):
                raise SeriesError(f"{where}: {patch!r}: issue must be #N or owner/name#N, not {entry['issue']!r}")
            out["issue"] = entry["issue"]
        if "text" in entry:
            out["text"] = _material(where, patch, "text", entry["text"], path.parent)
        issues[patch] = out
    return issues


def _test_homes(path: Path, name: str, table: object, tests: str) -> dict[str, str]:
    """Validate `[targets.<name>.test_homes]`: a new test file below `tests` (or `file::Class`) -> the upstream test
    file it belongs in."""
    where = f"manifest {path}: [targets.{name}.test_homes]"
    if not isinstance(table, dict):
        raise SeriesError(f'{where} must be a table of "tests/new.py" = "tests/upstream_file.py"')
    for key, home in table.items():
        parts = key.split("::")
        if not _relative_py(parts[0]) or not parts[0].startswith(tests) or len(parts) > 2 or "" in parts:
            raise SeriesError(f"{where}: {key!r} must be a test file below {tests}, or file::Class")
        if not _relative_py(home):
            raise SeriesError(f"{where}: {key!r} must map to a relative .py file, not {home!r}")
    return dict(table)


def _shared_helpers(path: Path, name: str, table: object, tests: str) -> dict[str, Any]:
    """Validate `[targets.<name>.shared_helpers]`: `module` (upstream's shared test helpers, a relative .py file) and
    each new test file below `tests` -> { its local helper -> the helper of `module` that replaces it }."""
    where = f"manifest {path}: [targets.{name}.shared_helpers]"
    if not isinstance(table, dict):
        raise SeriesError(
            f'{where} must be a table: module = "tests/helpers.py", "tests/new.py" = {{ Local = "Shared" }}'
        )
    module = table.get("module", "")
    if module and not _relative_py(module):
        raise SeriesError(f"{where}: module must be a relative .py file, not {module!r}")
    helpers: dict[str, dict[str, str]] = {}
    for key, names in table.items():
        if key == "module":
            continue
        if not _relative_py(key) or not key.startswith(tests):
            raise SeriesError(f"{where}: {key!r} must be a test file below {tests}")
        if not isinstance(names, dict) or not names:
            raise SeriesError(f'{where}: {key!r} must map to a table {{ LocalHelper = "SharedHelper" }}')
        for local, shared in names.items():
            if not local.isidentifier() or not isinstance(shared, str) or not shared.isidentifier():
                raise SeriesError(f"{where}: {key!r}: {local!r} = {shared!r} must name two Python identifiers")
        helpers[key] = dict(names)
    if helpers and not module:
        raise SeriesError(f"{where} lacks module (the upstream file holding the shared helpers)")
    return {"shared_helpers_module": module, "shared_helpers": helpers}


def _saved_state(path: Path, name: str, table: object) -> dict[str, str]:
    """Validate `[targets.<name>.saved_state]`: the class a checkpoint saves (`file`, `class`) and the facts of the
    release `pr` needs to say whether it loads a patch's checkpoints (one line each)."""
    where = f"manifest {path}: [targets.{name}.saved_state]"
    if not isinstance(table, dict):
        raise SeriesError(f"{where} must be a table (file, class, ...)")
    _known_keys(path, f"[targets.{name}.saved_state]", table, SAVED_STATE_KEYS)
    if table:
        missing = [key for key, required in SAVED_STATE_KEYS.items() if required and key not in table]
        if missing:
            raise SeriesError(f"{where} lacks {', '.join(missing)}")
    for key, value in table.items():
        if not isinstance(value, str) or not value.strip() or "\n" in value.strip():
            raise SeriesError(f"{where}: {key} must be one line of text")
    return {key: value.strip() for key, value in table.items()}


def check_patch_files(target: Target) -> None:
    """Error out when a listed patch file is missing."""
    for name in target.patches:
        if not target.patch_path(name).is_file():
            raise SeriesError(f"patch {name} of {target.name} is listed but {target.patch_path(name)} is missing")


def find_patch(target: Target, name: str) -> str:
    """Resolve a patch given by file name (with or without .patch) or by its number."""
    for patch in target.patches:
        if name in (patch, patch.removesuffix(".patch"), patch[:4]):
            return patch
    listed = ", ".join(target.patches) or "none"
    raise SeriesError(f"unknown patch {name!r} for {target.name} (patches: {listed})")


def _format_list(names: Sequence[str]) -> str:
    if not names:
        return "patches = []"
    return "patches = [\n" + "".join(f'    "{n}",\n' for n in names) + "]"


def rewrite_patch_list(manifest: Manifest, target_name: str, names: Sequence[str]) -> bool:
    """Replace one target's `patches = [...]` in place, keeping the rest of the file byte for byte.

    Returns True when the file changed.
    """
    text = manifest.path.read_text(encoding="utf-8")
    header = re.search(rf"^\[targets\.{re.escape(target_name)}\][ \t]*$", text, re.MULTILINE)
    if header is None:
        raise SeriesError(f"manifest {manifest.path}: cannot find [targets.{target_name}]")
    end = re.search(r"^\[", text[header.end() :], re.MULTILINE)
    section_end = header.end() + end.start() if end else len(text)
    section = text[header.end() : section_end]
    match = re.search(r"^patches[ \t]*=[ \t]*\[[^\]]*\]", section, re.MULTILINE)
    if match is None:
        raise SeriesError(f"manifest {manifest.path}: cannot find the patches list of [targets.{target_name}]")
    start = header.end() + match.start()
    stop = header.end() + match.end()
    new_text = text[:start] + _format_list(names) + text[stop:]
    if new_text == text:
        return False
    try:  # a `]` in a comment inside the list ends the match early: the result is no longer the list
        check = tomllib.loads(new_text)["targets"][target_name]["patches"]
    except (tomllib.TOMLDecodeError, KeyError, TypeError):
        check = None
    if check != list(names):
        raise SeriesError(f"manifest {manifest.path}: rewriting the patches list of {target_name} went wrong")
    manifest.path.write_text(new_text, encoding="utf-8")
    manifest.targets[target_name].patches = list(names)
    return True
