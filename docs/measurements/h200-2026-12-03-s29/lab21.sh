#!/usr/bin/env bash
# The narrow products against their floor with the committed build (the 4 x 4 blocks of
# rtile_matmul_narrow.cl): fbl-bench matmul --sweep --only lora at ranks 8 and 16, image and
# buffer operands (the narrow kernel at work_items x fill_work_items beside one launch streaming
# the same bytes and an empty launch), then cuBLAS on the same shapes
# (bench/torch_matmul_reference.py: forward, dA = dC B^T, dB = A^T dC of M K N).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.devcarry/bin
R=/tmp/lab21; mkdir -p $R
FINAL=$OUT
trap 'tar -czf $FINAL/lab21.tar.gz -C $R .' EXIT
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
date +%T
for r in 8 16; do
  for st in image buffer; do
    timeout 120 $B/fbl-bench matmul --sweep --only lora --rank $r --runs 10 --storage $st --device ${dev:-0} \
      --profile profiles/nvidia-h200.json --sweep-json $R/sweep-lora-r$r-$st.json > $R/sweep-lora-r$r-$st.txt 2>&1
    echo "rank $r $st"
    grep -E "^lora|stream floor|profile\)" $R/sweep-lora-r$r-$st.txt
  done
done
for shape in "512 2048 8" "8 512 2048" "512 2048 16" "16 512 2048"; do
  python3 bench/torch_matmul_reference.py $shape > "$R/cublas-${shape// /x}.json" 2>&1
done
python3 - <<'PY'
import glob, json
for f in sorted(glob.glob('/tmp/lab21/cublas-*.json')):
    d = json.load(open(f))
    print(f.rsplit('/', 1)[-1], {k: (round(v['min_ms'] * 1e3, 1), round(v['median_ms'] * 1e3, 1)) for k, v in d['results'].items()}, 'us (min, median)')
PY
date +%T
