#!/usr/bin/env bash
# The command-line path of the convolutional zoo models: `fblc zoo NAME --tiny`, `fblc compile`
# for profiles/pocl-cpu.json and one `fbl-train` step on PoCL from synthetic inputs (no --data)
# must end with a finite loss. (tests/device/zoo_tiny_step_test.cc compares the losses with the
# reference executor.) Args: BUILD_DIR SOURCE_DIR; FBL_ZOO_MODELS overrides the model list.
set -euo pipefail
build=${1:?build dir}; src=${2:?source dir}
bin=${FBL_BIN:-$build/bin}
work=$(mktemp -d /tmp/fbl-zoo-step.XXXXXX)
trap 'rm -rf "$work" 2>/dev/null || true' EXIT
# PoCL's compile of these plans' many distinct kernels takes minutes on 2 cores; a cache in the
# build dir makes every later run take seconds.
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$build/pocl-cache}

models=${FBL_ZOO_MODELS:-"mobilenetv2 resnet34 vgg19 stable-diffusion-1.5"}
dev=$("$bin/fbl-train" --list-devices | grep -i 'portable computing language' | head -1 | cut -d: -f1 || true)
if [ -z "$dev" ]; then
  echo "no PoCL device: skipped"
  exit 0
fi

failed=0
for m in $models; do
  start=$SECONDS
  "$bin/fblc" zoo "$m" --tiny -o "$work/$m.onnx" >/dev/null
  if ! "$bin/fblc" compile "$work/$m.onnx" --profile "$src/profiles/pocl-cpu.json" -o "$work/$m.fbp" \
      >"$work/$m.compile.log" 2>&1; then
    echo "FAIL $m: compile: $(tail -1 "$work/$m.compile.log")"; failed=1; continue
  fi
  # The weights are the $m.safetensors compile wrote beside the plan (fbl-train's default).
  if ! out=$("$bin/fbl-train" "$work/$m.fbp" --steps 1 --cache-dir "$build/zoo-step-cache" \
      --device "$dev" 2>"$work/$m.train.log"); then
    echo "FAIL $m: fbl-train: $(tail -1 "$work/$m.train.log")"; failed=1; continue
  fi
  loss=$(echo "$out" | sed -n 's/^done: step 1 loss \([^ ]*\) .*/\1/p')
  if ! awk -v l="$loss" 'BEGIN { exit !(l != "" && l == l + 0 && l + 0 < 1e30 && l + 0 > -1e30) }'; then
    echo "FAIL $m: loss '$loss' is not finite"; failed=1; continue
  fi
  echo "$m: loss $loss ($((SECONDS - start)) s)"
done
if [[ $failed -ne 0 ]]; then exit 1; fi
echo PASS
