#!/usr/bin/env bash
# The measurements of docs/results/speed-h200.md on an NVIDIA H200, in batches of under 10
# minutes each. Run from the repo root with fbl's binaries and libraries in FBL_BIN_DIR and
# FBL_LIB_DIR (default build/bin and build/lib; see docs/benchmarks.md):  bash bench/h200_run.sh 1
#   1: Figure 16 (matmul), Figure 17 (transforms), the tiny corpus models per strategy, the
#      PyTorch eager reference for the zoo Llama step;
#   2: the zoo models of Table 3 per strategy (fewer layers: see docs/results/speed-h200.md); 2a: the
#      Figure-14 ablation on the zoo Llama; 3: the CNNs and the SD UNet; sd: the SD UNet alone;
#      t: the tiny corpus models per strategy alone; s: buffer against image storage (Figure 16,
#      then Llama-3.2-1B and BERT-Large at LAYERS layers, default 2, every strategy with each).
# Call it without a pipe to tail: a command killed at a time limit takes its whole
# pipeline, and `| tail` then returns nothing; results-RUN.tar.gz in $OUT holds what finished.
set -uo pipefail
export LD_LIBRARY_PATH=${FBL_LIB_DIR:-$PWD/build/lib}:${LD_LIBRARY_PATH:-}
export POCL_CACHE_DIR=/tmp/pocl-cache
B=${FBL_BIN_DIR:-$PWD/build/bin}
FINAL=${OUT:-/tmp/out}
OUT=/tmp/results   # everything lands here, and is packed into one archive in $FINAL
P=${PROFILE:-profiles/nvidia-h200.json}
RUN=${1:-1}
mkdir -p $OUT /tmp/zoo
# The archive is rewritten after every step (and at exit): a run killed at a time limit still
# leaves what finished, written to a temporary name and renamed, so it is never truncated.
save() { tar -czf $FINAL/results-$RUN.tmp.tgz -C $OUT . && mv $FINAL/results-$RUN.tmp.tgz $FINAL/results-$RUN.tar.gz; }
trap save EXIT
$B/fblc profile --list > $OUT/devices.txt 2>&1
dev=$(grep -i nvidia $OUT/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
echo "NVIDIA device index: ${dev:-?}"

step() {  # step NAME MODEL STEPS [extra fbl-bench args...]
  local name=$1 model=$2 steps=$3
  shift 3
  timeout ${STEP_TIMEOUT:-240} $B/fbl-bench step "$model" --profile $P --device ${dev:-0} --steps "$steps" \
    --json $OUT/step-$name.json --svg $OUT/step-$name.svg "$@" 2>&1 | grep -v "macro redefined" | tail -25 |
    tee $OUT/step-$name.txt
  save
}

case "${1:-1}" in
1)
  timeout 120 $B/fbl-bench matmul --device ${dev:-0} --profile $P --runs 10 2>&1 | tee $OUT/matmul-h200.txt
  timeout 300 $B/fbl-bench transforms --device ${dev:-0} --profile $P --steps 5 --json $OUT/transforms.json 2>&1 |
    grep -v "macro redefined" | tee $OUT/transforms.txt
  for m in llama-tiny bert-tiny vit-tiny; do step $m tests/data/$m/model.onnx 20; done
  timeout 120 python3 bench/torch_lora_step.py --layers 2 --seq 512 2>&1 | tee $OUT/torch-llama-2layers.json
  ;;
2)
  for m in llama3.2-1b qwen2.5-1.5b gemma2-2b bert-large vit-large whisper-large; do
    $B/fblc zoo $m --layers 2 -o /tmp/zoo/$m.onnx > /dev/null && step $m /tmp/zoo/$m.onnx 3
  done
  ;;
2a)
  $B/fblc zoo llama3.2-1b --layers 2 -o /tmp/zoo/llama3.2-1b.onnx > /dev/null &&
    step llama3.2-1b-ablation /tmp/zoo/llama3.2-1b.onnx 3 --ablation
  ;;
t)
  for m in llama-tiny bert-tiny vit-tiny; do step $m tests/data/$m/model.onnx 20; done
  ;;
3)
  for m in mobilenetv2 resnet34 vgg19; do
    $B/fblc zoo $m -o /tmp/zoo/$m.onnx > /dev/null && step $m /tmp/zoo/$m.onnx 3
  done
  $B/fblc zoo stable-diffusion-1.5 --layers 1 -o /tmp/zoo/sd.onnx > /dev/null && step stable-diffusion-1.5 /tmp/zoo/sd.onnx 2
  ;;
s)
  timeout 120 $B/fbl-bench matmul --device ${dev:-0} --profile $P --runs 10 2>&1 | tee $OUT/matmul-h200.txt
  for m in ${MODELS:-llama3.2-1b bert-large}; do
    $B/fblc zoo $m --layers ${LAYERS:-2} -o /tmp/zoo/$m.onnx > /dev/null &&
      $B/fblc compile /tmp/zoo/$m.onnx --profile $P -o /tmp/zoo/$m.fbp --storage image --no-weights --report $OUT/compile-$m-image.json > /dev/null &&
      STEP_TIMEOUT=280 step $m-storage /tmp/zoo/$m.onnx 3 --strategy all --storage buffer --storage image
  done
  ;;
