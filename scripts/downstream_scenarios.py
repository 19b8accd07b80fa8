"""Real downstream trainers on tiny models built in code; the measured side of `series.py downstream`.

Runs in the pinned venv with PYTHONPATH on one variant's trees (transformers, maybe a patched
accelerate) and the downstream install (TRL, sentence-transformers, setfit, PEFT; an older TRL in a
layer before it). Nothing comes from the Hub: models are random Qwen2/BERT configs, the tokenizer a
word-level `tokenizers` model with a chat template, and the offline variables are set.

    --list                      the scenarios as JSON: name, package, layer (the install layer it needs
                                first on the path: trl-1.14.2) and fp16 (the optimizer of an fp16 variant)
    --check ROOT...             like `pip check` for the distributions under ROOT, then every module the
                                scenarios import; one JSON line
    --run NAME... --result-fd N run the scenarios; one JSON line per scenario on fd N (--log-dir: each
                                scenario's output in its own file)

`--run` imports everything once, then forks one child per scenario: each starts from the same state,
sets its seeds and runs in 1 thread, so a scenario's outcome depends neither on the others nor on their
order. A child's outcome: final weights (every tensor the optimizer updates: a sha256 of the exact bytes
and, per tensor, its sum and norm, which the driver compares with a tolerance), `global_step`, the
updates the optimizer applied (AdamW's `step` state), the LR scheduler's steps, the count of every
callback event, the log history without its timings, the error if training raised one, and how many
of the optimizer's tensors are left with a non-finite gradient.

The fp16 variants emulate CUDA's path on CPU as the series' own tests do: `fp16=True`, a CPU `GradScaler`
on `trainer.accelerator.scaler`, `native_amp = True`, and one inf gradient: a hook on the loss of one
chosen training forward (all gradients of that micro-batch become inf or NaN, the loss's own parameters'
too), with fused and non-fused AdamW.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import select
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar


if TYPE_CHECKING:  # the third-party packages are imported where a scenario needs them
    from datasets import Dataset, IterableDataset
    from peft import PeftConfig
    from sentence_transformers import SentenceTransformer
    from torch import nn
    from transformers import PreTrainedModel, PreTrainedTokenizerFast, Trainer


OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "TRANSFORMERS_VERBOSITY": "error",
    "WANDB_DISABLED": "true",
    # from 5.25.0 `from_pretrained` asks the `kernels` package for hub kernels by default and raises without a release
    # of it the base accepts, which the pinned environment lacks; offline none could load, and on CPU none applies
    "USE_HUB_KERNELS": "NO",
}
os.environ.update(OFFLINE)


# Keys of a log entry that measure time, not training (`train_runtime`, `*_per_second`, TRL's `step_time`).
def timing_key(key: str) -> bool:
    return key.endswith(("_runtime", "_per_second", "_time"))


EVENTS = (
    "on_train_begin",
    "on_train_end",
    "on_epoch_begin",
    "on_epoch_end",
    "on_step_begin",
    "on_pre_optimizer_step",
    "on_optimizer_step",
    "on_substep_end",
    "on_step_end",
    "on_log",
    "on_save",
    "on_evaluate",
)
WORDS = (
    "the a cat dog bird fish sat ran flew swam on under mat tree red blue green big small one two three "
    "four five yes no what is good bad happy sad"
).split()
SPECIALS = ["<pad>", "<unk>", "<eos>", "<|user|>", "<|assistant|>", "<|end|>", "[CLS]", "[SEP]", "[MASK]"]
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|' + message['role'] + '|> ' + message['content'] + ' <|end|> ' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|> ' }}{% endif %}"
)
INIT_SCALE = 16.0  # the series' tests' scale: only the poisoned micro-batch overflows

# What a scenario returns: the call that trains (`trainer.train`, or a function that calls it).
Train = Callable[..., object]
# One outcome, as the driver reads it (see `outcome`).
Outcome = dict[str, Any]
# A conversation: chat messages of `role` and `content`.
Messages = list[dict[str, str]]
T = TypeVar("T")


# -- what every scenario shares ---------------------------------------------------------------------------


class Kit:
    """What a scenario builds its trainer with: a scratch folder, the tokenizer, tiny models and the arguments
    every run shares; `prepare` installs the event counter and, for an fp16 variant, the emulated fp16 path."""

    def __init__(self, folder: str, fp16: str | None) -> None:
        self.folder = folder
        self.fp16 = fp16  # None, or the optimizer of the fp16 variant
        self.trainer: Trainer | None = None
        self.counts = dict.fromkeys(EVENTS, 0)
        self.training_forwards = 0
        self.poison_at = 3  # the training forward whose gradients become inf (fp16 variants)
        self._tokenizer: PreTrainedTokenizerFast | None = None

    def rng(self, seed: int = 0) -> random.Random:
        return random.Random(seed)

    @property
    def tokenizer(self) -> PreTrainedTokenizerFast:
        if self._tokenizer is None:
            self._tokenizer = tokenizer()
        return self._tokenizer

    def args(self, config_class: Callable[..., T], **kwargs: Any) -> T:
        common: dict[str, Any] = {
            "output_dir": os.path.join(self.folder, "output"),
            "report_to": "none",
            "save_strategy": "no",
            "logging_steps": 1,
            "seed": 0,
            "data_seed": 0,
            "use_cpu": True,
            "disable_tqdm": True,
            "dataloader_num_workers": 0,
            "learning_rate": 1e-2,
        }
        common.update(kwargs)
        if self.fp16:
            common.update(fp16=True, bf16=False, optim=self.fp16)
        return config_class(**common)

    def prepare(self, trainer: Trainer) -> Train:
        """Count the events of `trainer`, and emulate the fp16 path for an fp16 variant; returns its `train`."""
        import torch
        from transformers import TrainerCallback

        kit = self

        def counting(event: str) -> Callable[..., None]:
            def count(self: TrainerCallback, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                kit.counts[event] += 1

            return count

        counter = type("Counter", (TrainerCallback,), {event: counting(event) for event in EVENTS})
        trainer.add_callback(counter())
        self.trainer = trainer
        if self.fp16:
            trainer.accelerator.scaler = torch.amp.GradScaler("cpu", init_scale=INIT_SCALE)
            trainer.accelerator.native_amp = True
            compute_loss = trainer.compute_loss

            def poisoned(model: nn.Module, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
                out = compute_loss(model, inputs, *args, **kwargs)
                if model.training and torch.is_grad_enabled():
                    kit.training_forwards += 1
                    loss = out[0] if isinstance(out, tuple) else out
                    if kit.training_forwards == kit.poison_at and loss.requires_grad:
                        loss.register_hook(lambda grad: torch.full_like(grad, float("inf")))
                return out

            trainer.compute_loss = poisoned
        train: Train = trainer.train
        return train


def tokenizer(bert: bool = False) -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {word: index for index, word in enumerate(SPECIALS + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if bert:
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
        )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        eos_token="<eos>",
        unk_token="<unk>",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=64,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def qwen2(tok: PreTrainedTokenizerFast, seed: int = 0, *, classifier: bool = False) -> PreTrainedModel:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen2ForSequenceClassification

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=False,
        num_labels=1,
    )
    return (Qwen2ForSequenceClassification if classifier else Qwen2ForCausalLM)(config)


def qwen2_folder(kit: Kit, seed: int = 0) -> str:
    """The random tiny Qwen2 saved in the scratch folder: TRL builds the reference model of DPO and RLOO from
    the path it is given, and loads it from there (never from the Hub)."""
    path = os.path.join(kit.folder, "qwen2")
    if not os.path.isdir(path):
        qwen2(kit.tokenizer, seed).save_pretrained(path)
        kit.tokenizer.save_pretrained(path)
    return path


def bert_folder(kit: Kit, seed: int = 0) -> str:
    """A random tiny BERT and its tokenizer saved in the scratch folder (sentence-transformers loads from a path)."""
    import torch
    from transformers import BertConfig, BertModel

    path = os.path.join(kit.folder, "bert")
    if not os.path.isdir(path):
        tok = tokenizer(bert=True)
        torch.manual_seed(seed)
        config = BertConfig(
            vocab_size=len(tok),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=64,
            pad_token_id=tok.pad_token_id,
        )
        BertModel(config).save_pretrained(path)
        tok.save_pretrained(path)
    return path


def sentences(rng: random.Random, count: int, low: int = 3, high: int = 7) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high))) for _ in range(count)]


# -- the scenarios ----------------------------------------------------------------------------------------


class Spec(TypedDict):
    """A registered scenario (`--list` prints all but `func`)."""

    name: str
    package: str
    layer: str | None  # the install layer first on the path, e.g. trl-1.14.2; None: the main install
    func: Callable[[Kit], Train]
    fp16: str | None  # the optimizer of an fp16 variant


SCENARIOS: dict[str, Spec] = {}
Scenario = Callable[[Kit], Train]


def scenario(
    name: str, package: str, *, layer: str | None = None, fp16: Sequence[str] = ()
) -> Callable[[Scenario], Scenario]:
    """Register a scenario; `fp16` lists the optimizers of its fp16 variants, named `<name>-fp16-fused`
    (adamw_torch_fused) and `<name>-fp16-adamw` (adamw_torch)."""

    def register(func: Scenario) -> Scenario:
        SCENARIOS[name] = {"name": name, "package": package, "layer": layer, "func": func, "fp16": None}
        for optim in fp16:
            variant = f"{name}-fp16-{'fused' if optim.endswith('fused') else 'adamw'}"
            SCENARIOS[variant] = {"name": variant, "package": package, "layer": layer, "func": func, "fp16": optim}
        return func

    return register


FUSED, ADAMW = "adamw_torch_fused", "adamw_torch"
OLD_TRL = "1.14.2"


def sft(
    kit: Kit,
    dataset: Dataset | IterableDataset,
    *,
    peft_config: PeftConfig | None = None,
    eval_dataset: Dataset | None = None,
    **kwargs: Any,
) -> Train:
    from trl import SFTConfig, SFTTrainer

    options: dict[str, Any] = {"per_device_train_batch_size": 2, "max_length": 24, "gradient_checkpointing": False}
    options.update(kwargs)
    trainer = SFTTrainer(
        model=qwen2(kit.tokenizer),
        args=kit.args(SFTConfig, **options),
        train_dataset=dataset,
        eval_dataset=eval_dataset,
        processing_class=kit.tokenizer,
        peft_config=peft_config,
    )
    return kit.prepare(trainer)


@scenario("trl/sft-text", "trl", fp16=(FUSED, ADAMW))
def sft_text(kit: Kit) -> Train:
    from datasets import Dataset

    return sft(kit, Dataset.from_dict({"text": sentences(kit.rng(), 8)}), num_train_epochs=2)


@scenario("trl/sft-ga-remainder", "trl", fp16=(FUSED,))
def sft_ga_remainder(kit: Kit) -> Train:
    from datasets import Dataset

    # 5 batches per epoch in windows of 2: the last window of each epoch has one batch
    data = Dataset.from_dict({"text": sentences(kit.rng(), 10)})
    return sft(kit, data, gradient_accumulation_steps=2, num_train_epochs=2)


def prompt_completion(rng: random.Random, prompt_words: Iterable[int]) -> dict[str, list[Messages]]:
    """Conversational prompt/completion pairs: a prompt of each count of words, a completion of 3 words."""
    prompts, completions = [], []
    for count in prompt_words:
        prompts.append([{"role": "user", "content": " ".join(rng.choice(WORDS) for _ in range(count))}])
        completions.append([{"role": "assistant", "content": " ".join(rng.choice(WORDS) for _ in range(3))}])
    return {"prompt": prompts, "completion": completions}


@scenario("trl/sft-prompt-completion", "trl")
def sft_prompt_completion(kit: Kit) -> Train:
    from datasets import Dataset

    # conversational prompt/completion pairs through the chat template; the prompt tokens are masked; evaluated
    # before training and after each epoch
    rng = kit.rng()
    data = Dataset.from_dict(prompt_completion(rng, (rng.randint(3, 6) for _ in range(8))))
    held_out = Dataset.from_dict(prompt_completion(rng, (rng.randint(3, 6) for _ in range(4))))
    options = {"gradient_accumulation_steps": 2, "num_train_epochs": 2, "eval_strategy": "epoch"}
    return sft(kit, data, eval_dataset=held_out, eval_on_start=True, **options)


def sft_truncated(kit: Kit) -> Train:
    from datasets import Dataset

    # Prompt-masked SFT whose `max_length` cuts the completion off long prompts. TRL drops the samples that
    # its truncation leaves without targets, but not when it packs: BFD packing truncates each sample itself,
    # after that filter. A prompt of w words is w + 3 tokens and a completion 4, so with `max_length=12` a
    # prompt of 5 words keeps its whole completion and one of 9 or more is cut to a packed row of 12 prompt
    # tokens alone, every label -100. The rows come longest first; read in that order in windows of 2 rows
    # they are [targets, none], [none, none], [11 tokens, 10 tokens]: one log over the three windows, the
    # middle one without targets. The eval set packs into 3 batches of one row, the middle one without
    # targets, evaluated after the epoch.
    rng = kit.rng()
    data = Dataset.from_dict(prompt_completion(rng, [5, 10, 9, 14, 4, 3]))
    held_out = Dataset.from_dict(prompt_completion(rng, [5, 12, 4]))
    options: dict[str, Any] = {"per_device_train_batch_size": 1, "per_device_eval_batch_size": 1}
    options.update(gradient_accumulation_steps=2, max_length=12, packing=True, logging_steps=3)
    options.update(train_sampling_strategy="sequential", eval_strategy="epoch", num_train_epochs=1)
    return sft(kit, data, eval_dataset=held_out, **options)


scenario("trl/sft-truncated", "trl")(sft_truncated)
scenario(f"trl-{OLD_TRL}/sft-truncated", "trl", layer=f"trl-{OLD_TRL}")(sft_truncated)


@scenario("trl/sft-stream", "trl", fp16=(FUSED,))
def sft_stream(kit: Kit) -> Train:
    from datasets import Dataset

    # a stream of 5 batches read in windows of 2 until max_steps: each pass ends with a short window
    data = Dataset.from_dict({"text": sentences(kit.rng(), 10)}).to_iterable_dataset()
    return sft(kit, data, gradient_accumulation_steps=2, max_steps=5)


@scenario("trl/sft-stream-resume", "trl")
def sft_stream_resume(kit: Kit) -> Train:
    from datasets import Dataset

    # 8 steps over a 5-batch stream, saved at step 7 (in its second pass); a new trainer resumes there and
    # trains step 8: the outcome is the resumed run's
    texts = sentences(kit.rng(), 10)
    options = {"max_steps": 8, "save_strategy": "steps", "save_steps": 7, "save_only_model": False}

    def train() -> None:
        sft(kit, Dataset.from_dict({"text": texts}).to_iterable_dataset(), **options)()
        kit.counts = dict.fromkeys(EVENTS, 0)
        resumed = sft(kit, Dataset.from_dict({"text": texts}).to_iterable_dataset(), **options)
        resumed(resume_from_checkpoint=os.path.join(kit.folder, "output", "checkpoint-7"))

    return train


@scenario("trl/sft-lora", "peft")
def sft_lora(kit: Kit) -> Train:
    from datasets import Dataset
    from peft import LoraConfig

    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    data = Dataset.from_dict({"text": sentences(kit.rng(), 8)})
    return sft(kit, data, peft_config=config, gradient_accumulation_steps=2, num_train_epochs=2)


def reward_len(completions: Sequence[str | Messages], **kwargs: Any) -> list[float]:
    """Reward: how many of the completion's words are "yes" (a completion is a string or a message list)."""
    scores = []
    for completion in completions:
        text = completion if isinstance(completion, str) else " ".join(m["content"] for m in completion)
        scores.append(float(text.split().count("yes")) + 0.1 * len(text.split()))
    return scores


