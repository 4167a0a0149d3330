#!/usr/bin/env bash
# Every command reads a model whose weights sit in model.onnx.data (tests/data/llama-tiny-external,
# llama-tiny with every initializer moved out): inspect, run-ref (the same losses as llama-tiny's
# inline file), compile (whose weights file holds the external data), and fbl-train on them.
# Args: BUILD_DIR SOURCE_DIR.
set -euo pipefail
build=${1:?build dir}; src=${2:?source dir}
bin=${FBL_BIN:-$build/bin}
work=$(mktemp -d /tmp/fbl-external.XXXXXX)
trap 'rm -rf "$work" 2>/dev/null || true' EXIT
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$work/pocl}
ext=$src/tests/data/llama-tiny-external/model.onnx
inline=$src/tests/data/llama-tiny/model.onnx
data=$src/tests/data/llama-tiny/test_data_set_0

"$bin/fblc" inspect "$ext" > "$work/inspect.txt"
grep -q '^parameters' "$work/inspect.txt"

want=$("$bin/fblc" run-ref "$inline" --data "$data" --steps 2)
got=$("$bin/fblc" run-ref "$ext" --data "$data" --steps 2)
echo "inline:   $(echo $want)"
echo "external: $(echo $got)"
if [[ "$got" != "$want" ]]; then echo "FAIL: run-ref gives other losses on the external-data file"; exit 1; fi

"$bin/fblc" compile "$ext" --profile "$src/profiles/pocl-cpu.json" -o "$work/m.fbp" >/dev/null
"$bin/fbl-train" "$work/m.fbp" --weights "$work/m.safetensors" --data "$data" --steps 2 --cache-dir "$work/cache" \
  > "$work/train.txt" 2>"$work/train.err" || { cat "$work/train.err"; echo "FAIL: fbl-train"; exit 1; }
grep '^done: step 2' "$work/train.txt"
echo PASS