k)  # kernels: the tiling sweep (buffers, then images), Figure 16 with the profile's choice, cuBLAS,
    # PyTorch eager steps at full depth, and a 2-layer Llama step with every node's time
  FBL_CL_OPTIONS=-cl-nv-verbose FBL_CL_BUILD_LOG=1 timeout 200 $B/fbl-bench matmul --sweep --device ${dev:-0} --profile $P \
    --runs 5 ${TILES:-} --sweep-json $OUT/sweep-buffer.json > $OUT/sweep-buffer.txt 2> $OUT/sweep-buffer-build.log
  tail -60 $OUT/sweep-buffer.txt
  timeout 150 $B/fbl-bench matmul --sweep --device ${dev:-0} --profile $P --runs 5 --storage image \
    --sweep-json $OUT/sweep-image.json > $OUT/sweep-image.txt 2>&1
  timeout 60 $B/fbl-bench matmul --device ${dev:-0} --profile $P --runs 10 2>&1 | tee $OUT/matmul-h200.txt
  timeout 60 python3 bench/torch_matmul_reference.py 2>&1 | tee $OUT/cublas.json
  for m in llama3.2-1b qwen2.5-1.5b gemma2-2b; do
    timeout 100 python3 bench/torch_lora_step.py --model $m --steps 10 2>&1 | tail -1 | tee $OUT/torch-$m.json
  done
  $B/fblc zoo llama3.2-1b --layers 2 -o /tmp/zoo/llama3.2-1b.onnx > /dev/null &&
    step llama3.2-1b-2layers /tmp/zoo/llama3.2-1b.onnx 3 --strategy fblayout
  ;;
k2)  # kernels, second look: the sweep on the large products with more candidates, then steps
  timeout 200 $B/fbl-bench matmul --sweep --device ${dev:-0} --profile $P --runs 5 --storage image --only ${ONLY:-fig16} \
    ${TILES:-} --sweep-json $OUT/sweep2-image.json > $OUT/sweep2-image.txt 2>&1
  grep -E "model picks|fastest| 3 " $OUT/sweep2-image.txt | head -80
  $B/fblc zoo llama3.2-1b --layers 2 -o /tmp/zoo/llama3.2-1b-2.onnx > /dev/null &&
    step llama3.2-1b-2layers /tmp/zoo/llama3.2-1b-2.onnx 3 --strategy fblayout
  $B/fblc zoo llama3.2-1b -o /tmp/zoo/llama3.2-1b.onnx > /dev/null &&
    step llama3.2-1b-full /tmp/zoo/llama3.2-1b.onnx 3 --strategy fblayout
  ;;
speed)  # docs/results/speed-h200.md's full-depth figures in one run: the sweep (SKIP_SWEEP=1: not), Figure 16 beside cuBLAS,
        # full-depth steps beside PyTorch eager; bench/speed_report.py writes h200-speed.json from them.
        # With the unprofiled timing and the attention kernels this ran past 10 minutes for three
        # models (2026-12-02): run MODELS=llama3.2-1b, then the others, in separate calls.
  if [ -z "${SKIP_SWEEP:-}" ]; then
    timeout 150 $B/fbl-bench matmul --sweep --device ${dev:-0} --profile $P --runs 5 --storage image \
      --sweep-json $OUT/sweep-image.json > $OUT/sweep-image.txt 2>&1
    grep -E "model picks|fastest" $OUT/sweep-image.txt
  fi
  if [ -z "${SKIP_MATMUL:-}" ]; then  # SKIP_MATMUL=1: only the steps (a second call of the same run)
    timeout 60 $B/fbl-bench matmul --device ${dev:-0} --profile $P --runs 10 2>&1 | tee $OUT/matmul-h200.txt
    timeout 60 $B/fbl-bench matmul --device ${dev:-0} --profile $P --runs 10 --json > $OUT/matmul-h200.json 2>&1
    timeout 60 python3 bench/torch_matmul_reference.py > $OUT/cublas.json 2>&1
  fi
  for m in ${MODELS:-llama3.2-1b qwen2.5-1.5b gemma2-2b}; do
    echo "[$(date +%T)] $m: PyTorch"
    timeout 100 python3 bench/torch_lora_step.py --model $m --steps 10 2>&1 | tail -1 > $OUT/torch-$m.json
    echo "[$(date +%T)] $m: fbl"
    $B/fblc zoo $m -o /tmp/zoo/$m.onnx > /dev/null && STEP_TIMEOUT=${STEP_TIMEOUT:-200} step $m /tmp/zoo/$m.onnx 3 --strategy fblayout
  done
  echo "[$(date +%T)] done"
  python3 bench/speed_report.py $OUT $OUT/h200-speed.json && cat $OUT/h200-speed.json
  ;;
attn)  # the flash attention pair against the exported attention ops, Llama-3.2-1B full depth
  $B/fblc zoo llama3.2-1b -o /tmp/zoo/llama3.2-1b.onnx > /dev/null &&
    STEP_TIMEOUT=280 step llama3.2-1b-fused /tmp/zoo/llama3.2-1b.onnx 3 --strategy fblayout &&
    STEP_TIMEOUT=280 step llama3.2-1b-unfused /tmp/zoo/llama3.2-1b.onnx 3 --strategy fblayout --disable-pass fuse-attention
  ;;
sd)
  $B/fblc zoo stable-diffusion-1.5 --layers 1 -o /tmp/zoo/sd.onnx > /dev/null && step stable-diffusion-1.5 /tmp/zoo/sd.onnx 2
  ;;
esac
