"""`bundle` and the runner inside it (scripts/run_gpu_checks.py): built from a fake target and run here on CPU
(`--cpu`), compared with `verify` on the same series; the plain run without a GPU; bad input."""

import ast
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import tomllib

import pytest
from seriesfixtures import (
    ALL_SKIPPED,
    COLLECT_ERROR,
    GOOD,
    IMPORT_ONLY,
    NO_TESTS,
    NOT_RED,
    REPO_ROOT,
    SERIES,
    VERSION,
    one_error_line,
    table_rows,
)


RUNNER = REPO_ROOT / "scripts" / "run_gpu_checks.py"
sys.path.insert(0, str(REPO_ROOT / "scripts"))

from seriestool import render  # noqa: E402


def _runner_module():
    spec = importlib.util.spec_from_file_location("run_gpu_checks", RUNNER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build(fake, python, out, *extra):
    return fake.run("bundle", "--out", str(out), "--python", python, *extra)


def _unpack(archive, dest):
    dest.mkdir()
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(dest, filter="data")
    return dest / "series-gpu-checks"


def _run(bundle_dir, python, *args, env=None):
    env = dict(env or os.environ)
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [python, str(bundle_dir / "run_gpu_checks.py"), *args],
        cwd=bundle_dir,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def torch_python(test_python):
    proc = subprocess.run([test_python, "-c", "import torch"], capture_output=True)
    if proc.returncode != 0:
        pytest.skip("needs torch in the test interpreter (run `python3 scripts/series.py selftest`)")
    return test_python


def test_fake_bundle_replays_verify_on_cpu(fake, torch_python, tmp_path):
    fake.build_series(GOOD, NOT_RED, NO_TESTS, VERSION, ALL_SKIPPED, COLLECT_ERROR, IMPORT_ONLY)
    out = tmp_path / "gpu.tar.gz"
    proc = _build(fake, torch_python, out)
    assert proc.returncode == 0, proc.stderr
    assert "7 patch(es), 6 test file(s)" in proc.stdout and "series-gpu-checks/deps" in proc.stdout
    bundle_dir = _unpack(out, tmp_path / "unpacked")
    bundle = json.loads((bundle_dir / "bundle.json").read_text(encoding="utf-8"))

    # What the bundle holds: the sdist as pinned, each patch's files after it, the packages, hashes of all.
    (target,) = bundle["targets"]
    assert target["sdist"] == "sdists/fakepkg-1.0.tar.gz"
    assert (bundle_dir / target["sdist"]).read_bytes() == fake.sdist.read_bytes()
    names = [p["name"] for p in target["patches"]]
    assert names == tomllib.loads(fake.manifest.read_text(encoding="utf-8"))["targets"]["fake"]["patches"]
    good = target["patches"][0]
    assert good["test_files"] == ["tests/regress/test_add.py"]
    assert {c["path"] for c in good["changed"]} == {"src/fakepkg/core.py", "tests/regress/test_add.py"}
    assert "return a + b" in (bundle_dir / good["stage"] / "src/fakepkg/core.py").read_text(encoding="utf-8")
    packages = {p["name"].lower(): p for p in bundle["deps"]["packages"]}
    assert {"pytest", "parameterized", "pluggy", "iniconfig"} <= set(packages)
    assert all(p["license"] and p["license"] != "unknown" for p in packages.values())
    assert not any(rel.startswith("deps/site/torch/") for rel in bundle["files"])
    listed = {p.relative_to(bundle_dir).as_posix() for p in bundle_dir.rglob("*") if p.is_file()}
    assert listed == set(bundle["files"]) | {"bundle.json"}
    assert bundle["seed"] is None  # no transformers target

    # The same series through verify and through the runner on CPU: the same statuses and counts.
    report = tmp_path / "verify.json"
    verified = fake.run("verify", "--python", torch_python, "--json", str(report), "--no-cache")
    assert verified.returncode == 1, verified.stderr
    expected = json.loads(report.read_text(encoding="utf-8"))
    runner_json = tmp_path / "gpu.json"
    proc = _run(bundle_dir, torch_python, "--cpu", "--json", str(runner_json))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "NOT A GPU VERDICT" in proc.stdout
    assert "gpu checks: FAILED on CPU (not a GPU verdict)" in proc.stdout
    got = json.loads(runner_json.read_text(encoding="utf-8"))
    assert (got["ok"], got["gpu_verdict"], got["device"]) == (False, False, "cpu")
    assert got["tools"]["torch"] and got["seed000"] is None
    counts = ("status", "exit_code", "passed", "failed", "errors", "skipped", "total", "failing")
    for mine, theirs in zip(got["patches"], expected["patches"], strict=True):
        assert mine["name"] == theirs["name"]
        for key in ("verdict", "red_without_fix", "green_with_fix", "test_files", "base_status", "applies_alone"):
            assert mine[key] == theirs[key], (mine["name"], key)
        for run in ("red", "green"):
            assert {k: mine[run][k] for k in counts} == {k: theirs[run][k] for k in counts}, (mine["name"], run)
    verdicts = [p["verdict"] for p in got["patches"]]
    assert verdicts == ["ok", "fail", "fail", "ok", "fail", "fail", "fail"]
    assert [p["red"]["status"] for p in got["patches"]][5:] == ["error", "import-only"]

    # The table is verify's: the same cells but style, which the runner leaves to verify.
    mine, theirs = table_rows(proc.stdout), table_rows(verified.stdout)
    for row in (*mine, *theirs):
        row.pop("style")
    assert mine == theirs
    assert "fake 0002: without its fix the tests are not-red, not red" in proc.stdout


def test_plain_run_without_a_gpu_exits_2(fake, torch_python, tmp_path):
    fake.build_series(GOOD)
    out = tmp_path / "gpu.tar.gz"
    assert _build(fake, torch_python, out).returncode == 0
    bundle_dir = _unpack(out, tmp_path / "unpacked")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # no GPU, even on a machine that has one
    proc = _run(bundle_dir, torch_python, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("run_gpu_checks: error: ")]
    assert len(errors) == 1 and "no GPU visible to torch" in errors[0] and "nothing was run" in errors[0]
    assert "--cpu" in errors[0]
    assert proc.stdout == ""
    assert not (bundle_dir / "work").exists()

    # A damaged copy (a stage file changed) is refused before anything runs.
    stage = bundle_dir / "stages" / "fake" / "0001" / "src" / "fakepkg" / "core.py"
    stage.write_text(stage.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    proc = _run(bundle_dir, torch_python, "--cpu")
    assert proc.returncode == 2
    assert "the bundle is damaged: stages/fake/0001/src/fakepkg/core.py (sha256 differs)" in proc.stderr


def test_runner_names_a_package_the_tests_import_that_is_missing(fake, torch_python, tmp_path):
    missing = (
        "core: make add() add, with a helper",
        {
            "src/fakepkg/core.py": ("return a - b", "return a + b"),
            "tests/regress/test_helper.py": "import no_such_helper_pkg\n\n\ndef test_helper():\n    assert True\n",
        },
    )
    fake.build_series(missing)
    out = tmp_path / "gpu.tar.gz"
    assert _build(fake, torch_python, out).returncode == 0
    proc = _run(_unpack(out, tmp_path / "unpacked"), torch_python, "--cpu")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (
        "the release does not import" in proc.stderr and "(module no_such_helper_pkg is not installed" in proc.stderr
    )


def test_runner_bad_arguments_and_interpreters(fake, torch_python, tmp_path):
    fake.build_series(GOOD)
    out = tmp_path / "gpu.tar.gz"
    assert _build(fake, torch_python, out).returncode == 0
    bundle_dir = _unpack(out, tmp_path / "unpacked")
    proc = _run(bundle_dir, torch_python, "--cpu", "--python", str(tmp_path / "nope"))
    assert proc.returncode == 2 and "--python" in proc.stderr and "does not exist" in proc.stderr
    proc = _run(bundle_dir, torch_python, "--cpu", "--patch", "0042")
    assert proc.returncode == 2 and "unknown patch '0042'" in proc.stderr
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine\n", encoding="utf-8")
    proc = _run(bundle_dir, torch_python, "--cpu", "--work", str(foreign))
    assert proc.returncode == 2 and "did not make" in proc.stderr
    assert (foreign / "keep.txt").read_text(encoding="utf-8") == "mine\n"
    # An interpreter without torch: named, exit 2.
    bare = shutil.which("python3")
    proc = subprocess.run([bare, "-c", "import torch"], capture_output=True)
    if proc.returncode != 0:
        proc = _run(bundle_dir, torch_python, "--cpu", "--python", bare)
        assert proc.returncode == 2 and "no torch in" in proc.stderr


def test_bundle_bad_out_writes_nothing(fake, torch_python, tmp_path):
    fake.build_series(GOOD)
    cases = [
        (tmp_path / "missing" / "gpu.tar.gz", "does not exist"),
        (tmp_path, "is a folder"),
        (tmp_path / "gpu.zip", "must end in .tar.gz"),
        (fake.manifest / "gpu.tar.gz", "is not a folder"),  # below a file
    ]
    before = sorted(p.name for p in tmp_path.iterdir())
    for out, why in cases:
        proc = _build(fake, torch_python, out)
        assert why in one_error_line(proc)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_bundle_refuses_a_patch_that_does_not_apply(fake, torch_python, tmp_path):
    (name,) = fake.build_series(GOOD)
    patch = fake.patches_dir / "fake" / name
    patch.write_text(patch.read_text(encoding="utf-8").replace("-    return a - b", "-    return a * b"), "utf-8")
    out = tmp_path / "gpu.tar.gz"
    line = one_error_line(_build(fake, torch_python, out))
    assert "0001-core-make-add-add.patch does not go onto the pinned base" in line and "no bundle was written" in line
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".gpu", "gpu"))) == []


