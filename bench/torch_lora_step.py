#!/usr/bin/env python3
"""PyTorch eager fp32 reference for one LoRA training step of the zoo's decoder graphs.

Runs where torch and a CUDA GPU exist (it needs neither transformers nor peft), so the
model is written out here with plain torch, following compiler/zoo/zoo_llama.cc: embedding
Gather, per layer RMSNorm, q/k/v/o LoRA linears (r=8, alpha=16), RoPE with rotate_half, GQA by
repeating K/V heads, causal softmax attention, SwiGLU MLP with LoRA on gate/up/down, final
RMSNorm, lm_head, cross-entropy on the ids shifted left. --model picks the zoo config:
llama3.2-1b, qwen2.5-1.5b (q/k/v bias) or gemma2-2b (GeGLU, sandwich norms with 1 + w scales,
embeddings scaled by sqrt(hidden), attention softcap 50 applied before the mask, final logit
softcap 30, query_pre_attn_scalar 256), as compiler/zoo/zoo.cc builds them. Base weights are frozen random values;
only the LoRA factors train, with AdamW. TF32 is off (fp32 like the OpenCL kernels). --bf16 stores
the frozen weights in bfloat16 and runs under bf16 autocast (the LoRA factors and AdamW stay
fp32); --sdpa computes attention with F.scaled_dot_product_attention (causal, no softcap).

Prints one JSON object: median milliseconds per step (forward + loss + backward + AdamW) over
--steps timed steps after --warmup, and the configuration. Nothing here is used at build or test
time; docs/results/speed-h200.md quotes its output.
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint


class LoraLinear(nn.Module):
    def __init__(self, n_in, n_out, r, alpha, bias=False):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, n_in) / math.sqrt(n_in), requires_grad=False)
        self.bias = nn.Parameter(torch.zeros(n_out), requires_grad=False) if bias else None
        self.lora_A = nn.Parameter(torch.randn(r, n_in) / math.sqrt(n_in))
        self.lora_B = nn.Parameter(torch.zeros(n_out, r))
        self.scale = alpha / r

    def forward(self, x):
        return F.linear(x, self.weight, self.bias) + F.linear(F.linear(x, self.lora_A), self.lora_B) * self.scale


class RmsNorm(nn.Module):
    def __init__(self, n, eps, offset=False):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n) if offset else torch.ones(n), requires_grad=False)
        self.eps = eps
        self.offset = offset  # Gemma scales by 1 + w

    def forward(self, x):
        w = 1.0 + self.weight if self.offset else self.weight
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * w


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Layer(nn.Module):
    def __init__(self, c, r, alpha):
        super().__init__()
        h, d = c["hidden"], c["head_dim"]
        self.c = c
        g = c.get("gemma", False)
        self.norm1, self.norm2 = RmsNorm(h, c["eps"], g), RmsNorm(h, c["eps"], g)
        if g:  # sandwich norms: after attention and after the MLP, before each residual add
            self.post_attn, self.post_ffn = RmsNorm(h, c["eps"], g), RmsNorm(h, c["eps"], g)
        bias = c.get("qkv_bias", False)
        self.q = LoraLinear(h, c["heads"] * d, r, alpha, bias)
        self.k = LoraLinear(h, c["kv_heads"] * d, r, alpha, bias)
        self.v = LoraLinear(h, c["kv_heads"] * d, r, alpha, bias)
        self.o = LoraLinear(c["heads"] * d, h, r, alpha)
        self.gate = LoraLinear(h, c["ffn"], r, alpha)
        self.up = LoraLinear(h, c["ffn"], r, alpha)
        self.down = LoraLinear(c["ffn"], h, r, alpha)

    sdpa = False

    def forward(self, x, cos, sin, mask):
        c = self.c
        b, s, _ = x.shape
        d, nh, nkv = c["head_dim"], c["heads"], c["kv_heads"]
        h = self.norm1(x)
        q = self.q(h).view(b, s, nh, d).transpose(1, 2)
        k = self.k(h).view(b, s, nkv, d).transpose(1, 2)
        v = self.v(h).view(b, s, nkv, d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(nh // nkv, dim=1)
        v = v.repeat_interleave(nh // nkv, dim=1)
        if self.sdpa:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1 / math.sqrt(c.get("query_scalar", d)))
        else:
            scores = q @ k.transpose(-1, -2) / math.sqrt(c.get("query_scalar", d))
            if c.get("attn_softcap"):
                scores = torch.tanh(scores / c["attn_softcap"]) * c["attn_softcap"]
            scores = scores + mask
            a = scores.softmax(-1) @ v
        a = a.transpose(1, 2).reshape(b, s, nh * d)
        a = self.o(a)
        if c.get("gemma"):
            x = x + self.post_attn(a)
            h = self.norm2(x)
            return x + self.post_ffn(self.down(F.gelu(self.gate(h), approximate="tanh") * self.up(h)))
        x = x + a
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, c, layers, r, alpha, checkpoint=False):
        super().__init__()
        self.c = c
        self.checkpoint = checkpoint
        self.embed = nn.Parameter(torch.randn(c["vocab"], c["hidden"]) * 0.02, requires_grad=False)
        self.layers = nn.ModuleList(Layer(c, r, alpha) for _ in range(layers))
        self.norm = RmsNorm(c["hidden"], c["eps"], c.get("gemma", False))

    def forward(self, ids):
        c = self.c
        s = ids.shape[1]
        inv = 1.0 / (c["theta"] ** (torch.arange(0, c["head_dim"], 2, device=ids.device).float() / c["head_dim"]))
        ang = torch.outer(torch.arange(s, device=ids.device).float(), inv)
        ang = torch.cat((ang, ang), dim=-1)
        cos, sin = ang.cos()[None, None], ang.sin()[None, None]
        mask = torch.full((s, s), float("-inf"), device=ids.device).triu(1)
        x = F.embedding(ids, self.embed)
        if c.get("gemma"):
            x = x * math.sqrt(c["hidden"])
        for layer in self.layers:
            if self.checkpoint:  # per-layer activation checkpointing, as HF's gradient_checkpointing
                x = torch.utils.checkpoint.checkpoint(layer, x, cos, sin, mask, use_reentrant=False)
            else:
                x = layer(x, cos, sin, mask)
        logits = F.linear(self.norm(x), self.embed)  # tied lm_head, as all three configs
        if c.get("final_softcap"):
            logits = torch.tanh(logits / c["final_softcap"]) * c["final_softcap"]
        labels = F.pad(ids[:, 1:], (0, 1), value=-100)
        return F.cross_entropy(logits.view(-1, c["vocab"]), labels.reshape(-1), ignore_index=-100)


LLAMA_3_2_1B = {"hidden": 2048, "heads": 32, "kv_heads": 8, "head_dim": 64, "ffn": 8192,
                "vocab": 128256, "eps": 1e-5, "theta": 500000.0, "layers": 16}
QWEN_2_5_1_5B = {"hidden": 1536, "heads": 12, "kv_heads": 2, "head_dim": 128, "ffn": 8960,
                 "vocab": 151936, "eps": 1e-6, "theta": 1000000.0, "qkv_bias": True, "layers": 28}
GEMMA_2_2B = {"hidden": 2304, "heads": 8, "kv_heads": 4, "head_dim": 256, "ffn": 9216,
              "vocab": 256000, "eps": 1e-6, "theta": 10000.0, "gemma": True, "attn_softcap": 50.0,
              "final_softcap": 30.0, "query_scalar": 256.0, "layers": 26}
CONFIGS = {"llama3.2-1b": LLAMA_3_2_1B, "qwen2.5-1.5b": QWEN_2_5_1_5B, "gemma2-2b": GEMMA_2_2B}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=sorted(CONFIGS), default="llama3.2-1b")
    ap.add_argument("--layers", type=int, default=0, help="0: the model's full depth")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--checkpoint", action="store_true", help="recompute each layer in the backward pass")
    ap.add_argument("--bf16", action="store_true", help="frozen weights in bfloat16, bf16 autocast")
    ap.add_argument("--sdpa", action="store_true", help="attention by F.scaled_dot_product_attention")
    a = ap.parse_args()
    if a.sdpa and CONFIGS[a.model].get("attn_softcap"):
        ap.error("--sdpa has no attention softcap: not for " + a.model)
    Layer.sdpa = a.sdpa
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    dev = "cuda"
    cfg = CONFIGS[a.model]
    layers = a.layers or cfg["layers"]
    model = Llama(cfg, layers, a.rank, 2 * a.rank, a.checkpoint).to(dev)
    if a.bf16:
        for p in model.parameters():
            if not p.requires_grad:
                p.data = p.data.to(torch.bfloat16)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0)
    ids = torch.randint(0, cfg["vocab"], (a.batch, a.seq), device=dev)
    times = []
    for i in range(a.warmup + a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.bf16):
            loss = model(ids)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    print(json.dumps({"model": a.model + " (plain torch, LoRA q,k,v,o,gate,up,down)", "layers": layers,
                      "seq": a.seq, "batch": a.batch, "lora_rank": a.rank, "dtype": "bf16 frozen weights, bf16 autocast" if a.bf16 else "float32, TF32 off",
                      "sdpa": a.sdpa,
                      "checkpoint": a.checkpoint,
                      "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                      "trainable_params": sum(p.numel() for p in params),
                      "step_ms_median": 1e3 * statistics.median(times), "step_ms_min": 1e3 * min(times),
                      "loss": float(loss.item()), "peak_mem_bytes": torch.cuda.max_memory_allocated()}))


if __name__ == "__main__":
    main()
