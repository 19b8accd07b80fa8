"""`downstream`: outcomes compared with the release's, changes attributed along the series, declarations.

The comparison, the bisection and the declarations are unit tests (tests/unit/test_downstream.py). The
command runs on the fake target with a stand-in for the scenarios (tests/fake_scenarios.py) and a fake
downstream package installed from a wheel made here, so none of this needs torch or the real downstream
packages. The last test runs real scenarios when the real downstream install is there.
"""

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from seriesfixtures import GOOD, NOT_RED, REPO_ROOT, VERSION, one_error_line


sys.path.insert(0, str(REPO_ROOT / "scripts"))

from seriestool import pyenv  # noqa: E402
from seriestool.downstream import compare  # noqa: E402


FAKE_WORKER = Path(__file__).resolve().parent / "fake_scenarios.py"


# -- the command, on the fake target ---------------------------------------------------------------------


def _wheel(folder, version, offset):
    """A wheel of `fakedown` that pip installs without an index."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"fakedown-{version}-py3-none-any.whl"
    files = {
        "fakedown/__init__.py": f"OFFSET = {offset}\n",
        f"fakedown-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: fakedown\nVersion: {version}\n",
        f"fakedown-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = hashlib.sha256(text.encode()).digest()
        import base64

        encoded = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        record.append(f"{name},sha256={encoded},{len(text.encode())}")
    record.append(f"fakedown-{version}.dist-info/RECORD,,")
    files[f"fakedown-{version}.dist-info/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(path, "w") as whl:
        for name, text in files.items():
            whl.writestr(name, text)
    return path


@pytest.fixture
def env(fake, tmp_path):
    """The environment of a downstream run: the fake scenarios, the fake package (1.0, and 0.9 as a layer)."""
    wheels = tmp_path / "wheels"
    _wheel(wheels, "1.0", 0)
    _wheel(wheels, "0.9", 100)
    requirements = tmp_path / "req" / "requirements-downstream.txt"
    requirements.parent.mkdir()
    requirements.write_text("# fake\nfakedown==1.0\n", encoding="utf-8")
    (requirements.parent / "requirements-downstream-fakedown-0.9.txt").write_text("fakedown==0.9\n", encoding="utf-8")
    return fake.env(
        PIP_FIND_LINKS=str(wheels),
        SERIES_DOWNSTREAM_SCENARIOS=str(FAKE_WORKER),
        SERIES_DOWNSTREAM_REQUIREMENTS=str(requirements),
    )


def _declare(fake, names, declarations):
    """Append `[targets.fake.downstream]` with `declarations`: {patch index: [(patterns, reason, fields)]}."""
    lines = ["", "[targets.fake.downstream]"]
    for index, entries in declarations.items():
        items = []
        for patterns, reason, fields in entries:
            item = f"scenarios = {json.dumps(patterns)}, reason = {json.dumps(reason)}"
            if fields:
                item += f", fields = {json.dumps(fields)}"
            items.append("{ " + item + " }")
        lines.append(f'"{names[index]}" = [{", ".join(items)}]')
    with open(fake.manifest, "a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def _run(fake, env, *args):
    report = fake.root / "downstream.json"
    report.unlink(missing_ok=True)
    proc = fake.run("downstream", "--python", sys.executable, "--json", str(report), *args, env=env)
    data = json.loads(report.read_text(encoding="utf-8")) if report.exists() else None
    return proc, data


def test_changes_are_attributed_to_their_patch_and_an_undeclared_one_fails(fake, env):
    names = fake.build_series(GOOD, NOT_RED, VERSION)
    _declare(fake, names, {0: [(["fake/add"], "add() adds", None)], 2: [(["fake/version"], "a version", None)]})
    proc, data = _run(fake, env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert data["ok"] is False
    assert data["packages"] == {"fakedown": ["1.0", "0.9"]}
    by_name = {entry["name"]: entry for entry in data["scenarios"]}
    assert set(by_name) == {"fake/add", "fake/mul", "fake/version", "fake/crash", "fake-0.9/add"}
    assert (by_name["fake/add"]["patch"], by_name["fake/add"]["declared"]) == (names[0], True)
    assert by_name["fake/add"]["differences"] == [
        "global_step -1 -> 5",
        "updates -1 -> 5",
        "scheduler_steps -1 -> 5",
        "events on_step_end -1 -> 5",
        "weights 1 of 1 tensors differ",
        "log_history step 1 loss -0.1 -> 0.5",
    ]
    assert by_name["fake/add"]["changes"][0]["reasons"] == ["add() adds"]
    assert (by_name["fake/mul"]["patch"], by_name["fake/mul"]["declared"], by_name["fake/mul"]["differences"]) == (
        None,
        True,
        [],
    )
    assert (by_name["fake/version"]["patch"], by_name["fake/version"]["declared"]) == (names[2], True)
    # the same change in the layer's scenario is not declared: it fails the run, named with its patch
    assert (by_name["fake-0.9/add"]["patch"], by_name["fake-0.9/add"]["declared"]) == (names[0], False)
    assert [u["scenario"] for u in data["undeclared"]] == ["fake-0.9/add"]
    assert f"undeclared: fake-0.9/add: fake {names[0]} changes global_step 99 -> 105" in proc.stdout
    # one line per scenario as it goes, then the table
    assert "fake/mul                         fakedown               same as the release" in proc.stdout
    assert [p["label"] for p in data["points"]] == ["release", "0001", "0002", "0003"]
    assert "downstream: FAILED (5 scenario(s), 1 undeclared change(s), 0 not run" in proc.stdout


def test_declared_changes_pass_and_a_second_run_reuses_every_outcome(fake, env):
    names = fake.build_series(GOOD, NOT_RED)
    _declare(fake, names, {0: [(["fake/add", "fake-0.9/*"], "add() adds", None)]})
    proc, data = _run(fake, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["ok"] is True and data["undeclared"] == [] and data["not_seen"] == []
    assert "installing 1 pinned package(s)" in proc.stderr
    ran = data["outcomes"]["run"]
    assert ran > 0 and data["outcomes"]["reused"] == 0
    proc, again = _run(fake, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert again["outcomes"] == {"run": 0, "reused": ran}
    assert "installing" not in proc.stderr
    proc, fresh = _run(fake, env, "--no-cache")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert fresh["outcomes"] == {"run": ran, "reused": 0}
    assert [e["differences"] for e in again["scenarios"]] == [e["differences"] for e in data["scenarios"]]
    # pr shows what the patch changes downstream, with the declared reason
    text = fake.ok("pr", "0001", env=env).stdout
    # in the notes for the submitter (an HTML comment, each line indented by two)
    assert "\nDownstream (the last `series.py downstream` run):\n" in text
    assert "  - Intended: add() adds.\n    - `fake/add`: global_step -1 -> 5;" in text
    # it names what the run ran (the package of each scenario, its versions and how many), nothing else installed
    assert "Checked with fakedown 1.0 and 0.9 (5 scenarios): the scenarios the last `series.py downstream` ran" in (
        " ".join(text.split())
    )
    text = fake.ok("pr", "0002", env=env).stdout
    assert "None of them changes" in text

    # Before: the paragraph named every package installed; a run of some scenarios names only theirs.
    proc, some = _run(fake, env, "--scenario", "fake/add")
    assert some["packages"] == {"fakedown": "1.0"}
    text = " ".join(fake.ok("pr", "0001", env=env).stdout.split())
    assert "Checked with fakedown 1.0 (1 scenario): the scenarios" in text and "0.9" not in text

    # Before: no paragraph at all when no report holds this version of the patch; now it says none ran.
    patch = fake.patches_dir / "fake" / names[0]
    patch.write_text(patch.read_text(encoding="utf-8").replace("\n---\n", "\nReworded.\n---\n", 1), encoding="utf-8")
    text = " ".join(fake.ok("pr", "0001", env=env).stdout.split())
    assert "Downstream (the last `series.py downstream` run): No downstream trainer was checked" in text


def test_a_declaration_limited_to_some_fields_leaves_the_others_undeclared(fake, env):
    names = fake.build_series(GOOD)
    _declare(fake, names, {0: [(["fake*/add"], "add() adds", ["global_step", "log_history"])]})
    proc, data = _run(fake, env, "--scenario", "fake/add")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    change = data["scenarios"][0]["changes"][0]
    assert change["declared_fields"] == ["global_step", "log_history"]
    assert change["undeclared_fields"] == ["updates", "scheduler_steps", "events", "weights"]


def test_patch_stops_the_series_and_stale_declarations_are_noted(fake, env):
    names = fake.build_series(GOOD, NOT_RED, VERSION)
    _declare(fake, names, {0: [(["fake*/add"], "add() adds", None)], 1: [(["fake/mul"], "stale", None)]})
    proc, data = _run(fake, env, "--patch", "0002")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["through"] == names[1]
    assert [p["label"] for p in data["points"]] == ["release", "0001", "0002"]
    assert {e["name"]: e["patch"] for e in data["scenarios"]}["fake/version"] is None
    assert [s["reason"] for s in data["not_seen"]] == ["stale"]
    assert f"note: {names[1]} declares a difference in fake/mul: no run showed it (stale)" in proc.stdout


def test_a_declaration_that_names_no_scenario_is_noted(fake, env):
    names = fake.build_series(GOOD)
    _declare(fake, names, {0: [(["fake*/add"], "add() adds", None), (["fake/sub"], "a typo", None)]})
    proc, data = _run(fake, env, "--scenario", "fake/add")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [(s["scenarios"], s["why"]) for s in data["not_seen"]] == [(["fake/sub"], "matches no scenario")]


def test_a_scenario_that_dies_fails_the_run_and_is_not_cached(fake, env, tmp_path):
    names = fake.build_series(GOOD)
    _declare(fake, names, {0: [(["fake*/add"], "add() adds", None)]})
    crash = tmp_path / "crash"
    crash.write_text("", encoding="utf-8")
    proc, data = _run(fake, dict(env, FAKE_CRASH=str(crash)), "--scenario", "fake/crash")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert data["failures"] and data["failures"][0]["name"] == "fake/crash"
    assert "not run: fake/crash at release" in proc.stdout
    assert data["scenarios"][0]["declared"] is None
    crash.unlink()
    proc, data = _run(fake, dict(env, FAKE_CRASH=str(crash)), "--scenario", "fake/crash")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["outcomes"]["reused"] == 0


def test_a_scenario_that_fails_on_the_release_fails_the_run(fake, env, tmp_path):
    fake.build_series(GOOD)
    broken = tmp_path / "broken"
    broken.write_text("", encoding="utf-8")
    proc, data = _run(fake, dict(env, FAKE_ERROR=str(broken)), "--scenario", "fake/crash")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert data["scenarios"][0]["differences"] == []  # it fails the same way with the series
    message = "not run: fake/crash at release: training fails on the release: RuntimeError: the trainer broke"
    assert message in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--patch", "0009"], "unknown patch '0009' for fake"),
        (["--target", "nope"], "unknown target 'nope'"),
        (["--jobs", "0"], "--jobs and --timeout must be at least 1"),
        (["--scenario", "nothing/*"], "no scenario matches nothing/*"),
        (["--json", "/nonexistent/folder/report.json"], "the folder /nonexistent/folder does not exist"),
        # checked before the scenarios run, not after 15 minutes and an OK (a raw errno, before)
        (["--summary", "/"], "--summary /: cannot write it (is a folder)"),
    ],
)
def test_bad_input_is_one_error_line(fake, env, args, message):
    fake.build_series(GOOD)
    proc = fake.run("downstream", "--python", sys.executable, *args, env=env)
    assert message in one_error_line(proc)
    assert not (fake.work / "reports" / "downstream-fake.json").exists()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('"0009-x.patch" = [{ scenarios = "a", reason = "b" }]', "is not in the patches list"),
        ('PATCH = [{ scenarios = "a" }]', "every declaration needs a reason of one line"),
        ('PATCH = [{ scenarios = "a", reason = "b\\nc" }]', "every declaration needs a reason of one line"),
        ('PATCH = [{ scenarios = [], reason = "b" }]', "scenarios must be a pattern or a list of patterns"),
        ('PATCH = [{ scenarios = "a", reason = "b", fields = ["speed"] }]', "fields must list outcome fields"),
        ('PATCH = [{ scenarios = "a", reason = "b", why = "c" }]', "unknown key(s) why"),
        ('PATCH = "a"', "must map to a list of { scenarios, reason } tables"),
    ],
)
def test_bad_declarations_in_the_manifest_are_one_error_line(fake, table, message):
    names = fake.build_series(GOOD)
    with open(fake.manifest, "a", encoding="utf-8") as fh:
        fh.write("\n[targets.fake.downstream]\n" + table.replace("PATCH", f'"{names[0]}"') + "\n")
    assert message in one_error_line(fake.run("downstream"))


# -- real scenarios ---------------------------------------------------------------------------------------


def _real_install():
    """The downstream install of this checkout's work folder and a source tree of the release, or None."""
    work = Path(os.environ.get("SERIES_WORK") or REPO_ROOT / ".work")
    installs = sorted(work.glob("downstream-env-*/.series-complete"), key=lambda p: p.stat().st_mtime)
    trees = [
        marker.parent
        for marker in sorted((work / "downstream" / "trees" / "transformers").glob("*/.series-complete"))
        if (marker.parent / "transformers").is_dir()
    ]
    # the venv the tool builds for its tests (other venv-* folders may hold other interpreters)
    venv = work / f"venv-{pyenv.venv_key(REPO_ROOT / 'scripts' / 'requirements-test.txt')}"
    python = pyenv.venv_python(venv)
    if not installs or not trees or not python.exists():
        return None
    return python, installs[-1].parent, trees[0]


