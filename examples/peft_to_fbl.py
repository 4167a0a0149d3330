#!/usr/bin/env python3
"""From a Hugging Face causal LM with peft LoRA to an fbl training graph, and back (docs/guide.md).

    peft_to_fbl.py export   --model M --out DIR [--seq T] [--batch B] [--r R] [--alpha A] [--targets a,b]
    peft_to_fbl.py dataset  --model M --text FILE --out DIR [--seq T] [--batch B] [--eval-samples K]
    peft_to_fbl.py evaluate --model M --adapter DIR --data DIR [--fbl-metrics FILE.jsonl]
    peft_to_fbl.py tiny-base --text FILE --out DIR

M is a Hub name or a folder that from_pretrained reads (config, weights, tokenizer).

export    writes DIR/model.onnx: the model in fp32 with LoRA from peft, wrapped so that its
          forward returns the loss alone, traced on one [B, T] batch (fbl compiles static shapes),
          opset 20, every dropout probability 0 (fbl draws no random masks).
dataset   tokenizes FILE (one example a line), pads and truncates every line to T tokens, labels
          the real tokens (-100 on the padding), groups the lines into batches of B and writes
          DIR/train/ and DIR/eval/ (the last K batches), one INPUT.npy per model input, shaped
          [N, B, T]: what `fbl-train --data` and `fbl_dataset_open` read.
evaluate  loads the base model and the adapter fbl-train exported with peft, prints its mean loss
          over the batches of --data and, with --fbl-metrics, compares it with the last eval loss
          fbl-train logged (exit 1 when they differ by more than 1e-3 relative).
tiny-base writes a tiny random Llama and a word-level tokenizer of FILE's words into DIR: a
          stand-in for a downloaded checkpoint that needs no network.

Needs torch, transformers, peft, onnx and onnxscript (tests/data/corpus/README.md has tested versions).
"""
import argparse
import json
import os
import re

import numpy as np
import torch
import transformers as T
from peft import LoraConfig, PeftModel, get_peft_model

INPUTS = ["input_ids", "attention_mask", "labels"]