def online(kit: Kit, trainer_name: str, *, stream: bool = False, **kwargs: Any) -> Train:
    """GRPO or RLOO: 2 completions per prompt, 4 tokens each, generated on CPU; accumulation 2, max_steps. The
    stream has 7 prompts: with one prompt per micro-batch, each pass ends with a window of one."""
    import trl
    from datasets import Dataset

    rng = kit.rng()
    prompts = [" ".join(rng.choice(WORDS) for _ in range(4)) for _ in range(7 if stream else 8)]
    data = Dataset.from_dict({"prompt": prompts})
    if stream:
        data = data.to_iterable_dataset()
    config_class = getattr(trl, f"{trainer_name}Config")
    trainer_class = getattr(trl, f"{trainer_name}Trainer")
    options: dict[str, Any] = {
        "per_device_train_batch_size": 2,
        "gradient_accumulation_steps": 2,
        "num_generations": 2,
        "max_completion_length": 4,
        "max_steps": 3,
        "gradient_checkpointing": False,
        "temperature": 1.0,
    }
    options.update(kwargs)
    trainer = trainer_class(
        model=qwen2_folder(kit),
        reward_funcs=reward_len,
        args=kit.args(config_class, **options),
        train_dataset=data,
        processing_class=kit.tokenizer,
    )
    return kit.prepare(trainer)


