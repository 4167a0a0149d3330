#!/usr/bin/env bash
# A narrow side that spans the work-group (matmul.narrow.texel_walk_min_side), now for every
# narrow product: the texel walk where R is the narrow operand stored either way (x A^T, and
# dy B with lora_B stored transposed), and all of a narrow M's row blocks in one group (dt^T x).
# One call, the same binaries (.devcarry/bin):
#   1. fbl-bench matmul --sweep --only lora at ranks 8 and 16, buffer and image operands: each
#      narrow product at the profile's settings beside the rule switched (the sweep's second
#      variant row);
#   2. 2-layer steps: Llama-3.2-1B and Qwen2.5-1.5B at rank 16 with the rule off
#      (texel_walk_min_side 0, the plans before this change) and on (16); Llama-3.2-1B at rank 8
#      with 16 (unchanged) and 8 (narrow products by kind: ../h200-2026-12-03-s31/narrow_share.py).
# Writes straight into $OUT, so that a timeout keeps what finished.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
B=.devcarry/bin
R=$OUT/lab35; mkdir -p $R /tmp/zoo
for w in 0 8; do
  python3 -c "
import json
p = json.load(open('profiles/nvidia-h200.json'))
p['matmul']['narrow']['texel_walk_min_side'] = $w
json.dump(p, open('/tmp/h200-w$w.json', 'w'), indent=1)"
done
profile() { [ $1 = w16 ] && echo profiles/nvidia-h200.json || echo /tmp/h200-$1.json; }
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
date +%T
for r in 16 8; do
  for st in buffer image; do
    timeout 90 $B/fbl-bench matmul --sweep --only lora --rank $r --runs 10 --storage $st --device ${dev:-0} \
      --profile profiles/nvidia-h200.json --sweep-json $R/sweep-r$r-$st.json > $R/sweep-r$r-$st.txt 2>&1
    echo "rank $r $st"; grep -E "^lora|stream floor|\(profile\)" $R/sweep-r$r-$st.txt
    date +%T
  done
done
for spec in "llama3.2-1b 16 w0 w16" "qwen2.5-1.5b 16 w0 w16" "llama3.2-1b 8 w16 w8"; do
  set -- $spec
  m=$1; r=$2; name=$m-l2-r$r
  $B/fblc zoo $m --layers 2 --lora-rank $r -o /tmp/zoo/$name.onnx > /dev/null
  for v in $3 $4; do
    $B/fblc compile /tmp/zoo/$name.onnx --profile $(profile $v) -o /tmp/zoo/$name-$v.fbp > /dev/null 2>&1
    $B/fblc explain /tmp/zoo/$name-$v.fbp > $R/$name-$v-explain.txt 2>&1
    timeout 100 $B/fbl-bench step /tmp/zoo/$name.onnx --profile $(profile $v) --device ${dev:-0} \
      --steps 3 --strategy fblayout --json $R/$name-$v.json > $R/$name-$v.txt 2>&1
    echo "$name, texel_walk_min_side ${v#w}"; tail -2 $R/$name-$v.txt
    python3 docs/measurements/h200-2026-12-03-s31/narrow_share.py $R/$name-$v-explain.txt $R/$name-$v.json 2>&1 | tail -5
  done
  date +%T
done
