"""`invariants`: property-based checks of the Trainer's step loop, on the release, the upstream tier and the series.

The checks themselves live in the worker package `scripts/invariants/` (Hypothesis, torch, the Trainer), which
runs in the pinned venv with one tree on PYTHONPATH; this module (standard library only) owns what is around it:

- the trees, points of `downstream`'s series (the source trees made from the pinned sdist and the manifest's
  patches): `release` its first (the pinned release, the companions released), `upstream` the point after the
  last upstream-tier patch (every patch not in [targets.<t>.fork]; the companions still released: what upstream
  gets), `series` its last (the whole series, fork tier and the companion targets' patches included); `path:DIR`
  a checkout's `src/`;
- the worker run of each tree (its lines go to the console as they come; its result is a JSON file);
- the verdict (undeclared violations on any tree but the release fail), the report and the console summary.
"""

import datetime
import json
import queue
import shlex
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from . import downstream
from .context import Context
from .errors import SeriesError
from .manifest import Target
from .progress import Say, heartbeat
from .runners import stop_group


JSON = dict[str, Any]
SCRIPTS = Path(__file__).resolve().parents[1]
PACKAGE = SCRIPTS / "invariants"
SCHEMA_VERSION = 1
PROFILES = ("ci", "nightly")
RELEASE = "release"
UPSTREAM = "upstream"
SERIES = "series"
TREES = (RELEASE, UPSTREAM, SERIES)  # the named trees, in the order they run by default
EXIT_BAD_INPUT = 2  # the worker's exit status for a configuration it cannot take


@dataclass(frozen=True)
class Tree:
    """A --tree value: its label (what declarations and reports name), the spec as given, a checkout folder."""

    label: str
    spec: str
    folder: Path | None = None


def parse_tree(spec: str) -> Tree:
    """`release`, `upstream`, `series` or `path:DIR` (a checkout: DIR/src goes on PYTHONPATH); a SeriesError
    otherwise."""
    if spec in TREES:
        return Tree(spec, spec)
    if spec.startswith("path:") and spec[5:]:
        folder = Path(spec[5:]).expanduser().resolve()
        if not (folder / "src" / "transformers" / "trainer.py").is_file():
            raise SeriesError(f"--tree {spec}: {folder} is not a transformers checkout (no src/transformers/)")
        return Tree(spec, f"path:{folder}", folder)
    raise SeriesError(f"--tree {spec!r}: use release, upstream, series or path:DIR")


def parse_replay(text: str | None) -> JSON | None:
    """The --replay configuration: a JSON object (the worker checks its keys)."""
    if text is None:
        return None
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise SeriesError(f"--replay is not JSON: {exc}") from None
    if not isinstance(config, dict):
        raise SeriesError("--replay must be a JSON object (a configuration a violation printed)")
    return config


def _span(names: Sequence[str], order: Sequence[str]) -> str:
    """Patches by number: `0001-0022` for a run of the series' order, else each (`0003, 0007`)."""
    numbers = [name[:4] for name in names]
    if not numbers:
        return "none"
    first = order.index(names[0])
    if len(numbers) > 1 and list(order[first : first + len(names)]) == list(names):
        return f"{numbers[0]}-{numbers[-1]}"
    return ", ".join(numbers)


def upstream_index(target: Target) -> int | None:
    """The index of the point of `target`'s series after its last upstream-tier patch (0: the release), from the
    manifest alone. None when the manifest has no fork tier (the upstream tier is the whole series); a SeriesError
    when a fork-tier patch comes before an upstream-tier one (no point of the series is the upstream tier alone)."""
    if not target.fork:
        return None
    upstream = target.upstream_tier()
    last = target.patches.index(upstream[-1]) + 1 if upstream else 0
    early = [name for name in target.patches[:last] if name in target.fork]
    if early:
        raise SeriesError(
            f"--tree upstream: fork-tier patch {early[0][:4]} comes before upstream-tier patch {upstream[-1][:4]} in "
            f"[targets.{target.name}].patches, so no point of the series is the upstream tier alone: put the fork "
            f"tier ([targets.{target.name}.fork]) last, or run --tree release --tree series"
        )
    return last