def test_bundle_is_reproducible(fake, torch_python, tmp_path):
    fake.build_series(GOOD, VERSION)
    first, second = tmp_path / "a.tar.gz", tmp_path / "b.tgz"
    assert _build(fake, torch_python, first).returncode == 0
    assert _build(fake, torch_python, second).returncode == 0
    assert first.read_bytes() == second.read_bytes()
    mask = os.umask(0)
    os.umask(mask)
    assert first.stat().st_mode & 0o777 == 0o666 & ~mask  # as any new file, not private like a temporary one


def test_runner_table_is_verifys():
    """The runner keeps its own copy of verify's table (it runs without the tool): the same lines."""
    runner = _runner_module()
    base = {"target": "transformers", "applies_alone": True, "depends_on": [], "style": None, "style_clean": None}
    red = {"status": "red", "failed": 3, "total": 4, "passed": 1, "skipped": 0}
    green = {"status": "green", "failed": 0, "total": 4, "passed": 4, "skipped": 0}
    patches = [
        dict(
            base,
            name="0001-a.patch",
            subject="Trainer: a fix",
            base_status="clean",
            verdict="ok",
            red=red,
            green=green,
        ),
        dict(
            base,
            name="0002-b.patch",
            subject="Trainer: a much longer subject that the table has to cut to fit in the width" * 2,
            tier="fork",
            base_status="3-way",
            verdict="fail",
            red=dict(red, status="not-red", failed=0),
            green=dict(green, status="failed", passed=2),
            depends_on=["0001-a.patch"],
        ),
        dict(
            base,
            name="0003-c.patch",
            subject="",
            base_status="clean",
            verdict="not checked",
            red=None,
            green=None,
            applies_alone=None,
        ),
        dict(
            base,
            name="0004-d.patch",
            subject="x",
            base_status="clean",
            verdict="fail",
            red={"status": "no-tests", "failed": 0, "total": 0},
            green={"status": "no-tests", "passed": 0, "skipped": 0},
            style={"clean": False},
            style_clean=False,
            depends_on=["0001-a.patch", "0002-b.patch", "0003-c.patch"],
        ),
    ]
    assert runner.table(patches) == render.table(patches)
    assert runner.table(patches, width=60) == render.table(patches, width=60)


