"""scripts/invariants/judges.py on synthetic observations (no Trainer; needs torch, from the pinned venv): the
logged step and batch counts against the harness's records, in a run and after a resume with the same or other
arguments, with skipped steps, a log without them and a run without a gradient scaler."""

import json

import numpy as np
import pytest


pytest.importorskip("torch", reason="needs torch: run it with `python3 scripts/series.py selftest`")

from invariants import judges  # noqa: E402
from invariants.case import Observation, Run  # noqa: E402


def _attempts(micro_batches, first=0, skipped=()):
    return [
        {"index": first + i, "micro_batches": n, "applied": first + i not in skipped, "injected": first + i in skipped}
        for i, n in enumerate(micro_batches)
    ]


def _log(step, attempts, steps=None, batches=None, applied=None):
    return {
        "step": step,
        "loss": 1.0,
        "attempts": attempts,
        "num_optimizer_steps_attempted": steps,
        "num_batches_seen": batches,
        "num_optimizer_steps_applied": applied,
    }


def _observation(first_logs, resumed_logs=None, resume_args=(2, 2), fp16=True, skipped=(), counts_skipped=True):
    """A first run (fp16: with a gradient scaler) of 3 attempts reading 2, 2 and 1 micro-batches (batch 2,
    accumulation 2) and a checkpoint after its second attempt; with `resumed_logs`, a resume from it (`resume_args`:
    its batch size and accumulation) whose 2 attempts read 2 and 1 micro-batches. `skipped`: attempts not applied;
    `counts_skipped`: the drawn `count_skipped_steps` (False: the step is the applied updates)."""
    config = {"batch_size": 2, "ga": 2, "resume": None, "fp16": fp16, "count_skipped_steps": counts_skipped}
    first = Run(2, 2, attempts=_attempts([2, 2, 1], skipped=skipped), logs=first_logs)
    obs = Observation(config, first)
    if resumed_logs is not None:
        config["resume"] = {"checkpoint": 0, "batch_size": resume_args[0], "ga": resume_args[1]}
        obs.resumed = Run(*resume_args, first_attempt=2, attempts=_attempts([2, 1], first=2), logs=resumed_logs)
        obs.resumed_from = {"global_step": 2, "attempts": 2}
    return obs


def _wrong(where, step, name, value, expected, count):
    return (
        f"{where}: the log at global_step {step} says {name} {value}, expected {expected} "
        f"({count} since the start of training, left out when equal to the step)"
    )


