"""Regenerates the architecture corpus of tests/data/corpus, on the CPU, in one command:

    python3 -m venv $HOME/venv-export
    $HOME/venv-export/bin/pip install torch==2.11.* transformers==5.17.* peft==0.21.* onnx \
        onnxscript==0.7.2 safetensors numpy
    $HOME/venv-export/bin/python tests/data/corpus/export_corpus.py tests/data/corpus [ARCH,...]

For every architecture (ARCHS below) it builds a tiny randomly initialised Hugging Face model,
wraps it with peft LoRA (r=8, alpha=16, dropout 0, init_lora_weights=False so lora_B is not
zero and every adapter gets a gradient) and writes into OUT/<arch>/:

  test_data_set_0/input_N.pb, output_0.pb  the inputs and PyTorch's loss (TensorProto files)
  grads/grad_N.pb       PyTorch's gradient of every trainable, named by its parameter name
  trajectory.json       10 AdamW steps on that one batch: the optimizer settings and the losses
  adapter/              what peft saves after those 10 steps (adapter_model.safetensors, config)
  buffers.safetensors   the float buffers those 10 steps updated (BatchNorm's running statistics),
                        for models that have any; every export and the trajectory start from the
                        buffers as initialised
  buffers_step1.safetensors  the same buffers after the first step alone
  <style>/model.onnx    the export, weights inside (node metadata: opt keeps fx_node and name_scopes),
                        for each style that worked:
                          noopt  torch.onnx.export(dynamo=True, optimize=False)
                          opt    torch.onnx.export(dynamo=True) (the exporter's default)
                          ts     torch.onnx.export(dynamo=False, opset 17, training mode)
  meta.json             versions, config, trainables, per style its node/op counts or the
                        exporter's error

Everything runs in fp32 on the CPU with a fixed seed, so a rerun reproduces the files.
"""
import json
import os
import re
import sys
import traceback
from collections import Counter

import numpy as np
import torch
import onnx
from onnx import numpy_helper
import peft
import safetensors.torch
from peft import IA3Config, LoraConfig, get_peft_model
import transformers as T

LR, BETAS, EPS, WEIGHT_DECAY, STEPS = 1e-2, (0.9, 0.999), 1e-8, 0.01, 10
SEQ = 16
NO_DROPOUT = dict(attention_dropout=0.0)


class WithLoss(torch.nn.Module):
    """Calls the model with keyword inputs and returns its own training loss: one scalar output."""

    def __init__(self, m, keys):
        super().__init__()
        self.m, self.keys = m, keys

    def forward(self, *xs):
        return self.m(**dict(zip(self.keys, xs))).loss


def ids(vocab, batch=1, low=3):
    return torch.randint(low, vocab, (batch, SEQ))


# Each entry: (model class, config, LoRA target modules, input names, inputs, styles, notes), and
# optionally an 8th item: LoraConfig arguments beyond the common ones (rsLoRA, DoRA, a task type).
def gpt2():
    c = T.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_inner=64, vocab_size=128, n_positions=32,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
    x = ids(c.vocab_size)
    return (T.GPT2LMHeadModel, c, ["c_attn", "c_proj", "c_fc"], ["input_ids", "labels"], (x, x.clone()),
            ["noopt", "opt", "ts"], "Conv1D linears (peft fan_in_fan_out), learned positions")


def phi3():
    c = T.Phi3Config(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, vocab_size=128, max_position_embeddings=64, pad_token_id=0,
                     bos_token_id=1, eos_token_id=2, resid_pdrop=0.0, embd_pdrop=0.0, use_cache=False,
                     **NO_DROPOUT)
    x = ids(c.vocab_size)
    return (T.Phi3ForCausalLM, c, ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"], ["input_ids", "labels"],
            (x, x.clone()), ["noopt", "opt"], "fused qkv_proj and gate_up_proj, GQA 4/2")


def gpt_neox():
    c = T.GPTNeoXConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                        vocab_size=128, max_position_embeddings=64, rotary_pct=0.5, use_parallel_residual=True,
                        hidden_dropout=0.0, attention_dropout=0.0, use_cache=False, bos_token_id=1,
                        eos_token_id=2)
    x = ids(c.vocab_size)
    return (T.GPTNeoXForCausalLM, c, ["query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"],
            ["input_ids", "labels"], (x, x.clone()), ["noopt", "opt"],
            "fused query_key_value, rotary on half of each head, parallel residual")


