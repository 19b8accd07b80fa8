"""scripts/invariants/processes.py without launching processes (needs torch for the sample identities: run it with
`python3 scripts/series.py selftest`): the configurations drawn, a replay checked, and the judge on synthetic
records of 2 processes: the objective with and without `average_tokens_across_devices`, a process without targets,
the logged mean over several steps, the window content, a window the gradient scaler skips (fp16), the windows
`train()` counts as left out, and a failed run."""

import pytest


pytest.importorskip("torch", reason="needs torch: run it with `python3 scripts/series.py selftest`")

from invariants import models, processes  # noqa: E402


def test_configs_are_reproducible_and_cover_what_they_claim():
    configs = processes.configs(0, 12)
    assert configs == processes.configs(0, 12) and configs != processes.configs(1, 12)
    assert {c["model"] for c in configs} == set(processes.MODELS)
    assert {c["average_tokens"] for c in configs} == {True, False}
    for i, config in enumerate(configs):
        assert processes.check_config(config) == config
        b, ga = config["batch_size"], config["ga"]
        if i % 2 == 0:  # the second process holds no target in the first window (i % 4 == 0) or the last
            first = 0 if i % 4 == 0 else (config["windows"] - 1) * ga * 2
            second = [s for m in range(ga) for s in range((first + 2 * m + 1) * b, (first + 2 * m + 2) * b)]
            assert all(config["targets"][s] == 0 for s in second)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"processes": 3}, "processes: 2 only"),
        ({"model": "bert_cls"}, "model: one of"),
        ({"ga": 0}, "ga: a positive integer"),
        ({"targets": [1]}, "targets: batch_size * ga * processes * windows"),
        ({"extra": 1}, "has the keys"),
    ],
)
def test_a_replayed_configuration_is_checked(change, message):
    config = {**processes.configs(0, 1)[0], **change}
    with pytest.raises(ValueError, match=message.replace("*", r"\*")):
        processes.check_config(config)


def _config(average_tokens, logging=1, windows=1):
    # batch 1, accumulation 1: window j holds samples 2j (process 0) and 2j + 1 (process 1)
    return {
        "processes": 2,
        "model": "reg_kw",
        "targets": [2, 0] * windows,
        "seq_len": 2,
        "batch_size": 1,
        "ga": 1,
        "windows": windows,
        "logging": logging,
        "average_tokens": average_tokens,
    }


def _part(sample, grad, loss, targets, observed, lr):
    return {
        "samples": [[sample]],
        "grad": observed,
        "ref_grad": grad,
        "ref_loss": loss,
        "targets": targets,
        "over_targets": True,
        "grad_terms": 1.0,
        "loss_terms": abs(loss),
        "finite": True,
        "lr": lr,
        # SGD's step at that learning rate
        "before": [1.0, 1.0],
        "after": [1.0 - lr * g for g in observed],
    }


def _record(config, observed, logs):
    """Process 0 has 2 targets (its mean loss 3, gradient [1, 2]), process 1 none (0 and [0, 0]) in every window;
    every window applied (the linear schedule's learning rate decays by one window each)."""
    canonical = models.canonical(config)
    mean = {0: ([1.0, 2.0], 3.0, 2), 1: ([0.0, 0.0], 0.0, 0)}  # gradient, loss and targets of each process
    lrs = [processes.LEARNING_RATE * (len(observed) - j) / len(observed) for j in range(len(observed))]
    return {
        rank: {
            "attempts": [_part(canonical[2 * j + rank], *mean[rank], g, lrs[j]) for j, g in enumerate(observed)],
            "logs": logs,
            "error": None,
        }
        for rank in (0, 1)
    }


def test_without_average_tokens_a_process_without_targets_adds_zero():
    config = _config(False)
    broken, checked = processes.judge(config, _record(config, [[0.5, 1.0]], [[1, 1.5]]))
    assert broken == {} and "processes-gradient" in checked
    # the mean over the process that has targets only: twice the objective
    broken, _ = processes.judge(config, _record(config, [[1.0, 2.0]], [[1, 3.0]]))
    assert set(broken) == {"processes-gradient", "processes-logged-loss"}
    assert "objective's 1.5" in broken["processes-logged-loss"][0]


def test_with_average_tokens_the_mean_is_over_every_process_targets():
    config = _config(True)
    assert processes.judge(config, _record(config, [[1.0, 2.0]], [[1, 3.0]]))[0] == {}
    assert set(processes.judge(config, _record(config, [[0.5, 1.0]], [[1, 1.5]]))[0]) == {
        "processes-gradient",
        "processes-logged-loss",
    }


