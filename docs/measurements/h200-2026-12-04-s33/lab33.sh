#!/usr/bin/env bash
# dy B walked by output texels (chooseNarrowOrder) against stop 32's K slices with the narrow
# operand staged, in one call, old binaries (.devcarry/old: stop 32's, with stop 32's profile)
# against new (.devcarry/bin, this stop's profile):
#   1. the LoRA sweep at ranks 8 and 16, image and buffer operands, old then new;
#   2. 2-layer Llama-3.2-1B, Qwen2.5-1.5B and Gemma2-2B steps, old then new (narrow products by
#      kind: ../h200-2026-12-03-s31/narrow_share.py).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
R=/tmp/lab33; mkdir -p $R /tmp/zoo
FINAL=$OUT
trap 'tar -czf $FINAL/lab33.tar.gz -C $R .' EXIT
profile() { [ $1 = old ] && echo .devcarry/old/nvidia-h200.json || echo profiles/nvidia-h200.json; }
.devcarry/bin/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
date +%T
for r in 8 16; do
  for st in buffer image; do
    for v in old bin; do
      timeout 90 .devcarry/$v/fbl-bench matmul --sweep --only lora --rank $r --runs 10 --storage $st --device ${dev:-0} \
        --profile $(profile $v) --sweep-json $R/sweep-lora-r$r-$st-$v.json > $R/sweep-lora-r$r-$st-$v.txt 2>&1
      echo "rank $r $st $v"; grep -E "^[a-zA-Z]|\(profile\)" $R/sweep-lora-r$r-$st-$v.txt | grep -v "^matmul sweep" | head -12
    done
  done
done
date +%T
for m in llama3.2-1b qwen2.5-1.5b gemma2-2b; do
  .devcarry/bin/fblc zoo $m --layers 2 -o /tmp/zoo/$m-l2.onnx > /dev/null
  for v in old bin; do
    .devcarry/$v/fblc compile /tmp/zoo/$m-l2.onnx --profile $(profile $v) -o /tmp/zoo/$m-$v.fbp > /dev/null 2>&1
    .devcarry/$v/fblc explain /tmp/zoo/$m-$v.fbp > $R/$m-l2-$v-explain.txt 2>&1
    timeout 100 .devcarry/$v/fbl-bench step /tmp/zoo/$m-l2.onnx --profile $(profile $v) --device ${dev:-0} \
      --steps 3 --strategy fblayout --json $R/$m-l2-$v.json > $R/$m-l2-$v.txt 2>&1
    echo "$m 2 layers, $v"; tail -2 $R/$m-l2-$v.txt
    python3 docs/measurements/h200-2026-12-03-s31/narrow_share.py $R/$m-l2-$v-explain.txt $R/$m-l2-$v.json 2>&1 | tail -5
  done
  date +%T
done