def opt():
    c = T.OPTConfig(hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=128,
                    max_position_embeddings=64, word_embed_proj_dim=32, dropout=0.0, attention_dropout=0.0,
                    activation_dropout=0.0, use_cache=False, pad_token_id=1, bos_token_id=2, eos_token_id=2)
    x = ids(c.vocab_size)
    return (T.OPTForCausalLM, c, ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"], ["input_ids", "labels"],
            (x, x.clone()), ["noopt", "opt"], "learned positions with offset 2 from the attention mask's CumSum")


def falcon():
    c = T.FalconConfig(hidden_size=32, ffn_hidden_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=128,
                       max_position_embeddings=64, multi_query=True, parallel_attn=True, alibi=False, bias=False,
                       hidden_dropout=0.0, attention_dropout=0.0, use_cache=False, bos_token_id=1, eos_token_id=2)
    x = ids(c.vocab_size)
    return (T.FalconForCausalLM, c, ["query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"],
            ["input_ids", "labels"], (x, x.clone()), ["noopt", "opt"],
            "multi-query fused query_key_value, parallel attention and MLP, tied lm_head")


def t5():
    c = T.T5Config(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4, vocab_size=128,
                   relative_attention_num_buckets=8, relative_attention_max_distance=16, dropout_rate=0.0,
                   use_cache=False, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    src, tgt = ids(c.vocab_size, 2), ids(c.vocab_size, 2)
    return (T.T5ForConditionalGeneration, c, ["q", "k", "v", "o", "wi", "wo"], ["input_ids", "labels"], (src, tgt),
            ["noopt", "opt"], "encoder-decoder, relative position bias, labels shifted right inside")


def roberta():
    c = T.RobertaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                        vocab_size=128, max_position_embeddings=SEQ + 2, type_vocab_size=1, pad_token_id=1,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    x = ids(c.vocab_size, 2)
    mask = torch.ones_like(x)
    mask[1, 11:] = 0  # the second sequence is padded: its position ids stop counting there
    x[mask == 0] = c.pad_token_id
    labels = ids(c.vocab_size, 2)
    labels[mask == 0] = -100
    return (T.RobertaForMaskedLM, c, ["query", "key", "value", "attention.output.dense", "intermediate.dense",
                                      "output.dense"],
            ["input_ids", "attention_mask", "labels"], (x, mask, labels), ["noopt", "opt", "ts"],
            "position ids from input_ids != pad (CumSum), padded attention mask, ignored labels")


def deit():
    c = T.DeiTConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                     image_size=16, patch_size=4, num_labels=10, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    return (T.DeiTForImageClassification, c, ["q_proj", "k_proj", "v_proj", "o_proj", "fc1", "fc2"],
            ["pixel_values", "labels"], (torch.randn(2, 3, 16, 16), torch.randint(0, 10, (2,))),
            ["noopt", "opt", "ts"], "cls and distillation tokens, Conv patch embedding")


def swin():
    c = T.SwinConfig(image_size=16, patch_size=2, embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=4,
                     mlp_ratio=2.0, num_labels=10, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                     drop_path_rate=0.0)
    return (T.SwinForImageClassification, c, ["q_proj", "k_proj", "v_proj", "o_proj", "fc1", "fc2"],
            ["pixel_values", "labels"], (torch.randn(2, 3, 16, 16), torch.randint(0, 10, (2,))),
            ["noopt", "opt"], "shifted windows (torch.roll), relative position bias table, patch merging")


def gptj():
    c = T.GPTJConfig(n_embd=32, n_layer=2, n_head=4, n_inner=64, rotary_dim=4, vocab_size=128, n_positions=64,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False, bos_token_id=1,
                     eos_token_id=2)
    x = ids(c.vocab_size)
    return (T.GPTJForCausalLM, c, ["q_proj", "k_proj", "v_proj", "out_proj", "fc_in", "fc_out"],
            ["input_ids", "labels"], (x, x.clone()), ["noopt", "opt"],
            "interleaved rotary on 4 dims a head (repeat_interleave: Tile), parallel attention and MLP")


def deberta_v2():
    c = T.DebertaV2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                          vocab_size=128, max_position_embeddings=64, relative_attention=True, position_buckets=8,
                          pos_att_type=["p2c", "c2p"], max_relative_positions=16, position_biased_input=False,
                          pad_token_id=0, type_vocab_size=0, hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0)
    x = ids(c.vocab_size, 2)
    mask = torch.ones_like(x)
    mask[1, 11:] = 0
    x[mask == 0] = c.pad_token_id
    labels = ids(c.vocab_size, 2)
    labels[mask == 0] = -100
    return (T.DebertaV2ForMaskedLM, c, ["query_proj", "key_proj", "value_proj", "attention.output.dense",
                                        "intermediate.dense", "output.dense"],
            ["input_ids", "attention_mask", "labels"], (x, mask, labels), ["noopt", "opt", "ts"],
            "disentangled attention (c2p and p2c: GatherElements, Tile), log position buckets (Sign, Ceil, Clip)")