@scenario("trl/grpo", "trl", fp16=(FUSED,))
def grpo(kit: Kit) -> Train:
    return online(kit, "GRPO")


@scenario("trl/grpo-stream", "trl")
def grpo_stream(kit: Kit) -> Train:
    return online(kit, "GRPO", stream=True, max_steps=5)


@scenario("trl/rloo", "trl")
def rloo(kit: Kit) -> Train:
    return online(kit, "RLOO")


@scenario("trl/rloo-stream", "trl")
def rloo_stream(kit: Kit) -> Train:
    return online(kit, "RLOO", stream=True, max_steps=5)


@scenario(f"trl-{OLD_TRL}/grpo", "trl", layer=f"trl-{OLD_TRL}")
def grpo_old(kit: Kit) -> Train:
    return online(kit, "GRPO")


@scenario(f"trl-{OLD_TRL}/rloo", "trl", layer=f"trl-{OLD_TRL}")
def rloo_old(kit: Kit) -> Train:
    return online(kit, "RLOO")


def preference(rng: random.Random, count: int) -> dict[str, list[str]]:
    data: dict[str, list[str]] = {"prompt": [], "chosen": [], "rejected": []}
    for _ in range(count):
        data["prompt"].append(" ".join(rng.choice(WORDS) for _ in range(4)))
        data["chosen"].append("yes " + " ".join(rng.choice(WORDS) for _ in range(2)))
        data["rejected"].append("no " + " ".join(rng.choice(WORDS) for _ in range(2)))
    return data


