#!/usr/bin/env bash
# Narrow products against their floor (rtile_matmul_narrow.cl, matmul.narrow.block_side):
# 1. fbl-bench matmul --sweep --only lora at ranks 8 and 16: every narrow-kernel variant beside the
#    stream floor (one launch streaming the same bytes) and an empty launch;
# 2. cuBLAS (bench/torch_matmul_reference.py) on the same shapes;
# 3. 2-layer Llama-3.2-1B, Qwen2.5-1.5B and Gemma2-2B steps at block_side 4 and 16 (the LoRA
#    nodes' device ms, docs/measurements/h200-2026-12-03-s28/summarise.py).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
export POCL_CACHE_DIR=/tmp/pocl-cache
B=$PWD/.devcarry/bin
R=/tmp/lab; mkdir -p $R /tmp/zoo
FINAL=$OUT
trap 'tar -czf $FINAL/lab20.tar.gz -C $R .' EXIT
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
date +%T
for r in 8 16; do
  timeout 150 $B/fbl-bench matmul --sweep --only lora --rank $r --runs 10 --storage image --device ${dev:-0} \
    --profile profiles/nvidia-h200.json --sweep-json $R/sweep-lora-r$r.json > $R/sweep-lora-r$r.txt 2>&1
  grep -E "^lora|stream floor|profile\)" $R/sweep-lora-r$r.txt
done
for shape in "512 2048 8" "8 512 2048" "512 2048 16" "16 512 2048"; do
  python3 bench/torch_matmul_reference.py $shape > "$R/cublas-${shape// /x}.json" 2>&1
done
python3 - <<'PY'
import glob, json
for f in sorted(glob.glob('/tmp/lab/cublas-*.json')):
    try:
        d = json.load(open(f))
        print(f.rsplit('/', 1)[-1], {k: round(v['min_ms'] * 1e3, 1) for k, v in d['results'].items()}, 'us')
    except Exception as e:
        print(f, 'failed', open(f).read()[-300:])
p = json.load(open('profiles/nvidia-h200.json'))
for side in (4, 16):
    p['matmul']['narrow']['block_side'] = side
    json.dump(p, open(f'/tmp/lab/side{side}.json', 'w'), indent=1)
PY
date +%T
for m in llama3.2-1b qwen2.5-1.5b gemma2-2b; do
  $B/fblc zoo $m --layers 2 -o /tmp/zoo/$m-l2.onnx > /dev/null
  for side in 4 16; do
    timeout 100 $B/fbl-bench step /tmp/zoo/$m-l2.onnx --profile $R/side$side.json --device ${dev:-0} --steps 3 \
      --strategy fblayout --json $R/$m-side$side.json > $R/$m-side$side.txt 2>&1
    python3 docs/measurements/h200-2026-12-03-s28/summarise.py $R/$m-side$side.json 2>&1 | tail -1
  done
done
date +%T
