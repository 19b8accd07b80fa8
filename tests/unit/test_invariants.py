"""invariants.py and the standard-library rooms of the worker package (scripts/invariants/declared.py,
report.py): the --tree and --replay checks, argument errors as one line (exit 2), the replay command a violation
prints, the verdict and the report's shape, and which declarations cover which violations."""

import json
import shlex

import pytest
from invariants import declared, report
from seriestool import cli, invariants
from seriestool.errors import SeriesError


CONFIG = {"model": "reg_kw", "ga": 2, "targets": [2, 0], "callback": {"kind": "epoch_stop", "k": 3}, "note": "it's"}


# -- arguments ----------------------------------------------------------------------------------------------


def test_trees_are_the_release_the_series_or_a_checkout(tmp_path):
    assert invariants.parse_tree("release") == invariants.Tree("release", "release")
    assert invariants.parse_tree("series").label == "series"
    (tmp_path / "src" / "transformers").mkdir(parents=True)
    (tmp_path / "src" / "transformers" / "trainer.py").write_text("", encoding="utf-8")
    tree = invariants.parse_tree(f"path:{tmp_path}")
    assert tree.folder == tmp_path.resolve() and tree.spec == f"path:{tmp_path.resolve()}"


@pytest.mark.parametrize("spec", ["main", "path:", "git:https://x@v1"])
def test_an_unknown_tree_is_refused(spec):
    with pytest.raises(SeriesError, match="use release, series or path:DIR"):
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
        (["--tree", "main"], "--tree 'main': use release, series or path:DIR"),
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
    assert reason == "a tree without 0023 (the release) logs no step or batch counts"
    assert declared.find("logged-counts", label, config, source=SERIES_SOURCE) is None


@pytest.mark.parametrize("label", ["release", "series", "path:/x"])
def test_the_token_mean_declaration_follows_the_code_not_the_label(label):
    config = {"model": "reg_sample"}
    assert declared.find("logged-loss", label, config, source=SERIES_SOURCE) is not None
    assert declared.find("logged-loss", label, config, source=RELEASE_SOURCE) is None
    assert declared.find("logged-loss", label, {"model": "reg_kw"}, source=SERIES_SOURCE) is None


# -- coverage ------------------------------------------------------------------------------------------------


def _covered(examples, checked, **extra):
    names = ["window-content", "logs-due", "saves-due"]
    return {"tree": "series", "violations": [], "declared": [], "invariants": names,
            "coverage": {"examples": examples, "checked": checked}, **extra}  # fmt: skip


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


def test_the_summary_states_the_coverage():
    report = invariants.make_report(
        "ci", 0, [_covered(41, {"window-content": 41, "logs-due": 5, "saves-due": 3})], [], 1
    )
    report["trees"][0].update(examples=41, seconds=10)
    lines = invariants.summary_lines(report)
    assert "    checked in: window-content 41, logs-due 5, saves-due 3" in lines
    assert "    TOO LITTLE COVERED: 41 example(s), fewer than 60" in lines
    assert not report["ok"]


# -- the mutation check --------------------------------------------------------------------------------------


def test_each_mutant_is_one_small_edit_with_its_claim():
    from invariants import mutants

    names = [m.name for m in mutants.MUTANTS]
    assert len(names) == len(set(names)) >= 15
    for m in mutants.MUTANTS:
        assert m.old != m.new and m.claim and m.file.endswith(".py")
        assert len(m.old.splitlines()) <= 3


def test_a_mutant_tree_links_the_series_but_for_the_mutated_file(tmp_path):
    from invariants.mutants import Mutant

    source = tmp_path / "series"
    (source / "transformers" / "models").mkdir(parents=True)
    (source / "transformers" / "__init__.py").write_text("", encoding="utf-8")
    (source / "transformers" / "trainer.py").write_text("a = 1\nb = 2\n", encoding="utf-8")
    (source / "transformers-5.24.0.dist-info").mkdir()
    other = tmp_path / "accelerate"
    mutant = Mutant("m", "claim", "trainer.py", "b = 2", "b = 3")
    paths = invariants.mutant_paths([source, other], mutant, tmp_path / "m")
    assert paths == [tmp_path / "m", other]
    package = tmp_path / "m" / "transformers"
    assert (package / "trainer.py").read_text(encoding="utf-8") == "a = 1\nb = 3\n"
    assert (package / "models").is_symlink() and (package / "__init__.py").is_symlink()
    assert (tmp_path / "m" / "transformers-5.24.0.dist-info").is_symlink()
    assert (source / "transformers" / "trainer.py").read_text(encoding="utf-8") == "a = 1\nb = 2\n"
    stale = Mutant("s", "claim", "trainer.py", "c = 3", "c = 4")
    with pytest.raises(SeriesError, match="occurs 0 times"):
        invariants.mutant_paths([source], stale, tmp_path / "s")


def test_the_mutation_table_scores_the_caught():
    from invariants.mutants import Mutant

    caught = {"violations": [{"invariant": "saves-due", "key": "saves-due"}], "examples": 3, "seconds": 9.0}
    rows = [
        invariants.mutant_row(Mutant("a", "c", "trainer.py", "x", "y"), caught),
        invariants.mutant_row(Mutant("b", "c", "trainer.py", "x", "y"), {"violations": [], "examples": 150}),
        invariants.mutant_row(Mutant("c", "c", "trainer.py", "x", "y"), {"crashed": "the worker ended with exit 3"}),
    ]  # fmt: skip
    assert [r["caught"] for r in rows] == [True, False, False]
    lines = invariants.mutation_lines(rows, 200)
    assert lines[-1] == "  score: 1/3 caught (33%) in 200s"
    assert "saves-due" in lines[1] and "NO" in lines[2] and "NOT RUN" in lines[3]


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
