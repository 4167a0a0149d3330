#!/usr/bin/env bash
# Narrow LoRA products (rtile_matmul_narrow.cl) on and off on a 2-layer Llama, then the full Gemma2 step
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.devcarry/bin; P=profiles/nvidia-h200.json
R=/tmp/lab; mkdir -p $R /tmp/zoo
FINAL=$OUT
trap 'tar -czf $FINAL/lab12.tar.gz -C $R .' EXIT
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
python3 - <<'PY'
import json
p=json.load(open('profiles/nvidia-h200.json'))
p['matmul']['narrow']={'max_side':16,'work_items':256}
json.dump(p,open('/tmp/lab/narrow256.json','w'),indent=1)
p['matmul']['narrow']={'max_side':16,'work_items':128}
json.dump(p,open('/tmp/lab/narrow128.json','w'),indent=1)
PY
$B/fblc zoo llama3.2-1b --layers 2 -o /tmp/zoo/l2.onnx > /dev/null
for v in base narrow256 narrow128; do
  prof=$P; [ $v = base ] || prof=$R/$v.json
  timeout 100 $B/fbl-bench step /tmp/zoo/l2.onnx --profile $prof --device ${dev:-0} --steps 3 --strategy fblayout --json $R/l2-$v.json > $R/l2-$v.txt 2>&1
  python3 -c "
import json
r=json.load(open('$R/l2-$v.json'))['results'][0]
k=r['device_s_by_kernel']
small=sorted(v for n,v in r['device_s_by_node'].items() if 'inear' in n or 'ranspose' in n)
print('$v device ms', round(r['device_s']*1e3,3), 'launches', r['launches_per_step'], 'matmul+splitk', round(sum(v for n,v in k.items() if 'matmul' in n or 'splitk' in n)*1e3,3), 'nodes<60us', len([x for x in small if x<60e-6]), round(sum(x for x in small if x<60e-6)*1e3,3), 'loss', r['first_loss'], r['last_loss'])" 2>&1 | tail -1
done
cp $R/* $FINAL/ 2>/dev/null
OUT=$FINAL MODELS=gemma2-2b SKIP_SWEEP=1 STEP_TIMEOUT=420 bash bench/h200_run.sh speed > $R/gemma-speed.log 2>&1
tail -5 $R/gemma-speed.log
