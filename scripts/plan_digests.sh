#!/bin/bash
# Plan digests of the test models under every strategy and storage, plus the H200 profile, and of
# three full-depth zoo models (narrow products, launch batching, images) on the H200, Adreno 830
# and Mali-G925 profiles: run before and after a refactor and diff the two files to prove the
# plans byte-identical. Plans only (--no-weights): llama-full and the zoo models have no weights.
# usage: scripts/plan_digests.sh OUTFILE [BUILD_DIR]   (run from the repository root)
set -u
out=$1
bin=${2:-build}/bin/fblc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: > "$out"
for m in llama-tiny bert-tiny vit-tiny bert-tiny-torchscript llama-tiny-folded llama-full; do
  for s in fblayout reuse explicit; do
    for st in buffer image; do
      if "$bin" compile tests/data/$m/model.onnx --profile profiles/pocl-cpu.json --strategy $s \
          --storage $st --no-weights -o "$tmp/p.fbp" > /dev/null 2>&1; then
        echo "$m $s $st $(sha256sum "$tmp/p.fbp" | cut -c1-16)" >> "$out"
      else
        echo "$m $s $st FAIL" >> "$out"
      fi
    done
  done
  if "$bin" compile tests/data/$m/model.onnx --profile profiles/nvidia-h200.json --no-weights -o "$tmp/p.fbp" \
      > /dev/null 2>&1; then
    echo "$m h200 $(sha256sum "$tmp/p.fbp" | cut -c1-16)" >> "$out"
  else
    echo "$m h200 FAIL" >> "$out"
  fi
done
for m in llama3.2-1b qwen2.5-1.5b gemma2-2b; do
  "$bin" zoo $m -o "$tmp/$m.onnx" > /dev/null 2>&1 || { echo "$m zoo FAIL" >> "$out"; continue; }
  for p in nvidia-h200 adreno-830 mali-g925; do
    # fp32 and no budget, whatever the profile's compile_defaults: the same plans from one change to the next.
    if "$bin" compile "$tmp/$m.onnx" --profile profiles/$p.json --allow-over-limit --no-weights --base-weights fp32 \
        --memory-budget none -o "$tmp/p.fbp" > /dev/null 2>&1; then
      echo "$m $p $(sha256sum "$tmp/p.fbp" | cut -c1-16)" >> "$out"
    else
      echo "$m $p FAIL" >> "$out"
    fi
  done
done
