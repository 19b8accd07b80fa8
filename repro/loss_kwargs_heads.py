"""Gradient of one accumulation window vs one big batch, per head (issue 38).

Run once per tree, e.g.
    PYTHONPATH=/path/to/5.24.0/src python repro/loss_kwargs_heads.py
    PYTHONPATH=.work/checkouts/transformers/src python repro/loss_kwargs_heads.py
Prints, per model, the norm of the gradient of a window of 4 samples split into GA 2 and GA 4 micro-batches divided by
the norm of the gradient of one batch of the same 4 samples (1.0000 is right), and whether the Trainer passes
`num_items_in_batch` to it. Tiny random configs, CPU, SGD with lr 0, stdlib + torch + transformers only.

With `--processes 2` (names to select follow it) the window is trained by 2 CPU processes over gloo (DDP), per-device
batch 1 and GA 2, with `average_tokens_across_devices` True and False. The samples are ordered so that rank 0 gets
the ones with 1 and 3 targets and rank 1 those with 6 and 5 (micro-batch 1: 1 vs 6 targets, micro-batch 2: 3 vs 5;
each line prints what each rank's micro-batches held). The reference is the gradient of the head's own loss over one
batch of the 4 samples, on one process without the Trainer. Prints the norm ratio and the cosine to the reference
(1.0000 and 1.0000 are right).
"""

import contextlib
import datetime
import io
import logging
import os
import socket
import sys
import tempfile
import warnings

import torch
import transformers
from torch import nn
from transformers import Trainer, TrainerCallback, TrainingArguments


warnings.filterwarnings("ignore")
transformers.logging.set_verbosity_error()
logging.disable(logging.WARNING)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SEQ = 6
TARGETS = [1, 3, 5, 6]  # valid targets per sample: uneven micro-batches


def bert_config(**kw):
    return transformers.BertConfig(
        vocab_size=32,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        **kw,
    )


def llama_config(**kw):
    return transformers.LlamaConfig(
        vocab_size=32,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        pad_token_id=0,
        **kw,
    )


def token_rows(kind, generator):
    rows = []
    for i, targets in enumerate(TARGETS):
        ids = torch.randint(1, 32, (SEQ,), generator=generator)
        if kind == "sequence":
            rows.append({"input_ids": ids, "labels": torch.tensor(i % 3)})
            continue
        labels = ids.clone() if kind == "tokens" else torch.randint(0, 3, (SEQ,), generator=generator)
        labels[targets:] = -100
        rows.append({"input_ids": ids, "labels": labels})
    return rows


class PerSampleMean(nn.Module):
    """A custom module without **kwargs whose loss is the mean over samples of each sample's mean error."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))

    def forward(self, x, labels=None):
        mask = labels.ne(-100)
        error = (self.weight * x - labels.masked_fill(~mask, 0)) ** 2
        return {"loss": ((error * mask).sum(-1) / mask.sum(-1).clamp(min=1)).mean()}


class Delegating(nn.Module):
    """A wrapper that delegates forward and attribute lookups to a BERT MLM head (as PEFT's wrappers do)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, **kwargs):
        return self.inner(**kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.inner, name)


def qwen2_audio():
    config = transformers.Qwen2AudioConfig(
        audio_config={
            "num_mel_bins": 8,
            "encoder_layers": 1,
            "encoder_attention_heads": 2,
            "encoder_ffn_dim": 16,
            "d_model": 16,
            "max_source_positions": 16,
        },
        text_config={
            "model_type": "qwen2",
            "vocab_size": 32,
            "hidden_size": 16,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "intermediate_size": 32,
            "pad_token_id": 0,
        },
        audio_token_index=31,
    )
    return transformers.Qwen2AudioForConditionalGeneration(config)


def cohere_compass():
    config = transformers.CohereCompassTextConfig(
        vocab_size=32,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        intermediate_size=32,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        num_labels=3,
        layer_types=["full_attention"],
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e4}},
    )
    return transformers.CohereCompassTextForSequenceClassification(config)


def wav2vec2_ctc():
    config = transformers.Wav2Vec2Config(
        vocab_size=12,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        conv_dim=(8, 8),
        conv_stride=(4, 4),
        conv_kernel=(8, 4),
        num_conv_pos_embeddings=4,
        num_conv_pos_embedding_groups=2,
        ctc_loss_reduction="mean",
        pad_token_id=0,
        mask_time_prob=0.0,
        final_dropout=0.0,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        feat_proj_dropout=0.0,
        layerdrop=0.0,
    )
    return transformers.Wav2Vec2ForCTC(config)