def upstream_point(target: Target, series: "downstream.Series") -> "downstream.Point | None":
    """The point of `target`'s series after its last upstream-tier patch, the companions still released: the
    upstream tier alone (see `upstream_index`; None without a fork tier)."""
    last = upstream_index(target)
    if last is None:
        return None
    point = series.points[last]
    upstream = target.upstream_tier()
    assert point.patch == (upstream[-1] if upstream else None) and all(
        tree is None for name, tree in point.trees.items() if name != target.name
    ), point
    return point


def describe_trees(ctx: Context, target: Target) -> dict[str, str]:
    """What each named tree is, in words from the manifest (for the console, the summary and the report)."""
    companions = [ctx.manifest.target(name) for name in target.verify_with]
    pinned = target.companions.get(target.version, {})
    released = " + ".join(f"{c.package} {pinned.get(c.name, c.version)}" for c in companions)
    on_released = f" on released {released}" if released else ""
    release = f"{target.package} {target.version}" + (f" + {released}" if released else "")
    upstream_tier = target.upstream_tier()
    patched = [c for c in companions if c.patches]
    series = f"the whole series {_span(target.patches, target.patches)}"
    if target.fork:
        series += f" (fork tier {_span([p for p in target.patches if p in target.fork], target.patches)} included)"
    series += "".join(f" + {c.package} patches {_span(c.patches, c.patches)}" for c in patched)
    if not target.fork:
        upstream = f"no fork tier ([targets.{target.name}.fork]): the upstream tier is the series"
    else:
        upstream = f"the upstream tier {_span(upstream_tier, target.patches)} alone{on_released}"
    return {RELEASE: release, UPSTREAM: upstream, SERIES: series}


def tree_paths(ctx: Context, target: Target, trees: Sequence[Tree]) -> tuple[dict[str, list[Path]], list[Path]]:
    """PYTHONPATH entries of each tree, and the release's (for the release-loads invariant). Without a fork tier,
    `upstream` gets the series' entries."""
    paths, release, _ = tree_sources(ctx, target, trees)
    return paths, release


# The series' census of the heads the Trainer hands the token count (0017): the worker runs each tree's own copy
CENSUS = "utils/check_loss_kwargs_declarations.py"


def tree_sources(
    ctx: Context, target: Target, trees: Sequence[Tree]
) -> tuple[dict[str, list[Path]], list[Path], dict[str, str | None]]:
    """`tree_paths`, and the text of each tree's census (`CENSUS`, from the tree's commit or checkout; None where the
    tree has none, as the release)."""
    series = downstream.series_points(ctx, target)
    release = series.paths(series.points[0])
    out: dict[str, list[Path]] = {}
    census: dict[str, str | None] = {}
    for tree in trees:
        point = None
        if tree.label == RELEASE:
            out[tree.label] = release
            point = series.points[0]
        elif tree.label == UPSTREAM:
            point = upstream_point(target, series) or series.points[-1]
            out[tree.label] = series.paths(point)
        elif tree.label == SERIES:
            point = series.points[-1]
            out[tree.label] = series.paths(point)
        else:
            assert tree.folder is not None
            out[tree.label] = [tree.folder / "src"]
            script = tree.folder / CENSUS
            census[tree.label] = script.read_text(encoding="utf-8") if script.is_file() else None
        if point is not None:
            repo, commits = series.repos[target.name]
            commit = commits[point.trees[target.name] or series.base_trees[target.name]]
            has = repo.out("ls-tree", "--name-only", commit, CENSUS).strip()
            census[tree.label] = repo.out("show", f"{commit}:{CENSUS}") if has else None
    return out, release, census


# The most a worker may take: the profile's search budget per tree (scripts/invariants/draw.py) and a margin.
WORKER_SECONDS = {"ci": 600, "nightly": 3600, "mutants": 600}


def worker_timeout(profile: str) -> float:
    return float(WORKER_SECONDS[profile])