def test_a_log_over_several_steps_is_the_mean_of_their_objectives():
    config = _config(False, logging=2, windows=2)
    assert processes.judge(config, _record(config, [[0.5, 1.0]] * 2, [[2, 1.5]]))[0] == {}
    broken, _ = processes.judge(config, _record(config, [[0.5, 1.0]] * 2, []))
    assert broken["processes-logged-loss"] == [
        "step 2: logged loss None, the objective's 1.5 (the mean of the 2 window(s) kept of steps 1-2)"
    ]


def test_a_window_without_targets_on_any_process_is_left_out_of_the_log():
    config = {**_config(False, logging=2, windows=2), "targets": [2, 0, 0, 0]}
    record = _record(config, [[0.5, 1.0], [0.0, 0.0]], [[2, 1.5]])
    for rank in (0, 1):  # the second window: no target on either process
        record[rank]["attempts"][1].update(ref_grad=[0.0, 0.0], ref_loss=0.0, targets=0)
    assert processes.judge(config, record)[0] == {}
    record[0]["logs"] = [[2, 0.75]]  # the empty window averaged in
    assert "objective's 1.5" in processes.judge(config, record)[0]["processes-logged-loss"][0]
    config = {**config, "targets": [0, 0, 0, 0], "logging": 1}
    record = _record(config, [[0.0, 0.0]] * 2, [[1, float("nan")], [2, float("nan")]])
    for rank in (0, 1):
        for attempt in record[rank]["attempts"]:
            attempt.update(ref_grad=[0.0, 0.0], ref_loss=0.0, targets=0)
    assert processes.judge(config, record)[0] == {}  # a log of windows all left out is NaN


def test_train_loss_is_the_mean_of_the_windows_kept():
    config = {**_config(False, logging=2, windows=2), "targets": [2, 0, 0, 0]}
    record = _record(config, [[0.5, 1.0], [0.0, 0.0]], [[2, 1.5]])
    for rank in (0, 1):  # the second window: no target on either process, left out
        record[rank]["attempts"][1].update(ref_grad=[0.0, 0.0], ref_loss=0.0, targets=0)
        record[rank]["filtered"] = 1
    record[0]["train_loss"] = 1.5
    broken, checked = processes.judge(config, record)
    assert broken == {} and "processes-train-loss" in checked
    record[0]["train_loss"] = 0.75  # the empty window averaged in
    assert processes.judge(config, record)[0] == {
        "processes-train-loss": ["train_loss 0.75, the objective's 1.5 (the mean of the 1 window(s) kept of 2)"]
    }
    del record[0]["train_loss"]  # a record without it (the run did not return): not checked
    assert "processes-train-loss" not in processes.judge(config, record)[1]


def test_some_configurations_have_a_first_window_without_any_target():
    for i, config in enumerate(processes.configs(0, 12)):
        width = config["batch_size"] * config["ga"] * 2
        if i % 6 == 3 and config["windows"] > 1:
            assert not any(config["targets"][:width]) and any(config["targets"])


def test_the_window_content_comes_from_the_schedule():
    config = _config(False, windows=2)
    record = _record(config, [[0.5, 1.0]] * 2, [[1, 1.5], [2, 1.5]])
    record[1]["attempts"][0]["samples"] = [[models.canonical(config)[3]]]  # the second window's sample, read early
    broken, _ = processes.judge(config, record)
    assert list(broken) == ["processes-window-content"]
    record[1]["attempts"].pop()
    assert "optimizer steps per process [2, 1]" in processes.judge(config, record)[0]["processes-window-content"][0]


def test_a_failed_run_is_a_violation():
    config = _config(False)
    assert processes.judge(config, {"error": "the 2-process run exited 1: boom"})[0] == {
        "processes-completes": ["the run failed: the 2-process run exited 1: boom"]
    }
    record = _record(config, [[0.5, 1.0]], [[1, 1.5]])
    record[1]["error"] = "RuntimeError: x"
    assert processes.judge(config, record)[0] == {"processes-completes": ["the run failed: RuntimeError: x"]}


