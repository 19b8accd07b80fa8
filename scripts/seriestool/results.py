"""The report model of `verify`: one pytest run, one style check, one patch's result and verdict."""

from dataclasses import asdict, dataclass, field
from typing import Any

from .statuses import BaseStatus, RunStatus, Verdict


SCHEMA_VERSION = 5


def is_test_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


@dataclass
class PytestRun:
    """One pytest run. `status` for red: red, not-red, skipped, import-only, error, timeout, no-tests;
    for green: green, failed, flaky, error, timeout, no-tests (statuses.RunStatus).

    The same tests run several times (`verify --repeat`) are one PytestRun: `runs` of them, `run_statuses`
    the status of each, `flaky` the tests that failed in some runs and passed in others, and the counts,
    `failing` and log those of the first run that was not green (of the first run when all were)."""

    status: RunStatus
    exit_code: int | None = None
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    total: int = 0
    failing: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    log: str | None = None
    output_tail: str = ""
    cached: bool = False  # the outcome of an earlier identical run (see runcache.py)
    runs: int = 1
    run_statuses: list[str] = field(default_factory=list)  # when runs > 1
    flaky: list[dict[str, Any]] = field(default_factory=list)  # {"test": id, "failed": in how many runs}


@dataclass
class Style:
    clean: bool
    files: list[str] = field(default_factory=list)
    check_exit: int | None = None
    check_output: str = ""
    format_exit: int | None = None
    format_output: str = ""


@dataclass
class PatchResult:
    name: str
    target: str
    index: int
    applies: bool = False
    applies_alone: bool | None = None
    checked: bool = True
    red: PytestRun | None = None
    green: PytestRun | None = None
    style: Style | None = None
    test_files: list[str] = field(default_factory=list)
    conflict_files: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    verdict: Verdict = Verdict.FAIL
    base_status: BaseStatus | None = None  # see placement.py
    conflicts: list[Any] = field(default_factory=list)  # placement.Conflict
    skipped_before: list[str] = field(default_factory=list)  # earlier patches left out (they conflict)
    notes: list[str] = field(default_factory=list)  # informational, not failures
    sha256: str = ""
    subject: str = ""  # the commit subject
    depends_on: list[str] = field(default_factory=list)  # earlier patches it needs, from the manifest
    hidden_dependency: bool = False  # needs an earlier patch the manifest does not record
    # for BLOCKED: the patches it depends on that conflict (with theirs, so also through a blocked one), in order
    blocked_by: list[str] = field(default_factory=list)
    tier: str = "upstream"  # upstream (a pull request) or fork (carried for forks): [targets.<target>.fork]
    # for an upstream-tier patch that went in: whether it also goes in on the base with only the upstream-tier patches
    # before it (no fork-tier patch under it); None for a fork-tier patch or one that did not go in
    upstream_stack: bool | None = None
    # for a patch with a cut ([targets.<target>.cuts]), what verify found of it on the pinned base: {"file", "needs",
    # "applies", "same_change", "carried", "own", "red", "green", "style_clean", "ok"}; None without a cut
    cut: dict[str, Any] | None = None

    @property
    def red_without_fix(self) -> bool:
        return self.red is not None and self.red.status == RunStatus.RED

    @property
    def green_with_fix(self) -> bool:
        return self.green is not None and self.green.status == RunStatus.GREEN

    @property
    def style_clean(self) -> bool:
        return self.style is not None and self.style.clean

    def decide(self) -> Verdict:
        if self.base_status is not None and BaseStatus(self.base_status).informational:
            self.verdict = Verdict.UPSTREAM
        elif self.base_status == BaseStatus.BLOCKED:
            self.verdict = Verdict.BLOCKED
        elif not self.applies or self.hidden_dependency or self.upstream_stack is False:
            self.verdict = Verdict.FAIL
        elif self.cut is not None and not self.cut.get("ok"):
            self.verdict = Verdict.FAIL
        elif not self.checked:
            self.verdict = Verdict.NOT_CHECKED
        else:
            ok = self.red_without_fix and self.green_with_fix and self.style_clean
            flaky = getattr(self.green, "status", None) == RunStatus.FLAKY
            flaky = flaky and self.red_without_fix and self.style_clean
            self.verdict = Verdict.OK if ok else Verdict.FLAKY if flaky else Verdict.FAIL
        return self.verdict

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "target": self.target,
            "index": self.index,
            "sha256": self.sha256,
            "subject": self.subject,
            "tier": self.tier,
            "verdict": self.verdict,
            "ok": self.verdict == Verdict.OK,
            "base_status": self.base_status,
            "applies": self.applies,
            "applies_alone": self.applies_alone,
            "depends_on": self.depends_on,
            "blocked_by": self.blocked_by,
            "upstream_stack": self.upstream_stack,
            "red_without_fix": self.red_without_fix,
            "green_with_fix": self.green_with_fix,
            "style_clean": self.style_clean,
            "test_files": self.test_files,
            "conflict_files": self.conflict_files,
            "conflicts": [asdict(c) for c in self.conflicts],
            "skipped_before": self.skipped_before,
            "red": asdict(self.red) if self.red else None,
            "green": asdict(self.green) if self.green else None,
            "style": asdict(self.style) if self.style else None,
            "hidden_dependency": self.hidden_dependency,
            "cut": self.cut,
            "problems": self.problems,
            "notes": self.notes,
        }