def worker_command(
    python: Path,
    tree: Tree,
    profile: str,
    seed: int,
    result: Path,
    *,
    replay: JSON | None,
    release: Sequence[Path],
    first: bool = False,
    census: Path | None = None,
    processes_only: bool = False,
) -> list[str]:
    cmd = [str(python), "-m", "invariants", "--tree-label", tree.label, "--tree-spec", tree.spec]
    cmd += ["--profile", profile, "--seed", str(seed), "--result", str(result)]
    cmd += ["--release-path", ":".join(map(str, release))]
    if replay is not None:
        cmd += ["--replay", json.dumps(replay)]
    if first:
        cmd.append("--first")
    if census is not None:
        cmd += ["--census", str(census)]
    if processes_only:
        cmd.append("--processes-only")
    return cmd


def run_worker(
    python: Path,
    tree: Tree,
    paths: Sequence[Path],
    release: Sequence[Path],
    *,
    profile: str,
    seed: int,
    replay: JSON | None,
    timeout: float,
    out: Callable[[str], None],
    log_path: Path,
    say: Say | None = None,
    first: bool = False,
    census: str | None = None,
    processes_only: bool = False,
) -> JSON:
    """Run the worker on `tree`; its lines go to `out` (and `log_path`) as they come, `say` gets a progress line
    while it runs (with its last line). Returns its result, or a result with `crashed` when it gave none. A
    configuration the worker refuses is a SeriesError."""
    with tempfile.TemporaryDirectory(prefix="invariants-") as tmp:
        result = Path(tmp) / "result.json"
        script = None
        if census is not None and replay is None:  # the tree's census (a replay judges one configuration only)
            script = Path(tmp) / "check_loss_kwargs_declarations.py"
            script.write_text(census, encoding="utf-8")
        cmd = worker_command(
            python,
            tree,
            profile,
            seed,
            result,
            replay=replay,
            release=release,
            first=first,
            census=script,
            processes_only=processes_only,
        )
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "w", encoding="utf-8") as log:
            proc = subprocess.Popen(
                cmd,
                cwd=tmp,
                env=downstream.worker_env([*paths, SCRIPTS]),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                start_new_session=True,
            )
            lines: list[str] = []
            # the worker's lines come through a thread, so that its time limit holds while it prints nothing
            pipe: queue.Queue[str | None] = queue.Queue()
            reader = threading.Thread(target=_pump, args=(proc.stdout, pipe), daemon=True)
            reader.start()

            def detail() -> str:
                last = next((line.strip() for line in reversed(lines[-5:]) if line.strip()), "")
                return f"last: {last[:100]}" if last else ""

            deadline = time.monotonic() + timeout
            timed_out = False
            try:
                with heartbeat(say, detail):
                    while True:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            timed_out = True
                            break
                        try:
                            line = pipe.get(timeout=min(left, 1.0))
                        except queue.Empty:
                            continue
                        if line is None:
                            break
                        log.write(line)
                        lines.append(line.rstrip("\n"))
                        shown = line.startswith(("invariants:", "VIOLATION", "declared", "  "))
                        if shown and "error:" not in line[:18]:
                            out(line.rstrip("\n"))
                    if timed_out:
                        stop_group(proc)
                        code = None
                    else:
                        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                stop_group(proc)
                code, timed_out = None, True
            except KeyboardInterrupt:
                stop_group(proc)
                raise
        if timed_out:
            return {
                "tree": tree.label,
                "crashed": f"the worker ran past its time limit of {timeout:.0f}s and was stopped; see {log_path}",
            }
        if code == EXIT_BAD_INPUT:
            tail = lines[-1] if lines else "no output"
            raise SeriesError(tail.removeprefix("invariants: error: "))
        if code != 0 or not result.is_file():
            tail = next((line for line in reversed(lines) if line.strip()), "no output")
            return {"tree": tree.label, "crashed": f"the worker ended with exit {code}: {tail}; see {log_path}"}
        data: JSON = json.loads(result.read_text(encoding="utf-8"))
        return data


def _pump(stream: Any, pipe: "queue.Queue[str | None]") -> None:
    try:
        for line in stream:
            pipe.put(line)
    finally:
        pipe.put(None)


# The least a search must have covered for its verdict to count: examples per tree, and examples whose check of each
# invariant could tell right from wrong (a replay is one example, and is not held to it)
MIN_EXAMPLES = {"ci": 60, "nightly": 600}
MIN_CHECKED = 3


