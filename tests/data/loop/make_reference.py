"""PyTorch's training-loop trajectories for the corpus's GPT-2 (tests/data/corpus/gpt2):
torch.optim.AdamW with transformers' schedules, clip_grad_norm_ and gradient accumulation.

    $HOME/venv-export/bin/python tests/data/loop/make_reference.py tests/data/loop/gpt2_loop.json

(the venv of tests/data/corpus/README.md: torch 2.11, transformers 5.17, peft 0.21; CPU, fp32,
seed 0, so a rerun reproduces the file). It rebuilds the corpus's LoRA GPT-2 exactly as
tests/data/corpus/export_corpus.py does (and checks that its inputs and first loss are the stored
ones), then for every configuration below runs 20 optimizer steps and records each micro-batch's
loss before its update, each optimizer step's learning rate and gradient norm (before clipping).

Micro-batch j (0-based, counting every call of the train step) is the stored batch with every
input rolled by j % 4 positions along its last axis (torch.roll: element i moves to i + shift), so
that accumulation averages different gradients; tests/train/loop_test.cc and
tests/device/loop_device_test.cc feed the same batches.
"""
import json
import os
import sys

import torch
import transformers as T
from onnx import numpy_helper, TensorProto
from peft import LoraConfig, get_peft_model

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "corpus")
sys.path.insert(0, CORPUS)
import export_corpus as ec  # noqa: E402

STEPS = 20  # optimizer steps per configuration
LR, WD = 1e-2, 0.01

# name: fblc's flags (the same keys as `fblc compile` options, without the dashes).
CONFIGS = {
    "constant_warmup": dict(lr_schedule="constant", warmup_steps=5),
    "linear_warmup": dict(lr_schedule="linear", warmup_steps=5, total_steps=20),
    "cosine_warmup": dict(lr_schedule="cosine", warmup_steps=5, total_steps=20),
    "grad_accum": dict(grad_accum=4),
    "clip": dict(clip_grad_norm=0.4),
    "all": dict(grad_accum=4, clip_grad_norm=0.3, lr_schedule="cosine", warmup_steps=3, total_steps=20),
}


def read_tensor(path):
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return torch.from_numpy(numpy_helper.to_array(t).copy())


def build():
    torch.manual_seed(0)
    cls, cfg, targets, keys, xs, _, _ = ec.ARCHS["gpt2"]()
    cfg._attn_implementation = "eager"
    base = cls(cfg).float()
    lora = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=targets, init_lora_weights=False,
                      fan_in_fan_out=True)
    m = get_peft_model(base, lora)
    m.train()
    return m, ec.WithLoss(m, keys), xs


def micro_batch(xs, j):
    return [torch.roll(x, shifts=j % 4, dims=-1) for x in xs]


def scheduler(optim, c):
    kind, w, t = c.get("lr_schedule"), c.get("warmup_steps", 0), c.get("total_steps", 0)
    if kind == "constant":
        return T.get_constant_schedule_with_warmup(optim, num_warmup_steps=w)
    if kind == "linear":
        return T.get_linear_schedule_with_warmup(optim, num_warmup_steps=w, num_training_steps=t)
    if kind == "cosine":
        return T.get_cosine_schedule_with_warmup(optim, num_warmup_steps=w, num_training_steps=t)
    return None


def trajectory(c):
    m, net, xs = build()
    params = [p for _, p in m.named_parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=WD)
    sched = scheduler(optim, c)
    k = c.get("grad_accum", 1)
    losses, lrs, norms = [], [], []
    j = 0
    for _ in range(STEPS):
        optim.zero_grad()
        for _ in range(k):
            loss = net(*micro_batch(xs, j))
            (loss / k).backward() if k > 1 else loss.backward()
            losses.append(float(loss))
            j += 1
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params]))
        norms.append(float(norm))
        if c.get("clip_grad_norm"):
            torch.nn.utils.clip_grad_norm_(params, c["clip_grad_norm"])
        lrs.append(optim.param_groups[0]["lr"])
        optim.step()
        if sched is not None:
            sched.step()
    return dict(flags=dict(lr=LR, weight_decay=WD, **c), losses=losses, lrs=lrs, grad_norms=norms)


def main(out):
    m, net, xs = build()
    stored = [read_tensor(os.path.join(CORPUS, "gpt2", "test_data_set_0", f"input_{i}.pb")) for i in range(len(xs))]
    assert all(torch.equal(a, b) for a, b in zip(xs, stored)), "the rebuilt inputs differ from the corpus's"
    want = float(read_tensor(os.path.join(CORPUS, "gpt2", "test_data_set_0", "output_0.pb")))
    got = float(net(*xs))
    assert abs(got - want) <= 1e-6 * abs(want), f"the rebuilt model's loss {got} is not the corpus's {want}"
    doc = dict(model="corpus/gpt2/opt/model.onnx", steps=STEPS, roll="micro-batch j: inputs rolled by j % 4 along the last axis",
               versions=dict(torch=torch.__version__, transformers=T.__version__), configs={})
    for name, c in CONFIGS.items():
        doc["configs"][name] = trajectory(c)
        r = doc["configs"][name]
        print(f"{name}: loss {r['losses'][0]:.6f} -> {r['losses'][-1]:.6f}, grad norm {r['grad_norms'][0]:.4f}"
              f" -> {r['grad_norms'][-1]:.4f}, lr {r['lrs'][:3]} ... {r['lrs'][-1]:.2e}", flush=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(sys.argv[1])
