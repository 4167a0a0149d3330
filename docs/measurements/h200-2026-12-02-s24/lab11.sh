#!/usr/bin/env bash
# MatMul without bounds checks on tile-aligned products (ALIGNED), and TK/pipeline variants
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.devcarry/bin; P=profiles/nvidia-h200.json
R=/tmp/lab; mkdir -p $R
trap 'tar -czf $OUT/lab11.tar.gz -C $R .' EXIT
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
mm() { # label args
  local l=$1; shift
  mkdir -p $R/dump-$l
  FBL_CL_DUMP_DIR=$R/dump-$l FBL_CL_OPTIONS=-cl-nv-verbose FBL_CL_BUILD_LOG=1 timeout 120 $B/fbl-bench matmul --device ${dev:-0} --profile $P "$@" > $R/mm-$l.txt 2> $R/mm-$l.log
  printf "%-12s" $l; awk '/^  forward  /{f=$2} /backward dA/{a=$3} /backward dB/{b=$3} /forward\+backward/{t=$2} END{printf " fwd %s dA %s dB %s total %s  ", f,a,b,t}' $R/mm-$l.txt
  grep -hoE "Used [0-9]+ registers|[0-9]+ bytes spill (stores|loads)" $R/mm-$l.log | sort | uniq -c | tr '\n' ' '; echo
}
mm aligned --runs 20 --strategy fblayout
mm reuse --runs 20 --strategy reuse
mm tk32p3 --runs 20 --strategy fblayout --tile 128x128x32/8x8:3
mm tk32p2 --runs 20 --strategy fblayout --tile 128x128x32/8x8:2
mm tk16p2 --runs 20 --strategy fblayout --tile 128x128x16/8x8:2
mm tk8p3 --runs 20 --strategy fblayout --tile 128x128x8/8x8:3
mm lmhead --runs 5 --strategy fblayout --m 512 --k 2304 --n 128000
timeout 60 python3 bench/torch_matmul_reference.py 512 2304 128000 > $R/cublas-lmhead.json 2>&1
timeout 60 python3 bench/torch_matmul_reference.py > $R/cublas-fig16.json 2>&1
for f in $R/cublas-*.json; do echo $f; grep -A1 -E '"(forward|dA|dB)"' $f | grep min_ms | tr '\n' ' '; echo; done
