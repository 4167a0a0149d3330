#!/usr/bin/env bash
# final figures this session: Figure 16 + cuBLAS, full Llama step beside PyTorch; 2-layer attention per kernel
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.devcarry/bin; P=profiles/nvidia-h200.json
R=/tmp/lab; mkdir -p $R /tmp/zoo
trap 'tar -czf $OUT/lab8.tar.gz -C $R .' EXIT
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
for m in gemma2-2b qwen2.5-1.5b llama3.2-1b; do
  $B/fblc zoo $m --layers 2 -o /tmp/zoo/$m-2.onnx > /dev/null &&
    timeout 60 $B/fbl-bench step /tmp/zoo/$m-2.onnx --profile $P --device ${dev:-0} --steps 3 --strategy fblayout --json $R/step2-$m.json > /dev/null 2>&1
  python3 -c "
import json
r=json.load(open('$R/step2-$m.json'))['results'][0]
print('$m 2 layers device ms', round(r['device_s']*1e3,2), {k:round(v*1e3,3) for k,v in r['device_s_by_kernel'].items() if 'attention' in k})"
done
OUT2=$OUT; OUT=$R MODELS=llama3.2-1b SKIP_SWEEP=1 STEP_TIMEOUT=150 bash bench/h200_run.sh speed 2>&1 | grep -v "macro redefined" | tail -40
OUT=$OUT2
