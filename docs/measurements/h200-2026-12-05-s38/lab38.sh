#!/usr/bin/env bash
# The LoRA weight gradients at the MLP's width on the H200. PART=lab|steps, one call each (about
# 3 and 6 minutes):
#   lab:    wgrad_lab at W = 8192 (the MLP's 16 MB products: down's x^T dt, gate and up's dy^T h
#           and t^T dy) and W = 2048 (the attention's 4 MB), ranks 8 and 16, both output
#           orientations: every tiling beside the two floors;
#   steps:  2-layer Llama-3.2-1B, Qwen2.5-1.5B, Gemma2-2B at rank 8 and Llama-3.2-1B at 16, with
#           the profile as committed (off), chunk_min_k 4096 (stop 37's chunks), wide_run
#           $WIDE_RUN (default 32; set it from the lab's best TW) and both: device ms, the narrow
#           products by kind (../h200-2026-12-03-s31/narrow_share.py) and the losses (they must
#           agree); MODELS="model:rank ..." runs fewer. This supersedes
#           ../h200-2026-12-04-s37/lab37.sh PART=steps.
# The product's kernel on the products themselves: ../h200-2026-12-04-s37/lab37.sh PART=sweeps,
# run with this stop's fbl-bench, whose sweep also switches matmul.narrow.wide_run on per product
# (its rows "b<blocks>", runs of 8 and 32 texels) beside K in chunks (rows "k<chunks>").
# Before a call, here:
#   mkdir -p .devcarry/lab .devcarry/lib .devcarry/bin
#   g++ -O2 -std=c++17 docs/measurements/h200-2026-12-05-s38/wgrad_lab.cc -lOpenCL -o .devcarry/lab/wgrad_lab
#   cp docs/measurements/h200-2026-12-05-s38/wgrad_lab.cl .devcarry/lab/
#   cp -L /usr/lib/x86_64-linux-gnu/libOpenCL.so.1 .devcarry/lib/
#   strip -o .devcarry/bin/fblc build/bin/fblc; strip -o .devcarry/bin/fbl-bench build/bin/fbl-bench
#   (and the shared libraries they need, into .devcarry/lib, as for bench/h200_run.sh)
# Run (carry .devcarry): PART=lab OUT=$OUT bash docs/measurements/h200-2026-12-05-s38/lab38.sh
# Everything lands in $OUT/lab38-$PART.tar.gz.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
B=.devcarry/bin
WIDE_RUN=${WIDE_RUN:-32}
R=/tmp/lab38-$PART; mkdir -p $R /tmp/zoo
trap 'tar -czf $OUT/lab38-$PART.tar.gz -C $R .' EXIT
nvidia-smi -L > $R/gpu.txt 2>&1
date +%T
if [ $PART = lab ]; then
  for w in 8192 2048; do
    timeout 250 .devcarry/lab/wgrad_lab .devcarry/lab/wgrad_lab.cl 0 20 $w 512 > $R/wgrad-w$w.txt 2>&1
    echo "W $w: rc $?"; grep -E "empty|stream|WRONG" $R/wgrad-w$w.txt
    # The five fastest queued tilings per rank and orientation.
    for r in 8 16; do for o in "W x R" "R x W"; do
      awk -v r=$r -v o="$o" '$1 == r && ($2 " " $3 " " $4) == o && $5 == "wgrad"' $R/wgrad-w$w.txt | sort -k12 -n | head -5
    done; done
    date +%T
  done
  exit 0
fi
variant() {  # name chunk_min_k wide_run
  python3 -c "
import json
p = json.load(open('profiles/nvidia-h200.json'))
if $2: p['matmul']['narrow']['chunk_min_k'] = $2
if $3: p['matmul']['narrow']['wide_run'] = $3
json.dump(p, open('/tmp/h200-$1.json', 'w'), indent=1)"
}
variant off 0 0; variant chunks 4096 0; variant wide 0 $WIDE_RUN; variant both 4096 $WIDE_RUN
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
for mr in ${MODELS:-llama3.2-1b:8 qwen2.5-1.5b:8 gemma2-2b:8 llama3.2-1b:16}; do
  m=${mr%:*}; r=${mr#*:}; name=$m-l2-r$r
  $B/fblc zoo $m --layers 2 --lora-rank $r -o /tmp/zoo/$name.onnx > /dev/null
  for v in off chunks wide both; do
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
