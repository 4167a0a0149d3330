#!/usr/bin/env bash
# lora_B stored transposed (matmul.narrow.k_contiguous_weights) against row-major, in one call,
# the same binaries (.devcarry/bin), the H200 profile with the key off and on:
#   1. fbl-bench matmul --sweep --only "lora dh" at ranks 8 and 16, buffer and image operands:
#      dy B with B row-major (what plans ran before) beside B stored transposed;
#   2. 2-layer steps, key off then on: Llama-3.2-1B, Qwen2.5-1.5B and Gemma2-2B at rank 8, and
#      Llama-3.2-1B at rank 16 (narrow products by kind: ../h200-2026-12-03-s31/narrow_share.py).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
B=.devcarry/bin
R=/tmp/lab34; mkdir -p $R /tmp/zoo
FINAL=$OUT
trap 'tar -czf $FINAL/lab34.tar.gz -C $R .' EXIT
python3 -c "
import json
p = json.load(open('profiles/nvidia-h200.json'))
p['matmul']['narrow']['k_contiguous_weights'] = False
json.dump(p, open('/tmp/h200-off.json', 'w'), indent=1)"
profile() { [ $1 = off ] && echo /tmp/h200-off.json || echo profiles/nvidia-h200.json; }
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
date +%T
for r in 8 16; do
  for st in buffer image; do
    timeout 60 $B/fbl-bench matmul --sweep --only "lora dh" --rank $r --runs 10 --storage $st --device ${dev:-0} \
      --profile profiles/nvidia-h200.json --sweep-json $R/sweep-r$r-$st.json > $R/sweep-r$r-$st.txt 2>&1
    echo "rank $r $st"; grep -E "^lora|stream floor|\(profile\)" $R/sweep-r$r-$st.txt
  done
done
date +%T
for spec in "llama3.2-1b 8" "qwen2.5-1.5b 8" "gemma2-2b 8" "llama3.2-1b 16"; do
  set -- $spec
  m=$1; r=$2; name=$m-l2-r$r
  $B/fblc zoo $m --layers 2 --lora-rank $r -o /tmp/zoo/$name.onnx > /dev/null
  for v in off on; do
    $B/fblc compile /tmp/zoo/$name.onnx --profile $(profile $v) -o /tmp/zoo/$name-$v.fbp > /dev/null 2>&1
    $B/fblc explain /tmp/zoo/$name-$v.fbp > $R/$name-$v-explain.txt 2>&1
    timeout 100 $B/fbl-bench step /tmp/zoo/$name.onnx --profile $(profile $v) --device ${dev:-0} \
      --steps 3 --strategy fblayout --json $R/$name-$v.json > $R/$name-$v.txt 2>&1
    echo "$name, k_contiguous_weights $v"; tail -2 $R/$name-$v.txt
    python3 docs/measurements/h200-2026-12-03-s31/narrow_share.py $R/$name-$v-explain.txt $R/$name-$v.json 2>&1 | tail -5
  done
  date +%T
done
