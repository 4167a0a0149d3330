"""Measures fbl against the corpus's PyTorch references; not a test.

    $HOME/venv-export/bin/python tests/data/corpus/measure.py BUILD_DIR [OUT.json] [ARCH/STYLE,...]

For every export in tests/data/corpus, or in FBL_CORPUS (a folder export_heldout.py wrote), or the
listed ones, with the binaries of BUILD_DIR (FBL_COMPILE_FLAGS: more flags for step 3's compile):
  1. `fblc run-ref --dump`: the first step's loss and worst gradient error against PyTorch;
  2. `fblc run-ref --steps 10` with the trajectory's AdamW settings: worst relative loss difference;
  3. `fblc compile` for PoCL (profiles/pocl-cpu.json), then `fbl-train --steps 10 --dump-grads
     --export-adapter`: the first step's errors on the device, the worst relative loss difference
     over the trajectory, and the exported adapters against peft's (worst error scaled by the
     tensor's max-abs);
     Where the model has buffers.safetensors (BatchNorm's running statistics after PyTorch's 10
     steps) and buffers_step1.safetensors (after the first): a 1-step and the 10-step checkpoint's
     updated buffers against them, a running mean's error in units of its channel's running
     standard deviation (a mean near 0 has no relative error to speak of) and a running
     variance's relative to itself;
  4. where torch and peft import (the export venv): fbl's exported adapter loaded by
     `PeftModel.from_pretrained` onto the base model, as export_corpus.py builds it, and its loss on
     the batch against the loss with peft's own saved adapter loaded the same way.
Gradient errors are max|fbl - torch| / max|torch| per tensor, the worst over the trainables.
Prints a markdown table; OUT.json keeps every figure. Needs numpy, onnx and safetensors.
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper
from safetensors.numpy import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
# Another folder of the same layout (export_heldout.py's) with FBL_CORPUS=DIR.
CORPUS = os.path.abspath(os.environ.get("FBL_CORPUS", HERE))
STYLES = ["noopt", "opt", "ts"]
# More `fblc compile` flags for step 3, e.g. FBL_COMPILE_FLAGS="--recompute -1".
COMPILE_FLAGS = os.environ.get("FBL_COMPILE_FLAGS", "").split()


def tensor(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.name, numpy_helper.to_array(t)


def first_step_errors(arch, dump):
    """Loss error and worst gradient error of a dump (loss.pb, grads/<initializer>.pb)."""
    _, want_loss = tensor(os.path.join(CORPUS, arch, "test_data_set_0", "output_0.pb"))
    _, loss = tensor(os.path.join(dump, "loss.pb"))
    mine = {}
    for p in glob.glob(os.path.join(dump, "grads", "*.pb")):
        name, a = tensor(p)
        mine[name[2:] if name.startswith("m.") else name] = a
    worst, compared = 0.0, 0
    for p in glob.glob(os.path.join(CORPUS, arch, "grads", "*.pb")):
        name, want = tensor(p)
        if name not in mine or mine[name].shape != want.shape:
            return dict(error=f"no gradient of {name} in PyTorch's shape")
        worst = max(worst, float(np.abs(mine[name] - want).max() / np.abs(want).max()))
        compared += 1
    return dict(loss_error=abs(float(loss) - float(want_loss)), grad_error=worst, compared=compared)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def error_line(out):
    lines = [l for l in out.splitlines() if l.startswith("error")]
    return lines[0] if lines else out.strip().splitlines()[-1] if out.strip() else "failed"


def worst_relative(losses, want):
    """Relative to PyTorch's loss, absolute where that is below 1e-3 (a memorized batch reaches 0)."""
    if len(losses) != len(want):
        return None
    return max(abs(a - b) / max(abs(b), 1e-3) for a, b in zip(losses, want))