def beit():
    c = T.BeitConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, image_size=16,
                     patch_size=4, num_labels=10, use_relative_position_bias=True, use_mean_pooling=True,
                     layer_scale_init_value=0.1, drop_path_rate=0.0, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    return (T.BeitForImageClassification, c, ["q_proj", "k_proj", "v_proj", "o_proj", "fc1", "fc2"],
            ["pixel_values", "labels"], (torch.randn(2, 3, 16, 16), torch.randint(0, 10, (2,))),
            ["noopt", "opt", "ts"], "relative position bias table resized to the window (Resize), layer scale, mean pooling")


def padded_batch(vocab, pad_id, side, lengths=(SEQ, SEQ - 5, SEQ - 1)):
    """ids, attention_mask and labels of a batch of mixed lengths, padded on `side` as a tokenizer
    with padding_side=side pads it: pad ids, mask 0 and label -100 on the padding."""
    x = ids(vocab, len(lengths))
    mask = torch.zeros_like(x)
    for b, n in enumerate(lengths):
        if side == "left":
            mask[b, SEQ - n:] = 1
        else:
            mask[b, :n] = 1
    x[mask == 0] = pad_id
    labels = x.clone()
    labels[mask == 0] = -100
    return x, mask, labels


def qwen2_padded(side):
    c = T.Qwen2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=128, max_position_embeddings=64, use_cache=False,
                      pad_token_id=0, bos_token_id=1, eos_token_id=2, **NO_DROPOUT)
    return (T.Qwen2ForCausalLM, c, ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
            ["input_ids", "attention_mask", "labels"], padded_batch(c.vocab_size, c.pad_token_id, side),
            ["noopt", "opt"], f"GQA 4/2, qkv bias; a batch of 3 (16, 11 and 15 tokens) padded on the {side}"
            + (": a padded query row sees no key, and the last pad's logits predict the first token" if side == "left"
               else ""))


def bert_left_padded():
    c = T.BertConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                     vocab_size=128, max_position_embeddings=SEQ, type_vocab_size=1, pad_token_id=0,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    x, mask, labels = padded_batch(c.vocab_size, c.pad_token_id, "left")
    return (T.BertForMaskedLM, c, ["query", "key", "value", "attention.output.dense", "intermediate.dense",
                                   "output.dense"],
            ["input_ids", "attention_mask", "labels"], (x, mask, labels), ["noopt", "opt", "ts"],
            "an encoder on a batch of 3 (16, 11 and 15 tokens) padded on the left")


LLAMA_KW = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=128, max_position_embeddings=64, use_cache=False,
                pad_token_id=0, bos_token_id=1, eos_token_id=2)


def llama(targets, notes, peft_args):
    c = T.LlamaConfig(**LLAMA_KW, **NO_DROPOUT)
    x = ids(c.vocab_size)
    return (T.LlamaForCausalLM, c, targets, ["input_ids", "labels"], (x, x.clone()), ["noopt", "opt"], notes,
            peft_args)


def llama_rslora():
    return llama(["q_proj", "k_proj", "v_proj", "o_proj"], "rsLoRA: lora_B's output scaled by alpha/sqrt(r)",
                 dict(use_rslora=True))


def llama_embed():
    return llama(["embed_tokens", "q_proj", "v_proj"], "LoRA on embed_tokens (lora_embedding_A/B)", {})


def llama_dora():
    return llama(["q_proj", "v_proj"], "DoRA: lora_magnitude_vector rescales each output column",
                 dict(use_dora=True))


