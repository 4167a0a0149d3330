#!/usr/bin/env bash
# lab22.sh's steps again with the committed rule (codegen stages the narrow operand only where
# neighbouring work-items are K slices reading a buffer: dy B): 2-layer Llama-3.2-1B, Qwen2.5-1.5B
# and Gemma2-2B with matmul.narrow.stage_narrow_operand false and true (the narrow products'
# device ms by kind: narrow_share.py).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.devcarry/bin
R=/tmp/lab23; mkdir -p $R /tmp/zoo
FINAL=$OUT
trap 'tar -czf $FINAL/lab23.tar.gz -C $R .' EXIT
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
date +%T
python3 - <<'PY'
import json
p = json.load(open('profiles/nvidia-h200.json'))
for stage in (False, True):
    p['matmul']['narrow']['stage_narrow_operand'] = stage
    json.dump(p, open(f'/tmp/lab23/stage{int(stage)}.json', 'w'), indent=1)
PY
date +%T
for m in llama3.2-1b qwen2.5-1.5b gemma2-2b; do
  $B/fblc zoo $m --layers 2 -o /tmp/zoo/$m-l2.onnx > /dev/null
  for stage in 0 1; do
    $B/fblc compile /tmp/zoo/$m-l2.onnx --profile $R/stage$stage.json -o /tmp/zoo/$m-s$stage.fbp > /dev/null 2>&1
    $B/fblc explain /tmp/zoo/$m-s$stage.fbp > $R/$m-stage$stage-explain.txt 2>&1
    timeout 100 $B/fbl-bench step /tmp/zoo/$m-l2.onnx --profile $R/stage$stage.json --device ${dev:-0} --steps 3 \
      --strategy fblayout --json $R/$m-stage$stage.json > $R/$m-stage$stage.txt 2>&1
    echo "$m stage $stage"
    python3 docs/measurements/h200-2026-12-03-s28/summarise.py $R/$m-stage$stage.json 2>&1 | tail -1
    python3 docs/measurements/h200-2026-12-03-s29/narrow_share.py $R/$m-stage$stage-explain.txt $R/$m-stage$stage.json 2>&1 | tail -4
  done
done
date +%T
