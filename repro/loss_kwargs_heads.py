"""Gradient of one accumulation window vs one big batch, per head (issue 38).

Run once per tree, e.g.
    PYTHONPATH=/path/to/5.24.0/src python repro/loss_kwargs_heads.py
    PYTHONPATH=.work/checkouts/transformers/src python repro/loss_kwargs_heads.py
Prints, per model, the norm of the gradient of a window of 4 samples split into GA 2 and GA 4 micro-batches divided by
the norm of the gradient of one batch of the same 4 samples (1.0000 is right), and whether the Trainer passes
`num_items_in_batch` to it. Tiny random configs, CPU, SGD with lr 0, stdlib + torch + transformers only.
"""

import contextlib
import io
import logging
import os
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


class Grab(TrainerCallback):
    gradient = None

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        if self.gradient is None:
            self.gradient = torch.cat(
                [p.grad.detach().flatten().clone() for p in model.parameters() if p.grad is not None]
            )


def run(name, batch_size, accumulation):
    build, kind = SCENARIOS[name]
    generator = torch.Generator().manual_seed(0)
    rows = (
        ctc_rows(generator)
        if kind == "ctc"
        else sample_rows(generator)
        if kind == "samples"
        else token_rows(kind, generator)
    )
    torch.manual_seed(0)
    model = build()
    grab = Grab()
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
        )
        trainer = Trainer(model=model, args=args, train_dataset=rows, callbacks=[grab])
        with contextlib.redirect_stdout(io.StringIO()):
            trainer.train()
    return grab.gradient, trainer.model_accepts_loss_kwargs


def main():
    print(f"transformers {transformers.__version__} from {os.path.dirname(transformers.__file__)}")
    print(f"{'model':48} {'count passed':>12} {'GA 2':>8} {'GA 4':>8}")
    only = sys.argv[1:]
    for name in SCENARIOS:
        if only and not any(o in name for o in only):
            continue
        try:
            one, accepts = run(name, 4, 1)
            ratios = [(run(name, 4 // ga, ga)[0].norm() / one.norm()).item() for ga in (2, 4)]
            print(f"{name:48} {str(accepts):>12} {ratios[0]:8.4f} {ratios[1]:8.4f}", flush=True)
        except Exception as error:  # a head this release lacks or cannot build tiny
            print(f"{name:48} error: {type(error).__name__}: {str(error)[:80]}", flush=True)


if __name__ == "__main__":
    main()
