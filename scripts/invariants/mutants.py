"""The checker's own mutation check: plausible bugs, one per claim a patch makes, each a small edit of the series'
source (a text that must occur exactly once, and what replaces it). `series.py invariants --mutants` applies each
to a copy of its tree (`tree`: the series, or the upstream tier alone), searches it (the ci profile's 150 examples
at most, draw.PROFILES['mutants']) until the first undeclared violation, and scores the checker: a mutant is caught
when some invariant breaks. Standard library only (the tool imports it).
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    name: str
    claim: str  # the patch and what it claims
    file: str  # below the tree's transformers/ package: `trainer.py`, `models/bert/modeling_bert.py`
    old: str
    new: str
    # the tree it is applied to: `series` (the whole series) or `upstream` (the upstream tier alone, on released
    # accelerate: for a claim of an upstream-tier patch that the fork tier or the accelerate patches could mask)
    tree: str = "series"


TRAINER = "trainer.py"

MUTANTS: list[Mutant] = [
    Mutant(
        "zero-target-nan",
        "0005: a window without targets has a loss of 0, not NaN",
        TRAINER,
        "num_items_in_batch = num_items_in_batch.masked_fill(num_items_in_batch == 0, 1)",
        "num_items_in_batch = num_items_in_batch",
    ),
    Mutant(
        "stream-short-window-no-step",
        "0006: a stream's short last window gets its own optimizer step",
        TRAINER,
        "do_sync_step = i == len(batch_samples) - 1",
        "do_sync_step = (step + 1) % self.args.gradient_accumulation_steps == 0",
    ),
    Mutant(
        "resume-ignores-saved-position",
        "0007: a run resumed in a later pass over a stream goes on at the next batch it saved",
        TRAINER,
        "            if self.state.train_dataloader_epoch is not None:\n                epochs_trained = ",
        "            if False:\n                epochs_trained = ",
    ),
    Mutant(
        "resume-past-max-steps",
        "0008: a run resumed at max_steps trains no further update",
        TRAINER,
        "if epoch >= num_passes or self.state.global_step >= self.state.max_steps:",
        "if epoch >= num_passes:",
    ),
    Mutant(
        "stream-epoch-max-steps",
        "0009: a stream's epoch counts against the length of its last pass",
        TRAINER,
        "batches_per_pass = self.state.train_dataloader_batches_per_pass or steps_in_epoch",
        "batches_per_pass = steps_in_epoch",
    ),
    Mutant(
        "schedule-steps-on-skip",
        "0010: the LR schedule advances on applied updates only",
        TRAINER,
        "                    if not optimizer_step_was_skipped:\n"
        "                        # Delay optimizer scheduling until metrics are generated",
        "                    if True:\n"
        "                        # Delay optimizer scheduling until metrics are generated",
    ),
    Mutant(
        "skip-not-counted",
        "0010: every skipped optimizer step is counted",
        TRAINER,
        "                        self.state.skipped_optimizer_steps += 1\n",
        "                        pass\n",
    ),
    Mutant(
        "begin-again-after-skip",
        "0022: with count_skipped_steps=False, a step skipped does not begin again",
        TRAINER,
        "if not self._consecutive_skipped_optimizer_steps:",
        "if True:",
    ),
    Mutant(
        "no-scale-zero-stop",
        "0022: a max_steps run whose loss scale fell to 0 stops with an error instead of spinning",
        TRAINER,
        "if self.args.max_steps > 0 and scaler is not None and scaler.get_scale() == 0:",
        "if False:",
    ),
    Mutant(
        "no-make-up-passes",
        "0022: a max_steps run over sized data reads further windows for its skipped steps",
        TRAINER,
        "return math.ceil(num_windows / num_update_steps_per_epoch)",
        "return self._planned_num_train_epochs",
    ),
    Mutant(
        "epoch-run-reads-extra",
        "0022: an epoch run reads its planned windows, one update step less per skip",
        TRAINER,
        "            self.state.max_steps -= 1\n",
        "            pass\n",
    ),
    Mutant(
        "final-save-lost-on-skip",
        "0022: the final save happens when the last window of an epoch run is skipped",
        TRAINER,
        "if self.args.save_strategy == SaveStrategy.STEPS and step and step % self.state.save_steps != 0:",
        "if False:",
    ),
    Mutant(
        "skipped-pass-logs",
        "0022: a pass whose every step was skipped logs, evaluates and saves nothing",
        TRAINER,
        "            self.control.should_log = self.control.should_evaluate = self.control.should_save = False\n",
        "            pass\n",
    ),
    Mutant(
        "ga-not-current",
        "0011-0014/0016: a loss the Trainer averages over a window divides by the window's own micro-batches",
        TRAINER,
        "                loss = loss / self.current_gradient_accumulation_steps\n",
        "                loss = loss / self.args.gradient_accumulation_steps\n",
    ),
    Mutant(
        "processes-count-not-shared",
        "0016: with average_tokens_across_devices, a declared head's batch is weighted by all processes' targets",
        TRAINER,
        "num_targets = num_targets * (self.accelerator.num_processes // self.get_tp_size())",
        "num_targets = num_targets",
    ),
    Mutant(
        "process-without-targets-left-out",
        "0017: on several processes, one without targets in a window adds 0 to the logged loss",
        TRAINER,
        "if self._data_parallel_size > 1 and not self.args.average_tokens_across_devices:",
        "if False:",
    ),
    Mutant(
        "nan-window-kept",
        "0017: a window with a NaN loss is left out of the logged loss",
        TRAINER,
        "filtered = ~torch.isfinite(window_loss)",
        "filtered = torch.zeros_like(window_loss, dtype=torch.bool)",
    ),
    Mutant(
        "train-loss-over-steps",
        "0017: train_loss is the mean over the windows kept",
        TRAINER,
        "num_windows = num_optimizer_steps - self._total_filtered_windows",
        "num_windows = num_optimizer_steps",
    ),
    Mutant(
        "batches-seen-skips-one",
        "0023: num_batches_seen counts every batch read",
        TRAINER,
        "                self._num_batches_seen += 1\n",
        "                self._num_batches_seen += 1 if i else 0\n",
    ),
    Mutant(
        "tokens-of-skipped-lost",
        "include_num_input_tokens_seen counts the batches of every window",
        TRAINER,
        "                self._track_num_input_tokens(inputs)\n",
        "                if do_sync_step:\n                    self._track_num_input_tokens(inputs)\n",
    ),
]
