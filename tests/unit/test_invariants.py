"""invariants.py and the standard-library rooms of the worker package (scripts/invariants/declared.py,
report.py): the --tree and --replay checks, argument errors as one line (exit 2), the replay command a violation
prints, the verdict and the report's shape, and which declarations cover which violations."""

import json
import shlex
from pathlib import Path

import pytest
from invariants import declared, report
from seriestool import cli, invariants
from seriestool.errors import SeriesError


CONFIG = {"model": "reg_kw", "ga": 2, "targets": [2, 0], "callback": {"kind": "epoch_stop", "k": 3}, "note": "it's"}


# -- arguments ----------------------------------------------------------------------------------------------


def test_trees_are_the_release_the_upstream_tier_the_series_or_a_checkout(tmp_path):
    assert invariants.TREES == ("release", "upstream", "series")  # the default, in this order
    assert invariants.parse_tree("release") == invariants.Tree("release", "release")
    assert invariants.parse_tree("upstream") == invariants.Tree("upstream", "upstream")
    assert invariants.parse_tree("series").label == "series"
    (tmp_path / "src" / "transformers").mkdir(parents=True)
    (tmp_path / "src" / "transformers" / "trainer.py").write_text("", encoding="utf-8")
    tree = invariants.parse_tree(f"path:{tmp_path}")
    assert tree.folder == tmp_path.resolve() and tree.spec == f"path:{tmp_path.resolve()}"


@pytest.mark.parametrize("spec", ["main", "path:", "git:https://x@v1"])
def test_an_unknown_tree_is_refused(spec):
    with pytest.raises(SeriesError, match="use release, upstream, series or path:DIR"):
        invariants.parse_tree(spec)


def test_a_folder_without_the_trainer_is_refused(tmp_path):
    with pytest.raises(SeriesError, match="is not a transformers checkout"):
        invariants.parse_tree(f"path:{tmp_path}")