def ctc_rows(generator):
    rows = []
    for targets in TARGETS:
        labels = torch.randint(1, 12, (SEQ,), generator=generator)
        labels[targets:] = -100
        rows.append({"input_values": torch.randn(400, generator=generator), "labels": labels})
    return rows


def sample_rows(generator):
    rows = []
    for i, targets in enumerate([1, 0, 2, 1]):
        labels = torch.tensor([10.0, 20.0]) * (i + 1)
        labels[targets:] = -100
        rows.append({"x": torch.tensor([2.0 * i + 1, 2.0 * i + 2]), "labels": labels})
    return rows


def compiled_bert_cls():
    return torch.compile(transformers.BertForSequenceClassification(bert_config(num_labels=3)), backend="eager")


SCENARIOS = {
    "BertForSequenceClassification": (
        lambda: transformers.BertForSequenceClassification(bert_config(num_labels=3)),
        "sequence",
    ),
    "BertForMaskedLM": (lambda: transformers.BertForMaskedLM(bert_config()), "tokens"),
    "BertForTokenClassification": (
        lambda: transformers.BertForTokenClassification(bert_config(num_labels=3)),
        "classes",
    ),
    "T5ForConditionalGeneration": (
        lambda: transformers.T5ForConditionalGeneration(
            transformers.T5Config(
                vocab_size=32,
                d_model=16,
                d_kv=8,
                d_ff=32,
                num_layers=1,
                num_decoder_layers=1,
                num_heads=2,
                dropout_rate=0.0,
                decoder_start_token_id=0,
                pad_token_id=0,
            )
        ),
        "tokens",
    ),
    "BartForConditionalGeneration": (
        lambda: transformers.BartForConditionalGeneration(
            transformers.BartConfig(
                vocab_size=32,
                d_model=16,
                encoder_layers=1,
                decoder_layers=1,
                encoder_attention_heads=2,
                decoder_attention_heads=2,
                encoder_ffn_dim=32,
                decoder_ffn_dim=32,
                max_position_embeddings=16,
                dropout=0.0,
                attention_dropout=0.0,
                pad_token_id=0,
                bos_token_id=1,
                eos_token_id=2,
                decoder_start_token_id=2,
            )
        ),
        "tokens",
    ),
    "LlamaForSequenceClassification": (
        lambda: transformers.LlamaForSequenceClassification(llama_config(num_labels=3)),
        "sequence",
    ),
    "LlamaForCausalLM": (lambda: transformers.LlamaForCausalLM(llama_config()), "tokens"),
    "Qwen2AudioForConditionalGeneration (text only)": (qwen2_audio, "tokens"),
    "CohereCompassTextForSequenceClassification": (cohere_compass, "sequence"),
    "Wav2Vec2ForCTC (ctc_loss_reduction='mean')": (wav2vec2_ctc, "ctc"),
    "custom module, mean over samples": (PerSampleMean, "samples"),
    "torch.compile'd BertForSequenceClassification": (compiled_bert_cls, "sequence"),
    "wrapper delegating to BertForMaskedLM": (
        lambda: Delegating(transformers.BertForMaskedLM(bert_config())),
        "tokens",
    ),
}


def flat_gradient(model):
    """The gradient of every parameter, zeros for one without a gradient."""
    return torch.cat(
        [(p.grad if p.grad is not None else torch.zeros_like(p)).detach().flatten() for p in model.parameters()]
    )


class Grab(TrainerCallback):
    gradient = None

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        if self.gradient is None:
            self.gradient = flat_gradient(model).clone()


class Recording:
    """The default collator, recording the targets (labels other than -100) of each batch it makes."""

    def __init__(self):
        self.targets = []

    def __call__(self, features):
        batch = transformers.default_data_collator(features)
        self.targets.append(int(batch["labels"].ne(-100).sum()))
        return batch


def make_rows(kind):
    generator = torch.Generator().manual_seed(0)
    if kind == "ctc":
        return ctc_rows(generator)
    return sample_rows(generator) if kind == "samples" else token_rows(kind, generator)


