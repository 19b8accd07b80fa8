"""`verify`: prove every patch applies, is red without its fix, green with it, and style-clean."""

import datetime
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import base as base_mod
from . import pyenv, regression, reports, upstream
from .errors import SeriesError
from .git import Repo
from .manifest import check_patch_files, find_patch
from .runcache import RunCache, file_digest


SCHEMA_VERSION = 2
IMPORT_ERRORS = ("ImportError", "ModuleNotFoundError")
TAIL_LINES = 40


def is_test_file(path):
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


@dataclass
class PytestRun:
    """One pytest run. `status` for red: red, not-red, skipped, import-only, error, timeout, no-tests;
    for green: green, failed, error, timeout, no-tests."""

    status: str
    exit_code: int | None = None
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    total: int = 0
    failing: list = field(default_factory=list)
    duration_s: float = 0.0
    log: str | None = None
    output_tail: str = ""
    cached: bool = False  # the outcome of an earlier identical run (see runcache.py)


@dataclass
class Style:
    clean: bool
    files: list = field(default_factory=list)
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
    test_files: list = field(default_factory=list)
    conflict_files: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    verdict: str = "fail"
    base_status: str | None = None  # see upstream.py: clean, 3-way, conflict, already-upstream, fixed-differently
    conflicts: list = field(default_factory=list)  # upstream.Conflict
    skipped_before: list = field(default_factory=list)  # earlier patches left out (they conflict)
    notes: list = field(default_factory=list)  # informational, not failures
    sha256: str = ""
    depends_on: list = field(default_factory=list)  # earlier patches it needs, from the manifest
    hidden_dependency: bool = False  # needs an earlier patch the manifest does not record

    @property
    def red_without_fix(self):
        return self.red is not None and self.red.status == "red"

    @property
    def green_with_fix(self):
        return self.green is not None and self.green.status == "green"

    @property
    def style_clean(self):
        return self.style is not None and self.style.clean

    def decide(self):
        if self.base_status in upstream.INFORMATIONAL:
            self.verdict = "upstream"
        elif not self.applies or self.hidden_dependency:
            self.verdict = "fail"
        elif not self.checked:
            self.verdict = "not checked"
        else:
            ok = self.red_without_fix and self.green_with_fix and self.style_clean
            self.verdict = "ok" if ok else "fail"
        return self.verdict

    def to_json(self):
        return {
            "name": self.name,
            "target": self.target,
            "index": self.index,
            "sha256": self.sha256,
            "verdict": self.verdict,
            "ok": self.verdict == "ok",
            "base_status": self.base_status,
            "applies": self.applies,
            "applies_alone": self.applies_alone,
            "depends_on": self.depends_on,
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
            "problems": self.problems,
            "notes": self.notes,
        }


# -- pytest and ruff ---------------------------------------------------------------------------------


def _parse_junit(path):
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failing, kinds = [], []
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return counts, failing, kinds
    for case in root.iter("testcase"):
        case_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        failure, error = case.find("failure"), case.find("error")
        if failure is not None:
            counts["failed"] += 1
            failing.append(case_id)
            kinds.append((failure.get("message") or "").split(":", 1)[0].strip())
        elif error is not None:
            counts["errors"] += 1
            failing.append(case_id)
        elif case.find("skipped") is not None:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return counts, failing, kinds


def _run_logged(cmd, *, cwd, env, log_path, timeout):
    """Run a command with output to `log_path`; returns (exit code or None on timeout, seconds)."""
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
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
    return code, round(time.monotonic() - start, 2)