@pytest.mark.parametrize(
    ("obs", "found"),
    [
        # the counts since the start of training that differ from the step: 2 attempts read 4 micro-batches, 3 read 5
        (_observation([_log(2, 2, batches=4), _log(3, 3, batches=5)]), []),
        # a skipped attempt (steps counting applied updates): 3 attempts, 2 applied
        (_observation([_log(2, 3, 3, 5)], skipped=(1,), counts_skipped=False), []),
        # the same step counting attempts: 2 applied
        (_observation([_log(3, 3, batches=5, applied=2)], skipped=(1,)), []),
        # the skipped step left out of the count
        (
            _observation([_log(2, 3, None, 5)], skipped=(1,), counts_skipped=False),
            [_wrong("first run", 2, "num_optimizer_steps_attempted", None, 3, 3)],
        ),
        # one micro-batch too few: the short last window's batch not counted
        (
            _observation([_log(2, 2, batches=4), _log(3, 3, batches=4)]),
            [_wrong("first run", 3, "num_batches_seen", 4, 5, 5)],
        ),
        # a count equal to the step is left out
        (
            _observation([_log(2, 2, 2, 4)]),
            [_wrong("first run", 2, "num_optimizer_steps_attempted", 2, None, 2)],
        ),
        # 5.24.0: no counts in the logs
        (_observation([_log(2, 2)]), [_wrong("first run", 2, "num_batches_seen", None, 4, 4)]),
        # no gradient scaler: nothing new in the logs
        (_observation([_log(2, 2)], fp16=False), []),
        (
            _observation([_log(2, 2, batches=4)], fp16=False),
            ["first run: the log at global_step 2 of a run without a scaler has ['num_batches_seen']"],
        ),
        # a resume goes on from the 2 attempts (4 micro-batches) before its checkpoint
        (_observation([_log(3, 3, batches=5)], [_log(3, 1, batches=6), _log(4, 2, batches=7)]), []),
        (
            _observation([_log(3, 3, batches=5)], [_log(3, 1, 1, 2)]),
            [_wrong("after resume", 3, "num_optimizer_steps_attempted", 1, None, 3)],
        ),
        (
            _observation([_log(3, 3, batches=5)], [_log(3, 1, batches=7)]),
            [_wrong("after resume", 3, "num_batches_seen", 7, 6, 6)],
        ),
        # another batch size: its batches are another unit, not checked; the attempts still are
        (_observation([_log(3, 3, batches=5)], [_log(3, 1, batches=99)], resume_args=(1, 2)), []),
        (
            _observation([_log(3, 3, batches=5)], [_log(3, 1, 4, 99)], resume_args=(2, 1)),
            [_wrong("after resume", 3, "num_optimizer_steps_attempted", 4, None, 3)],
        ),
    ],
)
def test_the_logged_counts_are_the_harness_attempts_and_micro_batches(obs, found):
    assert judges.logged_counts(obs) == found


def test_the_logged_counts_are_an_invariant_of_their_own():
    assert judges.INVARIANTS["logged-counts"] is judges.logged_counts


def _fp16_observation(logs, skipped=(), init_scale=16.0, filtered=()):
    """A first run of 4 single-batch attempts with a gradient scaler; `skipped`: attempts whose inf was injected,
    `filtered`: attempts whose loss the filter leaves out (NaN)."""
    config = {"batch_size": 1, "ga": 1, "resume": None, "fp16": True, "init_scale": init_scale}
    attempts = _attempts([1, 1, 1, 1], skipped=skipped)
    for a in attempts:
        a["expected"] = {"loss": float("nan") if a["index"] in filtered else 1.0, "targets": 1}
    full = [dict(log) for log in logs]
    run = Run(1, 1, attempts=attempts, logs=[{"step": f["step"], "attempts": f["attempts"]} for f in full])
    run.full_logs = full
    obs = Observation(config, run)
    obs.__dict__["_expected"] = {id(run): None}  # no contract needed: the counts come from the attempts
    return obs


@pytest.mark.parametrize(
    ("logs", "skipped", "filtered", "wrong"),
    [
        # one skip in the first interval: counted there only, and the scale halved from then on
        ([{"step": 2, "attempts": 2, "skipped_optimizer_steps": 1, "loss_scale": 8.0},
          {"step": 4, "attempts": 4, "loss_scale": 8.0}], (1,), (), None),
        # wrong: the count since the start of training, where the one since the last log (none) is due
        ([{"step": 2, "attempts": 2, "skipped_optimizer_steps": 1, "loss_scale": 8.0},
          {"step": 4, "attempts": 4, "skipped_optimizer_steps": 1, "loss_scale": 8.0}],
         (1,), (), "skipped_optimizer_steps"),
        # the scale before the skip
        ([{"step": 2, "attempts": 2, "skipped_optimizer_steps": 1, "loss_scale": 16.0}], (1,), (), "loss_scale"),
        # a NaN window left out of the loss is no log key (train()'s metrics give the total, `train-metrics`)
        ([{"step": 4, "attempts": 4, "loss_scale": 16.0}], (), (2,), None),
    ],
)  # fmt: skip
def test_the_logged_skips_filtered_windows_and_scale_are_the_harness_counts(logs, skipped, filtered, wrong):
    obs = _fp16_observation(logs, skipped=skipped, filtered=filtered)
    found = judges.logged_fp16_counts(obs) + judges.loss_scale(obs)
    assert (found == []) if wrong is None else (len(found) == 1 and wrong in found[0])


