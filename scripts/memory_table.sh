#!/usr/bin/env bash
# The Table-3 zoo models at full size under the phone profiles: each plan's memory against the
# profile's limits (the compile report's `memory` block), without and with every forward segment
# recomputed, as a markdown table.
#   scripts/memory_table.sh OUT [BUILD]   (BUILD defaults to build/)
# Writes OUT/table.md and OUT/memory.json (the reports' memory blocks: condense_reports.py). Compile only: no device.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:?usage: scripts/memory_table.sh OUT [BUILD]}
bin=${2:-build}/bin/fblc
models="llama3.2-1b qwen2.5-1.5b gemma2-2b bert-large vit-large whisper-large stable-diffusion-1.5"
profiles="adreno-830 adreno-730 mali-g925"
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for m in $models; do
  "$bin" zoo "$m" -o "$tmp/$m.onnx" > /dev/null
  for p in $profiles; do
    # --allow-over-limit: these plans are measured, not shipped; over the limit is the finding.
    # --no-weights: full-size zoo models have none. fp32 and no budget, whatever the profile's
    # compile_defaults: the table measures what the fp32 model needs.
    "$bin" compile "$tmp/$m.onnx" --profile "profiles/$p.json" --allow-over-limit --no-weights -o "$tmp/p.fbp" \
        --base-weights fp32 --memory-budget none --report "$out/$m-$p.json" > /dev/null
    # Every forward segment recomputed: the lowest peak --memory-budget can ask for.
    "$bin" compile "$tmp/$m.onnx" --profile "profiles/$p.json" --allow-over-limit --no-weights -o "$tmp/p.fbp" \
        --base-weights fp32 --memory-budget none --recompute -1 --report "$out/$m-$p-recompute.json" > /dev/null
  done
  rm -f "$tmp"/*
done
python3 - "$out" $models -- $profiles > "$out/table.md" <<'PY'
import json, sys
out = sys.argv[1]
split = sys.argv.index("--")
models, profiles = sys.argv[2:split], sys.argv[split + 1:]
gb = lambda b: f"{b / 1e9:.2f} GB"
print("| model | profile | largest allocation (max_alloc_bytes) | allocations | peak (app budget) | "
      "frozen weights | trainables + optimizer state | transient peak | peak, all recomputed (segments) | "
      "its transient peak |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for m in models:
    for p in profiles:
        r = json.load(open(f"{out}/{m}-{p}.json"))["memory"]
        rr = json.load(open(f"{out}/{m}-{p}-recompute.json"))
        lim, budget, by = r["limits"]["max_alloc_bytes"], r["limits"]["app_budget_bytes"], r["by_role"]
        print(f"| {m} | {p} | {gb(r['largest_allocation_bytes'])} ({gb(lim) if lim else 'unknown'}) | "
              f"{r['allocations']} | {gb(r['peak_bytes'])} ({gb(budget) if budget else 'unknown'}) | "
              f"{gb(by['frozen_weights'])} | {gb(by['trainables'] + by['optimizer_state'])} | "
              f"{gb(by['transient_peak'])} | {gb(rr['memory']['peak_bytes'])} ({rr['recompute']['segments']}) | "
              f"{gb(rr['memory']['by_role']['transient_peak'])} |")
PY
scripts/condense_reports.py "$out" memory recompute loss_chunks
cat "$out/table.md"
