#!/usr/bin/env bash
# `fbl-bench step` runs end to end on PoCL: two training steps of the llama-3.2 tiny zoo model
# per strategy (no data set: synthetic inputs) give a JSON report with every key, one result per
# strategy, and an SVG chart. Timings are not checked: this machine is shared and noisy.
# Args: BUILD_DIR SOURCE_DIR.
set -euo pipefail
build=${1:?build dir}; src=${2:?source dir}
bin=${FBL_BIN:-$build/bin}
work=$(mktemp -d /tmp/fbl-bench-step.XXXXXX)
trap 'rm -rf "$work" 2>/dev/null || true' EXIT
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$work/pocl}

dev=$("$bin/fbl-train" --list-devices | grep -i 'portable computing language' | head -1 | cut -d: -f1 || true)
if [ -z "$dev" ]; then
  echo "no PoCL device: skipped"
  exit 0
fi

"$bin/fbl-bench" step "$src/models/llama3.2-1b-tiny.onnx" --profile "$src/profiles/pocl-cpu.json" \
  --steps 2 --device "$dev" --json "$work/step.json" --svg "$work/step.svg"

for key in model profile device steps strategies plans_identical note timing results strategy \
           samples_per_s step_s first_step_s phase_s forward backward optimizer launches_per_step \
           launches_by_phase launches_by_kind kernels bytes_moved_modelled layout_launches \
           layout_bytes_modelled layout_time_s layout_time_s_by_phase device_s device_s_by_phase \
           timed_steps plan_digest peak_device_bytes first_loss last_loss random_weights; do
  grep -q "\"$key\"" "$work/step.json" || { echo "step.json lacks \"$key\""; cat "$work/step.json"; exit 1; }
done
for s in fblayout reuse explicit; do
  [ "$(grep -c "\"strategy\": \"$s\"" "$work/step.json")" = 1 ] || { echo "step.json has no single $s result"; exit 1; }
done
grep -q '<svg' "$work/step.svg" || { echo "step.svg is not an SVG"; exit 1; }
grep -q '</svg>' "$work/step.svg" || { echo "step.svg is truncated"; exit 1; }
echo "ok"
