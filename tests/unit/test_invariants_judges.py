"""scripts/invariants/judges.py on synthetic observations (no Trainer; needs torch, from the pinned venv): the
logged step and batch counts against the harness's records, in a run and after a resume with the same or other
arguments, with skipped steps, a log without them and a run without a gradient scaler."""

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


def _observation(first_logs, resumed_logs=None, resume_args=(2, 2), fp16=True, skipped=()):
    """A first run (fp16: with a gradient scaler) of 3 attempts reading 2, 2 and 1 micro-batches (batch 2,
    accumulation 2) and a checkpoint after its second attempt; with `resumed_logs`, a resume from it (`resume_args`:
    its batch size and accumulation) whose 2 attempts read 2 and 1 micro-batches. `skipped`: attempts not applied."""
    config = {"batch_size": 2, "ga": 2, "resume": None, "fp16": fp16}
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
        (_observation([_log(2, 3, 3, 5)], skipped=(1,)), []),
        # the same step counting attempts: 2 applied
        (_observation([_log(3, 3, batches=5, applied=2)], skipped=(1,)), []),
        # the skipped step left out of the count
        (
            _observation([_log(2, 3, None, 5)], skipped=(1,)),
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
