#!/usr/bin/env bash
# Batched narrow launches tiled for the whole launch (the fill target counts every product the
# launch runs), in one call, old binaries (.devcarry/old: stop 31's) against new (.devcarry/bin):
#   1. the LoRA sweep at ranks 8 and 16, image and buffer operands, new binaries (the x3 column
#      is now tiled for three products, as plans tile a batched launch);
#   2. cuBLAS on the same narrow products, queued and as CUDA graphs (torch_narrow_reference.py);
#   3. 2-layer Llama-3.2-1B steps, old and new (narrow products by kind: narrow_share.py);
#   4. full-depth Llama-3.2-1B steps, old and new, twice each, alternating.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
R=/tmp/lab29; mkdir -p $R /tmp/zoo
FINAL=$OUT
trap 'tar -czf $FINAL/lab29.tar.gz -C $R .' EXIT
P=profiles/nvidia-h200.json
.devcarry/bin/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
date +%T
for r in 8 16; do
  for st in image buffer; do
    timeout 90 .devcarry/bin/fbl-bench matmul --sweep --only lora --rank $r --runs 10 --storage $st --device ${dev:-0} \
      --profile $P --sweep-json $R/sweep-lora-r$r-$st.json > $R/sweep-lora-r$r-$st.txt 2>&1
    grep -E "plans run|x3 queued|\(profile\)" $R/sweep-lora-r$r-$st.txt | head -12
  done
done
date +%T
timeout 120 python3 bench/torch_narrow_reference.py > $R/torch_narrow.json 2> $R/torch_narrow.err
date +%T
m=llama3.2-1b
.devcarry/bin/fblc zoo $m --layers 2 -o /tmp/zoo/$m-l2.onnx > /dev/null
for v in old bin; do
  .devcarry/$v/fblc compile /tmp/zoo/$m-l2.onnx --profile $P -o /tmp/zoo/$m-$v.fbp > /dev/null 2>&1
  .devcarry/$v/fblc explain /tmp/zoo/$m-$v.fbp > $R/$m-l2-$v-explain.txt 2>&1
  timeout 100 .devcarry/$v/fbl-bench step /tmp/zoo/$m-l2.onnx --profile $P --device ${dev:-0} \
    --steps 3 --strategy fblayout --json $R/$m-l2-$v.json > $R/$m-l2-$v.txt 2>&1
  echo "$m 2 layers, $v"; tail -2 $R/$m-l2-$v.txt
  python3 docs/measurements/h200-2026-12-03-s31/narrow_share.py $R/$m-l2-$v-explain.txt $R/$m-l2-$v.json 2>&1 | tail -5
done
date +%T
.devcarry/bin/fblc zoo $m -o /tmp/zoo/$m.onnx > /dev/null
for rep in 1 2; do
  for v in old bin; do
    timeout 150 .devcarry/$v/fbl-bench step /tmp/zoo/$m.onnx --profile $P --device ${dev:-0} \
      --steps 3 --strategy fblayout --json $R/$m-full-$v-$rep.json > $R/$m-full-$v-$rep.txt 2>&1
    echo "$m full depth, $v, $rep"; grep -A1 "strategy" $R/$m-full-$v-$rep.txt | tail -1
    date +%T
  done
done