class LossOnly(torch.nn.Module):
    """The training forward fbl compiles: the model's inputs in, its scalar training loss out."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, labels):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss


def load_base(name):
    """The model in fp32, with eager attention and every dropout probability 0."""
    config = T.AutoConfig.from_pretrained(name)
    for key, value in config.to_dict().items():
        if isinstance(value, float) and re.search(r"dropout|pdrop|layerdrop", key):
            setattr(config, key, 0.0)
    config.use_cache = False
    return T.AutoModelForCausalLM.from_pretrained(name, config=config, dtype=torch.float32,
                                                  attn_implementation="eager")


def tokenizer_of(name):
    tok = T.AutoTokenizer.from_pretrained(name)
    if tok.pad_token is None:  # Llama's tokenizers have none: pad with the end of sequence
        tok.pad_token = tok.eos_token
    return tok


def export(a):
    torch.manual_seed(0)
    model = get_peft_model(load_base(a.model), LoraConfig(
        r=a.r, lora_alpha=a.alpha, lora_dropout=0.0, target_modules=a.targets.split(","), task_type="CAUSAL_LM"))
    model.print_trainable_parameters()
    model.train()
    # One example batch fixes the shapes; its last row is half padding, so the mask is traced as data.
    vocab = model.config.vocab_size
    input_ids = torch.randint(0, vocab, (a.batch, a.seq))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[-1, a.seq // 2:] = 0
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "model.onnx")
    torch.onnx.export(LossOnly(model), (input_ids, attention_mask, labels), path, input_names=INPUTS,
                      output_names=["loss"], opset_version=20, dynamo=True, optimize=False)
    print(f"wrote {path}: inputs {', '.join(INPUTS)} i64[{a.batch},{a.seq}], output loss")


def dataset(a):
    tok = tokenizer_of(a.model)
    lines = [line.strip() for line in open(a.text, encoding="utf-8") if line.strip()]
    n = len(lines) // a.batch
    if n <= a.eval_samples:
        raise SystemExit(f"{a.text}: {len(lines)} lines make {n} batches of {a.batch}; "
                         f"--eval-samples {a.eval_samples} leaves none to train on")
    enc = tok(lines[:n * a.batch], padding="max_length", truncation=True, max_length=a.seq, return_tensors="np")
    ids = enc["input_ids"].astype(np.int64)
    mask = enc["attention_mask"].astype(np.int64)
    tensors = dict(input_ids=ids, attention_mask=mask, labels=np.where(mask == 1, ids, -100))
    for part, rows in (("train", slice(0, (n - a.eval_samples) * a.batch)),
                       ("eval", slice((n - a.eval_samples) * a.batch, n * a.batch))):
        os.makedirs(os.path.join(a.out, part), exist_ok=True)
        for name, t in tensors.items():
            np.save(os.path.join(a.out, part, name + ".npy"), t[rows].reshape(-1, a.batch, a.seq))
    print(f"wrote {a.out}/train ({n - a.eval_samples} batches) and {a.out}/eval ({a.eval_samples}) "
          f"of {a.batch} x {a.seq} tokens; {len(lines) - n * a.batch} lines left over")


def evaluate(a):
    model = PeftModel.from_pretrained(load_base(a.model), a.adapter)
    model.eval()
    data = {name: torch.from_numpy(np.load(os.path.join(a.data, name + ".npy"))) for name in INPUTS}
    with torch.no_grad():
        losses = [float(LossOnly(model)(*(data[name][i] for name in INPUTS))) for i in range(len(data["labels"]))]
    loss = sum(losses) / len(losses)
    print(f"peft eval loss {loss:.6f} ({len(losses)} batches)")
    if a.fbl_metrics:
        evals = [json.loads(line) for line in open(a.fbl_metrics) if '"eval_loss"' in line]
        fbl = evals[-1]["eval_loss"]
        print(f"fbl  eval loss {fbl:.6f} (step {evals[-1]['step']})")
        if abs(loss - fbl) > 1e-3 * max(1.0, abs(fbl)):
            raise SystemExit("the adapter in peft does not give fbl's eval loss")


def tiny_base(a):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    text = open(a.text, encoding="utf-8").read().lower()
    words = sorted(set(re.findall(r"\w+|[^\w\s]+", text)))
    vocab = {w: i for i, w in enumerate(["<pad>", "<unk>", "<s>", "</s>"] + words)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = T.PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", unk_token="<unk>",
                                    bos_token="<s>", eos_token="</s>")
    torch.manual_seed(0)
    config = T.LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                           pad_token_id=0, bos_token_id=2, eos_token_id=3, tie_word_embeddings=False)
    T.LlamaForCausalLM(config).save_pretrained(a.out)
    tok.save_pretrained(a.out)
    print(f"wrote {a.out}: a tiny Llama, vocabulary {len(vocab)}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export")
    d = sub.add_parser("dataset")
    v = sub.add_parser("evaluate")
    b = sub.add_parser("tiny-base")
    for s in (e, d, v):
        s.add_argument("--model", required=True)
    for s in (e, d):
        s.add_argument("--seq", type=int, default=32)
        s.add_argument("--batch", type=int, default=2)
    for s in (e, d, b):
        s.add_argument("--out", required=True)
    e.add_argument("--r", type=int, default=8)
    e.add_argument("--alpha", type=float, default=16)
    e.add_argument("--targets", default="q_proj,k_proj,v_proj,o_proj")
    d.add_argument("--text", required=True)
    d.add_argument("--eval-samples", type=int, default=1)
    v.add_argument("--adapter", required=True)
    v.add_argument("--data", required=True)
    v.add_argument("--fbl-metrics")
    b.add_argument("--text", required=True)
    a = p.parse_args()
    {"export": export, "dataset": dataset, "evaluate": evaluate, "tiny-base": tiny_base}[a.command](a)


if __name__ == "__main__":
    main()