def bert_seqcls():
    c = T.BertConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                     vocab_size=128, max_position_embeddings=SEQ, type_vocab_size=1, pad_token_id=0, num_labels=3,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout=0.0)
    return (T.BertForSequenceClassification, c, ["query", "value"], ["input_ids", "labels"],
            (ids(c.vocab_size, 2), torch.randint(0, 3, (2,))), ["noopt", "opt"],
            "task_type SEQ_CLS: peft trains the classifier head as modules_to_save", dict(task_type="SEQ_CLS"))


def wav2vec2(feat_extract_norm, stable_layer_norm, styles, notes):
    """A tiny Wav2Vec2ForSequenceClassification on 2 clips of 400 samples; the feature encoder's
    norm ("group": wav2vec2-base's GroupNorm after the first Conv, "layer": LayerNorm per Conv)."""
    c = T.Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                         conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                         num_conv_pos_embedding_groups=4, feat_extract_norm=feat_extract_norm,
                         do_stable_layer_norm=stable_layer_norm, num_labels=3, hidden_dropout=0.0, attention_dropout=0.0,
                         activation_dropout=0.0, feat_proj_dropout=0.0, final_dropout=0.0, layerdrop=0.0,
                         mask_time_prob=0.0, use_weighted_layer_sum=False, classifier_proj_size=16)
    return (T.Wav2Vec2ForSequenceClassification, c, ["q_proj", "k_proj", "v_proj", "out_proj"],
            ["input_values", "labels"], (torch.randn(2, 400), torch.randint(0, 3, (2,))), styles, notes,
            dict(task_type="SEQ_CLS"))


def wav2vec2_group():
    return wav2vec2("group", False, ["ts"], "audio: wav2vec2-base's feature encoder, GroupNorm after the first 1-D "
                    "Conv, post-LN (dynamo: torch.export fails on a data-dependent guard)")


def resnet():
    c = T.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic", num_labels=10)
    return (T.ResNetForImageClassification, c, ["convolution"], ["pixel_values", "labels"],
            (torch.randn(2, 3, 32, 32), torch.randint(0, 10, (2,))), ["noopt", "opt", "ts"],
            "CNN: BatchNorm in train mode (batch statistics), LoRA on every Conv, classifier trained",
            dict(modules_to_save=["classifier"]))


def llama_ia3():
    return llama(["k_proj", "v_proj", "down_proj"], "IA3: ia3_l rescales k/v outputs and down_proj's input",
                 dict(peft_type="IA3", feedforward_modules=["down_proj"]))


def mixtral():
    # transformers' default experts ("grouped_mm") do not convert to ONNX and "eager" loops over
    # the experts each batch routes to (data-dependent, torch.export fails): "batched_mm" gathers
    # each token's top-2 experts' weights and multiplies them in a batch, which exports.
    c = T.MixtralConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, vocab_size=128, max_position_embeddings=64, num_local_experts=4,
                        num_experts_per_tok=2, use_cache=False, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                        **NO_DROPOUT)
    c._experts_implementation = "batched_mm"
    x = ids(c.vocab_size)
    return (T.MixtralForCausalLM, c, ["q_proj", "k_proj", "v_proj", "o_proj"], ["input_ids", "labels"], (x, x.clone()),
            ["noopt", "opt"], "MoE: a top-2-of-4 router (TopK) and the chosen experts' weights gathered per token")


ARCHS = dict(gpt2=gpt2, phi3=phi3, gpt_neox=gpt_neox, opt=opt, falcon=falcon, t5=t5, roberta=roberta, deit=deit,
             swin=swin, gptj=gptj, deberta_v2=deberta_v2, beit=beit,
             qwen2_left=lambda: qwen2_padded("left"), qwen2_right=lambda: qwen2_padded("right"),
             bert_left=bert_left_padded)
ARCHS.update(llama_rslora=llama_rslora, llama_embed=llama_embed, llama_dora=llama_dora, bert_seqcls=bert_seqcls,
             wav2vec2_group=wav2vec2_group, resnet=resnet, mixtral=mixtral,
             llama_ia3=llama_ia3)


def save_tensor(path, name, t):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(t.detach().cpu().numpy(), name).SerializeToString())


# Node metadata kept in optimize=True exports: what the importer recovers names from (docs/ops.md,
# "Default exports"). The stack traces, namespaces and class lists are three quarters of a tiny
# model's bytes; optimize=False exports keep their names and need none of it. A BatchNormalization
# keeps its fx_node in every style: the exporter drops the training flag, which only the ATen call
# in it still gives (compiler/onnx/export_training_mode.h).
KEEP_METADATA = ("pkg.torch.onnx.fx_node", "pkg.torch.onnx.name_scopes")


