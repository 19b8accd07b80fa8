"""`downstream`: real TRL, sentence-transformers, setfit and PEFT trainers on the release and along the series.

The scenarios live in `scripts/downstream_scenarios.py`, which runs in the pinned venv; this module (standard
library only) owns everything around them:

- the install: the pinned downstream packages in `<work>/downstream-env-<key>/`, layered over the venv with
  `pip install --no-deps --target`, so they never replace its accelerate, and transformers is never installed
  (trees go on PYTHONPATH); an older TRL in a layer of its own that goes on the path first; checked once like
  `pip check`, and every scenario's modules imported;
- the points of the series: the release, then each prefix (+0001, +0001..0002, ...), then the patches of the
  companion targets (`verify_with`) on top of the whole series; each point's source trees are made only when a
  run needs them, hard-linked from one extracted base and named by their git tree id;
- the outcomes: one per scenario and point, kept in `verify`'s outcome cache (`runcache.RunCache`, in
  `<work>/cache/downstream/`), keyed by the trees, the scenario code, and the interpreter with its packages;
- the comparison with the release's own outcome, the attribution of each change to the patch that makes it
  (bisection over the points, all of whose outcomes are cached), and the check against the manifest's
  declarations (`[targets.<name>.downstream]`);
- the report (`<work>/reports/downstream-<target>.json`) and the lines `pr` shows from it.
"""

import contextlib
import fnmatch
import json
import math
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import archive, pyenv
from . import base as base_mod
from .am import am_series
from .context import Context
from .digests import sha256_file, sha256_of
from .errors import SeriesError
from .git import Repo
from .manifest import DOWNSTREAM_FIELDS, Manifest, Target
from .progress import heartbeat, pip_detail
from .runcache import RunCache
from .runners import stop_group
from .scratch import prepare_scratch


JSON = dict[str, Any]  # an outcome, a scenario's entry, a report: what goes into JSON files
Log = Callable[[str], None]


SCRIPTS = Path(__file__).resolve().parents[1]
# The scenarios and the pinned packages; the tool's tests put fakes in their place with these variables.
WORKER = Path(os.environ.get("SERIES_DOWNSTREAM_SCENARIOS") or SCRIPTS / "downstream_scenarios.py").resolve()
REQUIREMENTS = Path(
    os.environ.get("SERIES_DOWNSTREAM_REQUIREMENTS") or SCRIPTS / "requirements-downstream.txt"
).resolve()
SCHEMA_VERSION = 1
MARKER = ".series-complete"
# Floats of the log and of the weights' fingerprint are equal within this relative tolerance: a patch that
# only reorders float operations is not a difference. (Runs are bit-reproducible: the same trees give the
# same sha256 of the weights in every process.)
REL_TOL = 1e-5
ABS_TOL = 1e-7
RELEASE = "release"
KEEP_TREES = 16  # source trees kept beyond those of the current series


# -- the install -------------------------------------------------------------------------------------------


@dataclass
class Install:
    folder: Path
    site: Path
    layers: dict[str, Path]  # layer name (trl-1.14.2) -> folder
    info: JSON  # what the marker records: seconds, bytes, packages per layer, key

    def path_for(self, layer: str | None) -> list[Path]:
        """The folders a worker of `layer` (None: the main set) has on PYTHONPATH, first wins."""
        if layer is not None and layer not in self.layers:
            raise SeriesError(f"a scenario needs the layer {layer}, which no requirements-downstream-*.txt installs")
        return ([self.layers[layer]] if layer else []) + [self.site]


def layer_files(requirements: str | Path = REQUIREMENTS) -> dict[str, Path]:
    """The layers over the main set: `requirements-downstream-*.txt` beside it, one pin each -> {name: file}."""
    layers = {}
    for path in sorted(Path(requirements).parent.glob(Path(requirements).stem + "-*.txt")):
        pins = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if "==" in line]
        pins = [line for line in pins if not line.startswith("#")]
        if len(pins) != 1:
            raise SeriesError(f"{path.name} must pin exactly one package (name==version), found {len(pins)}")
        name, version = (part.strip() for part in pins[0].split("=="))
        layers[f"{name}-{version}"] = path
    return layers


def install_key(python: str | Path, requirements: str | Path = REQUIREMENTS) -> str:
    parts: list[str | Path] = [str(python), "\0", Path(requirements)]
    for name, path in layer_files(requirements).items():
        parts += [name, "\0", path]
    return sha256_of(*parts)[:16]


