"""scripts/invariants/judges.py on synthetic observations (no Trainer; needs torch, from the pinned venv): the
logged step and batch counts against the harness's records, in a run and after a resume with the same or other
arguments, and a log without them."""

import pytest


pytest.importorskip("torch", reason="needs torch: run it with `python3 scripts/series.py selftest`")

from invariants import judges  # noqa: E402
from invariants.case import Observation, Run  # noqa: E402


def _attempts(micro_batches, first=0):
    return [
        {"index": first + i, "micro_batches": n, "applied": True, "injected": False}
        for i, n in enumerate(micro_batches)
    ]


def _log(step, attempts, steps=None, batches=None):
    return {
        "step": step,
        "loss": 1.0,
        "attempts": attempts,
        "num_optimizer_steps_attempted": steps,
        "num_batches_seen": batches,
    }


def _observation(first_logs, resumed_logs=None, resume_args=(2, 2)):
    """A first run of 3 attempts reading 2, 2 and 1 micro-batches (batch 2, accumulation 2) and a checkpoint after
    its second attempt; with `resumed_logs`, a resume from it (`resume_args`: its batch size and accumulation) whose
    2 attempts read 2 and 1 micro-batches."""
    config = {"batch_size": 2, "ga": 2, "resume": None}
    first = Run(2, 2, attempts=_attempts([2, 2, 1]), logs=first_logs)
    obs = Observation(config, first)
    if resumed_logs is not None:
        config["resume"] = {"checkpoint": 0, "batch_size": resume_args[0], "ga": resume_args[1]}
        obs.resumed = Run(*resume_args, first_attempt=2, attempts=_attempts([2, 1], first=2), logs=resumed_logs)
        obs.resumed_from = {"global_step": 2, "attempts": 2}
    return obs


@pytest.mark.parametrize(
    ("obs", "found"),
    [
        # the counts since the start of training: 2 attempts read 4 micro-batches, 3 read 5
        (_observation([_log(2, 2, 2, 4), _log(3, 3, 3, 5)]), []),
        # one attempt too few: a skipped step left out of the count
        (
            _observation([_log(2, 2, 2, 4), _log(3, 3, 2, 5)]),
            [
                "first run: the log at global_step 3 says num_optimizer_steps_attempted 2, "
                "3 attempt(s) since the start of training"
            ],
        ),
        # one micro-batch too few: the short last window's batch not counted
        (
            _observation([_log(2, 2, 2, 4), _log(3, 3, 3, 4)]),
            [
                "first run: the log at global_step 3 says num_batches_seen 4, "
                "5 micro-batch(es) in the 3 attempt(s) since the start of training"
            ],
        ),
        # 5.24.0: no counts in the logs
        (
            _observation([_log(2, 2)]),
            ["first run: the log at global_step 2 logs no num_batches_seen or num_optimizer_steps_attempted"],
        ),
        (
            _observation([_log(2, 2, 2)]),
            ["first run: the log at global_step 2 logs no num_batches_seen"],
        ),
        # a resume goes on from the 2 attempts (4 micro-batches) before its checkpoint
        (_observation([_log(3, 3, 3, 5)], [_log(3, 1, 3, 6), _log(4, 2, 4, 7)]), []),
        (
            _observation([_log(3, 3, 3, 5)], [_log(3, 1, 1, 2)]),
            [
                "after resume: the log at global_step 3 says num_optimizer_steps_attempted 1, "
                "3 attempt(s) since the start of training"
            ],
        ),
        (
            _observation([_log(3, 3, 3, 5)], [_log(3, 1, 3, 7)]),
            [
                "after resume: the log at global_step 3 says num_batches_seen 7, "
                "6 micro-batch(es) in the 3 attempt(s) since the start of training"
            ],
        ),
        # another batch size: its batches are another unit, not checked; the attempts still are
        (_observation([_log(3, 3, 3, 5)], [_log(3, 1, 3, 99)], resume_args=(1, 2)), []),
        (
            _observation([_log(3, 3, 3, 5)], [_log(3, 1, 4, 99)], resume_args=(2, 1)),
            [
                "after resume: the log at global_step 3 says num_optimizer_steps_attempted 4, "
                "3 attempt(s) since the start of training"
            ],
        ),
    ],
)
def test_the_logged_counts_are_the_harness_attempts_and_micro_batches(obs, found):
    assert judges.logged_counts(obs) == found


def test_the_logged_counts_are_an_invariant_of_their_own():
    assert judges.INVARIANTS["logged-counts"] is judges.logged_counts
