"""runcache.py and runners.cached_pytest: what the key of a pytest outcome covers, storing, reuse and pruning."""

import json
import os
import stat
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
from seriestool import runcache, runners
from seriestool.results import PytestRun
from seriestool.runcache import RunCache
from seriestool.statuses import RunStatus


def _fake_python(tmp_path, name, packages):
    """An executable that answers the environment question like an interpreter holding `packages`."""
    path = tmp_path / name
    answer = json.dumps({"version": "3.11.0", "prefix": str(tmp_path), "packages": packages})
    path.write_text(f"#!/bin/sh\necho '{answer}'\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture(scope="module")
def python(tmp_path_factory):
    """An interpreter that answers at once (a real one takes a fraction of a second to list its packages)."""
    return _fake_python(tmp_path_factory.mktemp("python"), "python", ["pytest==9.0.0"])


@pytest.fixture
def key_args(python):
    return {
        "trees": ["t1"],
        "expect": RunStatus.RED,
        "files": ["tests/test_a.py", "tests/test_b.py"],
        "source_dir": "src",
        "python": python,
        "device": "cpu",
    }


def test_the_key_is_stable_and_ignores_the_order_of_the_files(tmp_path, key_args):
    cache = RunCache(tmp_path, {"tool": "x"})
    key = cache.key(**key_args)
    assert len(key) == 64 and int(key, 16) >= 0
    assert RunCache(tmp_path / "other", {"tool": "x"}).key(**key_args) == key
    assert cache.key(**dict(key_args, files=list(reversed(key_args["files"])))) == key
    assert cache.key(**dict(key_args, env={})) == key


CHANGES = {
    "trees": {"trees": ["t2"]},
    "companion_tree": {"trees": ["t1", "t3"]},
    "expect": {"expect": RunStatus.GREEN},
    "files": {"files": ["tests/test_a.py"]},
    "source_dir": {"source_dir": "lib"},
    "device": {"device": "cuda"},
    "env": {"env": {"HF_HUB_OFFLINE": "1"}},
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_the_key_changes_with_each_input(tmp_path, change, key_args):
    cache = RunCache(tmp_path, {"tool": "x"})
    assert cache.key(**dict(key_args, **CHANGES[change])) != cache.key(**key_args)


def test_the_key_does_not_depend_on_the_order_of_dict_entries(tmp_path, key_args):
    one = RunCache(tmp_path, {"tool": "x", "device": "cpu"}).key(**dict(key_args, env={"A": "1", "B": "2"}))
    two = RunCache(tmp_path, {"device": "cpu", "tool": "x"}).key(**dict(key_args, env={"B": "2", "A": "1"}))
    assert one == two


def test_the_key_changes_with_the_identity(tmp_path, key_args):
    assert RunCache(tmp_path, {"tool": "x"}).key(**key_args) != RunCache(tmp_path, {"tool": "y"}).key(**key_args)


def test_the_key_changes_with_the_interpreter_and_its_packages(tmp_path, key_args):
    cache = RunCache(tmp_path / "cache", {"tool": "x"})
    one = _fake_python(tmp_path, "one", ["torch==2.13.0"])
    same = _fake_python(tmp_path, "same", ["torch==2.13.0"])
    keys = {cache.key(**dict(key_args, python=python)) for python in (sys.executable, one, same)}
    assert len(keys) == 3  # another path is another interpreter
    # The packages are asked once per cache (one verify run): a later run sees an install.
    before = cache.key(**dict(key_args, python=one))
    _fake_python(tmp_path, "one", ["torch==2.14.0"])
    assert cache.key(**dict(key_args, python=one)) == before
    assert RunCache(tmp_path / "cache", {"tool": "x"}).key(**dict(key_args, python=one)) != before


def test_the_environment_is_what_the_probe_says_of_version_prefix_and_packages(tmp_path, python):
    cache = RunCache(tmp_path, {})
    digest = cache.environment(python)
    assert len(digest) == 64 and cache.environment(str(python)) == digest
    told = RunCache(tmp_path, {})
    told.remember(python, {"version": "3.11.0", "prefix": str(python.parent), "packages": ["pytest==9.0.0"]})
    assert told.environment(python) == digest  # the answer verify had already: not asked again
    other = RunCache(tmp_path, {})
    other.remember(python, {"version": "3.11.0", "prefix": str(python.parent), "packages": ["pytest==9.0.1"]})
    assert other.environment(python) != digest
    more = RunCache(tmp_path, {})
    more.remember(python, {"version": "3.11.0", "prefix": str(python.parent), "packages": ["pytest==9.0.0"], "x": 1})
    assert more.environment(python) == digest  # what else the probe tells does not count


def test_the_cache_of_verify(tmp_path, python, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    info = {"version": "3.11.0", "prefix": str(python.parent), "packages": ["pytest==9.0.0"], "torch": "2.13.0"}
    cache = runcache.for_verify(tmp_path, python, info, "cpu")
    assert cache.folder == tmp_path / "cache" / "verify"
    assert cache.identity == {"python": str(python), "probe": info, "device": "cpu", "tool": runcache.tool_digest()}
    assert cache._environments == {str(python): RunCache(tmp_path, {}).environment(python)}
    gpu = runcache.for_verify(tmp_path, python, info, "cuda")
    assert gpu.identity == dict(cache.identity, device="cuda", visible_devices="1")


def test_an_interpreter_that_cannot_be_asked_gives_no_key(tmp_path, key_args):
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\nexit 3\n", encoding="utf-8")
    broken.chmod(0o755)
    silent = tmp_path / "silent"
    silent.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    silent.chmod(0o755)
    cache = RunCache(tmp_path, {})
    for python in (broken, silent, tmp_path / "missing"):
        assert cache.environment(python) is None
        assert cache.key(**dict(key_args, python=python)) is None


def _outcome(tmp_path, status=RunStatus.RED, text="log text\n"):
    log = tmp_path / "run.log"
    log.write_text(text, encoding="utf-8")
    return asdict(PytestRun(status=status, exit_code=1, failed=2, total=3, log=str(log)))


def test_put_and_get(tmp_path):
    cache = RunCache(tmp_path / "work" / "cache", {})
    assert cache.get("k", tmp_path / "copy.log") is None
    outcome = _outcome(tmp_path)
    cache.put("k", outcome)
    assert sorted(p.name for p in (tmp_path / "work" / "cache").iterdir()) == ["k.json", "k.log"]
    cache = RunCache(tmp_path / "cache", {})
    assert cache.get("k", tmp_path / "copy.log") is None
    outcome = _outcome(tmp_path)
    cache.put("k", outcome)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["k.json", "k.log"]
    got = cache.get("k", tmp_path / "copy.log")
    assert got == dict(outcome, log=str(tmp_path / "copy.log"))
    assert (tmp_path / "copy.log").read_text(encoding="utf-8") == "log text\n"


def test_an_entry_without_its_log_or_unreadable_is_not_reused(tmp_path):
    cache = RunCache(tmp_path / "cache", {})
    cache.put("k", _outcome(tmp_path))
    (tmp_path / "cache" / "k.log").unlink()
    assert cache.get("k", tmp_path / "copy.log") is None
    cache.put("j", _outcome(tmp_path))
    (tmp_path / "cache" / "j.json").write_text("{not json", encoding="utf-8")
    assert cache.get("j", tmp_path / "copy.log") is None


def test_the_oldest_entries_go_first(tmp_path, monkeypatch):
    monkeypatch.setattr(runcache, "KEEP", 2)
    cache = RunCache(tmp_path / "cache", {})
    for age, key in enumerate(("a", "b")):
        cache.put(key, _outcome(tmp_path))
        os.utime(tmp_path / "cache" / f"{key}.json", (1000 + age, 1000 + age))
    assert cache.get("a", tmp_path / "copy.log") is not None  # used: now the newest
    cache.put("c", _outcome(tmp_path))
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["a.json", "a.log", "c.json", "c.log"]
    # an entry whose log is gone is pruned all the same
    os.utime(tmp_path / "cache" / "a.json", (1000, 1000))
    (tmp_path / "cache" / "a.log").unlink()
    cache.put("d", _outcome(tmp_path))
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["c.json", "c.log", "d.json", "d.log"]


def test_the_tool_digest(tmp_path, monkeypatch):
    package = tmp_path / "pkg"
    (package / "commands").mkdir(parents=True)
    (package / "runcache.py").write_text("A = 1\n", encoding="utf-8")
    (package / "commands" / "x.py").write_text("B = 1\n", encoding="utf-8")
    (package / "notes.txt").write_text("not code\n", encoding="utf-8")
    monkeypatch.setattr(runcache, "__file__", str(package / "runcache.py"))
    first = runcache.tool_digest()
    assert runcache.tool_digest() == first
    (package / "notes.txt").write_text("changed\n", encoding="utf-8")
    assert runcache.tool_digest() == first
    (package / "commands" / "x.py").write_text("B = 2\n", encoding="utf-8")
    second = runcache.tool_digest()
    assert second != first
    (package / "commands" / "x.py").rename(package / "commands" / "y.py")
    assert runcache.tool_digest() not in (first, second)


# -- runners.cached_pytest ---------------------------------------------------------------------------


class FakeRuns:
    """Stands in for run_pytest: returns the queued statuses, writes a log, counts the calls."""

    def __init__(self, *statuses):
        self.statuses = list(statuses)
        self.calls = []

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        log = Path(f"{kwargs['log_stem']}.log")
        log.write_text(f"run {len(self.calls)}\n", encoding="utf-8")
        return PytestRun(status=self.statuses.pop(0), exit_code=1, failed=1, total=1, log=str(log))


@pytest.fixture
def runs(monkeypatch):
    def install(*statuses):
        fake = FakeRuns(*statuses)
        monkeypatch.setattr(runners, "run_pytest", fake)
        monkeypatch.setattr(runners, "source_trees", lambda repo_dir, extra_paths=(): [(None, f"tree-of-{repo_dir}")])
        return fake

    return install


def _kwargs(tmp_path, **changes):
    kwargs = {
        "python": _fake_python(tmp_path, "python", []),
        "repo_dir": tmp_path / "repo",
        "source_dir": "src",
        "files": ["tests/test_a.py"],
        "device": "cpu",
        "log_stem": tmp_path / "a.red",
        "timeout": 60,
        "expect": RunStatus.RED,
    }
    kwargs.update(changes)
    return kwargs


def test_without_a_cache_every_run_runs(tmp_path, runs):
    fake = runs(RunStatus.RED, RunStatus.RED)
    assert runners.cached_pytest(None, **_kwargs(tmp_path)).cached is False
    assert runners.cached_pytest(None, **_kwargs(tmp_path)).cached is False
    assert len(fake.calls) == 2


def test_an_expected_outcome_is_reused(tmp_path, runs):
    fake = runs(RunStatus.RED)
    cache = RunCache(tmp_path / "cache", {})
    first = runners.cached_pytest(cache, **_kwargs(tmp_path))
    assert first.status == RunStatus.RED and not first.cached
    again = runners.cached_pytest(cache, **_kwargs(tmp_path, log_stem=tmp_path / "b.red"))
    assert again.cached and again.status == RunStatus.RED and (again.failed, again.total) == (1, 1)
    assert again.log == str(tmp_path / "b.red.log")
    assert (tmp_path / "b.red.log").read_text(encoding="utf-8") == "run 1\n"
    assert len(fake.calls) == 1


def test_an_unexpected_outcome_runs_again(tmp_path, runs):
    fake = runs(RunStatus.NOT_RED, RunStatus.RED, RunStatus.RED)
    cache = RunCache(tmp_path / "cache", {})
    assert runners.cached_pytest(cache, **_kwargs(tmp_path)).status == RunStatus.NOT_RED
    assert not runners.cached_pytest(cache, **_kwargs(tmp_path)).cached
    assert runners.cached_pytest(cache, **_kwargs(tmp_path)).cached
    assert len(fake.calls) == 2


RUN_CHANGES = {
    "interpreter": lambda tmp_path: {"python": _fake_python(tmp_path, "other-python", [])},
    "device": lambda tmp_path: {"device": "cuda"},
    "environment_variables": lambda tmp_path: {"extra_env": {"HF_HUB_OFFLINE": "1"}},
    "tree": lambda tmp_path: {"repo_dir": tmp_path / "other-repo"},
    "expectation": lambda tmp_path: {"expect": RunStatus.GREEN},
}


@pytest.mark.parametrize("change", sorted(RUN_CHANGES))
def test_an_outcome_is_not_reused_for_another_run(tmp_path, runs, change):
    expect = RUN_CHANGES[change](tmp_path).get("expect", RunStatus.RED)
    fake = runs(RunStatus.RED, expect)
    cache = RunCache(tmp_path / "cache", {})
    runners.cached_pytest(cache, **_kwargs(tmp_path))
    other = runners.cached_pytest(cache, **_kwargs(tmp_path, **RUN_CHANGES[change](tmp_path)))
    assert not other.cached and len(fake.calls) == 2


def test_an_interpreter_that_cannot_be_asked_runs_without_the_cache(tmp_path, runs):
    fake = runs(RunStatus.RED, RunStatus.RED)
    cache = RunCache(tmp_path / "cache", {})
    for _ in range(2):
        assert not runners.cached_pytest(cache, **_kwargs(tmp_path, python=tmp_path / "missing")).cached
    assert len(fake.calls) == 2 and not (tmp_path / "cache").exists()