@scenario("trl/dpo", "trl", fp16=(FUSED,))
def dpo(kit: Kit) -> Train:
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    options = {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 2, "num_train_epochs": 1}
    options.update(max_length=24, gradient_checkpointing=False)
    trainer = DPOTrainer(
        model=qwen2_folder(kit),
        args=kit.args(DPOConfig, **options),
        train_dataset=Dataset.from_dict(preference(kit.rng(), 10)),
        processing_class=kit.tokenizer,
    )
    return kit.prepare(trainer)


@scenario("trl/reward", "trl")
def reward(kit: Kit) -> Train:
    from datasets import Dataset
    from trl import RewardConfig, RewardTrainer

    options = {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 2, "num_train_epochs": 1}
    options.update(max_length=24, gradient_checkpointing=False)
    trainer = RewardTrainer(
        model=qwen2(kit.tokenizer, classifier=True),
        args=kit.args(RewardConfig, **options),
        train_dataset=Dataset.from_dict(preference(kit.rng(), 10)),
        processing_class=kit.tokenizer,
    )
    return kit.prepare(trainer)


def sentence_transformer(kit: Kit) -> SentenceTransformer:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    body = Transformer(bert_folder(kit), max_seq_length=32)
    return SentenceTransformer(modules=[body, Pooling(body.get_embedding_dimension(), "mean")], device="cpu")


