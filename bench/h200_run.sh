#!/usr/bin/env bash
# The measurements taken on the lent NVIDIA H200 machine, in one batch. Run from the repo root
# there with the carried binaries and libraries in .devcarry/ (see docs/benchmarks.md).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
export POCL_CACHE_DIR=/tmp/pocl-cache
B=$PWD/.devcarry/bin
OUT=${OUT:-/tmp/out}
clinfo -l 2>&1 | tee $OUT/clinfo.txt
$B/fblc profile --list 2>&1 | tee $OUT/devices.txt
dev=$(grep -i nvidia $OUT/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
echo "NVIDIA device index: ${dev:-?}"
# 1. the hardware profile (Figure-4 table), keeping the public facts of the committed file
( time $B/fblc profile --device ${dev:-0} --base profiles/nvidia-h200.json -o $OUT/nvidia-h200.json ) 2>&1 | tee $OUT/profile.log
# 2. Figure-16 matmul per strategy: tiles from the measured H200 profile, then from Adreno-830's
$B/fbl-bench matmul --device ${dev:-0} --profile $OUT/nvidia-h200.json --runs 10 2>&1 | tee $OUT/matmul-h200.txt
$B/fbl-bench matmul --device ${dev:-0} --rtile-profile profiles/adreno-830.json --runs 10 2>&1 | tee $OUT/matmul-adreno-tiles.txt
# 3. cuBLAS reference
python3 bench/torch_matmul_reference.py 2>&1 | tee $OUT/cublas.json
# 4. time per training step of every tiny corpus model
for m in llama-tiny bert-tiny vit-tiny bert-tiny-torchscript; do
  $B/fblc compile tests/data/$m/model.onnx --profile profiles/pocl-cpu.json -o /tmp/$m.fbp >/dev/null &&
  $B/fbl-train /tmp/$m.fbp --weights /tmp/$m.safetensors --data tests/data/$m/test_data_set_0 \
    --steps 30 --device ${dev:-0} 2>&1 | tr '\r' '\n' | tail -1 | sed "s/^/$m: /" | tee -a $OUT/train-steps.txt
done
# 5. whole training steps (fbl-bench step), where the binary has it
if $B/fbl-bench step --help >/dev/null 2>&1; then
  $B/fbl-bench step models/llama3.2-1b-tiny.onnx --profile $OUT/nvidia-h200.json --strategy all \
    --steps 20 --device ${dev:-0} 2>&1 | tee $OUT/step-llama-tiny.txt
fi
