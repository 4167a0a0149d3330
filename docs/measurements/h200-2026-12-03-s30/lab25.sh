#!/usr/bin/env bash
# The committed narrow kernel (0daf553's planes) in the LoRA sweep at ranks 8 and 16, image and
# buffer operands, each variant timed alone and queued as a step queues launches (fbl-bench
# matmul --sweep's "queued" column, beside the stream floor and the empty launch queued the same
# way); then issue 16's full-depth run: MODELS=... bash bench/h200_run.sh speed (results-speed.tar.gz).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
R=/tmp/lab25; mkdir -p $R
FINAL=$OUT
trap 'tar -czf $FINAL/lab25.tar.gz -C $R .' EXIT
.devcarry/bin/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
for r in 8 16; do
  for st in image buffer; do
    timeout 90 .devcarry/bin/fbl-bench matmul --sweep --only lora --rank $r --runs 10 --storage $st --device ${dev:-0} \
      --profile profiles/nvidia-h200.json --sweep-json $R/sweep-lora-r$r-$st.json > $R/sweep-lora-r$r-$st.txt 2>&1
    grep -E "plans run|profile\)" $R/sweep-lora-r$r-$st.txt
  done
done
[ -n "${MODELS:-}" ] && bash bench/h200_run.sh speed
