#!/usr/bin/env bash
# Does the small operand's re-reading cost the narrow kernel? Every group re-reads all of R (its
# columns) once per product, 8-16 MB through L2 at the profile's tiling against the large
# operand's 4 MB. narrow_lab's `rows` variants give each work-item 2 or 4 row blocks, so each R
# texel loaded serves that many, against the committed walk (`planes`), one and three products
# a launch, alone and bare-queued (narrow_lab.cc/.cl here, carried built in .devcarry).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
R=/tmp/lab30; mkdir -p $R
FINAL=$OUT
trap 'tar -czf $FINAL/lab30.tar.gz -C $R .' EXIT
.devcarry/bin/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
date +%T
.devcarry/bin/narrow_lab .devcarry/narrow_lab.cl ${dev:-0} 20 rows 2>&1 | grep -v warning > $R/narrow_lab_rows.txt
cat $R/narrow_lab_rows.txt
date +%T