def test_the_loss_scale_is_an_invariant_of_its_own():
    # the fork tier logs it (0023): on the upstream tier the skip count is still judged, the missing scale declared
    obs = _fp16_observation([{"step": 2, "attempts": 2, "skipped_optimizer_steps": 1}], skipped=(1,))
    assert judges.logged_fp16_counts(obs) == []
    assert len(judges.loss_scale(obs)) == 1
    assert judges.INVARIANTS["loss-scale"] is judges.loss_scale


def test_the_scale_reaches_0_in_float32_at_the_skip_the_contract_says():
    from invariants import contract, draw

    obs = _fp16_observation([])
    for init, skips in ((16.0, contract.SCALE_ZERO_SKIPS), (draw.TINY_SCALE, draw.TINY_SCALE_SKIPS)):
        obs.config["init_scale"] = init
        assert contract.scale_zero_skips(obs.config) == skips
        assert judges._scale_after(obs, skips - 1) > 0 and judges._scale_after(obs, skips) == 0


def test_a_run_that_ends_with_its_due_error_is_judged_in_full():
    """Guards the prefix rule: a run that raised the scale error too early is not judged on the prefix it shares."""
    from invariants import contract

    exp = contract.Expected(windows=[[[0]]] * 5, applied=[False] * 5, error="scale")
    early = Run(1, 1, attempts=_attempts([1, 1, 1], skipped=(0, 1, 2)))
    early.error, early.error_kind = f"RuntimeError: ... {judges.SCALE_ERROR} (at global step 0)", "crash"
    assert judges._due_error(early, exp) and judges._judged_in_full(early, exp)
    other = Run(1, 1, attempts=early.attempts, error="ValueError: x", error_kind="crash")
    assert not judges._judged_in_full(other, exp)


def test_the_clip_coefficient_is_torchs():
    obs = Observation({"max_grad_norm": 0.5}, Run(1, 1))
    assert judges._clip_coefficient(obs, 2.0) == pytest.approx(0.5 / (2.0 + 1e-6))
    assert judges._clip_coefficient(obs, 0.1) == 1.0
    obs.config["max_grad_norm"] = 0.0
    assert judges._clip_coefficient(obs, 2.0) == 1.0


def test_the_facts_say_whether_the_callback_stopped_an_epoch_before_the_checkpoint():
    config = {"batch_size": 1, "ga": 1, "resume": {"checkpoint": 0, "batch_size": 1, "ga": 1}, "fp16": False}
    first = Run(1, 1, attempts=_attempts([1, 1, 1, 1]))
    obs = Observation(config, first, resumed=Run(1, 1), resumed_from={"global_step": 2, "attempts": 2})
    assert judges.facts(obs)["epoch_stopped_before_resume"] is False
    first.callback_acts.append(("epoch_stop", 3, 3))  # after the checkpoint
    assert judges.facts(obs) == {
        "epoch_stopped": True,
        "epoch_stopped_before_resume": False,
        "epoch_stopped_at_resume": False,
        "resumed_from_epoch_end": False,
    }
    obs.resumed.first_attempt = 2
    obs.resumed.callback_acts.append(("epoch_stop", 2, 2))  # at the resumed run's first epoch begin
    assert judges.facts(obs)["epoch_stopped_at_resume"] and not judges.facts(obs)["epoch_stopped_before_resume"]
    first.callback_acts.append(("epoch_stop", 1, 1))
    obs.resumed_from["epoch_end"] = True
    facts = judges.facts(obs)
    assert facts["epoch_stopped_before_resume"] and facts["resumed_from_epoch_end"]


def _saved(**state):
    run = Run(1, 1)
    run.saves.append({"global_step": 2, "state_json": json.dumps(state)})
    return Observation({}, run)


