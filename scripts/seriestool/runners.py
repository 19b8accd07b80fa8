"""The pytest and ruff runs of `verify`: each in its own process group, its output in a log file."""

import json
import os
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from .git import Repo, StrPath
from .progress import Detail, Say, heartbeat, pytest_detail
from .results import PytestRun, Style
from .runcache import RunCache
from .statuses import RunStatus


IMPORT_ERRORS = ("ImportError", "ModuleNotFoundError")
TAIL_LINES = 40


def _parse_junit(path: StrPath) -> tuple[dict[str, int], list[str], list[str], dict[str, str]]:
    """(counts, failing test ids, failure kinds, {test id: "passed" | "failed" | "errors" | "skipped"})."""
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failing: list[str] = []
    kinds: list[str] = []
    outcomes: dict[str, str] = {}
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return counts, failing, kinds, outcomes
    for case in root.iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        case_id = f"{classname}::{name}" if classname else name  # a collection error has no class name
        failure, error = case.find("failure"), case.find("error")
        if failure is not None:
            outcome = "failed"
            failing.append(case_id)
            kinds.append((failure.get("message") or "").split(":", 1)[0].strip())
        elif error is not None:
            outcome = "errors"
            failing.append(case_id)
        elif case.find("skipped") is not None:
            outcome = "skipped"
        else:
            outcome = "passed"
        counts[outcome] += 1
        # a test that fails and then errors in teardown has two entries: the worst one counts
        if outcomes.get(case_id) in (None, "passed", "skipped"):
            outcomes[case_id] = outcome
    return counts, failing, kinds, outcomes


def stop_group(proc: subprocess.Popen[Any], grace: float = 3.0) -> None:
    """Stop `proc` and every process of its process group (it was started in its own session): SIGTERM, then
    SIGKILL for whatever is left after `grace` seconds. A second Ctrl-C while waiting still ends in SIGKILL."""
    try:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the members that outlived the leader, too
        except ProcessLookupError:
            pass
        proc.wait()


def run_logged(
    cmd: Sequence[str],
    *,
    cwd: StrPath,
    env: Mapping[str, str],
    log_path: StrPath,
    timeout: float | None,
    say: Say | None = None,
    detail: Detail | None = None,
) -> tuple[int | None, float]:
    """Run a command in its own process group with output to `log_path`; returns (exit code or None on
    timeout, seconds). On a timeout, Ctrl-C or any other exception, the whole group is stopped first. With `say`,
    a progress line while it runs (progress.py: every 30 s, with `detail()`)."""
    start = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            with heartbeat(say, detail):
                code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_group(proc, grace=0)
            code = None
        except BaseException:
            stop_group(proc)
            raise
    return code, round(time.monotonic() - start, 2)