def slim(path, style):
    mp = onnx.load(path)
    for n in mp.graph.node:
        keep = [(p.key, p.value) for p in n.metadata_props
                if p.key in KEEP_METADATA and (style == "opt" or n.op_type == "BatchNormalization")]
        del n.metadata_props[:]
        for k, v in keep:
            n.metadata_props.add(key=k, value=v)
    onnx.save(mp, path)
    return mp


def sort_target_modules(path):
    """peft writes target_modules from a set, in hash order: sorted, a rerun gives the same file."""
    cfg = json.load(open(path))
    if isinstance(cfg.get("target_modules"), list):
        cfg["target_modules"] = sorted(cfg["target_modules"])
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)


def first_line(e):
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip()  # the exporter colours its messages
    return f"{type(e).__name__}: {text.splitlines()[0][:300] if text else ''}"


def reset_initializers(path, values):
    """Sets the initializers of `path` that `values` names to those values."""
    mp = onnx.load(path)
    for init in mp.graph.initializer:
        if init.name in values:
            init.CopyFrom(numpy_helper.from_array(values[init.name].numpy(), init.name))
    onnx.save(mp, path)


def export(net, xs, names, style, path):
    if style == "ts":
        torch.onnx.export(net, xs, path, input_names=names, output_names=["loss"], dynamo=False, opset_version=17,
                          do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING)
    else:
        torch.onnx.export(net, xs, path, input_names=names, output_names=["loss"], dynamo=True,
                          external_data=False, optimize=(style == "opt"))


def build(arch, builders=ARCHS):
    """The peft model of `arch` in train mode and its inputs, from seed 0: the same weights every call."""
    torch.manual_seed(0)
    cls, cfg, targets, keys, xs, styles, notes, *more = builders[arch]()
    peft_args = more[0] if more else {}
    cfg._attn_implementation = "eager"
    base = cls(cfg).float()
    peft_args = dict(peft_args)
    if peft_args.pop("peft_type", "LORA") == "IA3":
        tuner = IA3Config(target_modules=targets, init_ia3_weights=False, **peft_args)
        described = dict(peft_type="IA3", init_ia3_weights=False, target_modules=targets, **peft_args)
    else:
        tuner = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=targets, init_lora_weights=False,
                           fan_in_fan_out=(arch == "gpt2"), **peft_args)
        described = dict(r=8, alpha=16, dropout=0.0, init_lora_weights=False, target_modules=targets, **peft_args)
    m = get_peft_model(base, tuner)
    m.train()
    return m, cls, cfg, keys, xs, styles, notes, described


