#!/usr/bin/env bash
# Narrow products (rtile_matmul_narrow.cl): matmul.narrow.work_items x fill_work_items on a 2-layer
# Llama-3.2-1B step (the LoRA nodes' device time), and the tiled candidates on the six LoRA products
# (fbl-bench matmul --sweep --only lora).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.devcarry/bin
R=/tmp/lab; mkdir -p $R /tmp/zoo
FINAL=$OUT
trap 'tar -czf $FINAL/lab17.tar.gz -C $R .' EXIT
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
python3 - <<'PY'
import json
p=json.load(open('profiles/nvidia-h200.json'))
for w in (128, 256, 512):
    for f in (0, 65536, 262144):
        p['matmul']['narrow']['work_items']=w
        p['matmul']['narrow']['fill_work_items']=f
        json.dump(p,open(f'/tmp/lab/narrow{w}-{f}.json','w'),indent=1)
PY
$B/fblc zoo llama3.2-1b --layers 2 -o /tmp/zoo/l2.onnx > /dev/null
for v in 128-0 128-65536 128-262144 256-0 256-65536 256-262144 512-0 512-65536 512-262144 128-0; do
  t0=$(date +%s.%N)
  timeout 60 $B/fbl-bench step /tmp/zoo/l2.onnx --profile $R/narrow$v.json --device ${dev:-0} --steps 3 --strategy fblayout --json $R/l2-$v.json > $R/l2-$v.txt 2>&1
  t1=$(date +%s.%N)
  python3 -c "
import json
r=json.load(open('$R/l2-$v.json'))['results'][0]
small=[v for n,v in r['device_s_by_node'].items() if ('inear' in n or 'ranspose' in n) and v<60e-6]
print('$v device ms', round(r['device_s']*1e3,3), 'launches', r['launches_per_step'], 'lora nodes', len(small), 'sum ms', round(sum(small)*1e3,3), 'loss', r['first_loss'], r['last_loss'], 'wall s', round($t1-$t0,1))" 2>&1 | tail -1
done
timeout 240 $B/fbl-bench matmul --sweep --only lora --runs 10 --device ${dev:-0} --profile profiles/nvidia-h200.json --sweep-json $R/sweep-lora.json > $R/sweep-lora.txt 2>&1
tail -60 $R/sweep-lora.txt
