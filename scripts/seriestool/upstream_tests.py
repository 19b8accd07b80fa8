"""`verify --upstream-tests SPEC`: upstream's own tests, once on the base and once with the whole series.

A maintainer runs the existing tests as well as the ones a patch adds. The test files a target lists in
`upstream_tests` (manifest) are taken from SPEC (base.parse_spec) - `path:DIR` (a tree holding upstream's
`tests/`) or `git:URL@REF` (a shallow, sparse fetch of `tests/` only) - copied into a tool-owned checkout of
the base, and run there with the base's sources, then with the series' sources. Every test that passes on the
base and does not pass with the series is a regression, unless a patch that went in declares it in
`[targets.<target>.upstream_tests_changed]` (the upstream test asserts the behaviour the patch changes, and the
patch's pull request updates the test): then it is reported as declared and does not fail the run. A declaration
whose test does not regress (it passes with the series, or does not pass on the base either) is stale and fails
the run, so that declarations cannot outlive their reason. A declaration that carries its pull request's change to
the test (`diff`) is checked with it: the updated test runs on both trees again and must pass with the series (a
change that does not apply, or an updated test that still fails, fails the run).
"""

import os
import shutil
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import base as base_mod
from .context import Context
from .digests import sha256_of
from .errors import SeriesError
from .git import GitError, Repo, StrPath
from .manifest import Target
from .progress import prefixed
from .render import shown_path, wrap
from .results import DeclaredChange, PytestRun, Regression, UpstreamRun, UpstreamTestsResult
from .runners import run_pytest
from .statuses import RunStatus


STATES = ("passed", "failed", "skipped", "error")
REFS = "refs/series/upstream-tests"
# Upstream's tests must not reach the Hub: a download is not what the series changes. Nor hub kernels: from 5.25.0
# `from_pretrained` asks the `kernels` package for them by default and raises without a release of it that the base
# accepts (>=0.19.1 for 5.25.0; the package index this project's machines use serves none newer than 0.17.2, so
# the pinned venv has none); offline no hub kernel could load anyway, and the Trainer's tests' models have no layer
# one would replace.
ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "USE_HUB_KERNELS": "NO"}


