#!/usr/bin/env bash
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.devcarry/bin
R=/tmp/lab; mkdir -p $R
trap 'tar -czf $OUT/lab4.tar.gz -C $R .' EXIT
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
i=0
run() { # profile opts
  i=$((i+1))
  FBL_CL_OPTIONS="$2 -cl-nv-verbose" FBL_CL_BUILD_LOG=1 timeout 90 $B/fbl-bench matmul --device ${dev:-0} --profile $1 --runs 20 --strategy fblayout > $R/v$i.txt 2> $R/v$i.log
  printf "v%-2s %-32s %-40s" $i "$1" "$2"
  awk '/^  forward  /{f=$2} /backward dA/{a=$3} /backward dB/{b=$3} /forward\+backward/{t=$2} END{printf " fwd %s dA %s dB %s total %s", f,a,b,t}' $R/v$i.txt
  echo "  regs: $(grep -A6 "for 'matmul_" $R/v$i.log | grep -o 'Used [0-9]* registers' | awk '{print $2}' | tr '\n' ' ') spill: $(grep -A6 "for 'matmul_" $R/v$i.log | grep -o '[0-9]* bytes spill stores' | awk '{print $1}' | tr '\n' ' ')"
}
run profiles/nvidia-h200.json ""
run profiles/nvidia-h200.json "-DLAB_ALIGN"
run .devcarry/h200-nocap.json ""
run .devcarry/h200-nocap.json "-DLAB_ALIGN"
run .devcarry/h200-nocap.json "-DLAB_ALIGN -DFBL_NO_REQD_WORK_GROUP_SIZE -cl-nv-maxrregcount=128"
run profiles/nvidia-h200.json ""
run profiles/nvidia-h200.json "-DLAB_ALIGN"
