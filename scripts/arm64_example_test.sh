#!/usr/bin/env bash
# Runs build-arm64/bin/fbl-example (arm64) under qemu-user on PoCL for arm64, training the bundled
# tiny Llama from a plan the host's fblc compiles; fails unless it exits 0, writes the checkpoint
# and the adapter, and its evaluated loss falls. `bash scripts/dev.sh arm64-test` installs and
# builds what it needs, then runs it. Args: BUILD_DIR ARM64_BUILD_DIR SOURCE_DIR.
#
# PoCL compiles the plan's kernels with LLVM running under qemu (docs/results/arm64.md has the
# times); -cl-opt-disable gives the same losses. POCL_EXTRA_BUILD_FLAGS reaches PoCL as it is:
# ctest sets it to FBL_WHOLE_PLAN_POCL_FLAGS (CMakeLists.txt; -cl-opt-disable), and unset or empty
# keeps PoCL's -O. PoCL's kernel cache persists in ARM64_BUILD_DIR; FBL_ARM64_COLD=1 empties it
# first. The example runs without the runtime's program cache (--cache-dir ""): PoCL would compile
# every kernel a second time to hand it the binary.
# FBL_ARM64_STEPS: steps (default 5). Missing prerequisites: exit 77 (ctest: skipped, with the
# reason), or a failure when FBL_REQUIRE_ARM64=1 (scripts/dev.sh test installs them all).
set -euo pipefail
build=${1:?build dir}; arm=${2:?arm64 build dir}; src=${3:?source dir}
steps=${FBL_ARM64_STEPS:-5}
fail() { echo "FAIL: $*" >&2; exit 1; }
missing() {
  if [ "${FBL_REQUIRE_ARM64:-0}" = 1 ]; then fail "$* (scripts/dev.sh arm64-test installs and builds it)"; fi
  echo "SKIPPED: $* (bash scripts/dev.sh arm64-test installs and builds it)"; exit 77
}

qemu=$(command -v qemu-aarch64 || command -v qemu-aarch64-static || true)
[ -n "$qemu" ] || missing "no qemu-aarch64 (Debian: qemu-user)"
[ -x "$build/bin/fblc" ] || missing "no $build/bin/fblc"
[ -x "$arm/bin/fbl-example" ] || missing "no $arm/bin/fbl-example"
[ -f "$arm/qemu-icd/pocl.icd" ] || missing "no PoCL for arm64 in $arm/qemu-sysroot"
readelf -h "$arm/bin/fbl-example" | grep -q 'Machine: *AArch64' || fail "$arm/bin/fbl-example is not an arm64 executable"

work=$(mktemp -d /tmp/fbl-arm64-example.XXXXXX)
trap 'rm -rf "$work" 2>/dev/null || true' EXIT
if [ "${FBL_ARM64_COLD:-0}" = 1 ]; then rm -rf "$arm/pocl-cache"; fi
cold=no; [ -d "$arm/pocl-cache" ] || cold=yes

"$build/bin/fblc" compile "$src/tests/data/llama-tiny/model.onnx" --profile "$src/profiles/pocl-cpu.json" \
  --lr 1e-2 -o "$work/llama-tiny.fbp" >/dev/null
mkdir -p "$work/out"
opt=${POCL_EXTRA_BUILD_FLAGS:-}
echo "running $arm/bin/fbl-example under $qemu ($steps steps, kernel cache cold: $cold, PoCL flags: ${opt:-none})"
start=$(date +%s.%N)
set +e
POCL_EXTRA_BUILD_FLAGS="$opt" OCL_ICD_VENDORS="$arm/qemu-icd" POCL_CACHE_DIR="$arm/pocl-cache" \
  "$qemu" -L "$arm/qemu-sysroot" "$arm/bin/fbl-example" "$work/llama-tiny.fbp" "$work/llama-tiny.safetensors" \
  "$work/out" --steps "$steps" --cache-dir "" 2>&1 | tee "$work/log"
rc=${PIPESTATUS[0]}
set -e
wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
[ "$rc" -eq 0 ] || fail "fbl-example exited $rc under qemu"
for f in checkpoint.safetensors adapter_model.safetensors adapter_config.json; do
  [ -s "$work/out/$f" ] || fail "fbl-example wrote no $f"
done
line=$(grep '^eval loss .* -> ' "$work/log" | tail -1)
before=$(echo "$line" | awk '{print $3}'); after=$(echo "$line" | awk '{print $5}')
awk -v a="$after" -v b="$before" 'BEGIN { exit !(a != "" && b != "" && a + 0 < b + 0) }' ||
  fail "the eval loss did not fall: '$line'"
printf 'arm64 under qemu: eval loss %s -> %s after %s steps, %.1f s wall (kernel cache cold: %s, PoCL flags: %s)\n' \
  "$before" "$after" "$steps" "$wall" "$cold" "${opt:-none}"