def test_runner_classifies_pytest_runs_like_verify(tmp_path):
    runner = _runner_module()
    junit = tmp_path / "run.xml"

    def cases(*items):
        body = "".join(
            f'<testcase classname="t.T" name="t{i}">{inner}</testcase>' for i, inner in enumerate(items, start=1)
        )
        junit.write_text(f"<testsuites><testsuite>{body}</testsuite></testsuites>", encoding="utf-8")

    cases('<failure message="AssertionError: 1 != 2"/>', "")
    assert runner.classify(1, junit, "red")[0]["status"] == "red"
    cases('<failure message="ModuleNotFoundError: No module named x"/>')
    assert runner.classify(1, junit, "red")[0]["status"] == "import-only"
    cases("", "")
    assert runner.classify(0, junit, "red")[0]["status"] == "not-red"
    cases('<skipped message="needs a GPU"/>')
    assert runner.classify(0, junit, "red")[0]["status"] == "skipped"
    assert runner.classify(0, junit, "green")[0]["status"] == "green"
    assert runner.classify(5, junit, "green")[0]["status"] == "no-tests"
    assert runner.classify(None, junit, "green")[0]["status"] == "timeout"
    assert runner.classify(2, junit, "green")[0]["status"] == "error"
    cases('<error message="collection failure"/>')
    run, outcomes = runner.classify(1, junit, "green")
    assert (run["status"], run["errors"], outcomes) == ("failed", 1, {"t.T::t1": ("error", ["collection failure"])})