def st_trainer(kit: Kit, model: SentenceTransformer, data: Dataset, loss: nn.Module, **kwargs: Any) -> Train:
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

    options: dict[str, Any] = {"per_device_train_batch_size": 4, "num_train_epochs": 2}
    options.update(kwargs)
    trainer = SentenceTransformerTrainer(
        model=model, args=kit.args(SentenceTransformerTrainingArguments, **options), train_dataset=data, loss=loss
    )
    return kit.prepare(trainer)


@scenario("st/mnrl", "sentence-transformers", fp16=(FUSED,))
def st_mnrl(kit: Kit) -> Train:
    from datasets import Dataset
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    rng = kit.rng()
    anchors = sentences(rng, 12)
    positives = [text + " " + rng.choice(WORDS) for text in anchors]
    model = sentence_transformer(kit)
    data = Dataset.from_dict({"anchor": anchors, "positive": positives})
    return st_trainer(kit, model, data, MultipleNegativesRankingLoss(model), gradient_accumulation_steps=2)


@scenario("st/mnrl-no-duplicates", "sentence-transformers")
def st_mnrl_no_duplicates(kit: Kit) -> Train:
    """
    A batch sampler that yields fewer batches than its `len()`: one anchor in 13 of 16 rows, full batches of 4
    without duplicates only, so each pass (and each of its two resampling passes) fills one batch: 3 of 4.
    """
    from datasets import Dataset
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    rng = kit.rng()
    distinct = sentences(rng, 4)
    anchors = [distinct[0]] * 13 + distinct[1:]
    positives = [text + " " + rng.choice(WORDS) for text in anchors]
    model = sentence_transformer(kit)
    data = Dataset.from_dict({"anchor": anchors, "positive": positives})
    loss = MultipleNegativesRankingLoss(model)
    return st_trainer(
        kit, model, data, loss, gradient_accumulation_steps=2, batch_sampler="no_duplicates", dataloader_drop_last=True
    )


@scenario("st/softmax", "sentence-transformers", fp16=(FUSED, ADAMW))
def st_softmax(kit: Kit) -> Train:
    from datasets import Dataset
    from sentence_transformers.sentence_transformer.losses import SoftmaxLoss

    rng = kit.rng()
    model = sentence_transformer(kit)
    data = Dataset.from_dict(
        {"premise": sentences(rng, 12), "hypothesis": sentences(rng, 12), "label": [i % 3 for i in range(12)]}
    )
    # the loss owns a classifier that the optimizer updates and `model.zero_grad()` does not reach
    loss = SoftmaxLoss(model, model.get_embedding_dimension(), num_labels=3)
    return st_trainer(kit, model, data, loss)