def _tail(path, lines=TAIL_LINES):
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def run_pytest(
    *, python, repo_dir, source_dir, files, device, log_stem, timeout, expect, extra_paths=(), extra_env=None
):
    """Run pytest on `files` in the checkout; classify the outcome as a red or a green run (`expect`).

    `extra_paths` go on PYTHONPATH after the checkout's sources (e.g. a patched companion package)."""
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
    code, seconds = _run_logged(cmd, cwd=repo_dir, env=env, log_path=log_path, timeout=timeout)
    counts, failing, kinds = _parse_junit(junit)
    run = PytestRun(status="error", exit_code=code, duration_s=seconds, log=str(log_path), failing=failing, **counts)
    run.total = sum(counts.values())
    if code is None:
        run.status = "timeout"
    elif code == 5:
        run.status = "no-tests"
    elif expect == "red":
        if code == 1 and run.failed:
            real = [kind for kind in kinds if kind not in IMPORT_ERRORS]
            run.status = "red" if real else "import-only"
        elif code == 0:
            run.status = "not-red" if run.passed else "skipped"
    else:
        if code == 0:
            run.status = "green"
        elif code == 1:
            run.status = "failed"
    if run.status not in ("red", "green"):
        run.output_tail = _tail(log_path)
    return run


def source_trees(repo_dir, extra_paths=()):
    """The git work trees a pytest run imports from (the checkout, and those of `extra_paths`), each with the
    id of the tree it holds (its index, which the tool keeps equal to the files)."""
    repos = [Repo(repo_dir, isolated=True)]
    for path in extra_paths:
        repo = Repo(path, isolated=True)
        if repo.is_work_tree():
            repos.append(Repo(repo.toplevel(), isolated=True))
    return [(repo, repo.out("write-tree")) for repo in repos]


def drop_stale_bytecode(repo, tree):
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


def cached_pytest(cache, **kwargs):
    """`run_pytest`, or the outcome of an earlier run of the same tests on the same trees (see runcache.py)."""
    if cache is None:
        return run_pytest(**kwargs)
    key = cache.key(
        trees=[tree for _, tree in source_trees(kwargs["repo_dir"], kwargs.get("extra_paths", ()))],
        expect=kwargs["expect"],
        files=kwargs["files"],
        source_dir=kwargs["source_dir"],
    )
    outcome = cache.get(key, Path(f"{kwargs['log_stem']}.log"))
    if outcome is not None:
        return PytestRun(**dict(outcome, cached=True))
    run = run_pytest(**kwargs)
    if run.status == kwargs["expect"]:
        cache.put(key, asdict(run))
    return run


def run_style(python, repo_dir, files):
    """ruff check and ruff format --check on `files`, from the checkout root (its own config)."""
    if not files:
        return Style(clean=True)
    ruff = [str(python), "-m", "ruff"]
    opts = {"cwd": repo_dir, "capture_output": True, "text": True, "stdin": subprocess.DEVNULL}
    check = subprocess.run([*ruff, "check", "--no-cache", "--", *files], **opts)
    fmt = subprocess.run([*ruff, "format", "--check", "--no-cache", "--", *files], **opts)
    return Style(
        clean=check.returncode == 0 and fmt.returncode == 0,
        files=list(files),
        check_exit=check.returncode,
        check_output=(check.stdout + check.stderr).strip(),
        format_exit=fmt.returncode,
        format_output=(fmt.stdout + fmt.stderr).strip(),
    )


# -- the scratch checkout ----------------------------------------------------------------------------


def _spec_key(spec, target):
    return base_mod.key_of(spec, target) or f"{spec.kind}:{spec.location}@{spec.ref}"