def test_runner_finds_multi_process_tests():
    runner = _runner_module()
    source = (
        "import pytest\n\n\nclass T:\n"
        "    def test_one(self):\n        pass\n\n"
        "    def test_two(self):\n        cmd = ['-m', 'torch.distributed.run', '--nproc_per_node=2']\n"
        "        env = {'CUDA_VISIBLE_DEVICES': ''}\n\n"
        "    @require_torch_multi_accelerator\n    def test_three(self):\n        pass\n"
    )
    found = dict(runner._test_functions(source))
    assert set(found) == {"test_one", "test_two", "test_three"}
    assert runner.MULTI_PROCESS.search(found["test_two"]) and runner.HIDES_GPUS.search(found["test_two"])
    assert runner.MULTI_DEVICE.search(found["test_three"]) and not runner.MULTI_PROCESS.search(found["test_one"])
    entry = {"file": "tests/test_m.py", "test": "test_two"}
    cases = {
        "tests.test_m.T::test_two_0_a": ("passed", []),
        "tests.test_m.T::test_two_1_b": ("passed", []),
        "tests.test_m.T::test_twofold": ("failed", ["no"]),
        "tests.test_other.T::test_two": ("failed", ["no"]),
    }
    assert set(runner._outcomes(entry, cases)) == {"tests.test_m.T::test_two_0_a", "tests.test_m.T::test_two_1_b"}
    assert runner._state(runner._outcomes(entry, cases), "(here)") == "passed (here)"
    assert runner._state({"x": ("skipped", ["needs 2 GPUs"])}, "") == "skipped (needs 2 GPUs)"


def test_runner_is_python310_and_standalone():
    """The runner goes to machines with Python 3.10 and without the tool: 3.10 syntax, standard library only."""
    source = RUNNER.read_text(encoding="utf-8")
    tree = ast.parse(source, feature_version=(3, 10))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)
    for newer in ("StrEnum", "tomllib", "datetime.UTC", "except*", "TaskGroup"):
        assert newer not in source
    python310 = shutil.which("python3.10")
    if python310 and subprocess.run([python310, "-c", "pass"], capture_output=True).returncode == 0:
        proc = subprocess.run([python310, str(RUNNER), "--help"], capture_output=True, text=True)
        assert proc.returncode == 0 and "--cpu" in proc.stdout, proc.stderr


