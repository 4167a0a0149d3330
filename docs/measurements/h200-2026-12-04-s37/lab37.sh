#!/usr/bin/env bash
# The split tilings of the MLP's x A^T and dy B (split_lab.cl) on the H200, in one call:
#   split_lab at K = 8192 (the MLP's 16 MB products) and K = 2048 (the attention's 4 MB), ranks 8
#   and 16, every tiling beside the plans' 4x4/256 and the two floors.
# Build here first (the device has no OpenCL headers):
#   mkdir -p .devcarry/lab .devcarry/lib
#   g++ -O2 -std=c++17 docs/measurements/h200-2026-12-04-s37/split_lab.cc -lOpenCL -o .devcarry/lab/split_lab
#   cp docs/measurements/h200-2026-12-04-s37/split_lab.cl .devcarry/lab/
#   cp -L /usr/lib/x86_64-linux-gnu/libOpenCL.so.1 .devcarry/lib/
# Run (carry .devcarry): OUT=$OUT bash docs/measurements/h200-2026-12-04-s37/lab37.sh
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
R=/tmp/lab37; mkdir -p $R
FINAL=$OUT
trap 'tar -czf $FINAL/lab37.tar.gz -C $R .' EXIT
nvidia-smi -L > $R/devices.txt 2>&1
for k in 8192 2048; do
  timeout 250 .devcarry/lab/split_lab .devcarry/lab/split_lab.cl 0 20 512 $k > $R/split-k$k.txt 2>&1
  echo "K $k: rc $?"; grep -E "empty|stream| 4 +1 +1 +256 " $R/split-k$k.txt
  for n in 8 16; do awk -v n=$n '$1 == n && $2 == "split"' $R/split-k$k.txt | sort -k11 -n | head -6; done
done
