#!/usr/bin/env bash
# kill -9 during training loses at most the steps since the last checkpoint, and --resume goes
# on from it: a run killed three times at random moments and resumed each time ends with exactly
# the loss of an uninterrupted run (kernels are deterministic, checkpoints and their dataset
# position files atomic). It trains on a 12-sample .npy dataset shuffled by seed with 2 samples
# held out, so a resume lands mid-epoch and must take the sample the uninterrupted run took.
# Args: BUILD_DIR SOURCE_DIR.
set -euo pipefail
build=${1:?build dir}; src=${2:?source dir}
bin=${FBL_BIN:-$build/bin}
work=$(mktemp -d /tmp/fbl-kill-resume.XXXXXX)
trap 'rm -rf "$work" 2>/dev/null || true' EXIT
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$work/pocl}
model=$src/tests/data/llama-tiny
steps=90

"$bin/fblc" compile "$model/model.onnx" --profile "$src/profiles/pocl-cpu.json" -o "$work/m.fbp" >/dev/null

# tokens.npy: i64 (12, 1, 16), sample i holding (7i + 3k) mod 256 at k; numpy's v1.0 layout,
# the header padded so that the data starts at byte 128.
header="{'descr': '<i8', 'fortran_order': False, 'shape': (12, 1, 16), }"
header=$(printf '%-117s' "$header")
{
  printf '\x93NUMPY\x01\x00\x76\x00%s\n' "$header"
  for i in $(seq 0 11); do for k in $(seq 0 15); do
    printf "\\x$(printf %02x $(((7 * i + 3 * k) % 256)))\\x00\\x00\\x00\\x00\\x00\\x00\\x00"
  done; done
} > "$work/tokens.npy"
# `exec`: every call runs in a subshell (`$(...)` or `&`), and without it `kill -9 $!` killed
# only that subshell, leaving fbl-train running on as an orphan that kept writing the checkpoint
# under the next attempt (under load the final run then read its checkpoint, or found it at the
# last step).
train() {  # extra args...
  exec "$bin/fbl-train" "$work/m.fbp" --weights "$work/m.safetensors" --data "$work/tokens.npy" --seed 3 \
    --eval-samples 2 --steps $steps --checkpoint-every 3 --cache-dir "$work/cache" "$@"
}

# The uninterrupted run.
expected=$(train --checkpoint "$work/straight.ckpt" 2>/dev/null | grep '^done:' | sed 's/ (.*//')

# Killed three times, resumed after each kill: the same command line each time, as a supervisor
# restarts it; --resume-if-exists lets the first start without a checkpoint.
for attempt in 1 2 3; do
  train --checkpoint "$work/killed.ckpt" --resume-if-exists >/dev/null 2>"$work/log.$attempt" &
  pid=$!
  # Kill once the run passes a random step of this attempt's stretch (checkpoints every 3).
  target=$((10 + 25 * (attempt - 1) + RANDOM % 10))
  for _ in $(seq 1 3000); do
    last=$(grep -o '^step [0-9]*' "$work/log.$attempt" 2>/dev/null | tail -1 | cut -d' ' -f2 || true)
    if [[ -n "$last" && "$last" -ge "$target" ]]; then break; fi
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.02
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  echo "attempt $attempt: killed after step ${last:-?}$([[ -e "$work/killed.ckpt.tmp" ]] && echo ', while writing a checkpoint')"
done

out=$(train --checkpoint "$work/killed.ckpt" --resume 2>"$work/log.final")
resumed=$(grep -o 'resumed from .* at step [0-9]*' "$work/log.final" || true)
got=$(echo "$out" | grep '^done:' | sed 's/ (.*//')
echo "uninterrupted: $expected"
echo "killed 3x:     $got ($resumed)"
if [[ -z "$resumed" ]]; then echo "FAIL: the final run did not resume from a checkpoint"; exit 1; fi
if [[ "$got" != "$expected" ]]; then echo "FAIL: the resumed run ends with a different loss"; exit 1; fi
echo PASS
