#!/usr/bin/env bash
# examples/fbl_example.c on the host's PoCL: it trains the bundled tiny Llama through the C API
# alone, its evaluated loss falls, it writes the checkpoint and the adapter; a bad command line or
# a missing plan is one line and a non-zero exit. (scripts/arm64_example_test.sh runs the arm64
# build of the same example under qemu.) Args: BUILD_DIR SOURCE_DIR.
set -euo pipefail
build=${1:?build dir}; src=${2:?source dir}
bin=${FBL_BIN:-$build/bin}
work=$(mktemp -d /tmp/fbl-example-app.XXXXXX)
trap 'rm -rf "$work" 2>/dev/null || true' EXIT
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$build/pocl-cache}
fail() { echo "FAIL: $*"; exit 1; }

dev=$("$bin/fbl-train" --list-devices | grep -i 'portable computing language' | head -1 | cut -d: -f1 || true)
[ -n "$dev" ] || fail "no PoCL device (scripts/dev.sh installs pocl-opencl-icd)"

# Bad command lines: exit 2 and one error line (the usage follows it).
for args in "" "a b" "a b c --steps" "a b c --steps x" "a b c --bogus 1" "a b c d"; do
  set +e; out=$("$bin/fbl-example" $args 2>&1 >/dev/null); rc=$?; set -e
  [ "$rc" -eq 2 ] || fail "fbl-example $args exited $rc, not 2"
  [ "$(echo "$out" | grep -c '^error: ')" -eq 1 ] || fail "fbl-example $args: not one error line: $out"
done
set +e; out=$("$bin/fbl-example" "$work/none.fbp" "$work/none.safetensors" "$work" --device "$dev" 2>&1); rc=$?; set -e
[ "$rc" -eq 1 ] || fail "a missing plan exited $rc, not 1"
[ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "none.fbp" || fail "a missing plan: not one line naming it: $out"

"$bin/fblc" compile "$src/tests/data/llama-tiny/model.onnx" --profile "$src/profiles/pocl-cpu.json" --lr 1e-2 \
  -o "$work/m.fbp" >/dev/null
mkdir -p "$work/out"
"$bin/fbl-example" "$work/m.fbp" "$work/m.safetensors" "$work/out" --steps 3 --device "$dev" \
  --cache-dir "$work/cache" > "$work/log" 2>&1 || { cat "$work/log"; fail "fbl-example exited non-zero"; }
cat "$work/log"
for f in checkpoint.safetensors adapter_model.safetensors adapter_config.json; do
  [ -s "$work/out/$f" ] || fail "no $f"
done
grep -q '^checkpoint: .* (step 3)$' "$work/log" || fail "the checkpoint did not load back at step 3"
line=$(grep '^eval loss .* -> ' "$work/log" | tail -1)
before=$(echo "$line" | awk '{print $3}'); after=$(echo "$line" | awk '{print $5}')
awk -v a="$after" -v b="$before" 'BEGIN { exit !(a != "" && b != "" && a + 0 < b + 0) }' ||
  fail "the eval loss did not fall: '$line'"
