#!/usr/bin/env bash
# `fblc profile` measures the PoCL device end to end (one timed run per configuration): the
# profile it writes names the device class and every measured field with its provenance, loads
# back, and `fblc compile` plans llama-tiny with it; measured over a file that is not yet a whole
# profile, it keeps that file's hand-written matmul and kernels blocks. Measured numbers are not
# compared: this machine is shared and noisy.
# Args: BUILD_DIR SOURCE_DIR.
set -euo pipefail
build=${1:?build dir}; src=${2:?source dir}
source "$src/tests/scripts/lib/bench_pocl_env.sh" fblc-profile

fail() { echo "FAIL: $*"; exit 1; }
"$bin/fblc" profile --device "$dev" --reps 1 -o "$work/pocl.json" > "$work/log" 2>&1 ||
  { tail -20 "$work/log"; fail "fblc profile exited non-zero"; }
for field in '"device_class": "cpu"' '"access_table"' '"bandwidth_gbps"' '"peak_gflops"' '"texture_block"' \
             '"wave_size"' '"l2_cache_bytes"' '"texel_formats"'; do
  grep -q "$field" "$work/pocl.json" || fail "the profile lacks $field"
done
grep -q '"access_table": "measured: ' "$work/pocl.json" || fail "the access table's provenance does not say measured"
"$bin/fblc" compile "$src/tests/data/llama-tiny/model.onnx" --profile "$work/pocl.json" --no-weights \
  -o "$work/p.fbp" > "$work/compile.log" 2>&1 || { tail -5 "$work/compile.log"; fail "the measured profile does not compile llama-tiny"; }
cat > "$work/partial.json" <<'JSON'
{"name": "partial",
 "kernels": {"provenance": "test: written by hand", "loss_workgroup": 32},
 "matmul": {"provenance": "test: written by hand", "narrow": {"max_side": 8, "work_items": 32, "provenance": "test"}}}
JSON
"$bin/fblc" profile --device "$dev" --reps 1 -o "$work/partial.json" > "$work/log" 2>&1 ||
  { tail -20 "$work/log"; fail "fblc profile over a partial profile exited non-zero"; }
grep -q '"loss_workgroup": 32' "$work/partial.json" || fail "measuring over a partial profile lost its kernels block"
grep -q '"work_items": 32' "$work/partial.json" || fail "measuring over a partial profile lost its matmul block"
"$bin/fblc" compile "$src/tests/data/llama-tiny/model.onnx" --profile "$work/partial.json" --no-weights \
  -o "$work/p.fbp" > "$work/compile.log" 2>&1 || { tail -5 "$work/compile.log"; fail "the re-measured profile does not load"; }
echo "fblc profile: measured $(grep -o '"device": "[^"]*"' "$work/pocl.json" | head -1), and it compiles llama-tiny"
