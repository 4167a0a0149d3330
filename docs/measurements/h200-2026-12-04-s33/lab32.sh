#!/usr/bin/env bash
# Which walk reads dy B's narrow operand best? narrow_lab (narrow_lab.cc/.cl here, carried built
# in .devcarry): the committed walk (planes) against cslice and allcols, which read R's rows
# whole, K slices 256 to 32, one and three products a launch; alone and bare-queued, against the
# floors; every output checked against a double-precision loop.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
R=/tmp/lab32; mkdir -p $R
FINAL=$OUT
trap 'tar -czf $FINAL/lab32.tar.gz -C $R .' EXIT
.devcarry/bin/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
date +%T
.devcarry/bin/narrow_lab .devcarry/narrow_lab.cl ${dev:-0} 20 2>&1 | grep -v warning > $R/narrow_lab.txt
cat $R/narrow_lab.txt
date +%T
