#!/usr/bin/env bash
# fbl-example (examples/fbl_example.c) on every export of the architecture corpus: each is
# compiled for PoCL and trained 2 steps through the C API alone, the inputs filled from what the
# plan describes (fbl_input_info, fbl_input_bounds). Prints one line per export and a count.
#   scripts/example_corpus.sh [BUILD] [STYLE]   (BUILD defaults to build/, STYLE to opt)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${1:-build}/bin
style=${2:-opt}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ok=0 failed=0 refused=0
for model in tests/data/corpus/*/"$style"/model.onnx; do
  arch=$(basename "$(dirname "$(dirname "$model")")")
  out="$work/$arch"
  mkdir -p "$out"
  if ! msg=$("$bin/fblc" compile "$model" --profile profiles/pocl-cpu.json -o "$out/m.fbp" 2>&1); then
    echo "$arch/$style: compile refused: $(echo "$msg" | grep -m1 '^error' || echo "$msg" | tail -1)"
    refused=$((refused + 1))
    continue
  fi
  if log=$("$bin/fbl-example" "$out/m.fbp" "$out/m.safetensors" "$out" --steps 2 --cache-dir "$work/cache" 2>&1); then
    echo "$arch/$style: $(echo "$log" | grep -c '^input ') inputs, $(echo "$log" | tail -1)"
    ok=$((ok + 1))
  else
    echo "$arch/$style: FAILED: $(echo "$log" | grep -m1 '^error' || echo "$log" | tail -1)"
    failed=$((failed + 1))
  fi
done
echo "$ok trained, $failed failed, $refused refused by the compiler"
[ "$failed" -eq 0 ]
