#!/usr/bin/env bash
# The LoRA weight gradients at the MLP's width on the H200 (wgrad_lab), one call, about 3 minutes:
# wgrad_lab at W = 8192 (the MLP's 16 MB products: down's x^T dt, gate and up's dy^T h and
# t^T dy) and W = 2048 (the attention's 4 MB), ranks 8 and 16, both output orientations; every
# tiling beside the two floors. The product's kernel on the same products is timed by
# ../h200-2026-12-04-s37/lab37.sh PART=sweeps (fbl-bench matmul --sweep --only "lora mlp":
# rows "lora mlp dB = dy^T*h" and "lora mlp dA = dh^T*x"), which prints its own stream floor.
# Before the call, here:
#   mkdir -p .devcarry/lab .devcarry/lib
#   g++ -O2 -std=c++17 docs/measurements/h200-2026-12-05-s38/wgrad_lab.cc -lOpenCL -o .devcarry/lab/wgrad_lab
#   cp docs/measurements/h200-2026-12-05-s38/wgrad_lab.cl .devcarry/lab/
#   cp -L /usr/lib/x86_64-linux-gnu/libOpenCL.so.1 .devcarry/lib/
# Run (carry .devcarry): OUT=$OUT bash docs/measurements/h200-2026-12-05-s38/lab38.sh
# Everything lands in $OUT/lab38.tar.gz.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
R=/tmp/lab38; mkdir -p $R
trap 'tar -czf $OUT/lab38.tar.gz -C $R .' EXIT
nvidia-smi -L > $R/gpu.txt 2>&1
date +%T
for w in 8192 2048; do
  timeout 250 .devcarry/lab/wgrad_lab .devcarry/lab/wgrad_lab.cl 0 20 $w 512 > $R/wgrad-w$w.txt 2>&1
  echo "W $w: rc $?"; grep -E "empty|stream|WRONG" $R/wgrad-w$w.txt
  # The five fastest queued tilings per rank and orientation.
  for r in 8 16; do for o in "W x R" "R x W"; do
    awk -v r=$r -v o="$o" '$1 == r && ($2 " " $3 " " $4) == o && $5 == "wgrad"' $R/wgrad-w$w.txt | sort -k12 -n | head -5
  done; done
  date +%T
done