def run(name, batch_size, accumulation, average=True, order=None):
    build, kind = SCENARIOS[name]
    rows = make_rows(kind)
    rows = rows if order is None else [rows[i] for i in order]
    torch.manual_seed(0)
    model = build()
    grab = Grab()
    collator = Recording()
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            out,
            per_device_train_batch_size=batch_size,
            gradient_accumulation_steps=accumulation,
            max_steps=1,
            learning_rate=0.0,
            optim="sgd",
            max_grad_norm=0.0,
            logging_steps=1,
            report_to="none",
            use_cpu=True,
            save_strategy="no",
            disable_tqdm=True,
            remove_unused_columns=False,
            average_tokens_across_devices=average,
            # the 2-process runs deal the samples out in a known order (see ORDER); one process keeps the default
            **({} if order is None else {"train_sampling_strategy": "sequential"}),
        )
        trainer = Trainer(model=model, args=args, train_dataset=rows, data_collator=collator, callbacks=[grab])
        with contextlib.redirect_stdout(io.StringIO()):
            trainer.train()
    return grab.gradient, trainer.model_accepts_loss_kwargs, collator.targets[:accumulation]


def reference(name, samples=None):
    """The gradient of the head's own loss over one batch of the 4 samples (or of `samples`), without the Trainer."""
    build, kind = SCENARIOS[name]
    rows = make_rows(kind)
    torch.manual_seed(0)
    model = build()
    model.train()
    model(**transformers.default_data_collator([rows[i] for i in samples or range(len(rows))]))["loss"].backward()
    return flat_gradient(model)


def cells(gradient, one):
    ratio = (gradient.norm() / one.norm()).item()
    return f"{ratio:8.4f} {torch.nn.functional.cosine_similarity(gradient, one, dim=0).item():8.4f}"


# Rank 0 reads samples 0 and 1 (1 and 3 targets), rank 1 samples 3 and 2 (6 and 5): the distributed sampler deals the
# sequential batches of 1 out in turn
ORDER = [0, 3, 1, 2]
RANK_SAMPLES = [ORDER[0::2], ORDER[1::2]]


def worker(rank, port, only):
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE="2",
        LOCAL_WORLD_SIZE="2",
    )
    torch.set_num_threads(1)
    dist = torch.distributed
    dist.init_process_group("gloo", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=300))
    if rank == 0:
        print(f"transformers {transformers.__version__} from {os.path.dirname(transformers.__file__)}")
        print(f"{'':61} vs one batch of the 4  {'avg False vs':>17}  targets per")
        print(f"{'':61} {'avg True':>17} {'avg False':>17}  {'ranks mean':>17}  micro-batch")
        print(f"{'model':48} {'count passed':>12}" + f" {'ratio':>8} {'cosine':>8}" * 3 + "  rank 0 | rank 1")
    for name in SCENARIOS:
        if only and not any(o in name for o in only):
            continue
        try:
            one = reference(name) if rank == 0 else None
            # average_tokens_across_devices=False: the mean over the ranks of the loss of each rank's samples
            ranks_mean = (
                (reference(name, RANK_SAMPLES[0]) + reference(name, RANK_SAMPLES[1])) / 2 if rank == 0 else None
            )
            row, seen = [], []
            for average in (True, False):
                gradient, accepts, targets = run(name, 1, 2, average=average, order=ORDER)
                seen = [None, None]
                dist.all_gather_object(seen, targets)
                if rank == 0:
                    row.append(cells(gradient, one))
            if rank == 0:
                ranks = " | ".join(",".join(map(str, t)) for t in seen)
                print(
                    f"{name:48} {str(accepts):>12} {row[0]} {row[1]}  {cells(gradient, ranks_mean)}  {ranks}",
                    flush=True,
                )
        except Exception as error:  # a head this release lacks or cannot build tiny
            if rank == 0:
                print(f"{name:48} error: {type(error).__name__}: {str(error)[:80]}", flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main():
    only = sys.argv[1:]
    if only[:1] == ["--processes"]:
        if only[1:2] != ["2"]:
            sys.exit("--processes takes 2")
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # DDP's note that a head has no unused parameters
        torch.multiprocessing.spawn(worker, args=(free_port(), only[2:]), nprocs=2)
        return
    print(f"transformers {transformers.__version__} from {os.path.dirname(transformers.__file__)}")
    print(f"{'model':48} {'count passed':>12} {'GA 2':>8} {'GA 4':>8}")
    for name in SCENARIOS:
        if only and not any(o in name for o in only):
            continue
        try:
            one, accepts, _ = run(name, 4, 1)
            ratios = [(run(name, 4 // ga, ga)[0].norm() / one.norm()).item() for ga in (2, 4)]
            print(f"{name:48} {str(accepts):>12} {ratios[0]:8.4f} {ratios[1]:8.4f}", flush=True)
        except Exception as error:  # a head this release lacks or cannot build tiny
            print(f"{name:48} error: {type(error).__name__}: {str(error)[:80]}", flush=True)


if __name__ == "__main__":
    main()
