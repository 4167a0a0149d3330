#!/usr/bin/env bash
# MatMul schedule (any split, tail launch) on Gemma/Qwen shapes against single launches and cuBLAS;
# 2-layer steps of the previous binaries (da955e5) against this commit's.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.devcarry/bin; O=$PWD/.devcarry/old; P=profiles/nvidia-h200.json
R=/tmp/lab; mkdir -p $R /tmp/zoo
FINAL=$OUT
trap 'tar -czf $FINAL/lab13.tar.gz -C $R .' EXIT
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
mm() { # label args
  local l=$1; shift
  timeout 90 $B/fbl-bench matmul --device ${dev:-0} --profile $P --strategy fblayout --runs 10 "$@" > $R/mm-$l.txt 2>&1
  printf "%-22s" $l; awk '/^  forward  /{f=$2} /backward dA/{a=$3} /backward dB/{b=$3} /forward\+backward/{t=$2} END{printf " fwd %s dA %s dB %s total %s\n", f,a,b,t}' $R/mm-$l.txt
}
for s in "512 2304 9216" "512 1536 8960" "512 2048 8192"; do
  set -- $s; tag=$1x$2x$3
  mm sched-$tag --m $1 --k $2 --n $3
  mm single-$tag --m $1 --k $2 --n $3 --single-launch
  timeout 60 python3 bench/torch_matmul_reference.py $1 $2 $3 > $R/cublas-$tag.json 2>&1
  echo -n "cublas-$tag "; grep -A1 -E '"(forward|dA|dB)"' $R/cublas-$tag.json | grep min_ms | tr -d ' \n'; echo
  grep -h "tiling forward" $R/mm-sched-$tag.txt | head -1 | cut -c1-400
done
for m in gemma2-2b qwen2.5-1.5b; do
  $B/fblc zoo $m --layers 2 -o /tmp/zoo/$m-2.onnx > /dev/null
  for v in old new; do
    bin=$B; [ $v = old ] && bin=$O
    timeout 120 $bin/fbl-bench step /tmp/zoo/$m-2.onnx --profile $P --device ${dev:-0} --steps 3 --strategy fblayout --json $R/step2-$m-$v.json > $R/step2-$m-$v.txt 2>&1
    python3 -c "
import json
r=json.load(open('$R/step2-$m-$v.json'))['results'][0]
k=r['device_s_by_kernel']
print('$m $v device ms', round(r['device_s']*1e3,3), 'app ms', round(r['unprofiled_step_s']*1e3,3), 'launches', r['launches_per_step'], 'matmul+splitk', round(sum(v for n,v in k.items() if 'matmul' in n or 'splitk' in n)*1e3,3), 'loss', r['first_loss'], r['last_loss'])" 2>&1 | tail -1
  done
done