def fetch_tests(ctx: Context, spec: str, target: Target) -> Path:
    """The folder holding upstream's `tests/` for `spec`."""
    parsed = base_mod.parse_spec(spec, target, option="--upstream-tests")
    location, ref = parsed.location, parsed.ref
    if parsed.kind == "path":
        root = Path(location)
        if not (root / "tests").is_dir():
            raise SeriesError(f"--upstream-tests {spec}: {root} has no tests/ folder")
        return root
    key = sha256_of(f"{location}@{ref}")[:16]
    dest = ctx.work / "upstream-tests" / "sources" / key
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".fetch-", dir=dest.parent))
    ctx.log(f"fetching tests/ of {location}@{ref} (shallow, sparse)")
    try:
        repo = Repo(staging, isolated=True)
        clone = ["clone", "--quiet", "--depth=1", "--filter=blob:none", "--sparse", "--no-checkout"]
        if ref != "HEAD":  # HEAD: the remote's default branch
            clone += ["--branch", ref]
        repo.run(*clone, location, "tree")
        tree = Repo(staging / "tree", isolated=True)
        tree.run("sparse-checkout", "set", "tests")
        tree.run("checkout", "--quiet")
        if not (staging / "tree" / "tests").is_dir():
            raise SeriesError(f"--upstream-tests {spec}: {ref} of {location} has no tests/ folder")
        if dest.exists():
            shutil.rmtree(dest)
        os.rename(staging / "tree", dest)
    except GitError as exc:
        raise SeriesError(f"cannot fetch tests/ of {location}@{ref}: {exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest


def _copy_tests(root: Path, files: list[str], dest: Path) -> None:
    """Copy into `dest` the folders holding `files` (whole), the files beside every folder above them up
    to `tests/` (package markers, conftest, helpers) and `tests/fixtures`."""
    folders = {Path(f).parent for f in files}
    tops: set[Path] = set()
    for folder in folders:
        shutil.copytree(root / folder, dest / folder, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        for above in [folder, *folder.parents]:
            if above == Path("."):
                break
            tops.add(above)
    for folder in tops:
        (dest / folder).mkdir(parents=True, exist_ok=True)
        for item in (root / folder).iterdir():
            if item.is_file():
                shutil.copyfile(item, dest / folder / item.name)
    fixtures = root / "tests" / "fixtures"
    if fixtures.is_dir():
        shutil.copytree(fixtures, dest / "tests" / "fixtures", dirs_exist_ok=True)


def outcomes(junit: StrPath) -> dict[str, str]:
    """{test id: passed | failed | skipped | error} from a JUnit file (empty when there is none)."""
    found: dict[str, str] = {}
    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError):
        return found
    for case in root.iter("testcase"):
        case_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        if case.find("error") is not None:
            found[case_id] = "error"
        elif case.find("failure") is not None:
            found[case_id] = "failed"
        elif case.find("skipped") is not None:
            found[case_id] = "skipped"
        else:
            found[case_id] = "passed"
    return found


def junit_id(node_id: str) -> str:
    """The id `outcomes` reports for a pytest node id, as pytest's JUnit XML names it:
    `tests/trainer/test_x.py::T::test_y` -> `tests.trainer.test_x.T::test_y`."""
    path, *names = node_id.split("::")
    module = path.removesuffix(".py").replace("/", ".")
    return f"{'.'.join([module, *names[:-1]])}::{names[-1]}"


def _covers(declared_id: str, test_id: str) -> bool:
    """A declared test covers itself and its parametrized cases (`test_y[a]`)."""
    return test_id == declared_id or test_id.startswith(declared_id + "[")


def declarations(target: Target, applied: Iterable[str]) -> list[tuple[str, str, str]]:
    """(patch, test node id, reason) of each `upstream_tests_changed` declaration of the patches in `applied` (those
    that went in), in series order: a patch left out of the series changes no test."""
    went_in = set(applied)
    return [
        (patch, entry["test"], entry["reason"])
        for patch in target.patches
        if patch in went_in
        for entry in target.upstream_tests_changed.get(patch, [])
    ]


def updates(target: Target, folder: Path) -> dict[str, Path]:
    """test node id -> the change its pull request makes to it (a diff below `folder`, the manifest's), for the
    declarations that carry one."""
    return {
        entry["test"]: folder / entry["diff"]
        for entries in target.upstream_tests_changed.values()
        for entry in entries
        if entry.get("diff")
    }


def _tree(ctx: Context, target: Target, scratch: Repo) -> Repo:
    """A tool-owned checkout (<work>/upstream-tests/<target>/tree) fed with the scratch repository's commits.

    The scratch repository of a base fetched with `git:` or `path:` is shallow (one commit): a plain fetch from it
    refuses every ref whose history stops at its shallow root (git only warns, "shallow roots are not allowed to be
    updated", and exits 0), so the checkout is made shallow alike (`--update-shallow`)."""
    path = ctx.work / "upstream-tests" / target.name / "tree"
    repo = Repo(path, isolated=True)
    if not (path.is_dir() and repo.is_work_tree() and repo.toplevel() == path.resolve()):
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        repo = Repo.init(path)
        base_mod.set_excludes(repo)
    repo.run("fetch", "--quiet", "--no-tags", "--update-shallow", str(scratch.path), f"+{REFS}/*:{REFS}/*")
    return repo


def run(
    ctx: Context,
    target: Target,
    scratch: Repo,
    commits: dict[str, str],
    spec: str,
    *,
    python: StrPath,
    device: str,
    timeout: float | None,
    declared: Sequence[tuple[str, str, str]] = (),
    diffs: Mapping[str, Path] | None = None,
    extra_paths: Sequence[StrPath] = (),
) -> UpstreamTestsResult:
    """Run the target's `upstream_tests` from `spec` on each of `commits` ({"base": id, "series": id}) of
    the scratch repository; `declared`: the (patch, test, reason) declarations that count (see `declarations`);
    `diffs`: the changes their pull requests make to declared tests (default: the manifest's, see `updates`), run
    again with the change."""
    if diffs is None:
        diffs = updates(target, ctx.manifest.path.parent)
    root = fetch_tests(ctx, spec, target)
    files = [f for f in target.upstream_tests if (root / f).is_file()]
    missing = [f for f in target.upstream_tests if f not in files]
    result = UpstreamTestsResult(target=target.name, spec=spec, files=files, missing=missing)
    if missing:
        ctx.log(f"upstream tests: {len(missing)} listed file(s) not in {spec}: {', '.join(missing)}")
    if not files:
        result.problems.append(f"none of the upstream_tests of {target.name} is in {spec}")
        result.ok = False
        return result
    for state, commit in commits.items():
        scratch.run("update-ref", f"{REFS}/{state}", commit)
    repo = _tree(ctx, target, scratch)
    for state, commit in commits.items():
        if repo.rev(f"{REFS}/{state}") != commit:
            raise SeriesError(
                f"the {state} commit {commit[:12]} did not reach the checkout of upstream's tests {repo.path}"
            )
    logs = ctx.work / "logs" / "verify" / target.name
    logs.mkdir(parents=True, exist_ok=True)
    found: dict[str, dict[str, str]] = {}
    # what every pytest run here shares: the tool-owned checkout, the target's sources, offline, expected green
    runs: dict[str, Any] = {
        "python": python,
        "repo_dir": repo.path,
        "source_dir": target.source_dir,
        "device": device,
        "timeout": timeout,
        "expect": RunStatus.GREEN,
        "extra_env": ENV,
        "extra_paths": extra_paths,
    }
    for state in commits:
        ctx.log(f"[{target.name} upstream tests] {len(files)} file(s) on the {state}")
        repo.reset_hard(f"{REFS}/{state}")
        _copy_tests(root, files, repo.path)
        stem = logs / f"upstream-tests.{state}"
        pytest_run = run_pytest(
            files=files,
            log_stem=stem,
            say=prefixed(ctx.log, f"[{target.name} upstream tests] on the {state}"),
            **runs,
        )
        found[state] = outcomes(Path(f"{stem}.xml"))
        result.states[state] = _state(found[state], pytest_run)
    compare(result, found.get("base", {}), found.get("series", {}), declared)
    for change in result.declared:
        diff = diffs.get(change.test)
        if diff is None or change.diff:
            continue
        for other in result.declared:  # a declaration that covers several parametrized cases runs once
            if other.test == change.test:
                other.diff = str(diff)
        for state in commits:
            repo.reset_hard(f"{REFS}/{state}")
            _copy_tests(root, files, repo.path)
            try:
                repo.run("apply", str(diff))
            except GitError as exc:
                result.problems.append(f"the change to {change.test} ({diff.name}) does not apply: {exc}")
                break
            stem = logs / f"upstream-tests.updated.{state}"
            run_pytest(
                files=[change.test],
                log_stem=stem,
                say=prefixed(ctx.log, f"[{target.name} upstream tests] {change.test} updated, on the {state}"),
                **runs,
            )
            got = outcomes(Path(f"{stem}.xml"))
            outcome = _outcome(got, junit_id(change.test))
            for other in result.declared:
                if other.test == change.test:
                    other.updated[state] = outcome
        if change.updated and change.updated.get("series") != "passed":
            result.problems.append(
                f"{change.test} with its pull request's change ({diff.name}) is {change.updated.get('series')} with "
                f"the series: the change must make it pass"
            )
    result.ok = not result.regressions and not result.stale and not result.problems
    repo.reset_hard(f"{REFS}/base")
    return result


def _outcome(found: dict[str, str], wanted: str) -> str:
    """The outcome of `wanted` (a JUnit id) among `found`, its parametrized cases together: failed or error
    when one is, passed when all ran and passed."""
    cases = [state for test_id, state in found.items() if _covers(wanted, test_id)]
    if not cases:
        return "not run"
    for bad in ("error", "failed"):
        if bad in cases:
            return bad
    return "passed" if all(c == "passed" for c in cases) else cases[0]


def _state(found: dict[str, str], pytest_run: PytestRun) -> UpstreamRun:
    counts = {name: sum(1 for v in found.values() if v == name) for name in STATES}
    return UpstreamRun(
        **counts,
        total=len(found),
        exit_code=pytest_run.exit_code,
        timed_out=pytest_run.exit_code is None,
        duration_s=pytest_run.duration_s,
        log=pytest_run.log,
        run={"status": pytest_run.status, "output_tail": pytest_run.output_tail},
    )


def compare(
    result: UpstreamTestsResult,
    base: dict[str, str],
    series: dict[str, str],
    declared: Sequence[tuple[str, str, str]] = (),
) -> None:
    """Fill in the regressions (passed on the base, neither passed nor skipped with the series), the declared and
    the stale declarations (`declared`: (patch, test node id, reason)), the fixed tests and the verdict of `result`
    from the outcomes per test id on both trees."""
    if not any(v == "passed" for v in base.values()):
        result.problems.append(f"no upstream test passed on the base (log {result.states['base'].log})")
    regressions = []
    for test_id, before in base.items():
        after = series.get(test_id, "not run")
        if before == "passed" and after not in ("passed", "skipped"):
            regressions.append(Regression(test_id, before, after, result.states["series"].log))
        elif before in ("failed", "error") and after == "passed":
            result.fixed.append(test_id)
    claimed: set[str] = set()
    for patch, test, reason in declared:
        wanted = junit_id(test)
        covered = [reg for reg in regressions if _covers(wanted, reg.id)]
        for reg in covered:
            result.declared.append(DeclaredChange(patch, test, reg.id, reason, reg.base, reg.series))
            claimed.add(reg.id)
        if not covered:
            ids = [test_id for test_id in {**base, **series} if _covers(wanted, test_id)]
            found = wanted if wanted in base or wanted in series or not ids else ids[0]
            before, after = base.get(found, "not run"), series.get(found, "not run")
            stale = DeclaredChange(patch, test, found, reason, before, after, _stale_why(result, test, before, after))
            result.stale.append(stale)
    result.regressions = [reg for reg in regressions if reg.id not in claimed]
    result.ok = not result.regressions and not result.stale and not result.problems


def _stale_why(result: UpstreamTestsResult, test: str, before: str, after: str) -> str:
    """Why a declared test does not regress."""
    if before == after == "not run":
        file = test.split("::", 1)[0]
        if file in result.missing:
            return f"its file is not in {result.spec}"
        return "it runs on neither tree (is the node id right?)"
    if before == "not run":
        return "it does not run on the base"
    if before != "passed":
        return {"failed": "it fails on the base too", "error": "it errors on the base too"}.get(
            before, f"it is {before} on the base"
        )
    return "it passes with the series" if after == "passed" else f"it is {after} with the series"


def _counts(state: UpstreamRun) -> str:
    counts = ", ".join(f"{getattr(state, name)} {name}" for name in STATES)
    return f"{counts} ({state.duration_s:.0f}s)"


def _declared_names(changes: Iterable[DeclaredChange]) -> list[str]:
    """`test_name by 0016` for each declaration (once, though it covers several parametrized cases)."""
    names: list[str] = []
    for change in changes:
        name = f"{change.test.rsplit('::', 1)[-1]} by {change.patch[:4]}"
        if name not in names:
            names.append(name)
    return names


def verdict(result: UpstreamTestsResult) -> str:
    """The verdict of the summary line: `no regression`, `no undeclared regression (1 declared: test_x by 0016)`
    or `FAIL (...)`."""
    names = _declared_names(result.declared)
    declared = f"{len(names)} declared: {', '.join(names)}" if names else ""
    if result.ok:
        return f"no undeclared regression ({declared})" if declared else "no regression"
    parts = [f"{len(result.regressions)} regression(s)"]
    if result.stale:
        parts.append(f"{len(result.stale)} stale declaration(s)")
    return f"FAIL ({', '.join(parts)}{'; ' + declared if declared else ''})"


def lines(result: UpstreamTestsResult) -> list[str]:
    """What `verify` prints about one target's upstream tests."""
    out = []
    head = f"{result.target} upstream tests ({len(result.files)} file(s) from {result.spec})"
    for name, state in result.states.items():
        timed_out = ", TIMED OUT" if state.timed_out else ""
        out.append(f"{head}, {name}: {_counts(state)}{timed_out}")
    for problem in result.problems:
        out += wrap(f"{result.target} upstream tests: {problem}")
    for reg in result.regressions:
        log = shown_path(reg.log) if reg.log is not None else reg.log
        out.append(f"  REGRESSION {reg.id}: {reg.base} on the base, {reg.series} with the series (log {log})")
    for change in result.declared:
        out += wrap(
            f"declared by {change.patch[:4]}: {change.id}: {change.base} on the base, {change.series} with the "
            f"series (its pull request updates the test: {change.reason})"
        )
    shown: set[str] = set()
    for change in result.declared:
        if change.diff and change.test not in shown:
            shown.add(change.test)
            out += wrap(
                f"  updated by {Path(change.diff).name}: {change.updated.get('base', 'not run')} on the base, "
                f"{change.updated.get('series', 'not run')} with the series"
            )
    table = f"[targets.{result.target}.upstream_tests_changed]"
    for change in result.stale:
        out += wrap(
            f"STALE DECLARATION {change.test} by {change.patch[:4]}: {change.why} ({change.base} on the base, "
            f"{change.series} with the series); remove it from {table} or correct it (reason given: {change.reason})"
        )
    if result.fixed:
        out.append(f"  {len(result.fixed)} test(s) fail on the base and pass with the series")
    if result.missing:
        out += wrap(f"note: not in {result.spec}: {', '.join(result.missing)}")
    out.append(f"{result.target} upstream tests: {verdict(result)}")
    return out