def buffer_error(checkpoint, reference):
    """Worst updated-buffer error of a checkpoint against PyTorch's buffers (see the docstring)."""
    if not os.path.exists(checkpoint):
        return "no checkpoint"
    mine, want = load_file(checkpoint), load_file(reference)
    missing = [k for k in want if "m." + k not in mine]
    if missing:
        return f"{len(missing)} of {len(want)} buffers missing"
    worst = 0.0
    for k, w in want.items():
        var = want.get(k[:-len("running_mean")] + "running_var") if k.endswith("running_mean") else w
        scale = np.sqrt(var) if k.endswith("running_mean") else var
        worst = max(worst, float((np.abs(mine["m." + k] - w) / np.maximum(scale, 1e-12)).max()))
    return worst


def measure(build, arch, style, tmp):
    model = os.path.join(CORPUS, arch, style, "model.onnx")
    data = os.path.join(CORPUS, arch, "test_data_set_0")
    traj = json.load(open(os.path.join(CORPUS, arch, "trajectory.json")))
    opt = ["--lr", str(traj["lr"]), "--weight-decay", str(traj["weight_decay"])]
    fblc, train = os.path.join(build, "bin", "fblc"), os.path.join(build, "bin", "fbl-train")
    row = dict(arch=arch, style=style)
    work = os.path.join(tmp, f"{arch}-{style}")
    os.makedirs(work, exist_ok=True)

    rc, out = run([fblc, "run-ref", model, "--data", data, "--dump", os.path.join(work, "ref")])
    row["ref"] = first_step_errors(arch, os.path.join(work, "ref")) if rc == 0 else dict(error=error_line(out))
    if rc == 0:
        rc, out = run([fblc, "run-ref", model, "--data", data, "--steps", str(traj["steps"])] + opt)
        losses = [float(x) for x in re.findall(r"^step \d+ loss (\S+)", out, re.M)]
        row["ref"]["trajectory"] = worst_relative(losses, traj["losses"])

    plan = os.path.join(work, "model.fbp")
    rc, out = run([fblc, "compile", model, "--profile", os.path.join(ROOT, "profiles", "pocl-cpu.json"), "-o", plan]
                  + opt + COMPILE_FLAGS)
    if rc != 0:
        row["pocl"] = dict(error=error_line(out))
        return row
    weights = plan[:-4] + ".safetensors"
    adapter = os.path.join(work, "adapter")
    os.makedirs(adapter, exist_ok=True)
    rc, out = run([train, plan, "--weights", weights, "--data", data, "--steps", str(traj["steps"]),
                   "--dump-grads", os.path.join(work, "dev"), "--checkpoint", os.path.join(work, "ten.ckpt"),
                   "--export-adapter", adapter])
    if rc != 0:
        row["pocl"] = dict(error=error_line(out))
        return row
    row["pocl"] = first_step_errors(arch, os.path.join(work, "dev"))
    losses = [float(x) for x in re.findall(r"step \d+/\d+ \[[^\]]*\] loss (\S+)", out)]
    row["pocl"]["trajectory"] = worst_relative(losses, traj["losses"])
    mine = load_file(os.path.join(adapter, "adapter_model.safetensors"))
    peft = load_file(os.path.join(CORPUS, arch, "adapter", "adapter_model.safetensors"))
    if set(mine) != set(peft) or any(mine[k].shape != peft[k].shape for k in peft):
        row["pocl"]["adapter"] = "keys or shapes differ from peft's"
    else:
        row["pocl"]["adapter"] = max(float(np.abs(mine[k] - peft[k]).max() / np.abs(peft[k]).max()) for k in peft)
    if os.path.exists(os.path.join(CORPUS, arch, "buffers.safetensors")):
        run([train, plan, "--weights", weights, "--data", data, "--steps", "1", "--checkpoint", os.path.join(work, "one.ckpt")])
        for key, ckpt, ref in [("buffers_step1", "one.ckpt", "buffers_step1.safetensors"), ("buffers", "ten.ckpt", "buffers.safetensors")]:
            row["pocl"][key] = buffer_error(os.path.join(work, ckpt), os.path.join(CORPUS, arch, ref))
    loads = peft_loads(arch, adapter)
    if loads is not None:
        row["pocl"]["peft_loads"] = loads
    return row


