#!/usr/bin/env bash
# The narrow kernel's tree in planes (rtile_matmul_narrow.cl: partial[4][WG], neighbouring
# work-items on neighbouring texels) against the tree it replaced (partial[WG][4]), in one call:
#   1. narrow_lab (narrow_lab.cc/.cl, carried built in .devcarry): lab variants of x A^T and
#      dy B alone, queued with an event per launch, queued bare (as a step runs), and wall clock;
#   2. the LoRA sweep at ranks 8 and 16, image and buffer operands, old and new fbl-bench;
#   3. 2-layer Llama-3.2-1B steps, old and new binaries (narrow products by kind: narrow_share.py).
# Old binaries: .devcarry/old (the tree before, built from the same commit with the kernel reverted).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
R=/tmp/lab24; mkdir -p $R /tmp/zoo
FINAL=$OUT
trap 'tar -czf $FINAL/lab24.tar.gz -C $R .' EXIT
.devcarry/bin/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
date +%T
.devcarry/bin/narrow_lab .devcarry/narrow_lab.cl ${dev:-0} 2>&1 | grep -v warning > $R/narrow_lab.txt
cat $R/narrow_lab.txt
for r in 8 16; do
  for st in image buffer; do
    for v in old bin; do
      timeout 90 .devcarry/$v/fbl-bench matmul --sweep --only lora --rank $r --runs 10 --storage $st --device ${dev:-0} \
        --profile profiles/nvidia-h200.json --sweep-json $R/sweep-lora-r$r-$st-$v.json > $R/sweep-lora-r$r-$st-$v.txt 2>&1
    done
  done
done
python3 docs/measurements/h200-2026-12-03-s29/narrow_summary.py $R/sweep-lora-*.json
date +%T
m=llama3.2-1b
.devcarry/bin/fblc zoo $m --layers 2 -o /tmp/zoo/$m-l2.onnx > /dev/null
for v in old bin; do
  .devcarry/$v/fblc compile /tmp/zoo/$m-l2.onnx --profile profiles/nvidia-h200.json -o /tmp/zoo/$m-$v.fbp > /dev/null 2>&1
  .devcarry/$v/fblc explain /tmp/zoo/$m-$v.fbp > $R/$m-$v-explain.txt 2>&1
  timeout 100 .devcarry/$v/fbl-bench step /tmp/zoo/$m-l2.onnx --profile profiles/nvidia-h200.json --device ${dev:-0} \
    --steps 3 --strategy fblayout --json $R/$m-$v.json > $R/$m-$v.txt 2>&1
  echo "$m $v"; tail -3 $R/$m-$v.txt
  python3 docs/measurements/h200-2026-12-03-s29/narrow_share.py $R/$m-$v-explain.txt $R/$m-$v.json 2>&1 | tail -8
done
date +%T
