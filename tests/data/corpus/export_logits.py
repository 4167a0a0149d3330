#!/usr/bin/env python3
"""PyTorch's logits for corpus exports: OUT/ARCH/logits.pb, the model's output before its loss
for test_data_set_0's batch, from the model export_corpus.py builds (seed 0: the same weights,
checked against the loss it saved in meta.json). tests/device/outputs_test.cc compares what
`fblc compile --outputs` keeps with them.

    python3 export_logits.py OUT ARCH[,ARCH...]
"""
import json
import os
import sys

import torch

import export_corpus as E


def export(arch, out):
    m, _, _, keys, xs, _, _, _ = E.build(arch)
    with torch.no_grad():
        o = m(**dict(zip(keys, xs)))
    meta = json.load(open(os.path.join(out, arch, "meta.json")))
    if abs(float(o.loss) - meta["loss"]) > 1e-6 * max(1.0, abs(meta["loss"])):
        sys.exit(f"{arch}: loss {float(o.loss)} is not meta.json's {meta['loss']}: not the exported weights")
    E.save_tensor(os.path.join(out, arch, "logits.pb"), "logits", o.logits.contiguous())
    print(f"{arch}: logits {list(o.logits.shape)}, loss {float(o.loss):.6f} as exported", flush=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    for a in sys.argv[2].split(","):
        export(a, sys.argv[1])