def test_a_failed_process_is_told_by_its_error_or_its_timeout(tmp_path):
    log = tmp_path / "rank0.log"
    log.write_text('Traceback:\n  File "x.py", line 1\nRuntimeError: gloo: connection closed\n\n', encoding="utf-8")
    assert processes._what_ended(log) == "RuntimeError: gloo: connection closed"
    log.write_text('Timeout (0:03:00)!\nThread 0x1:\n  File "<frozen runpy>", line 88\n', encoding="utf-8")
    assert processes._what_ended(log) == "Timeout (0:03:00)!"
    log.write_text("", encoding="utf-8")
    assert processes._what_ended(log) == "no output"


def test_fp16_configurations_skip_a_window_on_a_process_with_targets():
    for seed in range(6):
        configs = processes.configs(seed, 12)
        assert processes.cell_gaps(processes.cells(configs)) == []
        # after the 12, a smoothed copy of the first configuration of each head (it takes none of their places)
        for copy in configs[12:]:
            assert copy["label_smoothing"] == 0.1 and dict(copy, label_smoothing=0.0) in configs[:12]
        for i, config in enumerate(configs[:12]):
            assert config["fp16"] == (i % 3 == 1)
            if not config["fp16"]:
                assert config["skip"] is None
                continue
            assert config["windows"] >= 2
            due = {1: "before the last", 4: "before the last", 7: "the last", 10: None}[i % 12]
            if due is None:
                assert config["skip"] is None
                continue
            assert (config["skip"] == config["windows"] - 1) == (due == "the last")
            assert processes._targets_of(config, config["skip"])[config["skip_process"]] or not any(
                processes._targets_of(config, config["skip"])
            )
    row = processes.cells([c for c in processes.configs(0, 12)[:12] if not c["fp16"]])
    assert "processes/2: fp16 on 0, off 8" in processes.cell_gaps(row)


def _skipped(config, record, j):
    """Window `j` skipped by the scaler on both processes: its gradient inf, no weight moved."""
    for rank in (0, 1):
        attempt = record[rank]["attempts"][j]
        attempt.update(finite=False, grad=[float("inf")] * 2, after=list(attempt["before"]))


def test_a_skipped_window_moves_no_weight_and_holds_the_learning_rate():
    config = {**_config(False, logging=1, windows=2), "fp16": True, "skip": 0, "skip_process": 0}
    record = _record(config, [[0.5, 1.0]] * 2, [[1, 1.5], [2, 1.5]])
    _skipped(config, record, 0)
    for rank in (0, 1):  # the schedule waits for the next applied update
        attempt = record[rank]["attempts"][1]
        attempt.update(lr=processes.LEARNING_RATE, after=[1.0 - processes.LEARNING_RATE * g for g in attempt["grad"]])
    broken, checked = processes.judge(config, record)
    assert broken == {} and "processes-update" in checked
    record[1]["attempts"][0]["after"] = [0.5, 1.0]  # a weight moved on a skipped window
    assert "an inf gradient, yet a weight moved by 0.5" in processes.judge(config, record)[0]["processes-update"][0]
    record[1]["attempts"][0]["after"] = [1.0, 1.0]
    record[1]["attempts"][0]["finite"] = False
    record[0]["attempts"][0]["finite"] = True  # one process skips, the other does not
    record[0]["attempts"][0]["after"] = record[0]["attempts"][0]["before"]
    found = processes.judge(config, record)[0]["processes-update"]
    assert found[0].startswith("window 0, process 0: the update is off SGD's") or "finite on processes" in found[0]
    record = _record(config, [[0.5, 1.0]] * 2, [[1, 1.5], [2, 1.5]])
    _skipped(config, record, 0)  # the schedule advanced on the skip: 0.005 where 0.01 is due
    assert "learning rate 0.005, 0.01 after 0 update(s)" in processes.judge(config, record)[0]["processes-update"][0]


def test_train_counts_each_window_left_out_once():
    config = {**_config(False, logging=2, windows=2), "targets": [2, 0, 0, 0]}
    record = _record(config, [[0.5, 1.0], [0.0, 0.0]], [[2, 1.5]])
    for rank in (0, 1):  # the second window: no target on either process, left out
        record[rank]["attempts"][1].update(ref_grad=[0.0, 0.0], ref_loss=0.0, targets=0)
        record[rank].update(train_loss=1.5, filtered=1)
    assert processes.judge(config, record)[0] == {}
    record[1]["filtered"] = 2  # once per process
    assert processes.judge(config, record)[0] == {
        "processes-train-loss": [
            "process 1: train() says total_nan_inf_filtered_windows 2, due 1 (windows no process has a target in)"
        ]
    }
