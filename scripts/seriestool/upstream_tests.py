"""`verify --upstream-tests SPEC`: upstream's own tests, once on the base and once with the whole series.

A maintainer runs the existing tests as well as the ones a patch adds. The test files a target lists in
`upstream_tests` (manifest) are taken from SPEC - `path:DIR` (a tree holding upstream's `tests/`) or
`git:URL@REF` (a shallow, sparse fetch of `tests/` only; `{version}` in REF is the pinned version) -
copied into a tool-owned checkout of the base, and run there with the base's sources, then with the
series' sources. Every test that passes on the base and does not pass with the series is a regression.
"""

import hashlib
import os
import shutil
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import asdict
from pathlib import Path

from . import base as base_mod
from .errors import SeriesError
from .git import GitError, Repo
from .render import wrap
from .runners import run_pytest
from .statuses import RunStatus


STATES = ("passed", "failed", "skipped", "error")
REFS = "refs/series/upstream-tests"
# Upstream's tests must not reach the Hub: a download is not what the series changes.
ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def parse_spec(spec, target):
    """("path", DIR, "") or ("git", URL, REF) for `path:DIR` / `git:URL@REF`."""
    if spec.startswith("path:") and len(spec) > 5:
        return "path", str(Path(spec[5:]).expanduser().resolve()), ""
    if spec.startswith("git:") and "@" in spec[4:]:
        url, ref = spec[4:].rsplit("@", 1)
        if url and ref and ":" not in ref:
            return "git", url, ref.replace("{version}", target.version)
    raise SeriesError(f"bad --upstream-tests {spec!r}: use path:DIR (a tree with tests/) or git:URL@REF")


def fetch_tests(ctx, spec, target):
    """The folder holding upstream's `tests/` for `spec`."""
    kind, location, ref = parse_spec(spec, target)
    if kind == "path":
        root = Path(location)
        if not (root / "tests").is_dir():
            raise SeriesError(f"--upstream-tests {spec}: {root} has no tests/ folder")
        return root
    key = hashlib.sha256(f"{location}@{ref}".encode()).hexdigest()[:16]
    dest = ctx.work / "upstream-tests" / "sources" / key
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".fetch-", dir=dest.parent))
    ctx.log(f"fetching tests/ of {location}@{ref} (shallow, sparse)")
    try:
        repo = Repo(staging, isolated=True)
        clone = ["clone", "--quiet", "--depth=1", "--filter=blob:none", "--sparse", "--no-checkout"]
        repo.run(*clone, "--branch", ref, location, "tree")
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


def _copy_tests(root, files, dest):
    """Copy into `dest` the folders holding `files` (whole), the files beside every folder above them up
    to `tests/` (package markers, conftest, helpers) and `tests/fixtures`."""
    folders = {Path(f).parent for f in files}
    tops = set()
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


def outcomes(junit):
    """{test id: passed | failed | skipped | error} from a JUnit file (empty when there is none)."""
    found = {}
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


def _tree(ctx, target, scratch):
    """A tool-owned checkout (<work>/upstream-tests/<target>/tree) fed with the scratch repository's commits."""
    path = ctx.work / "upstream-tests" / target.name / "tree"
    repo = Repo(path, isolated=True)
    if not (path.is_dir() and repo.is_work_tree() and repo.toplevel() == path.resolve()):
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        repo = Repo.init(path)
        base_mod.set_excludes(repo)
    repo.run("fetch", "--quiet", "--no-tags", str(scratch.path), f"+{REFS}/*:{REFS}/*")
    return repo


def run(ctx, target, scratch, commits, spec, *, python, device, timeout):
    """Run the target's `upstream_tests` from `spec` on each of `commits` ({"base": id, "series": id}) of
    the scratch repository. Returns a dict for the report."""
    root = fetch_tests(ctx, spec, target)
    files = [f for f in target.upstream_tests if (root / f).is_file()]
    missing = [f for f in target.upstream_tests if f not in files]
    report = {
        "target": target.name,
        "spec": spec,
        "files": files,
        "missing": missing,
        "states": {},
        "regressions": [],
        "fixed": [],
        "problems": [],
        "ok": True,
    }
    if missing:
        ctx.log(f"upstream tests: {len(missing)} listed file(s) not in {spec}: {', '.join(missing)}")
    if not files:
        report["problems"].append(f"none of the upstream_tests of {target.name} is in {spec}")
        report["ok"] = False
        return report
    for state, commit in commits.items():
        scratch.run("update-ref", f"{REFS}/{state}", commit)
    repo = _tree(ctx, target, scratch)
    logs = ctx.work / "logs" / "verify" / target.name
    logs.mkdir(parents=True, exist_ok=True)
    found = {}
    for state in commits:
        ctx.log(f"[{target.name} upstream tests] {len(files)} file(s) on the {state}")
        repo.reset_hard(f"{REFS}/{state}")
        _copy_tests(root, files, repo.path)
        run = run_pytest(
            python=python,
            repo_dir=repo.path,
            source_dir=target.source_dir,
            files=files,
            device=device,
            log_stem=logs / f"upstream-tests.{state}",
            timeout=timeout,
            expect=RunStatus.GREEN,
            extra_env=ENV,
        )
        found[state] = outcomes(Path(f"{logs / f'upstream-tests.{state}'}.xml"))
        counts = {name: sum(1 for v in found[state].values() if v == name) for name in STATES}
        report["states"][state] = {
            **counts,
            "total": len(found[state]),
            "exit_code": run.exit_code,
            "timed_out": run.exit_code is None,
            "duration_s": run.duration_s,
            "log": run.log,
        }
        report["states"][state]["run"] = {k: v for k, v in asdict(run).items() if k in ("status", "output_tail")}
    repo.reset_hard(f"{REFS}/base")
    base, series = found.get("base", {}), found.get("series", {})
    if not any(v == "passed" for v in base.values()):
        report["problems"].append(f"no upstream test passed on the base (log {report['states']['base']['log']})")
    for test_id, before in base.items():
        after = series.get(test_id, "not run")
        if before == "passed" and after not in ("passed", "skipped"):
            report["regressions"].append(
                {"id": test_id, "base": before, "series": after, "log": report["states"]["series"]["log"]}
            )
        elif before in ("failed", "error") and after == "passed":
            report["fixed"].append(test_id)
    report["ok"] = not report["regressions"] and not report["problems"]
    return report


def _counts(state):
    return ", ".join(f"{state[name]} {name}" for name in STATES) + f" ({state['duration_s']:.0f}s)"


def lines(report):
    """What `verify` prints about one target's upstream tests."""
    out = []
    head = f"{report['target']} upstream tests ({len(report['files'])} file(s) from {report['spec']})"
    for state, counts in report["states"].items():
        timed_out = ", TIMED OUT" if counts["timed_out"] else ""
        out.append(f"{head}, {state}: {_counts(counts)}{timed_out}")
    for problem in report["problems"]:
        out += wrap(f"{report['target']} upstream tests: {problem}")
    for reg in report["regressions"]:
        out.append(
            f"  REGRESSION {reg['id']}: {reg['base']} on the base, {reg['series']} with the series (log {reg['log']})"
        )
    if report["fixed"]:
        out.append(f"  {len(report['fixed'])} test(s) fail on the base and pass with the series")
    if report["missing"]:
        out += wrap(f"note: not in {report['spec']}: {', '.join(report['missing'])}")
    verdict = "no regression" if report["ok"] else f"FAIL ({len(report['regressions'])} regression(s))"
    out.append(f"{report['target']} upstream tests: {verdict}")
    return out