def _tail(path: StrPath, lines: int = TAIL_LINES) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def run_pytest(
    *,
    python: StrPath,
    repo_dir: StrPath,
    source_dir: str,
    files: Sequence[str],
    device: str,
    log_stem: StrPath,
    timeout: float | None,
    expect: RunStatus,
    extra_paths: Iterable[StrPath] = (),
    extra_env: Mapping[str, str] | None = None,
    say: Say | None = None,
) -> PytestRun:
    """Run pytest on `files` in the checkout; classify the outcome as a red or a green run (`expect`).

    `extra_paths` go on PYTHONPATH after the checkout's sources (e.g. a patched companion package). `say` gets
    the progress lines while it runs (`still running, 60 s, 12/13 tests done`)."""
    log_path = Path(f"{log_stem}.log")
    junit = Path(f"{log_stem}.xml")
    junit.unlink(missing_ok=True)
    env = dict(os.environ)
    for key in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTHONSTARTUP", "PYTHONHOME"):
        env.pop(key, None)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(repo_dir) / source_dir), *map(str, extra_paths)])
    env["PYTHONUNBUFFERED"] = "1"
    # Keep bytecode in the (tool-owned) checkouts between runs, minus that of changed files: without it every
    # pytest run and every process a test starts compiles the target's modules again.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for repo, tree in source_trees(repo_dir, extra_paths):
        drop_stale_bytecode(repo, tree)
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(extra_env or {})
    cmd = [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-rfE", f"--junitxml={junit}", *files]
    detail = pytest_detail(log_path)
    code, seconds = run_logged(cmd, cwd=repo_dir, env=env, log_path=log_path, timeout=timeout, say=say, detail=detail)
    counts, failing, kinds, _ = _parse_junit(junit)
    run = PytestRun(
        status=RunStatus.ERROR,
        exit_code=code,
        duration_s=seconds,
        log=str(log_path),
        failing=failing,
        passed=counts["passed"],
        failed=counts["failed"],
        errors=counts["errors"],
        skipped=counts["skipped"],
    )
    run.total = sum(counts.values())
    if code is None:
        run.status = RunStatus.TIMEOUT
    elif code == 5:
        run.status = RunStatus.NO_TESTS
    elif expect == RunStatus.RED:
        if code == 1 and run.failed:
            real = [kind for kind in kinds if kind not in IMPORT_ERRORS]
            run.status = RunStatus.RED if real else RunStatus.IMPORT_ONLY
        elif code == 0:
            run.status = RunStatus.NOT_RED if run.passed else RunStatus.SKIPPED
    else:
        if code == 0:
            run.status = RunStatus.GREEN
        elif code == 1:
            run.status = RunStatus.FAILED
    if run.status not in (RunStatus.RED, RunStatus.GREEN):
        run.output_tail = _tail(log_path)
    return run


def source_trees(repo_dir: StrPath, extra_paths: Iterable[StrPath] = ()) -> list[tuple[Repo, str]]:
    """The git work trees a pytest run imports from (the checkout, and those of `extra_paths`), each with the
    id of the tree it holds (its index, which the tool keeps equal to the files)."""
    repos = [Repo(repo_dir, isolated=True)]
    for path in extra_paths:
        repo = Repo(path, isolated=True)
        if repo.is_work_tree():
            repos.append(Repo(repo.toplevel(), isolated=True))
    return [(repo, repo.out("write-tree")) for repo in repos]


def drop_stale_bytecode(repo: Repo, tree: str) -> None:
    """Delete the compiled bytecode of the `.py` files that changed since the last run in this checkout.

    Python trusts a `__pycache__` file while the source's size and mtime in whole seconds match, and the
    checkout moves between versions of a file faster than that. So the tree each run saw is recorded,
    and only the bytecode of files that differ from it is dropped (all of it when nothing is recorded).
    """
    record = repo.git_dir() / "series-bytecode-tree"
    try:
        previous = record.read_text(encoding="utf-8").strip()
    except OSError:
        previous = ""
    if previous != tree:
        changed = None
        if previous and repo.ok("cat-file", "-e", f"{previous}^{{tree}}"):
            changed = repo.out("diff", "--name-only", "--no-renames", "-z", previous, tree).split("\0")
        if changed is None:
            stale = list(repo.path.rglob("__pycache__/*.pyc"))
        else:
            stale = []
            for path in (repo.path / name for name in changed if name.endswith(".py")):
                stale += path.parent.glob(f"__pycache__/{path.stem}.*.pyc")
        for pyc in stale:
            pyc.unlink(missing_ok=True)
    record.write_text(tree + "\n", encoding="utf-8")


def _cache_key(cache: RunCache, kwargs: dict[str, Any]) -> str | None:
    return cache.key(
        trees=[tree for _, tree in source_trees(kwargs["repo_dir"], kwargs.get("extra_paths", ()))],
        expect=kwargs["expect"],
        files=kwargs["files"],
        source_dir=kwargs["source_dir"],
        python=kwargs["python"],
        device=kwargs["device"],
        env=kwargs.get("extra_env"),
    )


def cached_pytest(cache: RunCache | None, **kwargs: Any) -> PytestRun:
    """`run_pytest`, or the outcome of an earlier run of the same tests on the same trees (see runcache.py)."""
    if cache is None:
        return run_pytest(**kwargs)
    key = _cache_key(cache, kwargs)
    if key is None:
        return run_pytest(**kwargs)
    outcome = cache.get(key, Path(f"{kwargs['log_stem']}.log"))
    if outcome is not None:
        return PytestRun(**dict(outcome, cached=True))
    run = run_pytest(**kwargs)
    if run.status == kwargs["expect"]:
        cache.put(key, asdict(run))
    return run


def repeated_pytest(
    cache: RunCache | None,
    repeat: int,
    progress: Callable[[int, PytestRun], None] | None = None,
    **kwargs: Any,
) -> PytestRun:
    """The green stage: `cached_pytest` once, or with `repeat` > 1 that many fresh runs of the same tests, told
    apart by their log stems (`<stem>`, `<stem>.run2`, ...) and combined by `combine_runs`. A stored outcome is
    not one of them: a pass known from an earlier run does not count as `repeat` passes. When every run passed,
    the first one's outcome is stored for later single runs. `progress(number, run)` is called after each of
    the repeated runs."""
    if repeat == 1:
        return cached_pytest(cache, **kwargs)
    stem = Path(kwargs.pop("log_stem"))
    runs: list[PytestRun] = []
    outcomes: list[dict[str, str]] = []
    for number in range(1, repeat + 1):
        log_stem = stem if number == 1 else Path(f"{stem}.run{number}")
        runs.append(run_pytest(log_stem=log_stem, **kwargs))
        outcomes.append(_parse_junit(Path(f"{log_stem}.xml"))[3])
        if progress is not None:
            progress(number, runs[-1])
    run = combine_runs(runs, outcomes)
    if cache is not None and run.status == RunStatus.GREEN:
        key = _cache_key(cache, kwargs)
        if key is not None:
            cache.put(key, asdict(runs[0]))
    return run


def combine_runs(runs: Sequence[PytestRun], outcomes: Iterable[Mapping[str, str]]) -> PytestRun:
    """One PytestRun for several green-stage runs of the same tests, given each run's per-test outcomes.

    Green when every run was green. A test that failed (or errored) in some runs and passed in others is
    flaky. The combined status is flaky when no test failed without ever passing and either some test is
    flaky or some runs were green (the others failed without a test to blame: a timeout, a crash); else it
    is the status of the first run that was not green (a test that fails every time is a failure)."""
    failed_in: Counter[str] = Counter()
    passed_in: Counter[str] = Counter()
    for per_test in outcomes:
        for test, outcome in per_test.items():
            if outcome in ("failed", "errors"):
                failed_in[test] += 1
            elif outcome == "passed":
                passed_in[test] += 1
    flaky = [{"test": test, "failed": failed_in[test]} for test in failed_in if passed_in[test]]
    steady = [test for test in failed_in if not passed_in[test]]
    statuses = [run.status for run in runs]
    first_bad = next((run for run in runs if run.status != RunStatus.GREEN), runs[0])
    status = first_bad.status
    if status != RunStatus.GREEN and not steady and (flaky or RunStatus.GREEN in statuses):
        status = RunStatus.FLAKY
    return replace(
        first_bad,
        status=status,
        duration_s=round(sum(run.duration_s for run in runs), 2),
        runs=len(runs),
        run_statuses=[str(s) for s in statuses],
        flaky=flaky,
    )


def _ruff(
    python: StrPath, repo_dir: StrPath, args: Sequence[str], stdin: str | None = None
) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        [str(python), "-m", "ruff", *args],
        cwd=repo_dir,
        capture_output=True,
        text=True,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
    )


