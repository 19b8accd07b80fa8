"""Every status `verify` reports, as enums whose values are the strings of the JSON report, with the one label
each has in the console table and in the markdown summary."""

import enum


class BaseStatus(enum.StrEnum):
    """Where a patch stands on a base (`base_status` in the JSON report)."""

    CLEAN = "clean"  # `git apply --check` passes
    THREE_WAY = "3-way"  # the context moved, `git am --3way` merges it
    CONFLICT = "conflict"  # it does not go in
    ALREADY_UPSTREAM = "already-upstream"  # the base holds the whole change
    FIXED_DIFFERENTLY = "fixed-differently"  # it conflicts, and its tests pass on the base without it
    # not tried: a patch it depends on (manifest `depends`, with theirs) conflicts or is blocked itself, so it is
    # left out with it; it is judged once that one goes in
    BLOCKED = "blocked"

    @property
    def label(self) -> str:
        return _BASE_LABELS[self]

    @property
    def informational(self) -> bool:
        """Nothing for a maintainer to do in the series but drop the patch: not a failure of `verify`."""
        return self in (BaseStatus.ALREADY_UPSTREAM, BaseStatus.FIXED_DIFFERENTLY)

    @property
    def went_in(self) -> bool:
        return self in (BaseStatus.CLEAN, BaseStatus.THREE_WAY)


_BASE_LABELS = {
    BaseStatus.CLEAN: "yes",
    BaseStatus.THREE_WAY: "3-way",
    BaseStatus.CONFLICT: "CONFLICT",
    BaseStatus.ALREADY_UPSTREAM: "upstream",
    BaseStatus.FIXED_DIFFERENTLY: "fixed upstream",
    BaseStatus.BLOCKED: "blocked",
}


class RunStatus(enum.StrEnum):
    """The outcome of one pytest run (`red.status`, `green.status`)."""

    RED = "red"  # without the fix: real assertion failures
    GREEN = "green"  # with the fix: every test passes (or skips)
    NOT_RED = "not-red"  # without the fix the tests pass
    FAILED = "failed"  # with the fix some tests fail
    FLAKY = "flaky"  # with the fix, run several times (--repeat): a test failed in some runs and passed in others
    SKIPPED = "skipped"  # every test skipped
    IMPORT_ONLY = "import-only"  # the only failures are ImportErrors: not a valid red
    ERROR = "error"  # pytest itself failed (collection error, usage, internal error)
    TIMEOUT = "timeout"
    NO_TESTS = "no-tests"


class Verdict(enum.StrEnum):
    """A patch's verdict (`verdict` in the JSON report)."""

    OK = "ok"
    FAIL = "fail"
    FLAKY = "flaky"  # red and clean, but a test failed in some of its green runs and passed in others
    NOT_CHECKED = "not checked"  # applied, but --patch left its tests out
    UPSTREAM = "upstream"  # already upstream or fixed there: drop it
    # a patch it depends on does not go in (a conflict): not judged without it. Not passed, but not a failure of
    # its own either: the conflict that blocks it is the run's failure.
    BLOCKED = "blocked"
    # on a release older than the pin, a patch the manifest declares needs a backport there (`backports`), or one
    # blocked by such a patch: reported, not a failure (a declared patch that goes in after all is stale: a failure)
    BACKPORT = "backport"

    @property
    def label(self) -> str:
        return self.value.upper() if self in (Verdict.FAIL, Verdict.FLAKY) else self.value

    @property
    def passed(self) -> bool:
        """Whether the patch needs no maintainer (the exit status of `verify` is 0 for it). A blocked patch is not
        passed, but it fails no run by itself: the conflict that blocks it is in the same run, and fails it."""
        return self not in (Verdict.FAIL, Verdict.FLAKY, Verdict.BLOCKED)