@dataclass
class CompanionResult:
    """The last stage of `verify` for a target with companions (`verify_with`): all its patches' tests once more,
    with the patched sources of `companions` on PYTHONPATH."""

    target: str
    companions: list[str]  # the companion targets' names
    label: str
    run: PytestRun
    blocked: str | None = None  # why the companions' patches do not go in on the release judged (nothing run)

    @property
    def green(self) -> bool:
        """Green, or blocked: a companion release the companions' own patches do not go in is their news, not a
        failure of this target's patches."""
        return self.blocked is not None or self.run.status == RunStatus.GREEN

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "with": self.companions,
            "label": self.label,
            "green": self.green,
            "status": "blocked" if self.blocked else self.run.status,
            "blocked": self.blocked,
            "run": asdict(self.run),
        }


@dataclass
class UpstreamRun:
    """Upstream's tests run on one tree (the base, or the series): the counts per outcome and the run."""

    passed: int
    failed: int
    skipped: int
    error: int
    total: int
    exit_code: int | None
    timed_out: bool
    duration_s: float
    log: str | None
    run: dict[str, str]  # the status of the pytest run and the tail of its output


@dataclass
class Regression:
    """A test that passed on the base and does not with the series."""

    id: str
    base: str
    series: str
    log: str | None


@dataclass
class DeclaredChange:
    """A declaration of `[targets.<target>.upstream_tests_changed]` as `verify --upstream-tests` judged it: the
    patch, the upstream test (its pytest node id, and the JUnit id the runs report), the reason, the outcome on each
    tree; `why` says what makes it stale (it does not regress: passes with the series, fails on the base too, ...),
    empty for a declared regression."""

    patch: str
    test: str
    id: str
    reason: str
    base: str
    series: str
    why: str = ""
    # with the change its pull request makes to the test (`diff` of the declaration), when there is one: the diff
    # (below the manifest's folder) and the updated test's outcome on each tree
    diff: str = ""
    updated: dict[str, str] = field(default_factory=dict)


@dataclass
class UpstreamTestsResult:
    """`verify --upstream-tests`: upstream's own tests of one target, on the base and with the series."""

    target: str
    spec: str
    files: list[str]
    missing: list[str]
    states: dict[str, UpstreamRun] = field(default_factory=dict)  # "base" / "series"
    regressions: list[Regression] = field(default_factory=list)  # undeclared: they fail the run
    declared: list[DeclaredChange] = field(default_factory=list)  # regressions a patch declares: they do not
    stale: list[DeclaredChange] = field(default_factory=list)  # declarations whose test does not regress: they do
    fixed: list[str] = field(default_factory=list)  # ids of tests that fail on the base and pass with the series
    problems: list[str] = field(default_factory=list)
    ok: bool = True

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
