#!/usr/bin/env bash
# K in chunks for the MLP's x A^T and dy B on the H200. PART=lab|sweeps|steps, one call each
# (about 2, 4 and 5 minutes):
#   lab:    split_lab at K = 8192 (the MLP's 16 MB products) and 2048 (the attention's 4 MB),
#           ranks 8 and 16: every tiling, in one launch (`last`) and two (`planes`), beside the
#           plans' 4x4/256 and the two floors;
#   sweeps: fbl-bench matmul --sweep --only "lora mlp" at rank 8 and 16 (buffer) and 8 (image),
#           the profile as committed (chunk_min_k absent: off) and with chunk_min_k 4096; the
#           sweep's own row switches chunking per product (RANKS, VARIANTS: fewer of either);
#   steps:  2-layer Llama-3.2-1B, Qwen2.5-1.5B, Gemma2-2B at rank 8 and Llama-3.2-1B at 16, off
#           and chunk_min_k 4096: device ms, the narrow products by kind
#           (../h200-2026-12-03-s31/narrow_share.py) and the losses (they must agree).
#           Superseded by ../h200-2026-12-05-s38/lab38.sh PART=steps, which adds stop 38's
#           wide_run. Run with stop 38's fbl-bench, PART=sweeps also prints wide_run's rows.
# Before the call, here:
#   mkdir -p .devcarry/lab .devcarry/lib .devcarry/bin
#   g++ -O2 -std=c++17 docs/measurements/h200-2026-12-04-s37/split_lab.cc -lOpenCL -o .devcarry/lab/split_lab
#   cp docs/measurements/h200-2026-12-04-s37/split_lab.cl .devcarry/lab/
#   cp -L /usr/lib/x86_64-linux-gnu/libOpenCL.so.1 .devcarry/lib/
#   strip -o .devcarry/bin/fblc build/bin/fblc; strip -o .devcarry/bin/fbl-bench build/bin/fbl-bench
#   (and the shared libraries they need, into .devcarry/lib, as for bench/h200_run.sh)
# Run (carry .devcarry): PART=lab OUT=$OUT bash docs/measurements/h200-2026-12-04-s37/lab37.sh
# Everything lands in $OUT/lab37-$PART.tar.gz.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
B=.devcarry/bin
R=/tmp/lab37-$PART; mkdir -p $R /tmp/zoo
trap 'tar -czf $OUT/lab37-$PART.tar.gz -C $R .' EXIT
nvidia-smi -L > $R/gpu.txt 2>&1
date +%T
if [ $PART = lab ]; then
  for k in 8192 2048; do
    timeout 250 .devcarry/lab/split_lab .devcarry/lab/split_lab.cl 0 20 512 $k > $R/split-k$k.txt 2>&1
    echo "K $k: rc $?"; grep -E "empty|stream| 4 +1 +1 +256 " $R/split-k$k.txt
    for n in 8 16; do awk -v n=$n '$1 == n && $2 == "split"' $R/split-k$k.txt | sort -k11 -n | head -6; done
  done
  exit 0
fi
variant() {  # name chunk_min_k
  python3 -c "
import json
p = json.load(open('profiles/nvidia-h200.json'))
if $2: p['matmul']['narrow']['chunk_min_k'] = $2
json.dump(p, open('/tmp/h200-$1.json', 'w'), indent=1)"
}
variant off 0; variant k4096 4096
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
if [ $PART = sweeps ]; then
  for rs in ${RANKS:-8-buffer 16-buffer 8-image}; do
    r=${rs%-*}; st=${rs#*-}
    for v in ${VARIANTS:-off k4096}; do
      timeout 100 $B/fbl-bench matmul --sweep --only "lora mlp" --rank $r --runs 10 --storage $st --device ${dev:-0} \
        --profile /tmp/h200-$v.json --sweep-json $R/sweep-r$r-$st-$v.json > $R/sweep-r$r-$st-$v.txt 2>&1
      echo "rank $r $st $v"; grep -E "^lora|stream floor" $R/sweep-r$r-$st-$v.txt | cut -c1-150
      grep -A6 "  items" $R/sweep-r$r-$st-$v.txt | grep -v "^--" | cut -c1-150
    done
    date +%T
  done
  exit 0
fi
for mr in llama3.2-1b:8 qwen2.5-1.5b:8 gemma2-2b:8 llama3.2-1b:16; do
  m=${mr%:*}; r=${mr#*:}; name=$m-l2-r$r
  $B/fblc zoo $m --layers 2 --lora-rank $r -o /tmp/zoo/$name.onnx > /dev/null
  for v in off k4096; do
    $B/fblc compile /tmp/zoo/$name.onnx --profile /tmp/h200-$v.json -o /tmp/zoo/$name-$v.fbp > /dev/null 2>&1
    $B/fblc explain /tmp/zoo/$name-$v.fbp > $R/$name-$v-explain.txt 2>&1
    timeout 100 $B/fbl-bench step /tmp/zoo/$name.onnx --profile /tmp/h200-$v.json --device ${dev:-0} \
      --steps 3 --strategy fblayout --json $R/$name-$v.json > $R/$name-$v.txt 2>&1
    echo "$name, $v"; sed -n 3p $R/$name-$v.txt
    python3 -c "import json; r = json.load(open('$R/$name-$v.json'))['results'][0]; print('loss', r['first_loss'], r['last_loss'])"
    python3 docs/measurements/h200-2026-12-03-s31/narrow_share.py $R/$name-$v-explain.txt $R/$name-$v.json 2>&1 | tail -4
  done
  date +%T
done