def prepare_scratch(ctx, target, spec):
    """A tool-owned checkout of the base under <work>/verify/<target>, reused between runs."""
    path = ctx.work / "verify" / target.name
    key = _spec_key(spec, target)
    repo = Repo(path, isolated=True)
    if path.is_dir() and repo.is_work_tree() and repo.config("series.basekey") == key:
        if repo.operation_in_progress():
            repo.am_abort()
        base = base_mod.fetch_into(repo, spec) if spec.kind != "sdist" else repo.rev(base_mod.BASE_TAG)
        if base is not None:
            repo.run("tag", "-f", base_mod.BASE_TAG, base)
            repo.reset_hard(base)
            return repo, base
    if path.exists():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=path.parent))
    try:
        base = base_mod.create(target, spec, staging / "repo", downloads=ctx.downloads, log=ctx.log)
        Repo(staging / "repo", isolated=True).run("config", "series.basekey", key)
        os.rename(staging / "repo", path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Repo(path, isolated=True), base


def verify_target(ctx, target, repo, base, *, python, device, only, timeout, spec=None, notes=None, cache=None):
    results = []
    logs = ctx.work / "logs" / "verify" / target.name
    if logs.exists():
        shutil.rmtree(logs)
    logs.mkdir(parents=True)
    moved = spec is not None and spec.kind != "sdist"

    def run_red(files, stem):
        common = {"python": python, "repo_dir": repo.path, "source_dir": target.source_dir}
        return run_pytest(
            log_stem=Path(f"{stem}.red"), expect="red", files=files, device=device, timeout=timeout, **common
        )

    placing = upstream.Placing(ctx, target, repo, moved=moved, notes=notes, run_red=run_red, is_test=is_test_file)
    # The patches the base already holds, found as a stack (a base with patches 1..k, e.g. upstream main
    # after k pull requests landed), and those that went in on top of it.
    in_base = upstream.landed(repo, base, target.patch_paths(), ctx.work_dir())
    went_in = set()
    prev = base
    for index, name in enumerate(target.patches, start=1):
        res = PatchResult(name=name, target=target.name, index=index, depends_on=target.depends.get(name, []))
        results.append(res)
        patch = target.patch_path(name)
        ctx.log(f"[{target.name} {index}/{len(target.patches)}] {name}")
        repo.reset_hard(prev)
        if not placing.place(
            res,
            patch,
            checked=only is None or name in only,
            stem=logs / name.removesuffix(".patch"),
            in_base=patch in in_base,
        ):
            repo.reset_hard(prev)
            res.decide()
            continue
        res.applies = True
        went_in.add(name)
        commit = repo.head()
        res.applies_alone = repo.apply_check_on(base, patch, ctx.work)
        if not res.applies_alone and res.base_status == upstream.CLEAN:
            _check_dependencies(ctx, target, repo, base, res, patch, went_in)
        if only is not None and name not in only:
            res.checked = False
            res.decide()
            prev = commit
            continue
        changes = repo.changes(prev, commit)
        added = [c.path for c in changes if c.status == "A" and c.path.startswith(target.tests)]
        res.test_files = [p for p in added if is_test_file(p)]
        touched_py = [c.path for c in changes if c.status != "D" and c.path.endswith(".py")]
        stem = logs / name.removesuffix(".patch")
        if not res.test_files:
            res.red = PytestRun(status="no-tests")
            res.green = PytestRun(status="no-tests")
            res.problems.append(f"adds no test files under {target.tests}")
        else:
            repo.reset_hard(prev)
            repo.run("checkout", commit, "--", *added)
            common = {"python": python, "repo_dir": repo.path, "source_dir": target.source_dir}
            common.update(files=res.test_files, device=device, timeout=timeout)
            res.red = cached_pytest(cache, log_stem=Path(f"{stem}.red"), expect="red", **common)
            repo.reset_hard(commit)
            res.green = cached_pytest(cache, log_stem=Path(f"{stem}.green"), expect="green", **common)
            if not res.red_without_fix:
                res.problems.append(f"without its fix the tests are {res.red.status}, not red")
                if moved and res.red.status == "not-red":
                    res.notes.append("its tests pass on this base without it: fixed upstream in another way?")
            if not res.green_with_fix:
                res.problems.append(f"with the patch the tests are {res.green.status}, not green")
        repo.reset_hard(commit)
        res.style = run_style(python, repo.path, touched_py)
        if not res.style.clean:
            res.problems.append("ruff check / ruff format --check not clean")
        res.decide()
        prev = commit
    return results


def _check_dependencies(ctx, target, repo, base, res, patch, went_in):
    """A patch that applies in the series but not alone on the base needs an earlier one: the manifest must say
    which (`[targets.<target>.depends]`), so that it is submitted after it. Else it is a hidden dependency."""
    needs = [dep for dep in target.depends_on(res.name) if dep in went_in]
    if needs and upstream.applies_with(repo, base, patch, [target.patch_path(dep) for dep in needs], ctx.work):
        return
    res.hidden_dependency = True
    table = f"[targets.{target.name}.depends]"
    if needs:
        recorded = ", ".join(dep[:4] for dep in needs)
        res.problems.append(
            f"does not apply on the base with only the patches it depends on ({recorded}): record the other "
            f"earlier patches it needs in {table}"
        )
    else:
        res.problems.append(
            f"does not apply alone on the base, but {table} records no earlier patch it needs (hidden dependency): "
            "record the ones it needs"
        )


def verify_with_companions(ctx, target, results, scratch, *, python, device, timeout, cache=None):
    """Run all of `target`'s regression tests on its fully patched checkout with the patched sources of the
    targets in `target.verify_with` on PYTHONPATH: the series must not depend on, nor break with, its companions.

    Returns None when there is nothing to run, else a dict for the report."""
    others = [ctx.manifest.target(name) for name in target.verify_with]
    others = [other for other in others if other.name in scratch and other.patches]
    own = [res for res in results if res.target == target.name]
    if not others or not own or not all(res.verdict == "ok" for res in own):
        return None
    repo, _ = scratch[target.name]
    files = [path for res in own for path in res.test_files]
    paths = [scratch[other.name][0].path / other.source_dir for other in others]
    label = f"{target.name} + patched {', '.join(other.name for other in others)}"
    ctx.log(f"[{label}] all {len(files)} test file(s) of {target.name}")
    run = cached_pytest(
        cache,
        python=python,
        repo_dir=repo.path,
        source_dir=target.source_dir,
        files=files,
        device=device,
        log_stem=ctx.work / "logs" / "verify" / target.name / "with-companions",
        timeout=timeout,
        expect="green",
        extra_paths=paths,
    )
    return {
        "target": target.name,
        "with": [other.name for other in others],
        "label": label,
        "green": run.status == "green",
        "run": asdict(run),
    }


# -- output ------------------------------------------------------------------------------------------


def _cell_red(res):
    if res.red is None:
        return "-"
    if res.red.status == "red":
        return f"yes {res.red.failed}/{res.red.total}"
    if res.red.total:
        return f"NO: {res.red.status} {res.red.failed}/{res.red.total}"
    return f"NO: {res.red.status}"


def _cell_green(res):
    if res.green is None:
        return "-"
    if res.green.status == "green":
        return f"yes {res.green.passed}/{res.green.skipped}"
    return f"NO: {res.green.status} {res.green.passed}/{res.green.skipped}"


def _yes(value, no="NO"):
    return "-" if value is None else ("yes" if value else no)


def _cell_alone(res):
    if res.depends_on:
        return "needs " + ",".join(dep[:4] for dep in res.depends_on)
    return _yes(res.applies_alone, "no")


APPLIES_CELL = {
    upstream.CLEAN: "yes",
    upstream.THREE_WAY: "3-way",
    upstream.CONFLICT: "CONFLICT",
    upstream.ALREADY_UPSTREAM: "upstream",
    upstream.FIXED_DIFFERENTLY: "fixed upstream",
}


def table(results):
    head = ("patch", "applies", "alone", "red (failed/total)", "green (passed/skipped)", "style", "verdict")
    rows = [head]
    for res in results:
        style = "-" if res.style is None else ("clean" if res.style.clean else "NOT CLEAN")
        rows.append(
            (
                f"{res.target}/{res.name}",
                APPLIES_CELL.get(res.base_status, "-"),
                _cell_alone(res),
                _cell_red(res),
                _cell_green(res),
                style,
                res.verdict.upper() if res.verdict == "fail" else res.verdict,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _junit_outcome(res, check, passed, required, detail):
    """None when the check passed, else ("failure" or "skipped", message, text)."""
    if res.base_status in upstream.INFORMATIONAL:
        if check == "applies":
            return "skipped", f"{res.base_status}: {res.notes[0] if res.notes else ''}", ""
        return "skipped", f"not run: {res.base_status}", ""
    if not res.applies:
        if check == "applies":
            return "failure", "applies failed", "\n".join(res.problems)
        if check == "red_without_fix" and res.red is not None:
            return None if passed else ("skipped", f"without the patch: {res.red.status}", "")
        return "skipped", "not run: the patch does not apply", ""
    if passed:
        return None
    if not res.checked and check not in ("applies", "applies_alone"):
        return "skipped", "not checked (--patch)", ""
    if required:
        return "failure", f"{check} failed", str(detail or "")
    return "skipped", str(detail), ""


def write_junit(path, results, duration):
    suite = ET.Element("testsuite", name="series-verify", time=f"{duration:.2f}")
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for res in results:
        checks = [
            ("applies", res.applies, True, None),
            (
                "applies_alone",
                res.applies_alone,
                res.hidden_dependency,
                "; ".join(res.problems) if res.hidden_dependency else "does not apply alone on the bare base",
            ),
            ("red_without_fix", res.red_without_fix, True, res.red and res.red.status),
            ("green_with_fix", res.green_with_fix, True, res.green and res.green.status),
            (
                "style_clean",
                res.style_clean,
                True,
                res.style and f"{res.style.check_output}\n{res.style.format_output}",
            ),
        ]
        for check, passed, required, detail in checks:
            case = ET.SubElement(suite, "testcase", classname=f"{res.target}.{res.name}", name=check)
            counts["tests"] += 1
            if check == "applies" and res.base_status == upstream.THREE_WAY:
                ET.SubElement(case, "system-out").text = "applies with a 3-way merge"
            outcome = _junit_outcome(res, check, passed, required, detail)
            if outcome is None:
                continue
            kind, message, text = outcome
            element = ET.SubElement(case, kind, message=message)
            if text:
                element.text = text
            counts["failures" if kind == "failure" else "skipped"] += 1
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("errors", "0")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    Path(path).write_text(ET.tostring(root, encoding="unicode") + "\n", encoding="utf-8")


# -- the command -------------------------------------------------------------------------------------


def run(ctx, args):
    started = time.monotonic()
    targets = ctx.manifest.select(args.target)
    if args.base and len(targets) > 1:
        raise SeriesError("--base names one target's base; add --target")
    spec = base_mod.parse_spec(args.base)
    for target in targets:
        check_patch_files(target)
    only = None
    if args.patch:
        only = set()
        for wanted in args.patch:
            found = None
            for target in targets:
                try:
                    found = find_patch(target, wanted)
                    break
                except SeriesError:
                    continue
            if found is None:
                names = ", ".join(p for t in targets for p in t.patches) or "none"
                raise SeriesError(f"unknown patch {wanted!r} (patches: {names})")
            only.add(found)

    regression_target = None
    if args.upstream_tests:
        listing = [target for target in targets if target.upstream_tests]
        if not listing:
            named = ", ".join(target.name for target in targets)
            raise SeriesError(f"--upstream-tests: {named} lists no upstream_tests in {ctx.manifest.path.name}")
        if len(listing) > 1:
            raise SeriesError("--upstream-tests names one target's tests; add --target")
        regression_target = listing[0]
        regression.parse_spec(args.upstream_tests, regression_target)

    python = pyenv.interpreter(ctx.work, ctx.requirements, args.python, log=ctx.log)
    info = pyenv.probe(python)
    if args.device == "cuda" and not info.get("cuda"):
        torch = info.get("torch") or "missing"
        raise SeriesError(f"--device cuda needs a CUDA build of torch, but {python} has torch {torch} without CUDA")
    cache = None
    if not args.no_cache:
        identity = {"python": str(python), "probe": info, "device": args.device, "tool": file_digest(__file__)}
        if args.device == "cuda":
            identity["visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
        cache = RunCache(ctx.work / "cache" / "verify", identity)

    results, target_reports, scratch, tops = [], [], {}, {}
    for target in targets:
        repo, base = prepare_scratch(ctx, target, spec)
        scratch[target.name] = (repo, base)
        notes = []
        target_reports.append(
            {
                "name": target.name,
                "version": target.version,
                "base": {"spec": args.base or "sdist", "describe": spec.describe(target), "commit": base},
                "patches": len(target.patches),
                "notes": notes,
            }
        )
        if not target.patches:
            ctx.out(f"no patches for {target.name}: nothing to verify")
            continue
        results += verify_target(
            ctx,
            target,
            repo,
            base,
            python=python,
            device=args.device,
            only=only,
            timeout=args.test_timeout,
            spec=spec,
            notes=notes,
            cache=cache,
        )
        tops[target.name] = repo.head()
    companions = []
    if only is None:
        for target in targets:
            companion = verify_with_companions(
                ctx,
                target,
                results,
                scratch,
                python=python,
                device=args.device,
                timeout=args.test_timeout,
                cache=cache,
            )
            if companion is not None:
                companions.append(companion)
    upstream_tests = []
    if regression_target is not None:
        repo, base = scratch[regression_target.name]
        upstream_tests.append(
            regression.run(
                ctx,
                regression_target,
                repo,
                {"base": base, "series": tops.get(regression_target.name, base)},
                args.upstream_tests,
                python=python,
                device=args.device,
                timeout=args.test_timeout,
            )
        )
    # Conflicts and failed checks need a maintainer; a patch already upstream is only news.
    ok = all(res.verdict in ("ok", "not checked", "upstream") for res in results)
    ok = ok and all(companion["green"] for companion in companions)
    ok = ok and all(part["ok"] for part in upstream_tests)
    duration = round(time.monotonic() - started, 2)
    if results:
        ctx.out(table(results))
        for res in results:
            for problem in res.problems:
                ctx.out(f"  {res.target}/{res.name}: {problem}")
            for note in res.notes:
                ctx.out(f"  {res.target}/{res.name}: note: {note}")
    for companion in companions:
        run = companion["run"]
        verdict = "ok" if companion["green"] else f"FAIL ({run['status']})"
        counts = f"{run['passed']} passed, {run['skipped']} skipped, {run['failed']} failed"
        ctx.out(f"{companion['label']}: {verdict}, {counts}")
    for part in upstream_tests:
        for line in regression.lines(part):
            ctx.out(line)
    logs = ctx.work / "logs" / "verify"
    runs = [asdict(run) for res in results for run in (res.red, res.green) if run and run.exit_code is not None]
    runs += [companion["run"] for companion in companions]
    reused = sum(run["cached"] for run in runs)
    if reused:
        ctx.out(f"{reused} of {len(runs)} pytest runs: outcome of an identical earlier run (--no-cache to run them)")
    ctx.out(f"verify: {'OK' if ok else 'FAILED'} ({len(results)} patch(es), {duration:.1f}s, logs in {logs})")
    report = {
        "schema_version": SCHEMA_VERSION,
        "ok": ok,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": args.device,
        "python": str(python),
        "tools": {key: info.get(key) for key in ("python", "pytest", "ruff", "torch", "cuda")},
        "targets": target_reports,
        "patches": [res.to_json() for res in results],
        "companions": companions,
        "upstream_tests": upstream_tests,
        "duration_s": duration,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.junit:
        write_junit(args.junit, results, duration)
    reports.save_last(ctx.work, report)
    if args.summary:
        reports.append_markdown(args.summary, report)
    return 0 if ok else 1
