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


def _weights(sha="a", tensors=2, fingerprint=((1.5, 2.0), (0.0, 4.0))):
    return {"sha256": sha * 64, "tensors": tensors, "fingerprint": [list(pair) for pair in fingerprint]}


def test_how_weights_differ():
    differ = downstream._weights_differ
    assert differ(None, None) is None
    assert differ(None, _weights()) == "none -> some"
    assert differ(_weights(), None) == "some -> none"
    assert differ(_weights(), _weights()) is None  # the same bytes
    assert (
        differ(_weights(), _weights("b", fingerprint=((9.0, 9.0), (9.0, 9.0)), tensors=2)) == "2 of 2 tensors differ"
    )
    assert differ(_weights(), _weights("b", tensors=3)) == "2 -> 3 tensors"
    # a sum near 0 compares on the scale of the tensor's norm
    assert differ(_weights(fingerprint=((1e-3, 1e3),)), _weights("b", fingerprint=((1.5e-3, 1e3),))) is None
    assert differ(_weights(fingerprint=((1e-3, 1e3),)), _weights("b", fingerprint=((0.2, 1e3),))) is not None
    assert differ(_weights(fingerprint=((0.0, 1.0),)), _weights("b", fingerprint=((2e-5, 1.0),))) is not None
    # the same sums, other norms
    assert differ(_weights(fingerprint=((1.0, 1.0),)), _weights("b", fingerprint=((1.0, 1.1),))) is not None
    inf = float("inf")
    assert differ(_weights(fingerprint=((1.0, inf),)), _weights("b", fingerprint=((2.0, inf),))) is not None
    assert differ(_weights(fingerprint=((1.0, inf),)), _weights("b", fingerprint=((1.0, inf),))) is None


def test_close_and_short():
    close = downstream._close
    assert close(1.0, 1.0 + 1e-9) and close(1, 1.0) and not close(1.0, 1.1)
    assert close(float("nan"), float("nan")) and not close(float("nan"), 1.0) and not close(1.0, float("nan"))
    assert close(None, None) and not close(None, 0) and close("a", "a") and not close("a", "b")
    assert not close(True, 1.0 + 1e-9)  # a bool is not a number here
    assert downstream._short(1 / 3) == "0.333333" and downstream._short(3) == "3" and downstream._short(None) == "None"


def test_how_logs_and_events_differ():
    assert downstream._log_differs([{"loss": 1.0}], []) == "1 -> 0 entries"
    ordered = [{"step": 2, "epoch": 1.0, "loss": 1.0, "zz": 1, "learning_rate": 0.1}]
    other = [{"step": 2, "epoch": 2.0, "loss": 2.0, "zz": 2, "learning_rate": 0.2}]
    assert downstream._log_differs(ordered, other) == "step 2 loss 1 -> 2"  # the first key of LOG_ORDER first
    assert (
        downstream._log_differs([{"step": 1, "zz": 1, "aa": 1}], [{"step": 1, "zz": 2, "aa": 2}]) == "step 1 aa 1 -> 2"
    )
    assert downstream._log_differs([{"step": 1, "x": 1}], [{"step": 1}]) == "step 1 x 1 -> None"
    assert downstream._log_differs([], []) is None
    events = compare(outcome(events={"on_log": 1}), outcome(events={"on_step_end": 2}))
    assert events == [{"field": "events", "text": "on_log 1 -> 0, on_step_end 0 -> 2"}]
    assert compare(outcome(events=None), outcome(events={})) == []
    assert compare(outcome(log_history=None), outcome(log_history=[])) == []


def test_the_end_of_each_target():
    points = _points(4, companions=2)
    assert [downstream._last_of_target(points, p) for p in points] == [False, False, True, False, True]
    assert [downstream._last_of_target(points[:3], p) for p in points[:3]] == [False, False, True]


def test_bisection_says_what_it_runs():
    steps = {"one": [1, 1, 1, 1, 2, 2, 2, 2, 2, 2]}
    lines = []
    downstream.bisect(FakeRunner(steps), _points(9), ["one"], log=lines.append)
    assert lines and all(line.startswith("downstream: bisecting 1 scenario(s) at ") for line in lines)
    assert lines[0] == "downstream: bisecting 1 scenario(s) at 0004"  # halfway between 0 and 9


def test_a_crashed_or_missing_outcome_is_no_change():
    class Holes(FakeRunner):
        def get(self, point, name):
            return {"crashed": "x"} if point.index == 9 else super().get(point, name)

    found = downstream.bisect(Holes({"one": [1] * 9 + [2]}), _points(9), ["one"], log=lambda line: None)
    assert found == {"one": []}


def test_opposite_sums_near_zero_and_the_first_declaration_that_covers_a_field():
    differ = downstream._weights_differ
    assert differ(_weights(fingerprint=((0.1, 1e3),)), _weights("b", fingerprint=((-0.1, 1e3),))) is not None
    declarations = [
        {"scenarios": ["trl/*"], "reason": "first", "fields": ["global_step"]},
        {"scenarios": ["trl/*"], "reason": "second", "fields": ["global_step"]},
    ]
    differences = [{"field": "global_step", "text": "8 -> 7"}]
    assert declared_fields(declarations, "trl/x", differences) == (["global_step"], [], ["first"])


def test_bisection_runs_the_points_it_cuts_at():
    runner = FakeRunner({"one": [1, 1, 1, 1, 2, 2, 2, 2, 2, 2]})
    downstream.bisect(runner, _points(9), ["one"], log=lambda line: None)
    assert [index for index, _ in runner.asked] == [0, 9, 4, 2, 3]  # the ends, then the cuts of what differs


def test_an_event_that_appears_or_disappears():
    assert compare(outcome(events={}), outcome(events={"on_save": 1})) == [
        {"field": "events", "text": "on_save 0 -> 1"}
    ]
    assert compare(outcome(events={"on_save": 1}), outcome(events={})) == [
        {"field": "events", "text": "on_save 1 -> 0"}
    ]
