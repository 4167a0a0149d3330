#!/usr/bin/env bash
# fbl-train --eval-data: the held-out loss is the forward phase alone. Before any step it equals
# the first step's training loss (same weights, same batch), bit for bit as printed; after a step
# on the same batch it is lower. Args: BUILD_DIR SOURCE_DIR.
set -euo pipefail
build=${1:?build dir}; src=${2:?source dir}
bin=${FBL_BIN:-$build/bin}
work=$(mktemp -d /tmp/fbl-train-eval.XXXXXX)
trap 'rm -rf "$work" 2>/dev/null || true' EXIT
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$build/pocl-cache}

dev=$("$bin/fbl-train" --list-devices | grep -i 'portable computing language' | head -1 | cut -d: -f1 || true)
if [ -z "$dev" ]; then
  echo "no PoCL device: skipped"
  exit 0
fi
data=$src/tests/data/llama-tiny/test_data_set_0
"$bin/fblc" compile "$src/tests/data/llama-tiny/model.onnx" --profile "$src/profiles/pocl-cpu.json" -o "$work/m.fbp" >/dev/null
train() { "$bin/fbl-train" "$work/m.fbp" --weights "$work/m.safetensors" --data "$data" --eval-data "$data" \
            --cache-dir "$work/cache" --device "$dev" "$@" 2>/dev/null; }

before=$(train --steps 0 | sed -n 's/^eval loss \([^ ]*\) (1 batches at step 0)$/\1/p')
out=$(train --steps 1)
first=$(echo "$out" | sed -n 's/^done: step 1 loss \([^ ]*\) .*/\1/p')
after=$(echo "$out" | sed -n 's/^eval loss \([^ ]*\) (1 batches at step 1)$/\1/p')
echo "eval loss before training $before, first step's loss $first, eval loss after it $after"
if [ -z "$before" ] || [ "$before" != "$first" ]; then
  echo "FAIL: the eval loss before training ($before) is not the first step's loss ($first)"; exit 1
fi
if ! awk -v a="$after" -v b="$before" 'BEGIN { exit !(a != "" && a + 0 < b + 0) }'; then
  echo "FAIL: the eval loss after a step ($after) is not below the one before ($before)"; exit 1
fi
