#!/usr/bin/env bash
# Issue 16's run for Llama-3.2-1B on this stop's final binaries (.devcarry/bin), then a second
# full-depth pair, stop 31's binaries (.devcarry/old) against these, in one call:
#   1. bench/h200_run.sh speed with MODELS=llama3.2-1b SKIP_SWEEP=1: Figure 16 beside cuBLAS, the
#      full-depth step beside PyTorch eager (results-speed.tar.gz);
#   2. full-depth Llama-3.2-1B steps, new then old.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
MODELS=llama3.2-1b SKIP_SWEEP=1 STEP_TIMEOUT=200 bash bench/h200_run.sh speed
R=/tmp/lab31; mkdir -p $R /tmp/zoo
FINAL=$OUT
trap 'tar -czf $FINAL/lab31.tar.gz -C $R .' EXIT
dev=$(grep -i nvidia /tmp/results/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
m=llama3.2-1b
for v in bin old; do
  timeout 150 .devcarry/$v/fbl-bench step /tmp/zoo/$m.onnx --profile profiles/nvidia-h200.json --device ${dev:-0} \
    --steps 3 --strategy fblayout --json $R/$m-full-$v-2.json > $R/$m-full-$v-2.txt 2>&1
  echo "$m full depth, $v, 2"; grep -A1 "strategy" $R/$m-full-$v-2.txt | tail -1
  date +%T
done
