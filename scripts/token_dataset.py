#!/usr/bin/env python3
"""Writes a small token dataset for fbl-train as a .npy file (standard library only).

Each sample is one batch of a causal LM plan with input i64[1, SEQ]: a run of token ids
start, start + d, start + 2d, ... (mod VOCAB), start and d in [1, 4] drawn from Python's
random.Random(SEED), so a model has something to learn and a held-out sample measures whether
it did. Usage: scripts/token_dataset.py OUT.npy [--samples N] [--seq T] [--vocab V] [--seed S]
The file is numpy.save's version 1.0 format, shape (N, 1, T), dtype '<i8' (docs/runtime.md,
"Datasets").
"""
import argparse
import random
import struct


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--samples", type=int, default=64)
    p.add_argument("--seq", type=int, default=16)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    rng = random.Random(a.seed)
    ids = []
    for _ in range(a.samples):
        start, step = rng.randrange(a.vocab), rng.randint(1, 4)
        ids += [(start + step * k) % a.vocab for k in range(a.seq)]
    header = "{'descr': '<i8', 'fortran_order': False, 'shape': (%d, 1, %d), }" % (a.samples, a.seq)
    header += " " * ((-(10 + len(header) + 1)) % 64) + "\n"  # numpy aligns the data to 64 bytes
    with open(a.out, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack("<%dq" % len(ids), *ids))


if __name__ == "__main__":
    main()