def _findings(proc: "subprocess.CompletedProcess[str]", texts: Mapping[str, str], repo_dir: StrPath) -> list[Any]:
    """[(path, (code, message, the line's text), the finding as `path:row:col: CODE message`)] of a JSON
    `ruff check` of the files `texts` holds ({path: text})."""
    try:
        entries = json.loads(proc.stdout or "[]")
    except ValueError:
        return []
    found = []
    root = Path(repo_dir).resolve()
    for entry in entries:
        path = Path(entry.get("filename") or "")
        rel = path.resolve().relative_to(root).as_posix() if path.resolve().is_relative_to(root) else str(path)
        row = (entry.get("location") or {}).get("row") or 0
        lines = texts.get(rel, "").splitlines()
        line = lines[row - 1].strip() if 0 < row <= len(lines) else ""
        code, message = entry.get("code") or "", entry.get("message") or ""
        col = (entry.get("location") or {}).get("column") or 0
        found.append((rel, (code, message, line), f"{rel}:{row}:{col}: {code + ' ' if code else ''}{message}"))
    return found


def _reformatted(proc: "subprocess.CompletedProcess[str]") -> Counter[str]:
    """The lines `ruff format --diff` would rewrite (its `-` lines), counted."""
    return Counter(
        line[1:] for line in proc.stdout.splitlines() if line.startswith("-") and not line.startswith("---")
    )


