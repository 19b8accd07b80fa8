"""scripts/invariants/contract.py (standard library): the contract of the step loop on hand-worked cases: the
windows of a pass and after it, the steps of each reading, the callbacks, logs, evaluations and saves due, the
callbacks' stop rules, a cut epoch, the scale at 0 and a resume."""

from invariants import contract


BASE = {
    "targets": [1, 1, 1, 1, 1],
    "batch_size": 1,
    "ga": 2,
    "streamed": False,
    "fp16": True,
    "max_steps": 0,
    "epochs": 1,
    "logging": 1,
    "save_steps": 0,
    "callback": None,
    "count_skipped_steps": True,
}


def _run(faults=(), start=None, **changes):
    config = dict(BASE, **changes)
    return contract.simulate(config, config["batch_size"], config["ga"], lambda j: j in faults, start)


def _events(exp, *kinds):
    return [e for e in exp.events if e[0] in kinds]


def test_a_pass_is_laid_out_in_sampler_order_with_a_short_last_window():
    exp = _run(epochs=2)
    assert exp.windows == [[[0], [1]], [[2], [3]], [[4]]] * 2
    assert exp.step_after == [1, 2, 3, 4, 5, 6] and exp.end_step == 6
    assert _events(exp, "epoch_begin", "epoch_end") == [
        ("epoch_begin", 0), ("epoch_end", 3), ("epoch_begin", 3), ("epoch_end", 6)
    ]  # fmt: skip


def test_a_fractional_epoch_ends_after_its_share_of_the_windows():
    exp = _run(epochs=1.5)
    assert len(exp.windows) == 5 and exp.windows[3:] == [[[0], [1]], [[2], [3]]]
    assert _events(exp, "epoch_begin", "epoch_end")[-1] == ("epoch_end", 5)


def test_by_default_a_skipped_step_is_a_step():
    exp = _run(faults={1})
    assert exp.applied == [True, False, True] and exp.step_after == [1, 2, 3]
    assert _events(exp, "begin", "optimizer", "end") == [
        ("begin", 0), ("optimizer", 0), ("end", 1),
        ("begin", 1), ("optimizer", 1), ("end", 2),
        ("begin", 2), ("optimizer", 2), ("end", 3),
    ]  # fmt: skip


def test_with_the_option_a_skipped_step_begins_once_and_ends_never():
    exp = _run(faults={1}, count_skipped_steps=False)
    assert exp.applied == [True, False, True] and exp.step_after == [1, 1, 2] and exp.end_step == 2
    assert _events(exp, "begin", "optimizer", "end") == [
        ("begin", 0), ("optimizer", 0), ("end", 1),
        ("begin", 1),
        ("optimizer", 1), ("end", 2),
    ]  # fmt: skip


def test_with_the_option_an_epoch_run_skipped_at_its_end_still_saves_and_evaluates_there():
    exp = _run(faults={2}, count_skipped_steps=False, save_steps=3, eval="steps", eval_steps=3, epochs=1)
    assert exp.end_step == 2
    assert _events(exp, "save", "eval") == [("eval", 2), ("save", 2)]


def test_with_the_option_a_max_steps_run_reads_further_windows_in_its_last_epoch():
    exp = _run(faults={0}, count_skipped_steps=False, max_steps=3)
    assert len(exp.windows) == 4 and exp.windows[3] == [[0], [1]] and exp.end_step == 3
    # the fourth window comes from a further pass, which belongs to the last planned epoch
    assert _events(exp, "epoch_begin", "epoch_end") == [("epoch_begin", 0), ("epoch_end", 3)]


def test_with_the_option_a_pass_that_applied_nothing_logs_evaluates_and_saves_nothing_at_its_end():
    exp = _run(faults={0, 1, 2}, count_skipped_steps=False, epochs=2, logging="epoch", save_steps=1, save="epoch")
    assert _events(exp, "log", "save") == [("log", 3), ("save", 3)]


def test_the_scale_falls_to_zero_after_154_skips_and_a_max_steps_run_with_the_option_then_errs():
    exp = _run(faults=set(range(1000)), count_skipped_steps=False, max_steps=2)
    assert exp.error == "scale" and len(exp.windows) == contract.SCALE_ZERO_SKIPS and exp.end_step == 0
    by_default = _run(faults=set(range(1000)), max_steps=2)
    assert by_default.error is None and by_default.applied == [False, False]


def test_logs_come_when_the_step_moved_and_saves_at_the_end_of_training():
    exp = _run(logging=2, save_steps=2, eval="steps", eval_steps=2)
    assert _events(exp, "log") == [("log", 2)]
    assert _events(exp, "save", "eval") == [("eval", 2), ("save", 2), ("eval", 3), ("save", 3)]


def test_the_training_stop_callback_ends_at_its_step():
    exp = _run(callback={"kind": "train_stop", "k": 2}, epochs=3)
    assert exp.end_step == 2 and _events(exp, "epoch_end") == [("epoch_end", 2)]


def test_an_epoch_stopped_mid_window_leaves_its_micro_batch_to_the_next_window():
    exp = _run(callback={"kind": "epoch_stop", "k": 1}, epochs=3)
    # epoch 1 runs whole; epoch 2 stops after its first micro-batch (no step); epoch 3 too, its micro-batch kept
    assert exp.windows == [[[0], [1]], [[2], [3]], [[4]]] and exp.cut and exp.end_step == 3
    assert _events(exp, "begin")[-2:] == [("begin", 3), ("begin", 3)]


def test_a_resume_goes_on_from_a_saved_position():
    first = _run(save_steps=1, epochs=2)
    start = first.saves[1]  # after the second window
    again = _run(save_steps=1, epochs=2, start=start)
    assert again.windows == first.windows[2:] and again.end_step == 6
    assert _events(again, "epoch_begin")[0] == ("epoch_begin", 2)


def test_a_log_the_step_did_not_move_for_is_dropped_when_the_next_step_begins():
    # a stream resumed from a checkpoint at its first pass's last window: the resumed run reads that pass to its end
    # (no window), whose epoch-strategy log finds global_step where the last log was; the next step's begin clears it
    start = contract.Position(attempt=3, global_step=3, pass_index=0, window=3)
    exp = _run(start=start, streamed=True, max_steps=5, logging="epoch", fp16=False)
    assert _events(exp, "log", "epoch_end") == [("epoch_end", 3), ("epoch_end", 5), ("log", 5)]