@pytest.mark.downstream
def test_real_scenarios_are_bit_reproducible_and_record_the_emulated_skip():
    found = _real_install()
    if found is None:
        pytest.skip("no downstream install: run `python3 scripts/series.py downstream` once")
    python, install, tree = found
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), str(install / "site")]), OMP_NUM_THREADS="1")
    names = ["trl/sft-text-fp16-adamw", "st/softmax"]
    runs = []
    for _ in range(2):
        read, write = os.pipe()
        proc = subprocess.run(
            [str(python), str(REPO_ROOT / "scripts" / "downstream_scenarios.py"), "--run", *names]
            + ["--result-fd", str(write)],
            env=env,
            pass_fds=(write,),
            capture_output=True,
            text=True,
            timeout=900,
        )
        os.close(write)
        with os.fdopen(read, encoding="utf-8") as stream:
            runs.append({o["name"]: o for o in map(json.loads, stream.read().splitlines())})
        assert proc.returncode == 0, proc.stderr[-2000:]
    first, second = runs
    for name in names:
        assert first[name]["error"] is None and first[name]["weights"]["sha256"] == second[name]["weights"]["sha256"]
        assert compare(first[name], second[name]) == []
    skipped = first["trl/sft-text-fp16-adamw"]
    # the release counts the step the scaler skipped: one update fewer than global_step
    assert skipped["updates"] == skipped["global_step"] - 1 == skipped["scheduler_steps"]
    assert Path(first["st/softmax"]["modules"]["transformers"]).resolve().is_relative_to(tree.resolve())