@pytest.mark.parametrize(
    "state, answer, wrong",
    [
        # the release's keys only: it loads as saved
        ({"global_step": 2}, {"as_saved": None, "known_keys": None, "unknown": {}}, None),
        # new data, set: the release refuses it as saved (any newer checkpoint), and loads it once the key is dropped
        (
            {"global_step": 2, "skipped_optimizer_steps": 1},
            {"as_saved": "TypeError: x", "known_keys": None, "unknown": {"skipped_optimizer_steps": 1}},
            None,
        ),
        # a new field saved at its default: a run without the feature must save the release's keys
        (
            {"global_step": 2, "skipped_optimizer_steps": 0},
            {"as_saved": "TypeError: x", "known_keys": None, "unknown": {"skipped_optimizer_steps": 0}},
            "holds ['skipped_optimizer_steps'] at the default",
        ),
        # a known key the release cannot read, even with the unknown keys dropped
        (
            {"global_step": "x"},
            {"as_saved": "TypeError: y", "known_keys": "TypeError: y", "unknown": {}},
            "TypeError: y",
        ),
    ],
)
def test_a_checkpoint_holds_new_keys_only_when_set_and_loads_in_the_release(monkeypatch, state, answer, wrong):
    monkeypatch.setattr(judges, "LOADER", lambda text: answer)
    monkeypatch.setattr(judges, "FIELD_DEFAULTS", {"global_step": 0, "skipped_optimizer_steps": 0})
    found = judges.release_loads(_saved(**state))
    if wrong is None:
        assert found == []
    else:
        assert len(found) == 1 and wrong in found[0], found


def _summed(values):
    import numpy as np

    total = np.float32(0.0)
    for value in values:
        total = np.float32(total + np.float32(value))
    return float(total)


@pytest.mark.parametrize(
    "logged, wrong",
    [
        # 5.25.0's float: each micro-batch's loss added in float32 in the order read, over the interval's 2 steps
        (_summed([2.95, 4.71, 4.17, 0.51, 4.36, 0.65, 3.78, 1.29]) / 2, False),
        # the same losses summed per window first (what 0019 did before the cold review): another float
        (
            float(np.float32(_summed([2.95, 4.71, 4.17, 0.51])) + np.float32(_summed([4.36, 0.65, 3.78, 1.29]))) / 2,
            True,
        ),
    ],
)
def test_a_run_the_filter_does_not_concern_logs_the_release_s_float(monkeypatch, logged, wrong):
    monkeypatch.setattr(judges, "expected", lambda obs, run: None)
    windows = [[2.95, 4.71, 4.17, 0.51], [4.36, 0.65, 3.78, 1.29]]
    attempts = [
        {"index": i, "applied": True, "step_losses": losses, "expected": {"loss": sum(losses), "targets": 4}}
        for i, losses in enumerate(windows)
    ]
    run = Run(1, 4, attempts=attempts, logs=[{"step": 2, "loss": logged, "attempts": 2}])
    found = judges.logged_loss_floats(Observation({"fp16": False}, run))
    assert bool(found) is wrong, found


@pytest.mark.parametrize(
    ("objectives", "found"),
    [
        ([], None),  # no evaluation: nothing checked
        ([(0.5, 0.5), (float("nan"), float("nan"))], []),  # the loss, NaN where no target counts
        ([(0.5, None)], None),  # metrics without eval_loss: not judged
        (
            [(0.5, 0.5), (32.5, 0.5)],  # the token count summed in (5.25.0)
            ["first run: an evaluation's default objective is 32.5, its eval_loss 0.5"],
        ),
    ],
)
def test_eval_metrics_judges_the_default_objective_of_each_evaluation(objectives, found):
    obs = Observation({"batch_size": 2, "ga": 2, "resume": None}, Run(2, 2, eval_objectives=objectives))
    assert judges.eval_metrics(obs) == found
