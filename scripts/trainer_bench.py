"""Time and count the work of `Trainer` optimizer steps; the measured side of `series.py bench`.

Runs in the test venv (torch), with PYTHONPATH on one variant's source trees, so the same script
measures the unpatched and the patched transformers. It trains a tiny Llama on fixed random tokens (a
causal LM; in `cls-ga4` a sequence classifier, whose loss ignores `num_items_in_batch`), once per case,
and prints one line per case on stdout (the Trainer prints its own metrics there too):

    trainer-bench: {"case": ..., "step_s": [...], "step_cpu_s": [...], ...}

Timed runs come in pairs, one process per variant, started together by the driver: with `--baton-in`
and `--baton-out` they pass a token through two pipes at every `on_step_end`, so the two processes run
their optimizer steps alternately, one at a time, A/B/A/B, both on the same CPU (`--cpu`). Whatever
else loads the machine then hits both variants alike. A step's time runs from getting the token to the
step's `on_step_end` (data loading, forward, backward, clipping, optimizer and scheduler step,
bookkeeping); wall and CPU time of this process are both recorded.

With `--count-syncs` nothing is timed: after the warm-up, a `TorchFunctionMode` counts for `--steps`
optimizer steps the calls that read a tensor on the host (`Tensor.item`, `bool(tensor)`, `.tolist()`,
`.cpu()`, ...), each of which waits for the device on an accelerator, and the torch calls made from
Python; then, for as many steps again, a profile hook counts Python function calls.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any


os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402


# name: (optimizer, CPU GradScaler emulating the fp16 path, gradient accumulation steps, host syncs per step
# the series may add). Only an AMP-aware optimizer under a scaler may pay one: reading the `found_inf` flag
# that tells whether the fused kernel skipped the update.
CASES = {
    "fp32": ("adamw_torch_fused", False, 1, 0),
    "fp16-adamw": ("adamw_torch", True, 1, 0),
    "fp16-adamw-fused": ("adamw_torch_fused", True, 1, 1),
    "ga4": ("adamw_torch_fused", False, 4, 0),
    "cls-ga4": ("adamw_torch_fused", False, 4, 0),
}
# Cases that train a sequence classifier (a head whose loss does not take `num_items_in_batch`), not a causal LM.
CLASSIFIER_CASES = {"cls-ga4"}
# Samples per optimizer step, whatever the accumulation: gradient accumulation 4 runs micro-batches of 1.
SAMPLES_PER_STEP = 4
# The scaled gradients of this model stay far from float32 overflow, and the scale does not grow within a
# run (growth interval 2000): the scaler never skips a step.
INIT_SCALE = 2.0**10
# Result lines start with this.
PREFIX = "trainer-bench: "

# Tensor methods whose result lives on the host: on an accelerator each one waits for the device.
HOST_SYNC_METHODS = frozenset(
    {
        "item",
        "tolist",
        "numpy",
        "cpu",
        "__bool__",
        "__float__",
        "__int__",
        "__index__",
        "__complex__",
        "__array__",
        "__format__",
        "__repr__",
        "__str__",
        "is_nonzero",
        "equal",
        "allclose",
        "nonzero",
    }
)


class HostSyncCounter(TorchFunctionMode):
    """Counts the torch calls made from Python, and among them those that read a tensor on the host."""

    def __init__(self) -> None:
        super().__init__()
        self.syncs: dict[str, int] = {}
        self.torch_calls = 0

    def __torch_function__(
        self, func: Callable[..., Any], types: Any, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        self.torch_calls += 1
        name = getattr(func, "__name__", "")
        if name in HOST_SYNC_METHODS or (name == "to" and _to_host(args, kwargs)):
            self.syncs[name] = self.syncs.get(name, 0) + 1
        return func(*args, **kwargs)


def _to_host(args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Whether `tensor.to(...)` copies an accelerator tensor to the CPU."""
    source = args[0] if args and isinstance(args[0], torch.Tensor) else None
    if source is None or source.device.type == "cpu":
        return False
    for value in (*args[1:], kwargs.get("device")):
        if isinstance(value, (str, torch.device)):
            return torch.device(value).type == "cpu"
    return False


class CallCounter:
    """Counts Python function calls (generator resumptions included) on this thread while active."""

    def __init__(self) -> None:
        self.calls = 0

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            self.calls += 1

    def start(self) -> None:
        sys.setprofile(self._profile)

    def stop(self) -> None:
        sys.setprofile(None)


class Baton:
    """A token passed between two processes through pipes: only its holder runs an optimizer step."""

    def __init__(self, fd_in: int, fd_out: int, lead: bool) -> None:
        self.fd_in, self.fd_out, self.lead = fd_in, fd_out, lead

    def take(self) -> None:
        if os.read(self.fd_in, 1) != b"t":
            raise RuntimeError("the other benchmark process stopped")

    def give(self) -> None:
        os.write(self.fd_out, b"t")


class RandomTokens(torch.utils.data.Dataset):
    def __init__(self, num_samples: int, seq_len: int, vocab_size: int, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.input_ids = torch.randint(0, vocab_size, (num_samples, seq_len), generator=generator)

    def __len__(self) -> int:
        return len(self.input_ids)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"input_ids": self.input_ids[index], "labels": self.input_ids[index]}