def coverage_counts(coverage: JSON) -> tuple[str, dict[str, int]]:
    """The counts the floor judges, and what they count: `discriminating` (the examples whose check could tell
    right from wrong, e.g. a skip count only where a skip was due) where the worker gives it, else `checked` (the
    examples where the judge ran: results of a worker before it)."""
    if isinstance(coverage.get("discriminating"), dict):
        return "discriminating", coverage["discriminating"]
    return "checked", coverage.get("checked", {})


def coverage_gaps(tree: JSON, profile: str) -> list[str]:
    """What a tree's search covered too little of (empty for a replay, or a worker without coverage)."""
    coverage = tree.get("coverage")
    if tree.get("replayed") or tree.get("crashed") or not coverage:
        return []
    gaps = []
    if coverage["examples"] < MIN_EXAMPLES[profile]:
        gaps.append(f"{coverage['examples']} example(s), fewer than {MIN_EXAMPLES[profile]}")
    broken = {v["invariant"] for v in tree.get("violations", []) + tree.get("declared", [])}
    kind, counts = coverage_counts(coverage)
    thin = sorted(
        name
        for name, count in counts.items()
        if count < MIN_CHECKED and name not in broken and not tree.get("first_only")
    )
    missing = sorted(set(tree.get("invariants", [])) - set(counts) - broken)
    if thin or missing:
        what = "checked" if kind == "checked" else "checked where it could tell right from wrong"
        gaps.append(f"invariants {what} in fewer than {MIN_CHECKED} examples: {', '.join(missing + thin)}")
    cells = coverage.get("cell_gaps") or []
    if cells and not tree.get("first_only"):
        gaps.append(f"cells of the coverage table never drawn (edge/reading: feature): {'; '.join(cells)}")
    return gaps


def cell_lines(coverage: JSON) -> list[str]:
    """The coverage table: per edge and reading, the configurations drawn and how many had each feature on."""
    cells = coverage.get("cells") or {}
    if not cells:
        return []
    rows = [
        f"{row} {c['examples']} ({', '.join(f'{k} {v}' for k, v in c.items() if k != 'examples')})"
        for row, c in cells.items()
    ]
    return ["    drawn (edge/reading: examples (with the feature on)): " + "; ".join(rows)]


def verdict(trees: Sequence[JSON], profile: str = "ci") -> bool:
    """True when no tree but the release has an undeclared violation, every worker gave its result and every search
    but the release's covered enough (see `coverage_gaps`): the release's findings are reported, not judged, and its
    search, shrinking the bugs the series fixes, runs fewer examples."""
    return all(
        not t.get("crashed") and (t["tree"] == RELEASE or (not t.get("violations") and not coverage_gaps(t, profile)))
        for t in trees
    )


def make_report(profile: str, seed: int, trees: Sequence[JSON], loads: Sequence[float], seconds: float) -> JSON:
    return {
        "schema_version": SCHEMA_VERSION,
        "ok": verdict(trees, profile),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "profile": profile,
        "seed": seed,
        "trees": list(trees),
        "load_average_1m": list(loads),
        "duration_s": round(seconds, 1),
    }


def coverage_line(coverage: JSON) -> str | None:
    """Per invariant the examples that checked it and, where the worker counts them, those whose check could tell
    right from wrong (`skip-count 97/31`); None without counts."""
    checked = coverage.get("checked") or {}
    discriminating = coverage.get("discriminating")
    if not isinstance(discriminating, dict):
        if not checked:
            return None
        return "    checked in: " + ", ".join(f"{name} {count}" for name, count in checked.items())
    names = [*checked, *(name for name in discriminating if name not in checked)]
    if not names:
        return None
    counts = ", ".join(f"{name} {checked.get(name, 0)}/{discriminating.get(name, 0)}" for name in names)
    return "    checked/discriminating in: " + counts


