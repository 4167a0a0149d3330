#!/usr/bin/env bash
# Low-rank terms (compiler/plan/fusion.h, "low rank"): 2-layer Llama-3.2-1B, Qwen2.5-1.5B and
# Gemma2-2B steps with the terms (the default) and with `--disable-pass low-rank-terms`, the same
# binaries: device ms a step, launches, and the device ms of the products by size
# (summarised by docs/measurements/h200-2026-12-03-s28/summarise.py).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
export POCL_CACHE_DIR=/tmp/pocl-cache
B=$PWD/.devcarry/bin
R=/tmp/lab; mkdir -p $R /tmp/zoo
FINAL=$OUT
trap 'tar -czf $FINAL/lab19.tar.gz -C $R .' EXIT
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
run() {  # model variant [fbl-bench args]
  local m=$1 v=$2
  shift 2
  timeout 100 $B/fbl-bench step /tmp/zoo/$m-l2.onnx --profile profiles/nvidia-h200.json --device ${dev:-0} --steps 3 \
    --strategy fblayout --json $R/$m-$v.json "$@" > $R/$m-$v.txt 2>&1
  python3 docs/measurements/h200-2026-12-03-s28/summarise.py $R/$m-$v.json 2>&1 | tail -1
}
date +%T
for m in llama3.2-1b qwen2.5-1.5b gemma2-2b; do
  $B/fblc zoo $m --layers 2 -o /tmp/zoo/$m-l2.onnx > /dev/null
  run $m terms
  run $m noterms --disable-pass low-rank-terms
done
date +%T
