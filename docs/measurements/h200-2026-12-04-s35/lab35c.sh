#!/usr/bin/env bash
# Launch batching in passes (compiler/plan/launch_batching.cc): gate and up's dy B share a launch
# once their x^T dt have moved after gate's dt. Stop 35's first change (.devcarry/old/fbl-bench)
# against the passes (.devcarry/bin/fbl-bench), one call, 2-layer rank-8 steps of Llama-3.2-1B,
# Qwen2.5-1.5B and Gemma2-2B under the H200 profile. The plans' listings (lab35c/*-explain.txt)
# and the models (.devcarry/zoo: `fblc zoo M --layers 2`, random weights) were written on the
# workstation by each build's fblc (the plan does not depend on the device);
# narrow products by kind: ../h200-2026-12-03-s31/narrow_share.py.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
D=docs/measurements/h200-2026-12-04-s35/lab35c
R=/tmp/lab35c; mkdir -p $R
trap 'tar -czf $OUT/lab35c.tar.gz -C $R .' EXIT
bench() { [ $1 = old ] && echo .devcarry/old/fbl-bench || echo .devcarry/bin/fbl-bench; }
date +%T
for m in llama3.2-1b qwen2.5-1.5b gemma2-2b; do
  name=$m-l2-r8
  for v in old new; do
    timeout 100 $(bench $v) step .devcarry/zoo/$name.onnx --profile profiles/nvidia-h200.json --steps 3 \
      --strategy fblayout --json $R/$name-$v.json > $R/$name-$v.txt 2>&1
    echo "$name, $v"; sed -n 3p $R/$name-$v.txt
    python3 -c "import json; r = json.load(open('$R/$name-$v.json'))['results'][0]; print('loss', r['first_loss'], r['last_loss'])"
    python3 docs/measurements/h200-2026-12-03-s31/narrow_share.py $D/$name-$v-explain.txt $R/$name-$v.json 2>&1 | tail -4
  done
  date +%T
done