def summary_lines(report: JSON) -> list[str]:
    """One line per tree: examples, seconds, the invariants it breaks (undeclared, then declared); then its
    coverage and what it covered too little of. A tree whose result says what it is (`what`) says so."""
    lines = []
    for tree in report["trees"]:
        name = f"{tree['tree']} ({tree['what']})" if tree.get("what") else tree["tree"]
        if tree.get("crashed"):
            lines.append(f"  {name}: NOT RUN: {tree['crashed']}")
            continue
        broken = ", ".join(v.get("key", v["invariant"]) for v in tree["violations"]) or "none"
        known = ", ".join(v.get("key", v["invariant"]) for v in tree["declared"]) or "none"
        lines.append(
            f"  {name}: {tree['examples']} example(s) in {tree['seconds']:.0f}s; broken: {broken}; declared: {known}"
        )
        covered = coverage_line(tree.get("coverage") or {})
        if covered and not tree.get("replayed"):
            lines.append(covered)
            lines += cell_lines(tree.get("coverage") or {})
        lines += census_lines(tree.get("census"))
        for gap in coverage_gaps(tree, report["profile"]):
            judged = "" if tree["tree"] != RELEASE else " (the release: reported, not judged)"
            lines.append(f"    TOO LITTLE COVERED{judged}: {gap}")
    return lines


def census_lines(census: JSON | None) -> list[str]:
    """The tree's census of every head's declaration (`CENSUS`), as the worker ran it (none: the tree has none)."""
    if not census:
        return []
    if census.get("error"):
        return [f"    census ({CENSUS}): did not run to its end: {census['error']}"]
    return [
        f"    census ({CENSUS}): exit {census['exit']}, {len(census['failing'])} head(s) handed the count although "
        f"their loss ignores it, {census.get('not_checked', 0)} not checked, {census.get('declared_averaged', 0)} "
        f"declared averaged although their loss takes it ({census['seconds']:.0f}s)"
    ]


def rerun_command(profile: str, seed: int, trees: Sequence[Tree]) -> str:
    """The command that runs the same search again (the seed printed with every run)."""
    tree_args = " ".join(f"--tree {shlex.quote(t.spec)}" for t in trees)
    return f"python3 scripts/series.py invariants {tree_args} --profile {profile} --seed {seed}"


# -- the checker's own mutation check ---------------------------------------------------------------------------


MUTANT_TREES = (UPSTREAM, SERIES)  # the trees a mutant may apply to (its `tree`)


def touches_models(mutant: Any) -> bool:
    """Whether `mutant` edits a model (a head's declaration, a shared loss or head class): the census can see it."""
    return str(mutant.file).startswith(("models/", "loss/", "modeling_layers.py"))


def mutant_paths(paths: Sequence[Path], mutant: Any, folder: Path) -> list[Path]:
    """PYTHONPATH entries of a tree (`paths`: the series or the upstream tier) with `mutant` applied. `folder` gets a
    `transformers` package that links to the tree's: every folder on the way to the mutated file (`mutant.file`,
    below the package) is a real folder whose other entries are links to the tree's, and the mutated file a new file
    (the tree's text with the mutant's edit), so that nothing is written into the tree (whose files are hard links
    shared with the other trees). A SeriesError when the file is not there or the text to change does not occur
    exactly once (the mutant no longer fits its tree)."""
    tree = getattr(mutant, "tree", SERIES)
    source = next((p for p in paths if (p / "transformers" / "__init__.py").is_file()), None)
    if source is None:
        raise SeriesError(f"the {tree} tree has no transformers package")
    parts = PurePosixPath(mutant.file).parts
    if not parts or PurePosixPath(mutant.file).is_absolute() or any(part in ("", ".", "..") for part in parts):
        raise SeriesError(
            f"mutant {mutant.name}: file {mutant.file!r} must be a path below the transformers package "
            "(e.g. trainer.py or models/bert/modeling_bert.py): update scripts/invariants/mutants.py"
        )
    original = source.joinpath("transformers", *parts)
    if not original.is_file():
        raise SeriesError(
            f"mutant {mutant.name}: the {tree} tree has no transformers/{mutant.file}: update "
            "scripts/invariants/mutants.py"
        )
    text = original.read_text(encoding="utf-8")
    if text.count(mutant.old) != 1:
        raise SeriesError(
            f"mutant {mutant.name}: the text it changes occurs {text.count(mutant.old)} times in "
            f"transformers/{mutant.file} of the {tree} tree (once expected): update scripts/invariants/mutants.py"
        )
    from_dir, to_dir = source / "transformers", folder / "transformers"
    to_dir.mkdir(parents=True)
    for depth, part in enumerate(parts):
        for entry in from_dir.iterdir():
            if entry.name not in (part, "__pycache__"):
                (to_dir / entry.name).symlink_to(entry)
        if depth < len(parts) - 1:  # a folder on the way: real, its other entries links
            from_dir, to_dir = from_dir / part, to_dir / part
            to_dir.mkdir()
    for entry in source.iterdir():  # the package metadata (its version)
        if entry.name.endswith((".egg-info", ".dist-info")):
            (folder / entry.name).symlink_to(entry)
    write_inside(folder, to_dir / parts[-1], text.replace(mutant.old, mutant.new))
    return [folder, *[p for p in paths if p != source]]