def run_style(python: StrPath, repo_dir: StrPath, files: Sequence[str], base: str | None = None) -> Style:
    """ruff check and ruff format --check on `files`, from the checkout root (its own config).

    With `base` (the commit before the patch), only what the patch changes counts: a finding of `ruff check`
    that the file had at `base` too (same rule, message and line text) and a line `ruff format` would rewrite
    there too are the base's, not the patch's; they are named in a note but leave the style clean."""
    if not files:
        return Style(clean=True)
    check = _ruff(python, repo_dir, ["check", "--no-cache", "--", *files])
    fmt = _ruff(python, repo_dir, ["format", "--check", "--no-cache", "--", *files])
    style = Style(
        clean=check.returncode == 0 and fmt.returncode == 0,
        files=list(files),
        check_exit=check.returncode,
        check_output=(check.stdout + check.stderr).strip(),
        format_exit=fmt.returncode,
        format_output=(fmt.stdout + fmt.stderr).strip(),
    )
    if style.clean or base is None:
        return style
    repo = Repo(repo_dir, isolated=True)
    before: dict[str, str] = {}
    for path in files:
        shown = repo.run("show", f"{base}:{path}", check=False)
        if shown.returncode == 0:
            before[path] = shown.stdout
    if not before:  # every file is new: all of it is the patch's
        return style
    if check.returncode == 1:
        after = {path: (Path(repo_dir) / path).read_text(encoding="utf-8", errors="replace") for path in files}
        new = _findings(
            _ruff(python, repo_dir, ["check", "--no-cache", "--output-format=json", "--", *files]), after, repo_dir
        )
        old: Counter[tuple[str, tuple[str, str, str]]] = Counter()
        for path, text in before.items():
            proc = _ruff(
                python, repo_dir, ["check", "--no-cache", "--output-format=json", "--stdin-filename", path, "-"], text
            )
            old.update((rel, key) for rel, key, _ in _findings(proc, {path: text}, repo_dir))
        if new:
            added = []
            for rel, key, shown_line in new:
                if old[(rel, key)] > 0:
                    old[(rel, key)] -= 1
                else:
                    added.append(shown_line)
            kept = len(new) - len(added)
            note = [f"({kept} finding(s) already in the file(s) before the patch, not counted)"] if kept else []
            style.check_exit = 1 if added else 0
            style.check_output = "\n".join(added + note)
    if fmt.returncode == 1:
        lines, kept_files = [], []
        for path in [line.removeprefix("Would reformat: ") for line in fmt.stdout.splitlines()]:
            if path not in files:  # ruff's summary line
                continue
            if path not in before:
                lines.append(f"Would reformat: {path}")
                continue
            was = _ruff(
                python, repo_dir, ["format", "--diff", "--no-cache", "--stdin-filename", path, "-"], before[path]
            )
            changed = _reformatted(_ruff(python, repo_dir, ["format", "--diff", "--no-cache", "--", path]))
            changed -= _reformatted(was)
            if was.returncode == 0 or changed:
                lines.append(
                    f"Would reformat: {path}" + (f" ({changed.total()} line(s) of the patch)" if changed else "")
                )
            else:
                kept_files.append(path)
        note = [
            f"(not formatted before the patch either, and the patch adds nothing to that: {', '.join(kept_files)})"
        ]
        style.format_exit = 1 if lines else 0
        style.format_output = "\n".join(lines + (note if kept_files else []))
    style.clean = style.check_exit == 0 and style.format_exit == 0
    return style