def test_bundle_help_names_the_runner():
    proc = subprocess.run([sys.executable, str(SERIES), "bundle", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0
    assert "run_gpu_checks.py" in proc.stdout and "exit status" in proc.stdout


@pytest.mark.network
def test_real_series_bundle(torch_python, tmp_path):
    """The series as the manifest lists it now (never a fixed list): every patch and test in the bundle, under
    60 MB, no torch; the runner on CPU for the first patch of each target (the whole run takes minutes)."""
    manifest = tomllib.loads((REPO_ROOT / "patches" / "series.toml").read_text(encoding="utf-8"))
    env = dict(os.environ, SERIES_DOWNLOADS=str(REPO_ROOT / ".work" / "downloads"))
    env.pop("SERIES_WORK", None)
    out = tmp_path / "gpu.tar.gz"
    cmd = [sys.executable, str(SERIES), "--work", str(tmp_path / "work"), "bundle", "--out", str(out)]
    proc = subprocess.run([*cmd, "--python", torch_python], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size < 60 * 1000 * 1000
    bundle_dir = _unpack(out, tmp_path / "unpacked")
    bundle = json.loads((bundle_dir / "bundle.json").read_text(encoding="utf-8"))
    assert [t["name"] for t in bundle["targets"]] == list(manifest["targets"])
    for target in bundle["targets"]:
        pin = manifest["targets"][target["name"]]
        assert [p["name"] for p in target["patches"]] == pin["patches"]
        assert target["sha256"] == pin["sha256"]
        for patch in target["patches"]:
            text = (REPO_ROOT / "patches" / target["name"] / patch["name"]).read_text(encoding="utf-8")
            assert patch["test_files"] and all(f"+++ b/{path}" in text for path in patch["test_files"])
    assert bundle["seed"]["script"] == "checks/skipped_steps_natural.py"
    assert not any("/torch/" in rel or rel.startswith("deps/site/torch") for rel in bundle["files"])
    required = {dep["name"].lower() for dep in bundle["deps"]["compiled"] if dep["required"]}
    assert {"numpy", "tokenizers", "safetensors"} <= required

    proc = _run(bundle_dir, torch_python, env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert proc.returncode == 2 and "no GPU visible to torch" in proc.stderr
    first = {t["patches"][0]["name"][:4] for t in bundle["targets"]}
    args = [arg for number in sorted(first) for arg in ("--patch", number)]
    proc = _run(bundle_dir, torch_python, "--cpu", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = table_rows(proc.stdout)
    assert len(rows) == sum(len(t["patches"]) for t in bundle["targets"])
    checked = [row for row in rows if row["verdict"] == "ok"]
    assert len(checked) == len(bundle["targets"]) and all(row["red fail/all"].startswith("yes") for row in checked)


def test_interrupted_runner_stops_its_pytest(fake, torch_python, tmp_path):
    """Ctrl-C while a test runs: the runner stops that pytest's whole process group and exits 130."""
    blocking = (
        "core: make add() add, slowly",
        {
            "src/fakepkg/core.py": ("return a - b", "return a + b"),
            "tests/regress/test_block.py": (
                "import os\nimport pathlib\nimport time\n\nfrom fakepkg.core import add\n\n\n"
                "def test_block():\n"
                "    pathlib.Path(os.environ['BLOCK_PIDFILE']).write_text(str(os.getpgid(0)))\n"
                "    time.sleep(120)\n"
                "    assert add(1, 1) == 2\n"
            ),
        },
    )
    fake.build_series(blocking)
    out = tmp_path / "gpu.tar.gz"
    assert _build(fake, torch_python, out).returncode == 0
    bundle_dir = _unpack(out, tmp_path / "unpacked")
    pidfile = tmp_path / "pgid"
    env = dict(os.environ, BLOCK_PIDFILE=str(pidfile))
    env.pop("PYTHONPATH", None)
    runner = subprocess.Popen(
        [torch_python, str(bundle_dir / "run_gpu_checks.py"), "--cpu"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not pidfile.exists() or not pidfile.read_text():
            assert runner.poll() is None, runner.communicate()
            assert time.monotonic() < deadline, "the blocking test never started"
            time.sleep(0.1)
        pgid = int(pidfile.read_text())
        runner.send_signal(signal.SIGINT)
        _, err = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 130 and "run_gpu_checks: error: interrupted" in err
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)
