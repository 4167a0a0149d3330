#!/usr/bin/env bash
# Where a narrow product's own work goes, in one call (binaries of the commit after c75df36):
#   1. the LoRA sweep at ranks 8 and 16, image and buffer operands, now with three products in
#      one launch for every variant (the "x3 queued" column), NVIDIA's build log on (registers
#      and spills of every kernel: -cl-nv-verbose, in sweep-*-build.log);
#   2. a second pair of full-depth Llama-3.2-1B steps, batch_products 1 and 8.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
R=/tmp/lab27; mkdir -p $R /tmp/zoo
FINAL=$OUT
trap 'tar -czf $FINAL/lab27.tar.gz -C $R .' EXIT
B=.devcarry/bin
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
python3 - <<'PY'
import json
p = json.load(open('profiles/nvidia-h200.json'))
for b in (1, 8):
    p['matmul']['narrow']['batch_products'] = b
    json.dump(p, open(f'/tmp/lab27/h200-b{b}.json', 'w'), indent=1)
PY
date +%T
for r in 8 16; do
  for st in image buffer; do
    FBL_CL_OPTIONS=-cl-nv-verbose FBL_CL_BUILD_LOG=1 timeout 90 $B/fbl-bench matmul --sweep --only lora --rank $r \
      --runs 10 --storage $st --device ${dev:-0} --profile profiles/nvidia-h200.json \
      --sweep-json $R/sweep-lora-r$r-$st.json > $R/sweep-lora-r$r-$st.txt 2> $R/sweep-lora-r$r-$st-build.log
    grep -E "plans run|x3 queued|4x|8x" $R/sweep-lora-r$r-$st.txt | grep -v "model picks\|split" | head -40
  done
done
date +%T
m=llama3.2-1b
$B/fblc zoo $m -o /tmp/zoo/$m.onnx > /dev/null
for b in 1 8; do
  timeout 150 $B/fbl-bench step /tmp/zoo/$m.onnx --profile $R/h200-b$b.json --device ${dev:-0} \
    --steps 3 --strategy fblayout --json $R/$m-full-b$b.json > $R/$m-full-b$b.txt 2>&1
  echo "$m full depth, batch_products $b"; grep -A1 "strategy" $R/$m-full-b$b.txt | tail -1
  date +%T
done