def _size(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _pip_install(python: str | Path, requirements: Path, target: Path, log_path: Path, log: Log | None = None) -> None:
    cmd = [str(python), "-m", "pip", "install", "--no-deps", "--disable-pip-version-check", "--progress-bar", "off"]
    cmd += ["--no-compile", "--target", str(target), "-r", str(requirements)]
    with open(log_path, "a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        say = (lambda message: log(f"downstream: pip {message}")) if log is not None else None
        with heartbeat(say, pip_detail(log_path)):
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise SeriesError(
            f"installing {Path(requirements).name} failed (pip exit {proc.returncode}): "
            f"{pyenv._pip_error(log_path)}; full log {log_path}; it is made again on the next run"
        )


def ensure_install(
    work: Path, python: Path, base_tree: Path, *, requirements: str | Path = REQUIREMENTS, log: Log = print
) -> Install:
    """The downstream install for `python`, made once: `<work>/downstream-env-<key>/{site,<layer>...}`.

    `base_tree` (the release's transformers sources) is on the path while it is checked. The marker is written
    only once the install is whole and checked; a half-made one is removed and made again."""
    key = install_key(python, requirements)
    folder = Path(work) / f"downstream-env-{key}"
    layers = {name: folder / name for name in layer_files(requirements)}
    marker = folder / MARKER
    if marker.is_file():
        with contextlib.suppress(OSError, ValueError):
            return Install(folder, folder / "site", layers, json.loads(marker.read_text(encoding="utf-8")))
    if folder.exists():
        log(f"removing the incomplete downstream install {folder}")
        shutil.rmtree(folder)
    started = time.monotonic()
    log_path = Path(work) / "logs" / f"pip-downstream-{key}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text("", encoding="utf-8")
    staging = Path(tempfile.mkdtemp(prefix=f".downstream-env-{key}.", dir=work))
    try:
        count = pyenv.pinned_count(requirements)
        log(f"downstream: installing {count} pinned package(s) with --no-deps (once), log {log_path} ...")
        _pip_install(python, Path(requirements), staging / "site", log_path, log)
        for name, path in layer_files(requirements).items():
            log(f"downstream: installing the layer {name}")
            _pip_install(python, path, staging / name, log_path, log)
        pip_seconds = round(time.monotonic() - started, 1)
        packages = {}
        for layer in [None, *layers]:
            paths = [staging / layer] if layer else []
            checked = _check(python, [base_tree, *paths, staging / "site"], [*paths, staging / "site"])
            problems = checked["problems"]
            if problems:
                more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
                where = f" (layer {layer})" if layer else ""
                raise SeriesError(f"the downstream install{where} is not complete: {problems[0]}{more}")
            packages[layer or "main"] = checked["packages"]
        seconds = round(time.monotonic() - started, 1)
        info: JSON = {"key": key, "seconds": seconds, "pip_seconds": pip_seconds, "bytes": _size(staging)}
        info["packages"] = packages
        (staging / MARKER).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
        os.rename(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log(f"downstream: installed and checked in {time.monotonic() - started:.0f}s ({info['bytes'] / 2**20:.0f} MiB)")
    return Install(folder, folder / "site", layers, info)


def worker_env(paths: Iterable[str | Path]) -> dict[str, str]:
    """The environment of a worker in the pinned venv: `paths` alone on PYTHONPATH, CPU only, one thread, no hash
    randomisation (also `invariants`' worker)."""
    env = dict(os.environ)
    for key in ("PYTHONSTARTUP", "PYTHONHOME", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONWARNINGS"):
        env.pop(key, None)
    env["PYTHONPATH"] = os.pathsep.join(str(path) for path in paths)
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = "1"
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _check(python: Path, paths: Iterable[str | Path], roots: Iterable[str | Path]) -> JSON:
    proc = subprocess.run(
        [str(python), str(WORKER), "--check", *map(str, roots)],
        env=worker_env(paths),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise SeriesError(f"checking the downstream install failed: {tail}")
    return json.loads(lines[-1])


def scenarios(python: Path) -> list[JSON]:
    """The scenarios the worker defines: [{name, package, layer, fp16}]."""
    proc = subprocess.run(
        [str(python), str(WORKER), "--list"], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120
    )
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise SeriesError(f"{WORKER.name} --list failed: {tail}")
    return json.loads(proc.stdout)


# -- the points of the series and their source trees --------------------------------------------------------


@dataclass
class Point:
    """The release, or the series up to one patch: the source tree of each target (None: the released one)."""

    index: int
    label: str  # "release", "0004", "accelerate 0001"
    patch: str | None  # the patch that makes this point from the one before (None for the release)
    target: str | None  # whose patch
    trees: dict[str, str | None]  # target name -> tree id of its source folder; None: a companion at its release


@dataclass
class Series:
    """The points of one run and where their trees are (made on demand)."""

    points: list[Point]
    repos: dict[str, tuple[Repo, dict[str, str]]]  # target name -> (Repo, {tree id: commit})
    source_dirs: dict[str, str]  # target name -> source folder in the repository (src)
    folder: Path  # <work>/downstream/trees
    base_trees: dict[str, str]  # target name -> tree id of the release

    def tree_path(self, target: str, tree: str) -> Path:
        return self.folder / target / tree

    def paths(self, point: Point) -> list[Path]:
        """PYTHONPATH entries of `point`: its trees (made when missing); a companion target at its release has none
        and comes from the venv."""
        return [self.ensure(name, tree) for name, tree in point.trees.items() if tree is not None]

    def ensure(self, target: str, tree: str) -> Path:
        """The folder holding `tree` of `target`: made once from the base tree and the files that differ."""
        path = self.tree_path(target, tree)
        if (path / MARKER).is_file():
            return path
        repo, commits = self.repos[target]
        source = self.source_dirs[target]
        base = self.base_trees[target]
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{tree[:12]}.", dir=path.parent))
        try:
            if tree == base:
                tar = staging / "tree.tar"
                repo.run("archive", "--format=tar", "-o", str(tar), commits[tree], "--", source)
                archive.extract_stripped(tar, staging / "tree")
                tar.unlink()
            else:
                base_path = self.ensure(target, base)
                _link_tree(base_path, staging / "tree")
                changes = [c for c in repo.changes(commits[base], commits[tree]) if c.path.startswith(source + "/")]
                for change in changes:
                    (staging / "tree" / change.path[len(source) + 1 :]).unlink(missing_ok=True)
                present = [c.path for c in changes if c.status != "D"]
                if present:
                    tar = staging / "changed.tar"
                    repo.run("archive", "--format=tar", "-o", str(tar), commits[tree], "--", *present)
                    archive.extract_stripped(tar, staging / "changed")
                    for root, _, files in os.walk(staging / "changed"):
                        for name in files:
                            src = Path(root) / name
                            dest = staging / "tree" / src.relative_to(staging / "changed")
                            dest.parent.mkdir(parents=True, exist_ok=True)
                            os.replace(src, dest)
            (staging / "tree" / MARKER).write_text(f"{target} {tree}\n", encoding="utf-8")
            if path.exists():
                shutil.rmtree(path)
            os.rename(staging / "tree", path)
        except archive.UnsafeArchive as exc:
            raise SeriesError(f"cannot make the {target} tree {tree[:12]}: {exc}") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return path

    def prune(self, keep_extra: int = KEEP_TREES) -> None:
        """Drop trees of earlier series beyond the `keep_extra` most recently made."""
        current = {(p_target, tree) for p in self.points for p_target, tree in p.trees.items() if tree}
        current |= set(self.base_trees.items())
        others = []
        for target_dir in self.folder.iterdir() if self.folder.is_dir() else []:
            for tree_dir in target_dir.iterdir():
                if tree_dir.name.startswith("."):
                    shutil.rmtree(tree_dir, ignore_errors=True)
                elif (target_dir.name, tree_dir.name) not in current:
                    others.append(tree_dir)
        others.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        for tree_dir in others[keep_extra:]:
            shutil.rmtree(tree_dir, ignore_errors=True)


def _link_tree(src: Path, dest: Path) -> None:
    """A copy of the tree `src` whose files are hard links (no bytecode, no marker)."""
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = Path(root).relative_to(src)
        (Path(dest) / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            if name != MARKER:
                os.link(Path(root) / name, Path(dest) / rel / name)


def _applied(ctx: Context, target: Target) -> tuple[Repo, list[str]]:
    """The scratch repository of `target` with its series applied: (Repo, [base, commit per patch])."""
    repo, base = prepare_scratch(ctx, target, base_mod.SDIST, folder="downstream/repos")
    failed, files = am_series(repo, target, target.patches)
    if failed:
        where = f" ({', '.join(files)})" if files else ""
        raise SeriesError(f"patch {failed} of {target.name} does not apply on the pinned base{where}")
    commits = [base, *repo.commits(f"{base}..HEAD")]
    if len(commits) != len(target.patches) + 1:
        raise SeriesError(
            f"applying the {target.name} series made {len(commits) - 1} commits, not {len(target.patches)}"
        )
    return repo, commits


def series_points(ctx: Context, target: Target, through: str | None = None) -> Series:
    """The points of `target`'s series: the release, each prefix up to `through` (a patch file name; None: all),
    then, for the whole series, each prefix of the companion targets' series on top."""
    main = [target]
    companions = [] if through else [ctx.manifest.target(name) for name in target.verify_with]
    companions = [c for c in companions if c.patches]
    repos: dict[str, tuple[Repo, dict[str, str]]] = {}
    base_trees: dict[str, str] = {}
    source_dirs: dict[str, str] = {}
    trees: dict[str, list[str]] = {}
    for each in main + companions:
        repo, commits = _applied(ctx, each)
        ids = [repo.out("rev-parse", f"{commit}:{each.source_dir}") for commit in commits]
        repos[each.name] = (repo, dict(zip(ids, commits, strict=True)))
        base_trees[each.name] = ids[0]
        source_dirs[each.name] = each.source_dir
        trees[each.name] = ids
    release: dict[str, str | None] = {target.name: trees[target.name][0], **{c.name: None for c in companions}}
    points = [Point(0, RELEASE, None, None, release)]
    stop = target.patches.index(through) + 1 if through else len(target.patches)
    for index in range(1, stop + 1):
        patch = target.patches[index - 1]
        state = dict(points[-1].trees, **{target.name: trees[target.name][index]})
        points.append(Point(len(points), patch[:4], patch, target.name, state))
    for companion in companions:
        for index, patch in enumerate(companion.patches, start=1):
            state = dict(points[-1].trees, **{companion.name: trees[companion.name][index]})
            points.append(Point(len(points), f"{companion.name} {patch[:4]}", patch, companion.name, state))
    folder = ctx.work / "downstream" / "trees"
    return Series(points, repos, source_dirs, folder, base_trees)


# -- running scenarios -------------------------------------------------------------------------------------


def worker_digest() -> str:
    return sha256_file(WORKER)


def identity(python: Path, install: Install) -> JSON:
    """What outcomes depend on besides the trees: the interpreter and its packages, the install, the scenarios."""
    return {
        "python": str(python),
        "packages": pyenv.describe(python)["packages"],
        "install": install.info["key"],
        "scenarios": worker_digest(),
    }


def _safe(name: str) -> str:
    return name.replace("/", "__")


class Runner:
    """Outcomes of scenarios at points: from the cache, or from worker processes (`jobs` at a time), each of
    which imports the trainers once and forks one child per scenario."""

    def __init__(
        self,
        ctx: Context,
        series: Series,
        install: Install,
        python: Path,
        catalogue: list[JSON],
        *,
        cache: RunCache | None,
        jobs: int,
        timeout: int,
        log: Log,
    ) -> None:
        self.ctx, self.series, self.install, self.python = ctx, series, install, python
        self.catalogue = {spec["name"]: spec for spec in catalogue}
        self.cache, self.jobs, self.timeout, self.log = cache, jobs, timeout, log
        self.logs = ctx.work / "logs" / "downstream"
        self.outcomes: dict[tuple[int, str], JSON] = {}  # (point index, scenario) -> outcome
        self.ran = self.reused = 0
        self.failures: list[JSON] = []  # outcomes that are no result (the scenario process died or timed out)
        self.on_outcome: Callable[[Point, str], None] = lambda point, name: None  # called as each outcome comes

    def _key(self, point: Point, name: str) -> str | None:
        """The outcome's key in the cache, or None (no cache, or an interpreter that cannot be asked: no reuse)."""
        if self.cache is None:
            return None
        layer = self.catalogue[name]["layer"]
        trees = {target: tree or "venv" for target, tree in point.trees.items()}
        return self.cache.key(
            trees=dict(trees, layer=layer),
            expect="outcome",
            files=[name],
            source_dir="downstream",
            python=self.python,
            device="cpu",
        )

    def get(self, point: Point, name: str) -> Any:
        """The outcome (a dict), or None when it has not run."""
        return self.outcomes.get((point.index, name))

    def need(self, wanted: Iterable[tuple[Point, str]]) -> None:
        """Make sure every (point, scenario name) of `wanted` has an outcome."""
        todo: dict[tuple[object, ...], JSON] = {}
        for point, name in wanted:
            if (point.index, name) in self.outcomes:
                continue
            log_path = self.logs / point.label.replace(" ", "-") / f"{_safe(name)}.log"
            log_path.parent.mkdir(parents=True, exist_ok=True)
            key = self._key(point, name)
            stored = self.cache.get(key, log_path) if key is not None and self.cache is not None else None
            if stored is not None:
                self.outcomes[(point.index, name)] = stored
                self.reused += 1
                self.on_outcome(point, name)
                continue
            # points with the same trees share one run (a patch that adds only tests)
            group = (tuple(sorted((t, tree or "") for t, tree in point.trees.items())), self.catalogue[name]["layer"])
            entry = todo.setdefault(group, {"point": point, "names": [], "also": []})
            if name not in entry["names"]:
                entry["names"].append(name)
            entry["also"].append((point, name))
        if todo:
            self._run(list(todo.values()))

    def _run(self, groups: list[JSON]) -> None:
        results: queue.Queue[tuple[str, JSON, JSON | None]] = queue.Queue()
        pending = sorted(groups, key=lambda group: -len(group["names"]))  # the longest first
        running: list[tuple[subprocess.Popen[bytes], threading.Thread, JSON]] = []

        def start(group: JSON) -> None:
            point, layer = group["point"], self.catalogue[group["names"][0]]["layer"]
            paths = self.series.paths(point) + self.install.path_for(layer)
            folder = self.logs / point.label.replace(" ", "-")
            folder.mkdir(parents=True, exist_ok=True)
            read, write = os.pipe()
            cmd = [str(self.python), str(WORKER), "--run", *group["names"], "--result-fd", str(write)]
            cmd += ["--log-dir", str(folder), "--timeout", str(self.timeout)]
            group["log"] = folder / f"worker{'-' + layer if layer else ''}.log"
            with open(group["log"], "w", encoding="utf-8") as log:
                proc = subprocess.Popen(
                    cmd,
                    cwd=tempfile.gettempdir(),
                    env=worker_env(paths),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    pass_fds=(write,),
                    start_new_session=True,
                )
            os.close(write)
            thread = threading.Thread(target=_reader, args=(read, group, results), daemon=True)
            thread.start()
            running.append((proc, thread, group))

        ran, total = self.ran, sum(len(group["names"]) for group in groups)

        def detail() -> str:
            busy = sorted({item[2]["point"].label for item in list(running)})
            return f"{self.ran - ran}/{total} scenario run(s) done" + (f", at {', '.join(busy)}" if busy else "")

        try:
            with heartbeat(lambda message: self.log(f"downstream: workers {message}"), detail):
                while pending or running:
                    while pending and len(running) < self.jobs:
                        start(pending.pop(0))
                    try:
                        kind, group, payload = results.get(timeout=1.0)
                    except queue.Empty:
                        continue
                    if kind == "outcome" and payload is not None:
                        self._store(group, payload)
                    else:  # the worker's pipe closed: it is done
                        proc = next(item[0] for item in running if item[2] is group)
                        running[:] = [item for item in running if item[2] is not group]
                        code = proc.wait()
                        missing = [n for n in group["names"] if (group["point"].index, n) not in self.outcomes]
                        why = f"the worker process ended (exit {code}) without its outcome; see {group['log']}"
                        for name in missing:
                            self._store(group, {"name": name, "crashed": why})
        finally:
            for proc, _, _ in running:
                stop_group(proc)

    def _store(self, group: JSON, outcome: JSON) -> None:
        name = outcome["name"]
        point = group["point"]
        log_path = self.logs / point.label.replace(" ", "-") / f"{_safe(name)}.log"
        outcome["log"] = str(log_path)
        if not log_path.exists():
            log_path.write_text("", encoding="utf-8")
        self.ran += 1
        if outcome.get("crashed"):
            self.failures.append(dict(outcome, point=point.label))
        else:
            problem = _wrong_sources(outcome, self.series.paths(point))
            if problem:
                outcome = {"name": name, "crashed": problem, "log": str(log_path)}
                self.failures.append(dict(outcome, point=point.label))
            elif (key := self._key(point, name)) is not None and self.cache is not None:
                self.cache.put(key, outcome)
        for other_point, other in group["also"]:
            if other == name:
                self.outcomes[(other_point.index, name)] = outcome
                self.on_outcome(other_point, name)


def _reader(fd: int, group: JSON, results: "queue.Queue[tuple[str, JSON, JSON | None]]") -> None:
    with os.fdopen(fd, "r", encoding="utf-8") as stream:
        for line in stream:
            with contextlib.suppress(ValueError):
                results.put(("outcome", group, json.loads(line)))
    results.put(("done", group, None))


def _wrong_sources(outcome: JSON, paths: Iterable[str | Path]) -> str | None:
    """A run must import the targets (transformers, a patched accelerate) from the point's trees, not from
    anywhere else: None, or what went wrong."""
    for module, where in (outcome.get("modules") or {}).items():
        trees = [Path(p) for p in paths if (Path(p) / module).is_dir()]
        if trees and not any(Path(where).resolve().is_relative_to(tree.resolve()) for tree in trees):
            return f"imported {module} from {where}, not from {trees[0]}"
    return None


# -- comparing outcomes ------------------------------------------------------------------------------------


def _close(a: object, b: object) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        a, b = float(a), float(b)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    return a == b


def _short(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _weights_differ(old: JSON | None, new: JSON | None) -> str | None:
    """None when the weights agree (bit for bit, or within the tolerance), else how they differ."""
    if old is None or new is None:
        return None if old == new else f"{'none' if old is None else 'some'} -> {'none' if new is None else 'some'}"
    if old["sha256"] == new["sha256"]:
        return None
    if old["tensors"] != new["tensors"]:
        return f"{old['tensors']} -> {new['tensors']} tensors"
    changed = 0
    for (sum_a, norm_a), (sum_b, norm_b) in zip(old["fingerprint"], new["fingerprint"], strict=True):
        # a tensor's sum may be near 0: compare it on the scale of the tensor's norm
        scale = max(abs(norm_a), abs(norm_b))
        same_sum = _close(sum_a, sum_b) or (math.isfinite(scale) and abs(sum_a - sum_b) <= REL_TOL * scale)
        if not (same_sum and _close(norm_a, norm_b)):
            changed += 1
    if not changed:
        return None
    return f"{changed} of {old['tensors']} tensors differ"


LOG_ORDER = ("loss", "train_loss", "grad_norm", "learning_rate", "epoch")


def _log_differs(old: list[JSON], new: list[JSON]) -> str | None:
    if len(old) != len(new):
        return f"{len(old)} -> {len(new)} entries"
    for entry_a, entry_b in zip(old, new, strict=True):
        keys = sorted(set(entry_a) | set(entry_b), key=lambda k: (LOG_ORDER.index(k) if k in LOG_ORDER else 99, k))
        for key in keys:
            a, b = entry_a.get(key), entry_b.get(key)
            if not _close(a, b):
                return f"step {entry_a.get('step')} {key} {_short(a)} -> {_short(b)}"
    return None


def compare(expected: JSON, actual: JSON) -> list[JSON]:
    """The differences between two outcomes of one scenario: [{"field", "text"}], in DOWNSTREAM_FIELDS order."""
    found = []
    for name in DOWNSTREAM_FIELDS:
        a, b = expected.get(name), actual.get(name)
        if name == "weights":
            text = _weights_differ(a, b)
        elif name == "log_history":
            text = _log_differs(a or [], b or [])
        elif name == "events":
            a, b = a or {}, b or {}
            changed = [f"{key} {a.get(key, 0)} -> {b.get(key, 0)}" for key in a | b if a.get(key, 0) != b.get(key, 0)]
            text = ", ".join(changed) or None
        else:
            text = None if _close(a, b) else f"{_short(a)} -> {_short(b)}"
        if text:
            found.append({"field": name, "text": text})
    return found


def describe(differences: Iterable[JSON]) -> str:
    """One line: `global_step 8 -> 7; events on_step_end 8 -> 7; ...`."""
    return "; ".join(f"{d['field']} {d['text']}" for d in differences)


# -- attribution and declarations ------------------------------------------------------------------------


def bisect(
    runner: Runner, points: list[Point], names: Sequence[str], *, ways: int = 2, log: Log = print
) -> dict[str, list[int]]:
    """For each scenario, the points where its outcome changes from the point before: {name: [point index]}.

    The release and the end of each target's part of the series are always run; an interval whose two ends
    differ is cut at `ways - 1` points (evenly spaced) until each change lies between neighbours. A round runs
    all the outcomes it needs together, so more ways mean fewer rounds (each starts the trainers' imports
    again) for more outcomes. A change that a later patch undoes exactly is not seen."""
    ends = sorted({0, len(points) - 1, *(p.index for p in points if _last_of_target(points, p))})
    intervals = {name: list(zip(ends, ends[1:], strict=False)) for name in names}
    runner.need([(points[i], name) for i in ends for name in names])
    found: dict[str, list[int]] = {name: [] for name in names}
    while True:
        wanted: list[tuple[Point, str]] = []
        split: dict[str, list[tuple[int, int]]] = {name: [] for name in names}
        for name, pairs in intervals.items():
            for lo, hi in pairs:
                a, b = runner.get(points[lo], name), runner.get(points[hi], name)
                if a is None or b is None or a.get("crashed") or b.get("crashed") or not compare(a, b):
                    continue
                if hi - lo == 1:
                    found[name].append(hi)
                    continue
                cuts = sorted({lo + round((hi - lo) * k / ways) for k in range(1, ways)} - {lo, hi})
                wanted += [(points[cut], name) for cut in cuts]
                bounds = [lo, *cuts, hi]
                split[name] += list(zip(bounds, bounds[1:], strict=False))
        if not wanted:
            return {name: sorted(indexes) for name, indexes in found.items()}
        labels = sorted({point.index: point.label for point, _ in wanted}.items())
        scenarios = len({name for _, name in wanted})
        log(f"downstream: bisecting {scenarios} scenario(s) at {', '.join(label for _, label in labels)}")
        runner.need(wanted)
        intervals = split


def _last_of_target(points: list[Point], point: Point) -> bool:
    later = [p for p in points if p.index > point.index]
    return point.target is not None and (not later or later[0].target != point.target)


def declared_fields(
    declarations: list[JSON], scenario: str, differences: list[JSON]
) -> tuple[list[str], list[str], list[str]]:
    """Which differing fields the patch's declarations cover for `scenario`: (covered, uncovered, reasons)."""
    covered, reasons = [], []
    for diff in differences:
        for entry in declarations:
            if any(fnmatch.fnmatchcase(scenario, pattern) for pattern in entry["scenarios"]) and (
                diff["field"] in entry["fields"]
            ):
                covered.append(diff["field"])
                if entry["reason"] not in reasons:
                    reasons.append(entry["reason"])
                break
    uncovered = [d["field"] for d in differences if d["field"] not in covered]
    return covered, uncovered, reasons


def attribute(
    manifest: Manifest, points: list[Point], runner: Runner, catalogue: list[JSON], found: dict[str, list[int]]
) -> list[JSON]:
    """The report's scenarios: per scenario its changes along the series, each checked against the
    declarations of the patch that makes it."""
    out = []
    for spec in catalogue:
        name = spec["name"]
        first, last = runner.get(points[0], name), runner.get(points[-1], name)
        entry = {"name": name, "package": spec["package"], "patch": None, "declared": True, "differences": []}
        entry["changes"] = []
        if first is None or last is None or first.get("crashed") or last.get("crashed"):
            entry["declared"] = None
            out.append(entry)
            continue
        entry["differences"] = [f"{d['field']} {d['text']}" for d in compare(first, last)]
        entry["release"] = _summary(first)
        entry["series"] = _summary(last)
        for index in found.get(name, []):
            point, before = points[index], points[index - 1]
            assert point.target is not None and point.patch is not None  # every point but the release's
            differences = compare(runner.get(before, name), runner.get(point, name))
            declarations = manifest.target(point.target).downstream.get(point.patch, [])
            covered, uncovered, reasons = declared_fields(declarations, name, differences)
            entry["changes"].append(
                {
                    "patch": point.patch,
                    "target": point.target,
                    "point": point.label,
                    "differences": differences,
                    "declared_fields": covered,
                    "undeclared_fields": uncovered,
                    "reasons": reasons,
                }
            )
        if entry["changes"]:
            entry["patch"] = entry["changes"][0]["patch"]
            entry["declared"] = all(not change["undeclared_fields"] for change in entry["changes"])
        elif entry["differences"]:  # a point between could not run: the change has no patch to answer for it
            entry["declared"] = None
        out.append(entry)
    return out


def _summary(outcome: JSON) -> JSON:
    keys = ("global_step", "updates", "scheduler_steps", "error", "nonfinite_grads")
    summary = {key: outcome.get(key) for key in keys}
    summary["weights"] = (outcome.get("weights") or {}).get("sha256")
    return summary


def not_seen(
    manifest: Manifest, points: list[Point], scenarios: list[JSON], names: Sequence[str], known: Iterable[str]
) -> list[JSON]:
    """Declarations of the patches in `points` that nothing matches: patterns that name no scenario at all
    (`known`: every scenario there is), or no change of the scenarios run (`names`) - stale or mistyped."""
    stale = []
    for point in points[1:]:
        assert point.target is not None and point.patch is not None  # every point but the release's
        for entry in manifest.target(point.target).downstream.get(point.patch, []):
            if not any(fnmatch.fnmatchcase(n, p) for n in known for p in entry["scenarios"]):
                stale.append({"patch": point.patch, "target": point.target, "why": "matches no scenario", **entry})
                continue
            if not any(fnmatch.fnmatchcase(n, p) for n in names for p in entry["scenarios"]):
                continue  # not run this time (--scenario)
            seen = any(
                change["patch"] == point.patch and entry["reason"] in change["reasons"]
                for scenario in scenarios
                for change in scenario["changes"]
            )
            if not seen:
                stale.append({"patch": point.patch, "target": point.target, "why": "no run showed it", **entry})
    return stale


def release_failures(runner: Runner, points: list[Point], names: Sequence[str]) -> list[JSON]:
    """Scenarios whose training fails on the release: they prove nothing, whatever the series does."""
    failures = []
    for name in names:
        outcome = runner.get(points[0], name)
        if outcome is not None and not outcome.get("crashed") and outcome.get("error"):
            why = f"training fails on the release: {outcome['error']}"
            failures.append({"name": name, "point": points[0].label, "crashed": why, "log": outcome.get("log")})
    return failures


# -- what the command prints and keeps -------------------------------------------------------------------

WIDTH = 120


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def progress_line(name: str, package: str, release: JSON, series: JSON) -> str:
    """The line printed for a scenario once its outcomes on the release and with the whole series are known."""
    if release.get("crashed") or series.get("crashed"):
        why = release.get("crashed") or series.get("crashed")
        status = f"could not run: {why}"
    else:
        differences = compare(release, series)
        status = f"differs: {describe(differences)}" if differences else "same as the release"
    return _fit(f"{name:32} {package:22} {status}", WIDTH)


def declared_cell(entry: JSON) -> str:
    if entry["declared"] is None:
        return "NOT RUN"
    if not entry["changes"]:
        return "-"
    return "yes" if entry["declared"] else "NO"


def table(report: JSON) -> str:
    head = ("scenario", "package", "patch", "declared", "release -> series")
    rows = []
    for entry in report["scenarios"]:
        patches = ",".join(
            change["patch"][:4] if change["target"] == report["target"] else change["point"]
            for change in entry["changes"]
        )
        what = "; ".join(entry["differences"]) or ("-" if entry["declared"] is not None else "see below")
        rows.append([entry["name"], entry["package"], patches or "-", declared_cell(entry), what])
    widths = [max(len(head[i]), *(len(row[i]) for row in rows)) for i in range(4)]
    last = max(WIDTH - sum(widths) - 2 * 4, 20)
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, [*widths, last], strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in [*widths, min(last, 40)]))
    for row in rows:
        cells = [cell.ljust(w) for cell, w in zip(row[:4], widths, strict=True)] + [_fit(row[4], last)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def problem_lines(report: JSON) -> list[str]:
    lines = []
    for entry in report["scenarios"]:
        for change in entry["changes"]:
            if change["undeclared_fields"]:
                shown = [d for d in change["differences"] if d["field"] in change["undeclared_fields"]]
                lines.append(
                    f"undeclared: {entry['name']}: {change['target']} {change['patch']} changes {describe(shown)}"
                )
    for failure in report["failures"]:
        lines.append(f"not run: {failure['name']} at {failure['point']}: {failure['crashed']} (log {failure['log']})")
    for stale in report["not_seen"]:
        patterns = ", ".join(stale["scenarios"])
        lines.append(f"note: {stale['patch']} declares a difference in {patterns}: {stale['why']} ({stale['reason']})")
    return lines


def markdown(report: JSON) -> str:
    """The report as markdown (a CI job summary): the verdict, the table, the problems."""
    verdict = "OK" if report["ok"] else "FAILED"
    versions = _versions(report["packages"])
    lines = [f"## downstream: {verdict}", "", f"{len(report['scenarios'])} scenarios with {versions}.", ""]
    lines += ["| scenario | package | patch | declared | release -> series |", "|---|---|---|---|---|"]
    for entry in report["scenarios"]:
        patches = ", ".join(
            change["patch"][:4] if change["target"] == report["target"] else change["point"]
            for change in entry["changes"]
        )
        what = "; ".join(entry["differences"]).replace("|", "\\|") or "-"
        lines.append(f"| {entry['name']} | {entry['package']} | {patches or '-'} | {declared_cell(entry)} | {what} |")
    problems = problem_lines(report)
    if problems:
        lines += ["", *(f"- {line}" for line in problems)]
    return "\n".join(lines) + "\n"


def packages_of(install: Install, catalogue: list[JSON]) -> JSON:
    """{"trl": ["1.16.0", "1.14.2"], "sentence-transformers": "6.2.0", ...}: the versions the scenarios used (the
    packages installed that no scenario of the run is of are left out)."""
    main = install.info["packages"]["main"]
    ran = {spec.get("package") for spec in catalogue}
    out = {}
    for package, version in main.items():
        if package not in ran:
            continue
        versions = [version]
        for layer, layered in install.info["packages"].items():
            if layer != "main" and layered.get(package) != version and any(s["layer"] == layer for s in catalogue):
                versions.append(layered.get(package))
        out[package] = versions if len(versions) > 1 else version
    return out


def last_path(work: str | Path, target: str) -> Path:
    return Path(work) / "reports" / f"downstream-{target}.json"


def save_last(work: str | Path, report: JSON) -> None:
    path = last_path(work, report["target"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _load(path: str | Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


NAMES = {"trl": "TRL", "sentence-transformers": "sentence-transformers", "setfit": "setfit", "peft": "PEFT"}


def _versions(packages: JSON) -> str:
    parts = []
    for package, versions in packages.items():
        versions = versions if isinstance(versions, list) else [versions]
        parts.append(f"{NAMES.get(package, package)} {' and '.join(versions)}")
    return _and(parts)


def _and(parts: list[str]) -> str:
    return ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else "".join(parts)


def ran(report: JSON, target: str) -> str:
    """What the scenarios of a report ran, by the package each scenario is of, with its version(s) and how many
    scenarios: "TRL 1.16.0 and 1.14.2 (21 scenarios), ... and the Trainer of transformers itself (3)". Only the
    packages of scenarios in the report: not those the install also holds."""
    counts: dict[str, int] = {}
    for entry in report.get("scenarios", []):
        counts[entry.get("package", "?")] = counts.get(entry.get("package", "?"), 0) + 1
    packages = report.get("packages") or {}
    parts = []
    for package, count in counts.items():
        versions = packages.get(package)
        versions = versions if isinstance(versions, list) else [versions] if versions else []
        if package == target:
            name = f"the Trainer of {target} itself"
        else:
            name = " ".join([NAMES.get(package, package), " and ".join(versions)]).strip()
        parts.append(f"{name} ({count} scenario{'' if count == 1 else 's'})")
    return _and(parts)


def pr_lines(ctx: Context, target: Target, name: str) -> list[str]:
    """The Downstream paragraph of `pr` for patch `name` of `target`, from the last `downstream` report whose
    series holds this version of the patch and of every patch before it; [] (with a note) when there is none."""
    reports = [_load(last_path(ctx.work, target.name))]
    reports += [
        _load(last_path(ctx.work, other.name)) for other in ctx.manifest.targets.values() if other is not target
    ]
    report, point = None, None
    for candidate in reports:
        points = (candidate or {}).get("points", [])
        index = next((i for i, p in enumerate(points) if p["patch"] == name and p["target"] == target.name), None)
        if index is not None:
            report, point = candidate, points[index]
            break
    none = [
        "No downstream trainer was checked with this version of the patch: no `series.py downstream` report holds "
        "it, so say nothing of downstream libraries in the description (or run `downstream` first)."
    ]
    if report is None:
        if any(reports):  # say so only to those who run `downstream`
            ctx.log(f"note: no downstream result for {name}; run `series.py downstream` for it to show in the text")
        return none
    for earlier in report["points"][1 : report["points"].index(point) + 1]:
        other = ctx.manifest.targets.get(earlier["target"])
        path = other.patch_path(earlier["patch"]) if other else None
        if path is None or not path.is_file() or sha256_file(path) != earlier["sha256"]:
            ctx.log(f"note: the last downstream run was on another version of {earlier['patch']}; run it again")
            return none
    changed = [
        (entry, change)
        for entry in report["scenarios"]
        for change in entry["changes"]
        if change["patch"] == name and change["target"] == target.name
    ]
    total = len(report["scenarios"])
    intro = (
        f"Checked with {ran(report, target.name)}: the scenarios the last `series.py downstream` ran ({total}, "
        "on tiny models built in code, on CPU; fp16 emulated with a CPU GradScaler and one inf gradient), each on "
        "the series up to this change and on the series without it."
    )
    if not changed:
        return [intro + " None of them changes: same final weights, steps, scheduler steps, callback events and logs."]
    verb = "changes" if len(changed) == 1 else "change"
    lines = [intro + f" {len(changed)} of them {verb}:", ""]
    groups: dict[str | None, list[tuple[JSON, JSON]]] = {}
    for entry, change in changed:
        key = "; ".join(change["reasons"]) if not change["undeclared_fields"] else None
        groups.setdefault(key, []).append((entry, change))
    for reason, members in sorted(groups.items(), key=lambda item: item[0] is None):
        if reason is None:
            lines.append("- Not declared as intended (the `downstream` run fails on these):")
        else:
            lines.append(f"- Intended: {reason[0].lower() + reason[1:]}.")
        lines += [f"  - `{entry['name']}`: {describe(change['differences'])}" for entry, change in members]
    lines += ["", f"The other {total - len(changed)} train exactly as before."]
    return lines
