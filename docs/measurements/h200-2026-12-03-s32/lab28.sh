#!/usr/bin/env bash
# What the narrow kernel's body costs, in one call:
#   1. narrow_lab (narrow_lab.cc/.cl here, carried built in .devcarry): the committed walk with a
#      binary tree, radix-4 and radix-16 trees, K slices 256/128/64, the K walk not unrolled, and
#      register caps, one and three products a launch; alone and bare-queued, against the floors;
#   2. cuBLAS on the same narrow products (bench/torch_narrow_reference.py).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
R=/tmp/lab28; mkdir -p $R
FINAL=$OUT
trap 'tar -czf $FINAL/lab28.tar.gz -C $R .' EXIT
.devcarry/bin/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
date +%T
python3 bench/torch_narrow_reference.py > $R/torch_narrow.json 2> $R/torch_narrow.err
cat $R/torch_narrow.json | python3 -c "
import json,sys
d=json.load(sys.stdin)['results']
for k,v in d.items(): print(f\"{k:12s} alone {v['alone_us']:6.2f} queued {v['queued_us']:6.2f} x3 {v['x3_queued_us_per_product']:6.2f} stream {v['stream_floor_queued_us']:6.2f} launch {v['launch_floor_queued_us']:6.2f}\")"
date +%T
.devcarry/bin/narrow_lab .devcarry/narrow_lab.cl ${dev:-0} 2>&1 | grep -v warning > $R/narrow_lab.txt
cat $R/narrow_lab.txt
date +%T
