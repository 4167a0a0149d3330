#!/usr/bin/env bash
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
export POCL_CACHE_DIR=/tmp/pocl-cache
B=$PWD/.devcarry/bin; P=profiles/nvidia-h200.json
R=/tmp/lab; mkdir -p $R /tmp/zoo
trap 'tar -czf $OUT/lab5.tar.gz -C $R .' EXIT
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
FBL_CL_OPTIONS=-cl-nv-verbose FBL_CL_BUILD_LOG=1 timeout 90 $B/fbl-bench matmul --device ${dev:-0} --profile $P --runs 20 > $R/matmul.txt 2> $R/matmul-build.log
grep -E "^[a-z]+:|forward\+backward" $R/matmul.txt
timeout 60 python3 bench/torch_matmul_reference.py > $R/cublas.json 2>&1; grep -A1 -E '"(forward|dA|dB)"' $R/cublas.json | grep min_ms
timeout 100 python3 bench/torch_lora_step.py --model llama3.2-1b --steps 10 2>&1 | tail -1 > $R/torch-llama3.2-1b.json; cat $R/torch-llama3.2-1b.json
$B/fblc zoo llama3.2-1b -o /tmp/zoo/llama3.2-1b.onnx > /dev/null && timeout 200 $B/fbl-bench step /tmp/zoo/llama3.2-1b.onnx --profile $P --device ${dev:-0} --steps 3 --strategy fblayout --json $R/step-llama3.2-1b.json 2>&1 | grep -v "macro redefined" | tail -4
timeout 200 $B/fbl-bench matmul --sweep --device ${dev:-0} --profile $P --runs 5 --storage image --tile 64x128x16/8x8:3 --tile 128x64x16/8x8:3 --sweep-json $R/sweep-image.json > $R/sweep-image.txt 2>&1
grep -E "model picks|fastest" $R/sweep-image.txt
