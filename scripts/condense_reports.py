#!/usr/bin/env python3
"""Condenses a folder of `fblc compile --report` files into OUT/memory.json: per report (by file
stem), the blocks a results page cites, each under its last name (storage.base_weights:
base_weights), with model paths cut to their file names. The reports themselves are removed.
    scripts/condense_reports.py OUT BLOCK...   (e.g. memory recompute loss_chunks)"""
import json
import pathlib
import re
import sys

out, blocks = pathlib.Path(sys.argv[1]), sys.argv[2:]
reports = sorted(p for p in out.glob("*.json") if p.name != "memory.json")
if not reports:
    sys.exit(f"condense_reports.py: no reports in {out}; memory.json left as it is")
condensed = {}
for p in reports:
    r = json.loads(p.read_text())
    entry = {}
    for b in blocks:
        v = r
        for part in b.split("."):
            v = v.get(part) if isinstance(v, dict) else None
        if v is not None:
            entry[b.split(".")[-1]] = v
    condensed[p.stem] = entry
text = json.dumps(condensed, indent=1, sort_keys=True) + "\n"
# The scripts compile from a temporary folder; its path says nothing.
text = re.sub(r'/[^\s"\':]*/([^/\s"\':]+\.onnx)', r"\1", text)
(out / "memory.json").write_text(text)
for p in reports:
    p.unlink()
