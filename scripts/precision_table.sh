#!/usr/bin/env bash
# The Table-3 zoo models at full size on the Adreno 830 profile at each precision (`fblc compile
# --precision`: what the backward pass's saved activations are kept in) and frozen base
# (`--base-weights`), every forward segment recomputed: each plan's peak, largest allocation and
# frozen weights, as a markdown table.
#   scripts/precision_table.sh OUT [BUILD]   (BUILD defaults to build/)
# Writes OUT/table.md and OUT/memory.json (the reports' memory blocks: condense_reports.py). Compile only: no device.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:?usage: scripts/precision_table.sh OUT [BUILD]}
bin=${2:-build}/bin/fblc
models="llama3.2-1b qwen2.5-1.5b gemma2-2b bert-large vit-large whisper-large stable-diffusion-1.5"
# precision:base
configs="fp32:fp32 fp32:int4 fp16:fp16 fp16:int8 fp16:int4"
profile=adreno-830
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for m in $models; do
  "$bin" zoo "$m" -o "$tmp/$m.onnx" > /dev/null
  for c in $configs; do
    # --allow-over-limit: these plans are measured, not shipped; over the limit is the finding.
    # --no-weights: full-size zoo models have none (the encodings need no values).
    "$bin" compile "$tmp/$m.onnx" --profile "profiles/$profile.json" --allow-over-limit --no-weights --recompute -1 --memory-budget none \
        --precision "${c%%:*}" --base-weights "${c##*:}" -o "$tmp/p.fbp" --report "$out/$m-${c%%:*}-${c##*:}.json" > /dev/null
  done
  rm -f "$tmp"/*
done
python3 - "$out" "$profile" $models -- $configs > "$out/table.md" <<'PY'
import json, sys
out, profile = sys.argv[1], sys.argv[2]
split = sys.argv.index("--")
models, configs = sys.argv[3:split], sys.argv[split + 1:]
gb = lambda b: f"{b / 1e9:.2f} GB"
print(f"Every forward segment recomputed, profile {profile}: peak / largest allocation / frozen weights.\n")
print("| model | " + " | ".join("precision {}, base {}".format(*c.split(":")) for c in configs) +
      " | weights encoded (int4) |")
print("| --- |" + " ---: |" * len(configs) + " ---: |")
for m in models:
    cells = []
    for c in configs:
        r = json.load(open(f"{out}/{m}-{c.replace(':', '-')}.json"))
        mem = r["memory"]
        over = "" if mem["largest_allocation_bytes"] <= (mem["limits"]["max_alloc_bytes"] or 1 << 62) else " (over the limit)"
        cells.append(f"{gb(mem['peak_bytes'])} / {gb(mem['largest_allocation_bytes'])}{over} / "
                     f"{gb(mem['by_role']['frozen_weights'])}")
    enc = json.load(open(f"{out}/{m}-fp16-int4.json"))["storage"]["base_weights"]
    print(f"| {m} | " + " | ".join(cells) + f" | {enc['encoded']} ({len(enc['left_f32'])} left f32) |")
PY
scripts/condense_reports.py "$out" memory storage.base_weights recompute loss_chunks precision
cat "$out/table.md"