def run(arch, out, builders=ARCHS):
    m, cls, cfg, keys, xs, styles, notes, described = build(arch, builders)
    net = WithLoss(m, keys)
    d = os.path.join(out, arch)
    os.makedirs(d, exist_ok=True)
    names = [f"input_{i}" for i in range(len(xs))]
    trainable = [(n, p) for n, p in m.named_parameters() if p.requires_grad]
    before = {n: p.detach().clone() for n, p in m.named_parameters()}
    # A train-mode forward (and a TorchScript trace) updates BatchNorm's running statistics: each
    # export and the trajectory start from the initial buffers, so fbl's plan starts where
    # PyTorch's 10 steps did.
    initial_buffers = {n: b.detach().clone() for n, b in m.named_buffers()}

    def restore_buffers():
        with torch.no_grad():
            for n, b in m.named_buffers():
                b.copy_(initial_buffers[n])

    # PyTorch's first step: the loss and every trainable's gradient.
    m.zero_grad()
    loss = net(*xs)
    loss.backward()
    step1_buffers = {n: b.detach().clone().contiguous() for n, b in m.named_buffers()
                     if b.is_floating_point() and not torch.equal(b, initial_buffers[n])}
    td = os.path.join(d, "test_data_set_0")
    gd = os.path.join(d, "grads")
    os.makedirs(td, exist_ok=True)
    os.makedirs(gd, exist_ok=True)
    for i, x in enumerate(xs):
        save_tensor(os.path.join(td, f"input_{i}.pb"), names[i], x)
    save_tensor(os.path.join(td, "output_0.pb"), "loss", loss)
    for j, (n, p) in enumerate(trainable):
        save_tensor(os.path.join(gd, f"grad_{j}.pb"), n, p.grad)
    m.zero_grad()

    meta = dict(arch=arch, model_class=cls.__name__, notes=notes, loss=float(loss),
                versions=dict(torch=torch.__version__, transformers=T.__version__, peft=peft.__version__,
                              onnx=onnx.__version__),
                lora=described,
                inputs=[dict(name=names[i], feeds=keys[i], dtype=str(x.dtype), shape=list(x.shape))
                        for i, x in enumerate(xs)],
                params=sum(p.numel() for p in m.parameters()), trainable=[n for n, _ in trainable],
                config=cfg.to_diff_dict(), styles={})
    for style in styles:
        sd = os.path.join(d, style)
        os.makedirs(sd, exist_ok=True)
        path = os.path.join(sd, "model.onnx")
        try:
            restore_buffers()
            export(net, xs, names, style, path)
            if style == "ts":  # the trace ran a train-mode forward and exported the buffers it updated
                reset_initializers(path, {"m." + n: b for n, b in initial_buffers.items()})
            mp = slim(path, style)
            meta["styles"][style] = dict(ok=True, opset=[(o.domain, o.version) for o in mp.opset_import],
                                         nodes=len(mp.graph.node), bytes=os.path.getsize(path),
                                         op_counts=dict(Counter(n.op_type for n in mp.graph.node).most_common()))
            print(f"{arch}/{style}: {len(mp.graph.node)} nodes, {os.path.getsize(path) / 1e3:.0f} kB", flush=True)
        except Exception as e:  # an exporter's failure is a result: kept in meta.json
            for f in os.listdir(sd):
                os.remove(os.path.join(sd, f))
            os.rmdir(sd)
            msg = first_line(e)
            if e.__cause__ is not None:  # torch.export's own reason sits under the exporter's wrapper
                msg += f" (caused by {first_line(e.__cause__)})"
            meta["styles"][style] = dict(ok=False, error=msg)
            print(f"{arch}/{style}: FAILED {msg}", flush=True)
            traceback.print_exc(limit=2)
        for f in os.listdir(sd) if os.path.isdir(sd) else []:
            if f != "model.onnx":  # an exporter's side file (external data) would be a second copy
                os.remove(os.path.join(sd, f))

    # The exports must not have touched the weights the trajectory starts from.
    for n, p in m.named_parameters():
        assert torch.equal(p.detach(), before[n]), f"export changed {n}"

    # 10 AdamW steps on the one batch, as `fblc run-ref --steps 10` and fbl-train do: step k's loss
    # is computed before step k's update.
    restore_buffers()
    optim = torch.optim.AdamW([p for _, p in trainable], lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
    losses = []
    for _ in range(STEPS):
        optim.zero_grad()
        step_loss = net(*xs)
        step_loss.backward()
        optim.step()
        losses.append(float(step_loss))
    json.dump(dict(optimizer="adamw", lr=LR, betas=list(BETAS), eps=EPS, weight_decay=WEIGHT_DECAY, steps=STEPS,
                   losses=losses), open(os.path.join(d, "trajectory.json"), "w"), indent=1)
    updated = {n: b.detach().clone().contiguous() for n, b in m.named_buffers()
               if b.is_floating_point() and not torch.equal(b, initial_buffers[n])}
    if updated:
        safetensors.torch.save_file(updated, os.path.join(d, "buffers.safetensors"))
        safetensors.torch.save_file(step1_buffers, os.path.join(d, "buffers_step1.safetensors"))
    m.save_pretrained(os.path.join(d, "adapter"))
    os.remove(os.path.join(d, "adapter", "README.md"))  # peft's model card template
    sort_target_modules(os.path.join(d, "adapter", "adapter_config.json"))
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"{arch}: loss {float(loss):.6f} -> {losses[-1]:.6f} after {STEPS} steps", flush=True)


def main(builders):
    """OUT [ARCH,...] from the command line: exports every architecture of `builders`, or the listed ones."""
    out = sys.argv[1]
    which = sys.argv[2].split(",") if len(sys.argv) > 2 else list(builders)
    torch.set_num_threads(1)
    failed = []
    for arch in which:
        try:
            run(arch, out, builders)
        except Exception:
            traceback.print_exc()
            failed.append(arch)
    sys.exit(f"failed: {failed}" if failed else 0)


if __name__ == "__main__":
    main(ARCHS)