@pytest.mark.parametrize(("text", "message"), [("{", "is not JSON"), ("[1]", "must be a JSON object")])
def test_a_replay_must_be_a_json_object(text, message):
    with pytest.raises(SeriesError, match=message):
        invariants.parse_replay(text)
    assert invariants.parse_replay(None) is None
    assert invariants.parse_replay('{"ga": 2}') == {"ga": 2}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tree", "main"], "--tree 'main': use release, upstream, series or path:DIR"),
        (["--tree", "upstream", "--tree", "upstream"], "--tree: each tree once"),
        (["--mutants", "--tree", "upstream"], "--mutants runs each mutant on its own tree"),
        (["--fit"], "--fit needs --mutants"),
        (["--tree", "series", "--tree", "series"], "--tree: each tree once"),
        (["--replay", "[1]"], "--replay must be a JSON object"),
        (["--json", "/no/such/folder/r.json"], "the folder /no/such/folder does not exist"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys, argv, message):
    code = cli.main(["--work", str(tmp_path / "work"), "invariants", *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("series: error: ") and message in err


def test_a_seed_is_a_whole_number_or_random(capsys):
    parse = cli.build_parser().parse_args
    assert parse(["invariants", "--seed", "7"]).seed == 7
    assert 0 <= parse(["invariants", "--seed", "random"]).seed < 2**31
    with pytest.raises(SystemExit) as info:
        parse(["invariants", "--seed", "-1"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and "argument --seed: '-1' is not a whole number" in err


def test_an_unknown_profile_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        cli.build_parser().parse_args(["invariants", "--profile", "weekly"])
    assert info.value.code == 2 and "invalid choice: 'weekly'" in capsys.readouterr().err


# -- the trees ------------------------------------------------------------------------------------------------


def _targets(fork=("0004-d.patch", "0005-e.patch"), patches=None):
    from seriestool.manifest import Manifest, Target

    names = patches or ["0001-a.patch", "0002-b.patch", "0003-c.patch", "0004-d.patch", "0005-e.patch"]
    main = Target("transformers", "transformers", "5.25.0", "0" * 64, "https://x", "tests/", "src", names)
    main.verify_with = ["accelerate"]
    main.companions = {"5.25.0": {"accelerate": "1.16.0"}}
    main.fork = dict.fromkeys(fork, "why")
    companion = Target("accelerate", "accelerate", "1.17.0", "0" * 64, "https://y", "tests/", "src")
    companion.patches = ["0001-x.patch", "0002-y.patch"]
    return Manifest(Path("series.toml"), {"transformers": main, "accelerate": companion})


class _Series:
    """downstream.Series as series_points makes it: the release, each transformers prefix, the companion's."""

    def __init__(self, target, companion):
        from seriestool.downstream import Point

        trees = {target.name: "t0", companion.name: None}
        self.points = [Point(0, "release", None, None, dict(trees))]
        for index, patch in enumerate(target.patches, start=1):
            trees[target.name] = f"t{index}"
            self.points.append(Point(index, patch[:4], patch, target.name, dict(trees)))
        for index, patch in enumerate(companion.patches, start=1):
            trees[companion.name] = f"a{index}"
            self.points.append(Point(len(self.points), f"accelerate {patch[:4]}", patch, companion.name, dict(trees)))

        # the census (0017's check) arrives with the third patch: each tree id's commit, and a repository that shows it
        self.base_trees = {target.name: "t0"}
        commits = {f"t{i}": f"c{i}" for i in range(len(target.patches) + 1)}
        self.repos = {target.name: (_CensusRepo(), commits)}

    def paths(self, point):
        return [Path("/trees") / tree for tree in point.trees.values() if tree is not None]


class _CensusRepo:
    """A repository whose commits c3 and later hold the census script (its text names the commit)."""

    def out(self, *args):
        commit = args[2] if args[0] == "ls-tree" else args[1].split(":")[0]
        if args[0] == "ls-tree":
            return invariants.CENSUS if int(commit[1:]) >= 3 else ""
        return f"# census of {commit}"


def _ctx(manifest, tmp_path=None):
    from types import SimpleNamespace

    said = []
    return SimpleNamespace(manifest=manifest, out=said.append, log=said.append, said=said, work=tmp_path)


def test_the_upstream_tree_is_the_upstream_tier_on_the_released_companions(monkeypatch):
    manifest = _targets()
    main, companion = manifest.target("transformers"), manifest.target("accelerate")
    series = _Series(main, companion)
    point = invariants.upstream_point(main, series)
    assert point.patch == "0003-c.patch" and point.trees == {"transformers": "t3", "accelerate": None}
    monkeypatch.setattr(invariants.downstream, "series_points", lambda ctx, target: series)
    trees = [invariants.parse_tree(name) for name in invariants.TREES]
    paths, release = invariants.tree_paths(_ctx(manifest), main, trees)
    assert release == paths["release"] == [Path("/trees/t0")]
    assert paths["upstream"] == [Path("/trees/t3")]  # no accelerate patch: the venv's released accelerate
    assert paths["series"] == [Path("/trees/t5"), Path("/trees/a2")]
    # each tree's own census, from its commit (the release has none)
    _, _, census = invariants.tree_sources(_ctx(manifest), main, trees)
    assert census == {"release": None, "upstream": "# census of c3", "series": "# census of c5"}


def test_without_a_fork_tier_the_upstream_tree_is_the_series(monkeypatch):
    manifest = _targets(fork=())
    main, companion = manifest.target("transformers"), manifest.target("accelerate")
    series = _Series(main, companion)
    assert invariants.upstream_point(main, series) is None
    monkeypatch.setattr(invariants.downstream, "series_points", lambda ctx, target: series)
    paths, _ = invariants.tree_paths(_ctx(manifest), main, [invariants.parse_tree("upstream")])
    assert paths["upstream"] == [Path("/trees/t5"), Path("/trees/a2")]
    what = invariants.describe_trees(_ctx(manifest), main)
    assert what["upstream"] == "no fork tier ([targets.transformers.fork]): the upstream tier is the series"


def test_a_fork_tier_before_an_upstream_patch_has_no_upstream_tree():
    manifest = _targets(fork=("0002-b.patch",))
    main, companion = manifest.target("transformers"), manifest.target("accelerate")
    with pytest.raises(SeriesError, match="fork-tier patch 0002 comes before upstream-tier patch 0005"):
        invariants.upstream_point(main, _Series(main, companion))
    assert invariants.upstream_index(_targets().target("transformers")) == 3
    assert invariants.upstream_index(_targets(fork=()).target("transformers")) is None


def test_each_tree_says_what_it_is():
    manifest = _targets()
    what = invariants.describe_trees(_ctx(manifest), manifest.target("transformers"))
    assert what == {
        "release": "transformers 5.25.0 + accelerate 1.16.0",  # the release's companion, not the pin (1.17.0)
        "upstream": "the upstream tier 0001-0003 alone on released accelerate 1.16.0",
        "series": "the whole series 0001-0005 (fork tier 0004-0005 included) + accelerate patches 0001-0002",
    }
    assert invariants._span(["0001-a", "0003-c"], ["0001-a", "0002-b", "0003-c"]) == "0001, 0003"


def _run_command(monkeypatch, tmp_path, manifest, argv):
    """`invariants` with the manifest given, the trees' paths and the worker faked: (exit, trees run, console)."""
    from seriestool import pyenv
    from seriestool.commands import invariants as command

    ran = []

    def worker(python, tree, paths, release, **kwargs):
        ran.append((tree.label, paths))
        return _tree(tree.label)

    fake_paths = {"release": [Path("/r")], "upstream": [Path("/u")], "series": [Path("/s")]}
    monkeypatch.setattr(pyenv, "interpreter", lambda *args, **kwargs: Path("/python"))
    monkeypatch.setattr(
        invariants,
        "tree_sources",
        lambda ctx, target, trees: ({t.label: fake_paths[t.label] for t in trees}, [], {t.label: None for t in trees}),
    )
    monkeypatch.setattr(invariants, "run_worker", worker)
    args = cli.build_parser().parse_args(["invariants", *argv])
    ctx = _ctx(manifest, tmp_path)
    ctx.requirements = tmp_path / "requirements.txt"
    code = command.run(args, ctx)
    return code, ran, ctx.said


def test_the_default_runs_the_release_the_upstream_tier_and_the_series(monkeypatch, tmp_path):
    code, ran, said = _run_command(monkeypatch, tmp_path, _targets(), ["--json", str(tmp_path / "r.json")])
    assert code == 0 and [label for label, _ in ran] == ["release", "upstream", "series"]
    assert "invariants: upstream = the upstream tier 0001-0003 alone on released accelerate 1.16.0" in said
    trees = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["trees"]
    assert [t["what"] for t in trees][0] == "transformers 5.25.0 + accelerate 1.16.0"
    assert any(line.startswith("  upstream (the upstream tier 0001-0003 alone") for line in said)


def test_without_a_fork_tier_the_upstream_tree_is_skipped_not_run_twice(monkeypatch, tmp_path):
    code, ran, said = _run_command(monkeypatch, tmp_path, _targets(fork=()), [])
    assert code == 0 and [label for label, _ in ran] == ["release", "series"]
    assert (
        "invariants: upstream skipped: no fork tier ([targets.transformers.fork]): the upstream tier is the series "
        "(run once, as series)"
    ) in said
    # asked for alone, it runs (once), and says what it is
    code, ran, said = _run_command(monkeypatch, tmp_path, _targets(fork=()), ["--tree", "upstream"])
    assert [label for label, _ in ran] == ["upstream"]
    assert any("upstream = no fork tier" in line for line in said)


def test_a_fork_tier_that_does_not_come_last_is_bad_input_before_any_run(monkeypatch, tmp_path):
    with pytest.raises(SeriesError, match="fork-tier patch 0002 comes before upstream-tier patch 0005"):
        _run_command(monkeypatch, tmp_path, _targets(fork=("0002-b.patch",)), [])
    # without the upstream tree, such a manifest runs
    code, ran, _ = _run_command(
        monkeypatch, tmp_path, _targets(fork=("0002-b.patch",)), ["--tree", "release", "--tree", "series"]
    )
    assert code == 0 and [label for label, _ in ran] == ["release", "series"]


# -- the replay command -----------------------------------------------------------------------------------


def test_the_replay_command_is_one_line_that_gives_back_the_configuration():
    command = report.replay_command("path:/tmp/my checkout", CONFIG)
    assert "\n" not in command
    words = shlex.split(command)
    assert words[:4] == ["python3", "scripts/series.py", "invariants", "--tree"]
    assert words[4] == "path:/tmp/my checkout" and words[5] == "--replay"
    assert json.loads(words[6]) == CONFIG


def test_the_configuration_prints_with_sorted_keys_and_no_spaces():
    assert report.config_json({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'


def test_a_violation_prints_the_invariant_tree_findings_config_and_replay():
    entry = {
        "invariant": "skip-count",
        "tree": "series",
        "config": CONFIG,
        "found": ["after resume: skip count -2 but 0 inf(s) injected"],
        "declared": None,
        "replay": report.replay_command("series", CONFIG),
        "examples": 7,
        "seconds": 12.25,
        "shrink_calls": 30,
    }
    lines = report.violation_lines(entry)
    assert lines[0] == "VIOLATION skip-count on series"
    assert lines[1] == "  after resume: skip count -2 but 0 inf(s) injected"
    assert lines[2] == "  found after 7 example(s), 12.2s; shrunk in 30 call(s)"
    assert lines[3] == f"  config: {report.config_json(CONFIG)}"
    assert lines[4] == f"  replay: {entry['replay']}"
    declared_lines = report.violation_lines(dict(entry, declared="issue 28", examples=None))
    assert declared_lines[0] == "declared skip-count on series (issue 28)" and len(declared_lines) == 4


# -- verdict and report ------------------------------------------------------------------------------------


def _tree(name, violations=(), declared_=(), **extra):
    return {"tree": name, "examples": 10, "seconds": 5.0, "violations": list(violations), "declared": list(declared_)}


def test_only_undeclared_violations_beyond_the_release_fail():
    broken = {"invariant": "window-gradient", "key": "window-gradient[bert_cls]"}
    assert invariants.verdict([_tree("release", [broken]), _tree("series", declared_=[broken])])
    assert not invariants.verdict([_tree("release"), _tree("series", [broken])])
    assert not invariants.verdict([_tree("path:/x", [broken])])
    assert not invariants.verdict([_tree("release"), {"tree": "series", "crashed": "exit 1"}])


def test_the_report_has_the_shape_of_the_other_reports():
    trees = [_tree("release", [{"invariant": "skip-count"}]), _tree("series")]
    data = invariants.make_report("ci", 3, trees, [1.5, 2.0], 12.34)
    assert set(data) == {"schema_version", "ok", "date", "profile", "seed", "trees", "load_average_1m", "duration_s"}
    assert data["ok"] is True and data["seed"] == 3 and data["duration_s"] == 12.3
    json.dumps(data)
    lines = invariants.summary_lines(data)
    assert lines[0] == "  release: 10 example(s) in 5s; broken: skip-count; declared: none"
    assert lines[1] == "  series: 10 example(s) in 5s; broken: none; declared: none"
    crashed = invariants.summary_lines(invariants.make_report("ci", 0, [{"tree": "series", "crashed": "x"}], [], 1))
    assert crashed == ["  series: NOT RUN: x"]


def test_findings_are_told_apart_by_model_data_or_faults():
    config = {"model": "bert_cls", "streamed": True, "fp16": True, "inject": [2]}
    assert report.key("window-gradient", config) == "window-gradient[bert_cls]"
    assert report.key("bounded-run", config) == "bounded-run[stream]"
    assert report.key("run-length", dict(config, streamed=False)) == "run-length[sized]"
    assert report.key("skip-count", config) == "skip-count[infs]"
    assert report.key("skip-count", dict(config, inject=[])) == "skip-count[no infs]"
    assert report.key("logged-loss", config) == "logged-loss"


def test_the_rerun_command_names_the_trees_profile_and_seed():
    trees = [invariants.parse_tree("release"), invariants.parse_tree("series")]
    assert invariants.rerun_command("nightly", 7, trees) == (
        "python3 scripts/series.py invariants --tree release --tree series --profile nightly --seed 7"
    )


def test_the_worker_command_carries_tree_profile_seed_and_replay(tmp_path):
    tree = invariants.parse_tree("series")
    cmd = invariants.worker_command(
        tmp_path / "python", tree, "ci", 5, tmp_path / "r.json", replay={"ga": 2}, release=[tmp_path / "rel"]
    )
    assert cmd[1:3] == ["-m", "invariants"]
    assert cmd[cmd.index("--seed") + 1] == "5" and cmd[cmd.index("--profile") + 1] == "ci"
    assert json.loads(cmd[cmd.index("--replay") + 1]) == {"ga": 2}
    assert cmd[cmd.index("--release-path") + 1] == str(tmp_path / "rel")
    assert "--processes-only" not in cmd
    alone = invariants.worker_command(
        tmp_path / "python", tree, "mutants", 0, tmp_path / "r.json", replay=None, release=[], processes_only=True
    )
    assert alone[-1] == "--processes-only"


# -- declared limitations ----------------------------------------------------------------------------------

DECLARATIONS = [
    {
        "invariant": "window-gradient",
        "trees": ["series"],
        "when": {"model": ["bert_cls"], "ga": {"min": 2}},
        "reason": "x GA",
    },
    {"invariant": "skip-count", "trees": ["*"], "when": {"streamed": True, "ga": {"max": 2}}, "reason": "streams"},
    {"invariant": "bounded-run", "trees": ["*"], "when": {"callback": {"kind": "epoch_stop"}}, "reason": "stops"},
]


@pytest.mark.parametrize(
    ("invariant", "tree", "config", "reason"),
    [
        ("window-gradient", "series", {"model": "bert_cls", "ga": 2}, "x GA"),
        ("window-gradient", "series", {"model": "bert_cls", "ga": 1}, None),  # below the minimum
        ("window-gradient", "release", {"model": "bert_cls", "ga": 4}, None),  # another tree
        ("window-gradient", "series", {"model": "reg_kw", "ga": 4}, None),  # another model
        ("window-gradient", "series", {"ga": 4}, None),  # the key is missing
        ("logged-loss", "series", {"model": "bert_cls", "ga": 4}, None),  # another invariant
        ("skip-count", "path:/x", {"streamed": True, "ga": 2}, "streams"),  # any tree
        ("skip-count", "series", {"streamed": True, "ga": 3}, None),  # above the maximum
        ("skip-count", "series", {"streamed": False, "ga": 1}, None),  # equality
        ("skip-count", "series", {"streamed": True, "ga": True}, None),  # a bool is not a number
        ("bounded-run", "series", {"callback": {"k": 0, "kind": "epoch_stop"}}, "stops"),  # a nested predicate
        ("bounded-run", "series", {"callback": {"k": 0, "kind": "train_stop"}}, None),  # another kind
        ("bounded-run", "series", {"callback": None}, None),  # no callback drawn
    ],
)
def test_a_declaration_covers_its_invariant_tree_and_configurations(invariant, tree, config, reason):
    assert declared.find(invariant, tree, config, DECLARATIONS) == reason


def test_the_shipped_declarations_are_well_formed():
    for entry in declared.DECLARED:
        assert set(entry) <= {"invariant", "tree", "when", "happened", "reason"}
        assert {"invariant", "when", "reason"} <= set(entry)
        assert entry["reason"] and isinstance(entry["when"], dict)
        assert set(entry.get("tree", {})) <= {"has", "lacks"}
        # facts the judges observe (judges.facts), never configured
        assert set(entry.get("happened", {})) <= {
            "epoch_stopped",
            "epoch_stopped_before_resume",
            "epoch_stopped_at_resume",
            "resumed_from_epoch_end",
        }


EPOCH_STOP_RESUME = {
    "callback": {"kind": "epoch_stop", "k": 0},
    "resume": {"checkpoint": 0, "batch_size": 1, "ga": 1, "again": None},
    "streamed": False,
}


@pytest.mark.parametrize(
    "facts, covered",
    [
        ({"epoch_stopped": True, "epoch_stopped_before_resume": True}, True),
        # the same configuration, but the callback stopped no epoch before the checkpoint: not covered
        ({"epoch_stopped": True, "epoch_stopped_before_resume": False}, False),
        ({}, False),
        (None, False),
    ],
)
def test_a_resume_declaration_covers_only_a_case_whose_callback_stopped_an_epoch_before_its_checkpoint(facts, covered):
    for invariant in ("resume-identical", "saves-due", "logged-counts"):
        source = declared.LOGGED_COUNTS  # a tree that logs the counts
        reason = declared.find(invariant, "series", EPOCH_STOP_RESUME, source=source, facts=facts)
        assert (reason is not None) == covered


def test_the_stream_pass_end_declaration_needs_a_resume_from_a_pass_end_checkpoint():
    config = {"streamed": True, "save": "epoch", "resume": {"checkpoint": 0, "batch_size": 1, "ga": 1}}
    assert declared.find("saves-due", "series", config, facts={"resumed_from_epoch_end": True})
    assert declared.find("saves-due", "series", config, facts={"resumed_from_epoch_end": False}) is None
    # the fact, not the strategy: a save a callback asked for at a pass's end is such a checkpoint too
    steps = dict(config, save="steps")
    assert declared.find("saves-due", "series", steps, facts={"resumed_from_epoch_end": True})


RELEASE_SOURCE = "class Trainer:\n    def _inner_training_loop(self): ...\n"
SERIES_SOURCE = RELEASE_SOURCE + f"    {declared.LOGGED_COUNTS} = 0\n    '''{declared.GUESSED_MEAN}'''\n"


@pytest.mark.parametrize("config", [CONFIG, {}, {"model": "llama_lm", "fp16": True, "resume": None}])
@pytest.mark.parametrize("label", ["release", "series", "path:/x"])
def test_a_tree_without_the_counts_logs_none_for_any_configuration(config, label):
    # keyed on what the tree's source holds, whatever its label: `--tree path:` of the release is the release
    reason = declared.find("logged-counts", label, config, source=RELEASE_SOURCE)
    assert reason == "a tree without 0027 (the release) logs no step or batch counts"
    assert declared.find("logged-counts", label, config, source=SERIES_SOURCE) is None


@pytest.mark.parametrize("label", ["release", "upstream", "series", "path:/x"])
def test_a_tree_without_the_loss_scale_logs_none(label):
    config = {"model": "llama_lm", "fp16": True, "resume": None}
    assert declared.find("loss-scale", label, config, source=RELEASE_SOURCE) is not None
    assert declared.find("loss-scale", label, config, source=RELEASE_SOURCE + declared.LOSS_SCALE) is None


@pytest.mark.parametrize("label", ["release", "series", "path:/x"])
def test_the_token_mean_declaration_follows_the_code_not_the_label(label):
    config = {"model": "reg_sample"}
    assert declared.find("logged-loss", label, config, source=SERIES_SOURCE) is not None
    assert declared.find("logged-loss", label, config, source=RELEASE_SOURCE) is None
    assert declared.find("logged-loss", label, {"model": "reg_kw"}, source=SERIES_SOURCE) is None


# -- coverage ------------------------------------------------------------------------------------------------


def _covered(examples, checked, discriminating=None, **extra):
    names = ["window-content", "logs-due", "saves-due"]
    coverage = {"examples": examples, "checked": checked}
    if discriminating is not None:
        coverage["discriminating"] = discriminating
    return {"tree": "series", "violations": [], "declared": [], "invariants": names, "coverage": coverage, **extra}


def test_a_search_below_the_floor_fails_the_verdict():
    full = {"window-content": 90, "logs-due": 40, "saves-due": 12}
    assert invariants.coverage_gaps(_covered(100, full), "ci") == []
    assert invariants.verdict([_covered(100, full)], "ci")
    few = _covered(41, full)
    assert invariants.coverage_gaps(few, "ci") == ["41 example(s), fewer than 60"]
    assert not invariants.verdict([few], "ci")
    thin = _covered(100, {"window-content": 90, "logs-due": 2})
    assert invariants.coverage_gaps(thin, "ci") == ["invariants checked in fewer than 3 examples: saves-due, logs-due"]
    assert not invariants.verdict([thin], "ci")
    # a replay is one example, and a broken invariant needs no more
    assert invariants.coverage_gaps(_covered(1, {}, replayed=True), "ci") == []
    broken = _covered(100, {"window-content": 90, "logs-due": 40}, declared=[{"invariant": "saves-due"}])
    assert invariants.coverage_gaps(broken, "ci") == []


def test_the_release_is_not_held_to_the_floor():
    release = dict(_covered(41, {"window-content": 41}), tree="release")
    assert invariants.coverage_gaps(release, "ci")
    assert invariants.verdict([release, _covered(100, {"window-content": 90, "logs-due": 40, "saves-due": 12})], "ci")


def test_the_floor_judges_the_discriminating_examples_where_the_worker_counts_them():
    full = {"window-content": 90, "logs-due": 40, "saves-due": 12}
    # checked often, but could tell right from wrong in 2 examples (a skip count only where a skip was due)
    thin = _covered(100, full, {"window-content": 90, "logs-due": 2, "saves-due": 12})
    assert invariants.coverage_gaps(thin, "ci") == [
        "invariants checked where it could tell right from wrong in fewer than 3 examples: logs-due"
    ]
    assert not invariants.verdict([thin], "ci")
    # an invariant the worker lists no discriminating count for had none
    missing = _covered(100, full, {"window-content": 90, "logs-due": 3})
    assert invariants.coverage_gaps(missing, "ci") == [
        "invariants checked where it could tell right from wrong in fewer than 3 examples: saves-due"
    ]
    assert invariants.coverage_gaps(_covered(100, full, dict(full, **{"logs-due": 3})), "ci") == []
    assert invariants.verdict([_covered(100, full, dict(full, **{"logs-due": 3}))], "ci")
    # a result of a worker before the count (no `discriminating`) is judged on `checked`, as before
    assert invariants.coverage_counts({"examples": 1, "checked": full}) == ("checked", full)
    assert invariants.coverage_gaps(_covered(100, full), "ci") == []


def test_the_summary_states_the_coverage():
    report = invariants.make_report(
        "ci", 0, [_covered(41, {"window-content": 41, "logs-due": 5, "saves-due": 3})], [], 1
    )
    report["trees"][0].update(examples=41, seconds=10)
    lines = invariants.summary_lines(report)
    assert "    checked in: window-content 41, logs-due 5, saves-due 3" in lines
    assert "    TOO LITTLE COVERED: 41 example(s), fewer than 60" in lines
    assert not report["ok"]


def test_the_summary_states_the_census():
    tree = dict(_covered(150, {"window-content": 150}), examples=150, seconds=10, tree="series")
    tree["census"] = {"exit": 1, "failing": ["SegformerForSemanticSegmentation"], "not_checked": 16, "seconds": 19.2}
    tree["census"]["declared_averaged"] = 29
    lines = invariants.summary_lines(invariants.make_report("ci", 0, [tree], [], 1))
    assert (
        "    census (utils/check_loss_kwargs_declarations.py): exit 1, 1 head(s) handed the count although their loss "
        "ignores it, 16 not checked, 29 declared averaged although their loss takes it (19s)"
    ) in lines
    tree["census"] = {"error": "the census took more than 300s"}
    assert (
        "    census (utils/check_loss_kwargs_declarations.py): did not run to its end: the census took more than 300s"
    ) in invariants.summary_lines(invariants.make_report("ci", 0, [tree], [], 1))


def test_a_mutant_of_a_model_file_is_searched_with_the_census():
    from types import SimpleNamespace

    assert invariants.touches_models(SimpleNamespace(file="models/segformer/modeling_segformer.py"))
    assert invariants.touches_models(SimpleNamespace(file="modeling_layers.py"))
    assert not invariants.touches_models(SimpleNamespace(file="trainer.py"))


def test_the_summary_states_the_checked_and_the_discriminating_examples():
    checked = {"window-content": 41, "skip-count": 97, "saves-due": 3}
    discriminating = {"window-content": 41, "skip-count": 31, "logs-due": 4}
    tree = dict(_covered(150, checked, discriminating), examples=150, seconds=10, what="the upstream tier", tree="up")
    lines = invariants.summary_lines(invariants.make_report("ci", 0, [tree], [], 1))
    assert lines[0].startswith("  up (the upstream tier): 150 example(s) in 10s; broken: none")
    assert lines[1] == (
        "    checked/discriminating in: window-content 41/41, skip-count 97/31, saves-due 3/0, logs-due 0/4"
    )
    assert lines[2] == (
        "    TOO LITTLE COVERED: invariants checked where it could tell right from wrong in fewer than 3 examples: "
        "saves-due"
    )


# -- the mutation check --------------------------------------------------------------------------------------


def test_each_mutant_is_one_small_edit_with_its_claim():
    from invariants import mutants

    names = [m.name for m in mutants.MUTANTS]
    assert len(names) == len(set(names)) >= 15
    for m in mutants.MUTANTS:
        assert m.old != m.new and m.claim and m.file.endswith(".py")
        # a line or a few, or one block moved (the clip after the optimizer step: 8 lines)
        assert len(m.old.splitlines()) <= 8 and m.tree in ("series", "upstream")


def _package(root):
    """A small fake series tree: a transformers package with a nested model folder, its metadata, and a copy of
    each file hard-linked into a second tree (as downstream's trees share their files)."""
    import os

    files = {
        "transformers/__init__.py": "",
        "transformers/trainer.py": "a = 1\nb = 2\n",
        "transformers/utils/__init__.py": "",
        "transformers/models/__init__.py": "",
        "transformers/models/bert/__init__.py": "",
        "transformers/models/bert/modeling_bert.py": "loss = x / n\ntwice = 1\ntwice = 1\n",
        "transformers/models/bert/configuration_bert.py": "c = 1\n",
        "transformers/models/gpt2/modeling_gpt2.py": "g = 1\n",
        "transformers-5.25.0.dist-info/METADATA": "Version: 5.25.0\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
        (root.parent / "other" / name).parent.mkdir(parents=True, exist_ok=True)
        os.link(root / name, root.parent / "other" / name)
    return root


def _snapshot(root):
    """Every entry below `root`: its kind and its bytes (a link's target)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = ("link", str(path.readlink()))
        elif path.is_dir():
            out[rel] = ("dir", None)
        else:
            out[rel] = ("file", path.read_bytes())
    return out


def test_a_mutant_tree_links_the_series_but_for_the_mutated_file(tmp_path):
    from invariants.mutants import Mutant

    source = _package(tmp_path / "series")
    before, other = _snapshot(source), _snapshot(tmp_path / "other")
    accelerate = tmp_path / "accelerate"
    mutant = Mutant("m", "claim", "trainer.py", "b = 2", "b = 3")
    assert mutant.tree == "series"
    paths = invariants.mutant_paths([source, accelerate], mutant, tmp_path / "m")
    assert paths == [tmp_path / "m", accelerate]
    package = tmp_path / "m" / "transformers"
    assert (package / "trainer.py").read_text(encoding="utf-8") == "a = 1\nb = 3\n"
    assert not (package / "trainer.py").is_symlink()
    assert (package / "models").is_symlink() and (package / "__init__.py").is_symlink()
    assert (tmp_path / "m" / "transformers-5.25.0.dist-info").is_symlink()
    assert _snapshot(source) == before and _snapshot(tmp_path / "other") == other


def test_a_nested_mutant_gets_real_folders_on_its_way_and_leaves_the_tree_as_it_was(tmp_path):
    from invariants.mutants import Mutant

    source = _package(tmp_path / "series")
    before, other = _snapshot(source), _snapshot(tmp_path / "other")
    mutant = Mutant("n", "claim", "models/bert/modeling_bert.py", "loss = x / n", "loss = x", tree="upstream")
    invariants.mutant_paths([source], mutant, tmp_path / "n")
    package = tmp_path / "n" / "transformers"
    # the folders on the way are real, their other entries links; the mutated file a file of the mutant's folder
    for folder in (package, package / "models", package / "models" / "bert"):
        assert folder.is_dir() and not folder.is_symlink()
    for link in ("trainer.py", "utils", "__init__.py", "models/__init__.py", "models/gpt2", "models/bert/__init__.py"):
        assert (package / link).is_symlink(), link
    assert (package / "models" / "bert" / "configuration_bert.py").resolve() == (
        source / "transformers" / "models" / "bert" / "configuration_bert.py"
    ).resolve()
    mutated = package / "models" / "bert" / "modeling_bert.py"
    assert not mutated.is_symlink() and mutated.resolve().is_relative_to((tmp_path / "n").resolve())
    assert mutated.read_text(encoding="utf-8") == "loss = x\ntwice = 1\ntwice = 1\n"
    # the series tree, and the tree sharing its files, are byte for byte as they were
    assert _snapshot(source) == before and _snapshot(tmp_path / "other") == other
    text = (source / "transformers" / "models" / "bert" / "modeling_bert.py").read_text(encoding="utf-8")
    assert text.startswith("loss = x / n\n")


@pytest.mark.parametrize(
    ("file", "old", "message"),
    [
        ("trainer.py", "c = 3", "occurs 0 times in transformers/trainer.py of the series tree"),
        ("models/bert/modeling_bert.py", "twice = 1", "occurs 2 times in transformers/models/bert/modeling_bert.py"),
        ("models/bert/modeling_nope.py", "x", "the series tree has no transformers/models/bert/modeling_nope.py"),
        ("../setup.py", "x", "must be a path below the transformers package"),
        ("/etc/passwd", "x", "must be a path below the transformers package"),
    ],
)
def test_a_mutant_that_does_not_fit_its_tree_is_refused_and_writes_nothing(tmp_path, file, old, message):
    from invariants.mutants import Mutant

    source = _package(tmp_path / "series")
    before = _snapshot(source)
    with pytest.raises(SeriesError, match=message):
        invariants.mutant_paths([source], Mutant("s", "claim", file, old, "new"), tmp_path / "s")
    assert not (tmp_path / "s").exists() and _snapshot(source) == before


def test_the_mutated_file_is_never_written_through_a_link_or_over_a_file(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.py").write_text("kept\n", encoding="utf-8")
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "linked").symlink_to(outside)
    with pytest.raises(SeriesError, match="would be written outside"):
        invariants.write_inside(folder, folder / "linked" / "new.py", "x")
    with pytest.raises(SeriesError, match="would be written outside"):
        invariants.write_inside(folder, tmp_path / "elsewhere.py", "x")
    (folder / "f.py").symlink_to(outside / "f.py")
    with pytest.raises(SeriesError, match="is there already"):
        invariants.write_inside(folder, folder / "f.py", "x")
    assert (outside / "f.py").read_text(encoding="utf-8") == "kept\n" and sorted(outside.iterdir()) == [
        outside / "f.py"
    ]
    invariants.write_inside(folder, folder / "new.py", "x")
    assert (folder / "new.py").read_text(encoding="utf-8") == "x"


def test_each_mutant_runs_on_its_own_tree_and_must_fit_it_before_any_runs(monkeypatch, tmp_path):
    from invariants.mutants import Mutant
    from seriestool import pyenv
    from seriestool.commands import invariants as command

    trees = {name: _package(tmp_path / name / "tree") for name in ("upstream", "series")}
    (trees["series"] / "transformers" / "trainer.py").write_text("a = 1\nb = 2\nfork = 1\n", encoding="utf-8")
    chosen = [
        Mutant("on-series", "c", "trainer.py", "fork = 1", "fork = 0"),
        Mutant("on-upstream", "c", "models/bert/modeling_bert.py", "loss = x / n", "loss = x", tree="upstream"),
        Mutant("two-processes", "c", "trainer.py", "b = 2", "b = 3", processes_only=True),
    ]
    asked, ran, alone = [], {}, {}

    def tree_sources(ctx, target, wanted):
        asked.append([t.label for t in wanted])
        return (
            {t.label: [trees[t.label]] for t in wanted},
            [Path("/release")],
            {t.label: f"# {t.label}" for t in wanted},
        )

    def worker(python, tree, paths, release, **kwargs):
        # the census goes with a mutant of a model file only (the search alone sees the Trainer)
        assert kwargs["census"] == ("# upstream" if tree.spec == "upstream" else None)
        alone[tree.label] = kwargs["processes_only"]
        package = paths[0] / "transformers"
        ran[tree.label] = (tree.spec, (package / "trainer.py").read_text(encoding="utf-8"))
        ran[tree.label] += ((package / "models" / "bert" / "modeling_bert.py").read_text(encoding="utf-8"),)
        return {"tree": tree.label, "violations": [{"invariant": "saves-due"}], "examples": 1, "seconds": 1}

    monkeypatch.setattr(pyenv, "interpreter", lambda *args, **kwargs: Path("/python"))
    monkeypatch.setattr(invariants, "tree_sources", tree_sources)
    monkeypatch.setattr(invariants, "run_worker", worker)
    monkeypatch.setattr(command, "_mutants", lambda names: chosen)
    ctx = _ctx(_targets(), tmp_path)
    ctx.requirements = tmp_path / "requirements.txt"
    args = cli.build_parser().parse_args(["invariants", "--mutants", "--json", str(tmp_path / "m.json")])
    assert command.run(args, ctx) == 0
    assert asked == [["upstream", "series"]]
    assert ran["mutant:on-series"] == ("series", "a = 1\nb = 2\nfork = 0\n", "loss = x / n\ntwice = 1\ntwice = 1\n")
    assert ran["mutant:on-upstream"] == ("upstream", "a = 1\nb = 2\n", "loss = x\ntwice = 1\ntwice = 1\n")
    # a mutant whose claim only the 2-process configurations exercise runs those alone (no search before them)
    assert alone == {"mutant:on-series": False, "mutant:on-upstream": False, "mutant:two-processes": True}
    rows = json.loads((tmp_path / "m.json").read_text(encoding="utf-8"))["mutants"]
    assert [(r["mutant"], r["tree"]) for r in rows] == [
        ("on-series", "series"),
        ("on-upstream", "upstream"),
        ("two-processes", "series"),
    ]
    # a mutant that does not fit its tree (0026's text is not in the upstream tier) stops the run before any runs
    ran.clear()
    chosen[1] = Mutant("fork-on-upstream", "c", "trainer.py", "fork = 1", "fork = 0", tree="upstream")
    with pytest.raises(SeriesError, match="mutant fork-on-upstream: the text it changes occurs 0 times .* upstream"):
        command.run(args, ctx)
    assert ran == {}
    # --fit checks that alone, and runs nothing when every mutant fits
    fit = cli.build_parser().parse_args(["invariants", "--mutants", "--fit"])
    printed = []
    ctx.out = printed.append
    assert command.run(fit, ctx) == 1  # every misfit listed, not only the first
    assert any("mutant fork-on-upstream: the text it changes occurs 0 times" in line for line in printed)
    assert printed[-1].startswith("invariants --mutants --fit: FAILED (1 of 3 do not fit)")
    chosen[1] = Mutant("on-upstream", "c", "trainer.py", "b = 2", "b = 3", tree="upstream")
    assert command.run(fit, ctx) == 0
    assert ran == {}
    chosen[1] = Mutant("on-release", "c", "trainer.py", "a = 1", "a = 2", tree="release")
    with pytest.raises(SeriesError, match="mutant on-release: tree 'release' is not one of upstream, series"):
        command.run(args, ctx)


def test_the_mutation_table_scores_the_caught():
    from invariants.mutants import Mutant

    caught = {"violations": [{"invariant": "saves-due", "key": "saves-due"}], "examples": 3, "seconds": 9.0}
    rows = [
        invariants.mutant_row(Mutant("a", "c", "trainer.py", "x", "y"), caught),
        invariants.mutant_row(Mutant("b", "c", "trainer.py", "x", "y"), {"violations": [], "examples": 150}),
        invariants.mutant_row(Mutant("c", "c", "trainer.py", "x", "y"), {"crashed": "the worker ended with exit 3"}),
    ]  # fmt: skip
    rows.append(invariants.mutant_row(Mutant("upstream-one", "c", "trainer.py", "x", "y", tree="upstream"), caught))
    rows.append(invariants.mutant_row(Mutant("out-a", "c", "trainer.py", "x", "y", origin="outside"), caught))
    assert [r["caught"] for r in rows] == [True, False, False, True, True]
    assert [r["tree"] for r in rows] == ["series", "series", "series", "upstream", "series"]
    assert [r["origin"] for r in rows] == ["own"] * 4 + ["outside"]
    lines = invariants.mutation_lines(rows, 200)
    # the whole list, then each origin apart: a list written without reading the checker is scored on its own
    assert lines[-3] == "  score: 3/5 caught (60%) in 200s"
    assert lines[-2].startswith("  written from the patches alone") and lines[-2].endswith("1/1 caught (100%)")
    assert lines[-1] == "  the checker's own list: 2/4 caught (50%)"
    assert invariants.mutation_scores(rows) == {"outside": 1.0, "own": 0.5}
    assert lines[0].split() == ["mutant", "tree", "caught", "examples", "s", "by"]
    assert lines[1].split()[:3] == ["a", "series", "yes"] and "saves-due" in lines[1]
    assert "NO" in lines[2] and "NOT RUN" in lines[3]
    assert lines[4].split()[:3] == ["upstream-one", "upstream", "yes"]


WORKER = """\
import json, sys, time
print("invariants: case 1 of 2", flush=True)
time.sleep(0.5)
print("invariants: case 2 of 2", flush=True)
with open(sys.argv[sys.argv.index("--result") + 1], "w") as fh:
    json.dump({"tree": "release", "violations": []}, fh)
"""


def test_a_worker_run_says_its_last_line_while_it_runs_and_gives_its_result(tmp_path, monkeypatch):
    import re
    import stat
    import sys

    from seriestool import progress

    python = tmp_path / "python"
    python.write_text(f"#!{sys.executable}\n{WORKER}", encoding="utf-8")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv(progress.ENV, "0.2")
    shown, said = [], []
    result = invariants.run_worker(
        python,
        invariants.Tree("release", "release"),
        [],
        [],
        profile="quick",
        seed=1,
        replay=None,
        timeout=60,
        out=shown.append,
        log_path=tmp_path / "logs" / "release.log",
        say=progress.prefixed(said.append, "invariants: release"),
    )
    assert result == {"tree": "release", "violations": []}
    assert shown == ["invariants: case 1 of 2", "invariants: case 2 of 2"]
    assert said and all(re.fullmatch(r"invariants: release: still running, \d+ s(, last: .*)?", s) for s in said)
    assert any(line.endswith(", last: invariants: case 1 of 2") for line in said)


SILENT_WORKER = """\
import time
print("invariants: started", flush=True)
time.sleep(60)
"""


def test_a_worker_past_its_time_limit_is_stopped_and_reported(tmp_path):
    import stat
    import sys
    import time

    python = tmp_path / "python"
    python.write_text(f"#!{sys.executable}\n{SILENT_WORKER}", encoding="utf-8")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    started = time.monotonic()
    result = invariants.run_worker(
        python,
        invariants.Tree("series", "series"),
        [],
        [],
        profile="quick",
        seed=1,
        replay=None,
        timeout=2,
        out=lambda line: None,
        log_path=tmp_path / "logs" / "series.log",
    )
    assert time.monotonic() - started < 20
    assert result["tree"] == "series" and "ran past its time limit of 2s" in result["crashed"]
    assert not invariants.verdict([result])


@pytest.mark.parametrize("invariant", ["resume-identical", "resume-logs"])
def test_a_resume_after_an_epoch_the_callback_ended_is_declared_on_every_tree(invariant):
    resume = {"checkpoint": 1, "batch_size": 2, "ga": 1, "again": None}
    cut = {"callback": {"kind": "epoch_stop", "k": 1}, "resume": resume}
    stopped = {"epoch_stopped": True, "epoch_stopped_before_resume": True}
    assert declared.find(invariant, "series", cut, source=SERIES_SOURCE, facts=stopped) is not None
    assert declared.find(invariant, "release", cut, source=RELEASE_SOURCE, facts=stopped) is not None
    assert declared.find(invariant, "series", dict(cut, resume=None), source=SERIES_SOURCE, facts=stopped) is None
    train_stop = dict(cut, callback={"kind": "train_stop", "k": 1})
    assert declared.find(invariant, "series", train_stop, facts=stopped) is None
    # the callback stopped its epochs only after the checkpoint: the resume is modelled, nothing declared
    later = {"epoch_stopped": True, "epoch_stopped_before_resume": False}
    assert declared.find(invariant, "series", cut, source=SERIES_SOURCE, facts=later) is None
    # it stopped the epoch the resumed run continues: that run has no uninterrupted reference, the contract has one
    at_resume = dict(later, epoch_stopped_at_resume=True)
    assert declared.find(invariant, "series", cut, source=SERIES_SOURCE, facts=at_resume) is not None
    assert declared.find("saves-due", "series", cut, source=SERIES_SOURCE, facts=at_resume) is None
