#!/usr/bin/env bash
# elementwise_items 1 against 4 on 2-layer Gemma2 and Llama steps (this commit's binaries), then
# issue 16's speed run for Llama-3.2-1B and Qwen2.5-1.5B (Figure 16 beside cuBLAS, full-depth steps
# beside PyTorch eager).
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.devcarry/bin; P=profiles/nvidia-h200.json
R=/tmp/lab; mkdir -p $R /tmp/zoo
FINAL=$OUT
trap 'tar -czf $FINAL/lab14.tar.gz -C $R .' EXIT
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
python3 - <<'PY'
import json
p=json.load(open('profiles/nvidia-h200.json'))
for n in (1, 2, 4, 8):
    p['kernels']['elementwise_items']=n
    json.dump(p,open(f'/tmp/lab/ew{n}.json','w'),indent=1)
PY
for m in gemma2-2b llama3.2-1b; do
  $B/fblc zoo $m --layers 2 -o /tmp/zoo/$m-2.onnx > /dev/null
  for v in ew1 ew2 ew4 ew8; do
    timeout 100 $B/fbl-bench step /tmp/zoo/$m-2.onnx --profile $R/$v.json --device ${dev:-0} --steps 3 --strategy fblayout --json $R/step2-$m-$v.json > $R/step2-$m-$v.txt 2>&1
    python3 -c "
import json
r=json.load(open('$R/step2-$m-$v.json'))['results'][0]
k=r['device_s_by_kernel']
ew=sum(v for n,v in k.items() if not any(s in n for s in ('matmul','splitk','attention','reduce','sceloss','adamw','slicegrad','fill','gather','softmax','layernorm','pack','pad')))
print('$m $v device ms', round(r['device_s']*1e3,3), 'app ms', round(r['unprofiled_step_s']*1e3,3), 'launches', r['launches_per_step'], 'elementwise-ish', round(ew*1e3,3), 'attention', round(sum(v for n,v in k.items() if 'attention' in n)*1e3,3), 'loss', r['first_loss'], r['last_loss'])" 2>&1 | tail -1
  done
done
cp $R/* $FINAL/ 2>/dev/null
OUT=$FINAL MODELS="llama3.2-1b qwen2.5-1.5b" SKIP_SWEEP=1 bash bench/h200_run.sh speed > $R/speed.log 2>&1
tail -40 $R/speed.log