def builders():
    """The corpus's model builders (export_corpus.py), and the held-out ones (export_heldout.py)."""
    sys.path.insert(0, HERE)
    import export_corpus
    out = dict(export_corpus.ARCHS)
    try:
        import export_heldout
        out.update(export_heldout.NEW)
    except ImportError:
        pass
    return out


def peft_loss(arch, adapter_dir):
    """The batch's loss with the adapter of adapter_dir loaded by peft onto the corpus's base model."""
    import torch
    from peft import PeftModel
    import export_corpus
    torch.manual_seed(0)  # as export_corpus.run: the builder's inputs, then the base model's weights
    cls, cfg, _, keys, xs, *_ = builders()[arch]()
    cfg._attn_implementation = "eager"
    m = PeftModel.from_pretrained(cls(cfg).float(), adapter_dir)
    m.train()
    with torch.no_grad():
        return float(export_corpus.WithLoss(m, keys)(*xs))


def peft_loads(arch, adapter):
    """Does peft load fbl's adapter as its own: the loss with it against the loss with peft's adapter."""
    try:
        import torch  # noqa: F401
        import peft  # noqa: F401
    except ImportError:
        return None
    try:
        mine, want = peft_loss(arch, adapter), peft_loss(arch, os.path.join(CORPUS, arch, "adapter"))
    except Exception as e:  # peft refusing fbl's adapter is the finding
        return dict(error=f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
    return dict(fbl=mine, peft=want, relative=abs(mine - want) / max(abs(want), 1e-3))


def fmt(x):
    return "-" if x is None else f"{x:.1e}" if isinstance(x, float) else str(x)


def cell(part, key):
    if "error" in part and key == "loss_error":
        return part["error"].replace("|", "/")[:160]
    return fmt(part.get(key))


def loads_cell(dev):
    """fbl's adapter in peft: its loss, and the relative difference to the loss with peft's adapter."""
    loads = (dev or {}).get("peft_loads")
    if loads is None:
        return "-"
    if "error" in loads:
        return loads["error"].replace("|", "/")[:160]
    return f"{loads['fbl']:.6f} ({loads['relative']:.1e} from peft's {loads['peft']:.6f})"


def main():
    build = os.path.abspath(sys.argv[1])
    out = sys.argv[2] if len(sys.argv) > 2 else None
    only = sys.argv[3].split(",") if len(sys.argv) > 3 else None
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for arch in sorted(os.listdir(CORPUS)):
            if not os.path.exists(os.path.join(CORPUS, arch, "meta.json")):
                continue
            for style in STYLES:
                key = f"{arch}/{style}"
                if not os.path.exists(os.path.join(CORPUS, arch, style, "model.onnx")) or (only and key not in only):
                    continue
                rows.append(measure(build, arch, style, tmp))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print("| export | run-ref loss err | run-ref worst grad err | run-ref 10-step worst rel | PoCL loss err | "
          "PoCL worst grad err | PoCL 10-step worst rel | PoCL adapter vs peft | loss with fbl's adapter in peft |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        ref, dev = r["ref"], r.get("pocl")
        print(f"| {r['arch']}/{r['style']} | {cell(ref, 'loss_error')} | {cell(ref, 'grad_error')} | "
              f"{cell(ref, 'trajectory')} | {cell(dev, 'loss_error')} | {cell(dev, 'grad_error')} | "
              f"{cell(dev, 'trajectory')} | {cell(dev, 'adapter')} | {loads_cell(dev)} |")
    for r in rows:
        if "buffers" in (r.get("pocl") or {}):
            print(f"{r['arch']}/{r['style']}: updated buffers against PyTorch's after 1 step "
                  f"{cell(r['pocl'], 'buffers_step1')}, after 10 steps {cell(r['pocl'], 'buffers')}")
    if out:
        json.dump(rows, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
