#!/usr/bin/env bash
# Narrow products (rtile_matmul_narrow.cl): matmul.narrow.work_items 32 / 64 / 128 (the profile) / 256
# on a 2-layer Llama-3.2-1B step; the LoRA nodes' device time (nodes under 60 us).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.devcarry/bin
R=/tmp/lab; mkdir -p $R /tmp/zoo
FINAL=$OUT
trap 'tar -czf $FINAL/lab16.tar.gz -C $R .' EXIT
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
python3 - <<'PY'
import json
p=json.load(open('profiles/nvidia-h200.json'))
for w in (32, 64, 128, 256):
    p['matmul']['narrow']['work_items']=w
    json.dump(p,open(f'/tmp/lab/narrow{w}.json','w'),indent=1)
PY
$B/fblc zoo llama3.2-1b --layers 2 -o /tmp/zoo/l2.onnx > /dev/null
for w in 32 64 128 256; do
  timeout 60 $B/fbl-bench step /tmp/zoo/l2.onnx --profile $R/narrow$w.json --device ${dev:-0} --steps 3 --strategy fblayout --json $R/l2-narrow$w.json > $R/l2-narrow$w.txt 2>&1
  python3 -c "
import json
r=json.load(open('$R/l2-narrow$w.json'))['results'][0]
small=[v for n,v in r['device_s_by_node'].items() if ('inear' in n or 'ranspose' in n) and v<60e-6]
print('work_items $w device ms', round(r['device_s']*1e3,3), 'launches', r['launches_per_step'], 'lora nodes', len(small), 'sum ms', round(sum(small)*1e3,3), 'loss', r['first_loss'], r['last_loss'])" 2>&1 | tail -1
done
