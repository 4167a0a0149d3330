#!/usr/bin/env python3
"""The FLOPs a plan executes for its rank-side products (LoRA's A and B sides: min(M, N) <= 16).

    python3 scripts/rank_side_flops.py PLAN.fbp

A tiled product (rtile_matmul.cl) computes whole TM x TN tiles, so its executed FLOPs are
2 x M x N x K with M and N rounded up to the tile (times the batch); a narrow product
(rtile_matmul_narrow.cl) pads only to its 4 x 4 blocks, counted here as its useful FLOPs. The
sizes are read from each product kernel's #defines in the plan's program (docs/plan-format.md).
"""
import json
import math
import re
import struct
import sys


def load_plan(path):
    data = open(path, "rb").read()
    if data[:8] != b"FBLPLAN\n":
        sys.exit(f"{path}: not an fbl plan")
    _version, _zero, json_len, _blob_len = struct.unpack("<IIQQ", data[8:32])
    return json.loads(data[32:32 + json_len])


def kernel_defines(program):
    """Kernel name -> its #defines, for each kernel of the program."""
    out, previous = {}, 0
    for m in re.finditer(r"kernel void (?:WG_SIZE )?(\w+)\(", program):
        out[m[1]] = dict(re.findall(r"#define (\w+) ([^\n]+)", program[previous:m.start()]))
        previous = m.end()
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    plan = load_plan(sys.argv[1])
    defines = kernel_defines(plan["program"])
    useful = executed = tiled = narrow = 0
    for launch in plan["launches"]:
        d = defines.get(plan["kernels"][launch["kernel"]], {})
        if not all(k in d for k in ("M", "N", "K", "TM", "TN")):
            continue
        value = lambda k: int(d[k].strip().rstrip("u"))
        m, n, k, tm, tn = (value(x) for x in ("M", "N", "K", "TM", "TN"))
        if min(m, n) > 16:
            continue
        if "BM" in d:  # the narrow kernel
            narrow += 1
            useful += 2 * m * n * k
            executed += 2 * m * n * k
            continue
        tiled += 1
        cols = value("N1") - value("N0")
        batch = launch["global"][2] // value("SPLIT") if len(launch["global"]) > 2 else 1
        useful += 2 * m * cols * k * batch
        executed += 2 * math.ceil(m / tm) * tm * math.ceil(cols / tn) * tn * k * batch
    print(f"rank-side products: {tiled} tiled launches, {narrow} narrow launches; useful {useful / 1e9:.1f} GFLOP, "
          f"executed {executed / 1e9:.1f} GFLOP ({executed / max(useful, 1):.1f}x)")


if __name__ == "__main__":
    main()
