#!/usr/bin/env bash
# The landed rule (matmul.narrow.rows_in_group_min_side: a narrow M's row blocks in one group),
# the same binaries (.devcarry/bin) for every part. PART=sweeps|r16|r8, one call each:
#   sweeps: fbl-bench matmul --sweep --only lora at ranks 16 and 8, buffer and image operands (the
#           sweep's fourth row switches the rule for each product: off at rank 16, on at rank 8);
#   r16:    2-layer Llama-3.2-1B and Qwen2.5-1.5B at rank 16, rows_in_group_min_side 0 then 16;
#   r8:     the same at rank 8, 16 (the profile: off at rank 8) then 8.
# Narrow products by kind: ../h200-2026-12-03-s31/narrow_share.py. Everything lands in
# $OUT/lab35b-$PART.tar.gz (one file: the device returns a limited count).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
B=.devcarry/bin
R=/tmp/lab35b-$PART; mkdir -p $R /tmp/zoo
trap 'tar -czf $OUT/lab35b-$PART.tar.gz -C $R .' EXIT
for w in 0 8; do
  python3 -c "
import json
p = json.load(open('profiles/nvidia-h200.json'))
p['matmul']['narrow']['rows_in_group_min_side'] = $w
json.dump(p, open('/tmp/h200-rows$w.json', 'w'), indent=1)"
done
profile() { [ $1 = 16 ] && echo profiles/nvidia-h200.json || echo /tmp/h200-rows$1.json; }
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
date +%T
if [ $PART = sweeps ]; then
  for r in 16 8; do
    for st in buffer image; do
      timeout 120 $B/fbl-bench matmul --sweep --only lora --rank $r --runs 10 --storage $st --device ${dev:-0} \
        --profile profiles/nvidia-h200.json --sweep-json $R/sweep-r$r-$st.json > $R/sweep-r$r-$st.txt 2>&1
      echo "rank $r $st"; grep -E "^lora d[AB]|stream floor|\(profile\)" $R/sweep-r$r-$st.txt | tail -4
      date +%T
    done
  done
  exit 0
fi
[ $PART = r16 ] && { r=16; a=0; b=16; } || { r=8; a=16; b=8; }
for m in llama3.2-1b qwen2.5-1.5b; do
  name=$m-l2-r$r
  $B/fblc zoo $m --layers 2 --lora-rank $r -o /tmp/zoo/$name.onnx > /dev/null
  for v in $a $b; do
    $B/fblc compile /tmp/zoo/$name.onnx --profile $(profile $v) -o /tmp/zoo/$name-$v.fbp > /dev/null 2>&1
    $B/fblc explain /tmp/zoo/$name-$v.fbp > $R/$name-rows$v-explain.txt 2>&1
    timeout 100 $B/fbl-bench step /tmp/zoo/$name.onnx --profile $(profile $v) --device ${dev:-0} \
      --steps 3 --strategy fblayout --json $R/$name-rows$v.json > $R/$name-rows$v.txt 2>&1
    echo "$name, rows_in_group_min_side $v"; sed -n 3p $R/$name-rows$v.txt
    python3 -c "import json; r = json.load(open('$R/$name-rows$v.json'))['results'][0]; print('loss', r['first_loss'], r['last_loss'])"
    python3 docs/measurements/h200-2026-12-03-s31/narrow_share.py $R/$name-rows$v-explain.txt $R/$name-rows$v.json 2>&1 | tail -4
  done
  date +%T
done