class RandomClasses(RandomTokens):
    """Fixed random token sequences, each with one of two class labels."""

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"input_ids": self.input_ids[index], "labels": self.input_ids[index, 0] % 2}


def run_case(name: str, args: argparse.Namespace, out_dir: str, baton: Baton | None) -> dict[str, Any]:
    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        LlamaForSequenceClassification,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    optim, scaled, accumulation, sync_budget = CASES[name]
    num_steps = args.warmup + (2 * args.steps if args.count_syncs else args.steps)

    class StepClock(TrainerCallback):
        """Times every optimizer step, hands the token over after it, and runs the counters."""

        def __init__(self) -> None:
            self.starts: list[tuple[float, float]] = []  # (wall, cpu) pairs
            self.ends: list[tuple[float, float]] = []
            self.syncs, self.calls = HostSyncCounter(), CallCounter()

        def _start(self) -> None:
            self.starts.append((time.perf_counter(), time.process_time()))

        def on_train_begin(self, train_args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if baton is not None and not baton.lead:
                baton.take()
            self._start()

        def on_step_end(self, train_args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.ends.append((time.perf_counter(), time.process_time()))
            done = len(self.ends)
            if args.count_syncs:
                if done == args.warmup:
                    self.syncs.__enter__()
                elif done == args.warmup + args.steps:
                    self.syncs.__exit__(None, None, None)
                    self.calls.start()
                elif done == num_steps:
                    self.calls.stop()
            if baton is not None:
                baton.give()
                # The follower's last step ends the pair's case; the leader waits for it.
                if baton.lead or done < num_steps:
                    baton.take()
            self._start()

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=2 * args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=args.seq_len,
        num_labels=2,
        pad_token_id=0,
    )
    classifier = name in CLASSIFIER_CASES
    model = LlamaForSequenceClassification(config) if classifier else LlamaForCausalLM(config)
    train_args = TrainingArguments(
        output_dir=out_dir,
        max_steps=num_steps,
        per_device_train_batch_size=SAMPLES_PER_STEP // accumulation,
        gradient_accumulation_steps=accumulation,
        learning_rate=1e-4,
        optim=optim,
        use_cpu=True,
        report_to="none",
        logging_strategy="no",
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
    )
    data = (RandomClasses if classifier else RandomTokens)(num_steps * SAMPLES_PER_STEP, args.seq_len, args.vocab)
    clock = StepClock()
    trainer = Trainer(model=model, args=train_args, train_dataset=data, callbacks=[clock])
    if scaled:
        # CPU emulation of the fp16 path: accelerate creates no scaler on CPU
        trainer.accelerator.scaler = torch.amp.GradScaler("cpu", init_scale=INIT_SCALE)
        trainer.accelerator.native_amp = True
    trainer.train()
    if len(clock.ends) != num_steps:
        raise RuntimeError(f"{name}: {len(clock.ends)} optimizer steps ended, expected {num_steps}")

    result = {"case": name, "optim": optim, "scaler": scaled, "accumulation": accumulation, "sync_budget": sync_budget}
    if args.count_syncs:
        result.update(
            counted_steps=args.steps,
            syncs=dict(sorted(clock.syncs.syncs.items())),
            torch_calls=clock.syncs.torch_calls,
            python_calls=clock.calls.calls,
        )
    else:
        measured = list(zip(clock.starts[:-1], clock.ends, strict=True))[args.warmup :]
        result["step_s"] = [end[0] - start[0] for start, end in measured]
        result["step_cpu_s"] = [end[1] - start[1] for start, end in measured]
    if scaled:
        result["final_scale"] = trainer.accelerator.scaler.get_scale()
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="case to run (default: all)")
    parser.add_argument("--steps", type=int, default=40, help="measured (or counted) optimizer steps per case")
    parser.add_argument("--warmup", type=int, default=5, help="optimizer steps run before measuring (>= 1)")
    parser.add_argument("--count-syncs", action="store_true", help="count host syncs and calls instead of timing")
    parser.add_argument("--baton-in", type=int, metavar="FD", help="pipe to take the token from (timed pairs)")
    parser.add_argument("--baton-out", type=int, metavar="FD", help="pipe to hand the token to")
    parser.add_argument("--lead", action="store_true", help="hold the token first")
    parser.add_argument("--cpu", type=int, help="run on this CPU only")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=1024)
    args = parser.parse_args(argv)
    if args.warmup < 1 or args.steps < 1:
        parser.error("--warmup and --steps must be at least 1")
    if (args.baton_in is None) != (args.baton_out is None):
        parser.error("--baton-in and --baton-out go together")
    baton = None if args.baton_in is None else Baton(args.baton_in, args.baton_out, args.lead)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    torch.set_num_threads(args.threads)

    import accelerate
    import transformers

    model = (
        f"Llama, {args.layers} layers, hidden {args.hidden}, sequence {args.seq_len}, vocabulary {args.vocab}, "
        f"{SAMPLES_PER_STEP} samples per optimizer step"
    )
    info = {
        "modules": {"transformers": transformers.__file__, "accelerate": accelerate.__file__},
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "model": model,
    }
    print(PREFIX + json.dumps({"info": info}), flush=True)
    with tempfile.TemporaryDirectory(prefix="trainer-bench-") as out_dir:
        for name in args.case or list(CASES):
            print(PREFIX + json.dumps(run_case(name, args, out_dir, baton)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
