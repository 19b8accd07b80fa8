"""downstream.py in-process: outcomes compared with the tolerance, the bisection that attributes a change to
its patch, what a declaration covers, the layers of the install."""

import pytest
from seriestool import downstream
from seriestool.downstream import Point, compare, declared_fields


# -- the comparison --------------------------------------------------------------------------------------


def outcome(**changes):
    base = {
        "error": None,
        "global_step": 8,
        "updates": 8,
        "scheduler_steps": 8,
        "events": {"on_step_end": 8, "on_log": 9},
        "log_history": [{"loss": 3.25, "step": 1}, {"train_loss": 3.0, "step": 8}],
        "weights": {"sha256": "a" * 64, "tensors": 2, "fingerprint": [[1.5, 2.0], [0.0, 4.0]]},
        "nonfinite_grads": 0,
    }
    base.update(changes)
    return base


def test_identical_outcomes_do_not_differ():
    assert compare(outcome(), outcome()) == []


def test_each_field_that_differs_is_named_in_order():
    changed = outcome(
        global_step=7,
        events={"on_step_end": 7, "on_log": 9},
        nonfinite_grads=2,
        log_history=[{"loss": 3.25, "step": 1}],
    )
    found = compare(outcome(), changed)
    assert [d["field"] for d in found] == ["global_step", "events", "log_history", "nonfinite_grads"]
    assert downstream.describe(found).startswith("global_step 8 -> 7; events on_step_end 8 -> 7; log_history 2 -> 1")


def test_weights_within_the_tolerance_are_the_same_and_beyond_it_differ():
    close = {"sha256": "b" * 64, "tensors": 2, "fingerprint": [[1.5 + 1e-9, 2.0], [1e-9, 4.0 + 1e-8]]}
    assert compare(outcome(), outcome(weights=close)) == []
    far = {"sha256": "b" * 64, "tensors": 2, "fingerprint": [[1.5, 2.0], [0.5, 4.1]]}
    assert compare(outcome(), outcome(weights=far)) == [{"field": "weights", "text": "1 of 2 tensors differ"}]


def test_log_floats_compare_with_the_tolerance_and_nan_equals_nan():
    nan = [{"loss": float("nan"), "step": 1}, {"train_loss": 3.0 + 1e-9, "step": 8}]
    assert compare(outcome(log_history=nan), outcome(log_history=nan)) == []
    assert compare(outcome(), outcome(log_history=nan)) == [
        {"field": "log_history", "text": "step 1 loss 3.25 -> nan"}
    ]


def test_declarations_cover_fields_and_never_a_new_error_unless_named():
    declarations = [
        {"scenarios": ["trl/sft-*"], "reason": "windows", "fields": ["global_step", "events", "log_history"]},
        {"scenarios": ["st/*"], "reason": "other", "fields": ["weights"]},
    ]
    differences = [{"field": "global_step", "text": "8 -> 7"}, {"field": "weights", "text": "1 of 2"}]
    assert declared_fields(declarations, "trl/sft-text", differences) == (["global_step"], ["weights"], ["windows"])
    assert declared_fields(declarations, "st/mnrl", differences) == (["weights"], ["global_step"], ["other"])
    assert declared_fields(declarations, "setfit/x", differences) == ([], ["global_step", "weights"], [])


class FakeRunner:
    """Outcomes of a scenario along 10 points: `steps[name]` is its global_step at each point."""

    def __init__(self, steps):
        self.steps, self.asked = steps, []

    def need(self, wanted):
        self.asked += [(point.index, name) for point, name in wanted]

    def get(self, point, name):
        return outcome(global_step=self.steps[name][point.index])


def _points(count, companions=0):
    points = [Point(0, "release", None, None, {})]
    for i in range(1, count + 1):
        target = "transformers" if i <= count - companions else "accelerate"
        points.append(Point(i, f"{i:04d}", f"{i:04d}-x.patch", target, {}))
    return points


@pytest.mark.parametrize("ways", [2, 3])
def test_bisection_finds_every_change_point_and_skips_quiet_scenarios(ways):
    steps = {
        "same": [1] * 10,
        "one": [1, 1, 1, 1, 2, 2, 2, 2, 2, 2],
        "two": [1, 1, 2, 2, 2, 2, 2, 2, 3, 3],
        "last": [1] * 9 + [4],
    }
    runner = FakeRunner(steps)
    found = downstream.bisect(runner, _points(9), list(steps), ways=ways, log=lambda line: None)
    assert found == {"same": [], "one": [4], "two": [2, 8], "last": [9]}
    # a scenario whose ends agree runs only at the ends
    assert sorted(index for index, name in runner.asked if name == "same") == [0, 9]
    assert len([1 for _, name in runner.asked if name == "one"]) < 10


def test_bisection_always_runs_the_end_of_each_target():
    steps = {"acc": [1] * 8 + [2, 2]}  # points 8 and 9: companion patches after 7 of the main target
    runner = FakeRunner(steps)
    found = downstream.bisect(runner, _points(9, companions=2), ["acc"], log=lambda line: None)
    assert found == {"acc": [8]}
    assert {0, 7, 9} <= {index for index, _ in runner.asked}


def test_a_layer_file_must_pin_one_package(tmp_path):
    requirements = tmp_path / "requirements-downstream.txt"
    requirements.write_text("a==1\n", encoding="utf-8")
    (tmp_path / "requirements-downstream-b.txt").write_text("b==1\nc==2\n", encoding="utf-8")
    with pytest.raises(downstream.SeriesError, match="must pin exactly one package"):
        downstream.layer_files(requirements)
    (tmp_path / "requirements-downstream-b.txt").write_text("# b\nb==1.5\n", encoding="utf-8")
    assert list(downstream.layer_files(requirements)) == ["b-1.5"]