@scenario("st/cross-encoder", "sentence-transformers", fp16=(FUSED,))
def st_cross_encoder(kit: Kit) -> Train:
    from datasets import Dataset
    from sentence_transformers.cross_encoder import (
        CrossEncoder,
        CrossEncoderTrainer,
        CrossEncoderTrainingArguments,
    )
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss

    rng = kit.rng()
    model = CrossEncoder(bert_folder(kit), num_labels=1, device="cpu", max_length=32)
    data = Dataset.from_dict(
        {"query": sentences(rng, 12), "passage": sentences(rng, 12), "label": [float(i % 2) for i in range(12)]}
    )
    options = {"per_device_train_batch_size": 4, "num_train_epochs": 2, "gradient_accumulation_steps": 2}
    trainer = CrossEncoderTrainer(
        model=model,
        args=kit.args(CrossEncoderTrainingArguments, **options),
        train_dataset=data,
        loss=BinaryCrossEntropyLoss(model),
    )
    return kit.prepare(trainer)


@scenario("setfit/classifier", "setfit", fp16=(FUSED,))
def setfit_classifier(kit: Kit) -> Train:
    import setfit.trainer
    from datasets import Dataset
    from setfit import SetFitModel, Trainer, TrainingArguments
    from sklearn.linear_model import LogisticRegression

    # SetFit trains the body with a sentence-transformers trainer it builds inside `train()`: prepare that one
    inner = setfit.trainer.BCSentenceTransformersTrainer
    train = inner.train

    def prepared_train(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.args.fp16 != bool(kit.fp16):
            raise RuntimeError("the fp16 setting did not reach setfit's inner trainer")
        kit.prepare(self)
        return train(self, *args, **kwargs)

    inner.train = prepared_train
    rng = kit.rng()
    model = SetFitModel(model_body=sentence_transformer(kit), model_head=LogisticRegression())
    data = Dataset.from_dict({"text": sentences(rng, 8), "label": [i % 2 for i in range(8)]})
    options: dict[str, Any] = {"batch_size": 4, "num_epochs": 1, "num_iterations": 2, "seed": 0, "report_to": "none"}
    options.update(logging_steps=1, save_strategy="no", output_dir=os.path.join(kit.folder, "output"))
    if kit.fp16:
        options.update(use_amp=True)
    trainer = Trainer(model=model, args=TrainingArguments(**options), train_dataset=data)
    train_all: Train = trainer.train  # the body (the inner trainer), then the head
    return train_all


# -- heads whose loss ignores num_items_in_batch, through transformers' own Trainer ---------------------------


def bert_head(kit: Kit, head: str) -> PreTrainedModel:
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(kit.tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        max_position_embeddings=64,
        pad_token_id=kit.tokenizer.pad_token_id,
        num_labels=3,
    )
    model: PreTrainedModel = getattr(transformers, head)(config)
    return model


def plain_trainer(kit: Kit, model: PreTrainedModel, rows: dict[str, list[Any]], *, tokens: bool) -> Train:
    from datasets import Dataset
    from transformers import DataCollatorForTokenClassification, DataCollatorWithPadding, Trainer, TrainingArguments

    options: dict[str, Any] = {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 2}
    options.update(num_train_epochs=2)
    collator = (DataCollatorForTokenClassification if tokens else DataCollatorWithPadding)(kit.tokenizer)
    trainer = Trainer(
        model=model,
        args=kit.args(TrainingArguments, **options),
        train_dataset=Dataset.from_dict(rows),
        data_collator=collator,
    )
    return kit.prepare(trainer)


@scenario("hf/seq-classifier-ga2", "transformers")
def hf_seq_classifier(kit: Kit) -> Train:
    texts = sentences(kit.rng(), 8)
    input_ids = [kit.tokenizer(text)["input_ids"] for text in texts]
    rows = {"input_ids": input_ids, "labels": [i % 3 for i in range(8)]}
    return plain_trainer(kit, bert_head(kit, "BertForSequenceClassification"), rows, tokens=False)


@scenario("hf/token-classifier-ga2", "transformers")
def hf_token_classifier(kit: Kit) -> Train:
    rng = kit.rng()
    input_ids = [kit.tokenizer(text)["input_ids"] for text in sentences(rng, 8)]
    # a label per word, -100 on some: the micro-batches of a window hold different counts of targets
    labels = [[rng.choice([-100, 0, 1, 2]) for _ in ids] for ids in input_ids]
    rows = {"input_ids": input_ids, "labels": labels}
    return plain_trainer(kit, qwen2_token_classifier(kit), rows, tokens=True)


def qwen2_token_classifier(kit: Kit) -> PreTrainedModel:
    import torch
    from transformers import Qwen2Config, Qwen2ForTokenClassification

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(kit.tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        pad_token_id=kit.tokenizer.pad_token_id,
        num_labels=3,
    )
    return Qwen2ForTokenClassification(config)


@scenario("hf/seq2seq-t5-ga2", "transformers")
def hf_seq2seq_t5(kit: Kit) -> Train:
    import torch
    from datasets import Dataset
    from transformers import (
        DataCollatorForSeq2Seq,
        Seq2SeqTrainer,
        Seq2SeqTrainingArguments,
        T5Config,
        T5ForConditionalGeneration,
    )

    rng = kit.rng()
    tok = kit.tokenizer
    sources, targets = sentences(rng, 8), sentences(rng, 8, low=1, high=6)
    rows = {"input_ids": [tok(t)["input_ids"] for t in sources], "labels": [tok(t)["input_ids"] for t in targets]}
    torch.manual_seed(0)
    config = T5Config(
        vocab_size=len(tok),
        d_model=16,
        d_kv=8,
        d_ff=32,
        num_layers=1,
        num_decoder_layers=1,
        num_heads=2,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        decoder_start_token_id=tok.pad_token_id,
    )
    model = T5ForConditionalGeneration(config)
    options: dict[str, Any] = {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 2}
    trainer = Seq2SeqTrainer(
        model=model,
        args=kit.args(Seq2SeqTrainingArguments, num_train_epochs=2, **options),
        train_dataset=Dataset.from_dict(rows),
        data_collator=DataCollatorForSeq2Seq(tok, model=model),
    )
    return kit.prepare(trainer)


# -- one scenario's outcome ------------------------------------------------------------------------------


def outcome(kit: Kit, error: str | None) -> Outcome:
    """What the driver compares between trees."""
    import torch

    trainer = kit.trainer
    result: Outcome = {"error": error, "events": kit.counts}
    if trainer is None:
        return result
    state = trainer.state
    result["global_step"] = state.global_step
    result["log_history"] = [
        {key: value for key, value in sorted(entry.items()) if not timing_key(key)} for entry in state.log_history
    ]
    optimizer = getattr(trainer, "optimizer", None)
    inner = getattr(optimizer, "optimizer", optimizer)
    params: list[Any] = []
    steps: list[int] = []
    if inner is not None:
        params = [p for group in inner.param_groups for p in group["params"]]
        steps = [int(inner.state[p]["step"]) for p in params if p in inner.state and "step" in inner.state[p]]
    result["updates"] = max(steps) if steps else None
    scheduler = getattr(trainer, "lr_scheduler", None)
    scheduler = getattr(scheduler, "scheduler", scheduler)
    result["scheduler_steps"] = getattr(scheduler, "last_epoch", None)
    digest, fingerprint, nonfinite = hashlib.sha256(), [], 0
    with torch.no_grad():
        for param in params:
            value = param.detach().to(torch.float64).cpu().contiguous()
            digest.update(param.detach().cpu().contiguous().numpy().tobytes())
            fingerprint.append([float(value.sum()), float(value.norm())])
            if param.grad is not None and not bool(torch.isfinite(param.grad).all()):
                nonfinite += 1
    result["weights"] = {"sha256": digest.hexdigest(), "tensors": len(params), "fingerprint": fingerprint}
    result["nonfinite_grads"] = nonfinite
    return result


def run_one(spec: Spec, fd: int) -> None:
    """In the forked child: run one scenario and write its outcome, one JSON line, to `fd`."""
    import torch
    import transformers

    started = time.monotonic()
    torch.manual_seed(0)
    random.seed(0)
    with tempfile.TemporaryDirectory(prefix="downstream-") as folder:
        os.environ["HF_HOME"] = os.path.join(folder, "hf-home")
        os.environ["HF_DATASETS_CACHE"] = os.path.join(folder, "datasets")
        kit = Kit(folder, spec["fp16"])
        error = None
        try:
            train = spec["func"](kit)
            train()
        except Exception as exc:  # the outcome of the run: recorded, compared
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".strip()
            traceback.print_exc()
        result = outcome(kit, error)
    result.update(name=spec["name"], package=spec["package"], seconds=round(time.monotonic() - started, 2))
    import accelerate

    result["modules"] = {module.__name__: os.path.dirname(module.__file__) for module in (transformers, accelerate)}
    os.write(fd, (json.dumps(result) + "\n").encode())


# -- the worker -------------------------------------------------------------------------------------------

# What a scenario of each package imports: imported once before the scenarios fork, and by --check.
MODULES = {
    "trl": ["datasets", "trl", "trl.trainer.sft_trainer", "trl.trainer.grpo_trainer", "trl.trainer.rloo_trainer"]
    + ["trl.trainer.dpo_trainer", "trl.trainer.reward_trainer"],
    "peft": ["datasets", "peft", "trl", "trl.trainer.sft_trainer"],
    "sentence-transformers": ["datasets", "sentence_transformers", "sentence_transformers.cross_encoder"],
    "setfit": ["datasets", "sentence_transformers", "setfit", "setfit.trainer", "sklearn.linear_model"],
    "transformers": ["datasets", "transformers.trainer", "transformers.trainer_seq2seq"],
}
# The distributions whose versions a report names.
PACKAGES = ("trl", "sentence-transformers", "setfit", "peft")


def import_all(packages: Iterable[str]) -> None:
    import importlib

    import torch

    torch.set_num_threads(1)
    for package in packages:
        for module in MODULES[package]:
            importlib.import_module(module)


def check(roots: Sequence[str], transformers_version: str) -> dict[str, Any]:
    """Like `pip check` for the distributions under `roots` (the downstream install): every requirement
    (without extras, markers evaluated) is met by the distribution Python would import first, transformers by
    the tree on the path; then every scenario's modules import. Returns a dict for the report."""
    import importlib.metadata as metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    first: dict[str, metadata.Distribution] = {}
    for dist in metadata.distributions():
        first.setdefault(canonicalize_name(dist.metadata["Name"] or ""), dist)
    first_versions = {name: dist.version for name, dist in first.items()}
    first_versions.setdefault("transformers", transformers_version)
    problems: list[str] = []
    roots = [os.path.realpath(root) for root in roots]
    for name, dist in sorted(first.items()):
        location = os.path.realpath(str(dist.locate_file("")))
        if not any(location == root or location.startswith(root + os.sep) for root in roots):
            continue
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            wanted = canonicalize_name(requirement.name)
            found = transformers_version if wanted == "transformers" else first_versions.get(wanted)
            if found is None:
                problems.append(f"{name} {dist.version} requires {requirement}, which is not installed")
            elif not requirement.specifier.contains(found, prereleases=True):
                problems.append(f"{name} {dist.version} requires {requirement}, but {found} is installed")
    for package in MODULES:
        for module in MODULES[package]:
            try:
                __import__(module)
            except Exception as exc:
                problems.append(f"import {module}: {type(exc).__name__}: {exc}")
    versions = {package: first_versions.get(package) for package in PACKAGES}
    return {"problems": problems, "packages": versions}


def run(names: Sequence[str], fd: int, timeout: float, log_dir: str | None) -> None:
    specs = [SCENARIOS[name] for name in names]
    import_all(sorted({spec["package"] for spec in specs}))
    for spec in specs:
        read, write = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: one scenario, then out
            code = 1
            try:
                os.close(read)
                os.close(fd)
                if log_dir:  # the scenario's own log
                    log = os.open(
                        os.path.join(log_dir, spec["name"].replace("/", "__") + ".log"),
                        os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                    )
                    os.dup2(log, 1)
                    os.dup2(log, 2)
                    os.close(log)
                print(f"== {spec['name']}", file=sys.stderr, flush=True)
                run_one(spec, write)
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        os.close(write)
        data, deadline = b"", time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            ready = select.select([read], [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                os.kill(pid, 9)
                break
            chunk = os.read(read, 1 << 16)
            if not chunk:
                break
            data += chunk
        os.close(read)
        _, status = os.waitpid(pid, 0)
        if data.endswith(b"\n"):
            line = data.decode()
        else:
            why = f"took longer than {timeout}s" if time.monotonic() >= deadline else f"died ({status:#x})"
            line = json.dumps({"name": spec["name"], "package": spec["package"], "crashed": why}) + "\n"
        os.write(fd, line.encode())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--check", nargs="*", metavar="ROOT")
    parser.add_argument("--run", nargs="*", metavar="NAME")
    parser.add_argument("--result-fd", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--log-dir", metavar="DIR", help="each scenario's output goes to DIR/<name>.log")
    args = parser.parse_args(argv)
    if args.list:
        listed = [
            {"name": spec["name"], "package": spec["package"], "layer": spec["layer"], "fp16": spec["fp16"]}
            for spec in SCENARIOS.values()
        ]
        print(json.dumps(listed))
    elif args.check is not None:
        import transformers

        print(json.dumps(check(args.check, transformers.__version__)))
    elif args.run is not None:
        unknown = [name for name in args.run if name not in SCENARIOS]
        if unknown:
            parser.error(f"unknown scenario(s): {', '.join(unknown)}")
        run(args.run, args.result_fd, args.timeout, args.log_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
