#!/usr/bin/env bash
# Narrow products batched into shared launches (compiler/plan/launch_batching.h), in one call:
#   1. the LoRA sweep at ranks 8 and 16, image and buffer operands: every narrow product alone,
#      queued, and three of them in one launch (fbl-bench matmul --sweep's batched line);
#   2. 2-layer Llama-3.2-1B steps with matmul.narrow.batch_products 1 and 8 (narrow_share.py);
#   3. full-depth Llama-3.2-1B steps, batch_products 1, 8, 1, 8 (alternating against drift).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
R=/tmp/lab26; mkdir -p $R /tmp/zoo
FINAL=$OUT
trap 'tar -czf $FINAL/lab26.tar.gz -C $R .' EXIT
S=docs/measurements/h200-2026-12-03-s31
B=.devcarry/bin
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
python3 - <<'PY'
import json
p = json.load(open('profiles/nvidia-h200.json'))
for b in (1, 8):
    p['matmul']['narrow']['batch_products'] = b
    json.dump(p, open(f'/tmp/lab26/h200-b{b}.json', 'w'), indent=1)
PY
date +%T
for r in 8 16; do
  for st in image buffer; do
    timeout 90 $B/fbl-bench matmul --sweep --only lora --rank $r --runs 10 --storage $st --device ${dev:-0} \
      --profile profiles/nvidia-h200.json --sweep-json $R/sweep-lora-r$r-$st.json > $R/sweep-lora-r$r-$st.txt 2>&1
    grep -E "plans run|profile\)|one launch" $R/sweep-lora-r$r-$st.txt
  done
done
date +%T
m=llama3.2-1b
$B/fblc zoo $m --layers 2 -o /tmp/zoo/$m-l2.onnx > /dev/null
$B/fblc zoo $m -o /tmp/zoo/$m.onnx > /dev/null
for b in 1 8; do
  $B/fblc compile /tmp/zoo/$m-l2.onnx --profile $R/h200-b$b.json -o /tmp/zoo/$m-l2-b$b.fbp > $R/$m-l2-b$b-compile.txt 2>&1
  $B/fblc explain /tmp/zoo/$m-l2-b$b.fbp > $R/$m-l2-b$b-explain.txt 2>&1
  timeout 100 $B/fbl-bench step /tmp/zoo/$m-l2.onnx --profile $R/h200-b$b.json --device ${dev:-0} \
    --steps 3 --strategy fblayout --json $R/$m-l2-b$b.json > $R/$m-l2-b$b.txt 2>&1
  echo "$m 2 layers, batch_products $b"; tail -3 $R/$m-l2-b$b.txt
  python3 $S/narrow_share.py $R/$m-l2-b$b-explain.txt $R/$m-l2-b$b.json 2>&1 | tail -5
done
date +%T
for run in 1 2; do
  [ $run = 2 ] && [ $SECONDS -gt 400 ] && break  # the second pair only while it fits the call's 10 minutes
  for b in 1 8; do
    timeout 150 $B/fbl-bench step /tmp/zoo/$m.onnx --profile $R/h200-b$b.json --device ${dev:-0} \
      --steps 3 --strategy fblayout --json $R/$m-full-b$b-$run.json > $R/$m-full-b$b-$run.txt 2>&1
    echo "$m full depth, batch_products $b, run $run"; grep -A1 "strategy" $R/$m-full-b$b-$run.txt | tail -1
    date +%T
  done
done
