#!/usr/bin/env bash
# Flash attention's split streamed ranges (kernels.attention.min_groups_per_unit) and tile sizes
# (min_whole_tile, dq_min_whole_tile) on 2-layer Gemma2-2B, Qwen2.5-1.5B and Llama-3.2-1B steps,
# plus loads issued before local stores (-DFBL_STAGE_IN_REGISTERS, a macro of that build only: it lost and
# was removed): each variant's attention
# device ms per step, by kernel.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.devcarry/bin
R=/tmp/lab; mkdir -p $R /tmp/zoo
FINAL=$OUT
trap 'tar -czf $FINAL/lab18.tar.gz -C $R .' EXIT
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
python3 - <<'PY'
import json
variants = {
  'base': {},
  'g4': {'min_groups_per_unit': 4},
  'g8': {'min_groups_per_unit': 8},
  'g4w32': {'min_groups_per_unit': 4, 'min_whole_tile': 32, 'dq_min_whole_tile': 32},
  'g8w32': {'min_groups_per_unit': 8, 'min_whole_tile': 32, 'dq_min_whole_tile': 32},
  'g4reg': {'min_groups_per_unit': 4, 'regs': 1},
}
for name, v in variants.items():
    p = json.load(open('profiles/nvidia-h200.json'))
    if v.pop('regs', None): p['opencl']['build_options'] += ' -DFBL_STAGE_IN_REGISTERS'
    p['kernels']['attention'].update(v)
    json.dump(p, open(f'/tmp/lab/{name}.json', 'w'), indent=1)
PY
for m in gemma2-2b qwen2.5-1.5b llama3.2-1b; do $B/fblc zoo $m --layers 2 -o /tmp/zoo/$m-l2.onnx > /dev/null; done
run() {  # model variant
  local m=$1 v=$2 t0 t1
  t0=$(date +%s.%N)
  timeout 90 $B/fbl-bench step /tmp/zoo/$m-l2.onnx --profile $R/$v.json --device ${dev:-0} --steps 3 --strategy fblayout --json $R/$m-$v.json > $R/$m-$v.txt 2>&1
  t1=$(date +%s.%N)
  python3 -c "
import json
r=json.load(open('$R/$m-$v.json'))['results'][0]
k=r['device_s_by_kernel']
att={n.split('/')[1]:round(s*1e3,3) for n,s in k.items() if 'attention' in n}
print('$m $v device ms', round(r['device_s']*1e3,3), 'attention', round(sum(att.values()),3), att, 'loss', r['first_loss'], r['last_loss'], 'wall s', round($t1-$t0,1))" 2>&1 | tail -1
}
date +%T
for v in base g4 g8 g4w32 g8w32 g4reg; do run gemma2-2b $v; done
for v in base g4 g8 g4w32 g4reg; do run qwen2.5-1.5b $v; done
for v in base g4 g8 g4reg; do run llama3.2-1b $v; done
date +%T