@pytest.mark.downstream
@pytest.mark.parametrize("layer", [None, "trl-1.14.2"])
def test_the_truncated_scenario_has_a_window_and_an_eval_batch_without_targets(layer):
    """The premise of `trl*/sft-truncated`: once TRL has packed and truncated its data, the middle window of the
    training rows (2 rows a window) and the middle eval batch hold no target, the others do. Without it the
    scenario would show nothing about a window without targets."""
    found = _real_install()
    if found is None:
        pytest.skip("no downstream install: run `python3 scripts/series.py downstream` once")
    python, install, tree = found
    paths = [tree, *([install / layer] if layer else []), install / "site"]
    script = (
        "import json, sys, tempfile\n"
        f"sys.path.insert(0, {str(REPO_ROOT / 'scripts')!r})\n"
        "import downstream_scenarios as ds\n"
        "with tempfile.TemporaryDirectory() as folder:\n"
        "    kit = ds.Kit(folder, None)\n"
        "    ds.sft_truncated(kit)\n"
        "    rows = {'train': kit.trainer.train_dataset, 'eval': kit.trainer.eval_dataset}\n"
        "    print(json.dumps({k: [sum(x != -100 for x in row['labels']) for row in v] for k, v in rows.items()}))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, paths)), OMP_NUM_THREADS="1")
    proc = subprocess.run([str(python), "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    targets = json.loads(proc.stdout.splitlines()[-1])
    windows = [targets["train"][i : i + 2] for i in range(0, len(targets["train"]), 2)]
    assert [sum(window) > 0 for window in windows] == [True, False, True]
    assert [count > 0 for count in targets["eval"]] == [True, False, True]