def write_inside(folder: Path, path: Path, text: str) -> None:
    """Write `text` to the new file `path`, which must lie in `folder` through real folders only: never through a
    link, never over a file that is there (it could be a hard link to a tree's file). A SeriesError otherwise."""
    parent = path.parent
    if not parent.is_relative_to(folder) or parent.resolve() != folder.resolve() / parent.relative_to(folder):
        raise SeriesError(f"internal error: the mutated file {path} would be written outside {folder}")
    try:
        with open(path, "x", encoding="utf-8") as handle:
            handle.write(text)
    except FileExistsError:
        raise SeriesError(f"internal error: the mutated file {path} is there already (a link into a tree?)") from None


def mutant_row(mutant: Any, result: JSON) -> JSON:
    """One row of the mutation table: the tree the mutant was applied to, caught (some invariant broke, declared or
    not? only undeclared ones count), by what, after how many examples and seconds."""
    row: JSON = {
        "mutant": mutant.name,
        "tree": getattr(mutant, "tree", SERIES),
        "origin": getattr(mutant, "origin", OWN),
        "claim": mutant.claim,
    }
    if result.get("crashed"):
        return {**row, "caught": False, "by": f"NOT RUN: {result['crashed']}"}
    found = result.get("violations", [])
    return {
        **row,
        "caught": bool(found),
        "by": ", ".join(v.get("key", v["invariant"]) for v in found) or "-",
        "examples": result.get("examples", 0),
        "seconds": result.get("seconds", 0),
    }


def mutation_lines(rows: Sequence[JSON], seconds: float) -> list[str]:
    caught = sum(1 for r in rows if r["caught"])
    width = max([len("mutant"), *(len(r["mutant"]) for r in rows)])
    trees = max([len("tree"), *(len(r.get("tree", SERIES)) for r in rows)])
    lines = [f"  {'mutant':<{width}}  {'tree':<{trees}}  caught  {'examples':>8}  {'s':>5}  by"]
    for r in rows:
        lines.append(
            f"  {r['mutant']:<{width}}  {r.get('tree', SERIES):<{trees}}  {'yes' if r['caught'] else 'NO':<6}  "
            f"{r.get('examples', 0):>8}  {r.get('seconds', 0):>5.0f}  {r['by']}"
        )
    score = caught / len(rows) if rows else 0.0
    lines.append(f"  score: {caught}/{len(rows)} caught ({score:.0%}) in {seconds:.0f}s")
    for origin, (got, total) in _caught_by_origin(rows).items():
        lines.append(f"  {ORIGINS.get(origin, origin)}: {got}/{total} caught ({got / total:.0%})")
    return lines


OWN = "own"
# who wrote the mutants: the checker's authors, or a helper who read the patches and never the checker
ORIGINS = {OWN: "the checker's own list", "outside": "written from the patches alone (mutants_outside.py)"}


def mutation_scores(rows: Sequence[JSON]) -> dict[str, float]:
    """The share of mutants caught, per origin (each is gated on its own: a list its authors wrote for their own
    checker is scored apart from one written without reading it)."""
    return {origin: got / total for origin, (got, total) in _caught_by_origin(rows).items()}


def _caught_by_origin(rows: Sequence[JSON]) -> dict[str, tuple[int, int]]:
    """origin -> (mutants caught, mutants), in the origins' order."""
    counts: dict[str, tuple[int, int]] = {}
    for origin in sorted({r.get("origin", OWN) for r in rows}):
        mine = [r for r in rows if r.get("origin", OWN) == origin]
        counts[origin] = (sum(1 for r in mine if r["caught"]), len(mine))
    return counts
