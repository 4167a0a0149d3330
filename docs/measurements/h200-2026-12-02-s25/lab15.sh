#!/usr/bin/env bash
# The rest of issue 16's speed run after lab14's call ran out of time: the full-depth Gemma2-2B and
# Qwen2.5-1.5B steps, each beside PyTorch eager, with the commands of bench/h200_run.sh speed.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.devcarry/lib:${LD_LIBRARY_PATH:-}
B=$PWD/.devcarry/bin; P=profiles/nvidia-h200.json
R=/tmp/speedB; mkdir -p $R /tmp/zoo
FINAL=$OUT
save() { tar -czf $FINAL/speedB.tmp.tgz -C $R . && mv $FINAL/speedB.tmp.tgz $FINAL/speedB.tar.gz; }
trap save EXIT
$B/fblc profile --list > $R/devices.txt 2>&1
dev=$(grep -i nvidia $R/devices.txt | head -1 | cut -d: -f1 | tr -d " ")
for m in gemma2-2b qwen2.5-1.5b; do
  timeout 100 python3 bench/torch_lora_step.py --model $m --steps 10 2>&1 | tail -1 > $R/torch-$m.json
  cat $R/torch-$m.json
  $B/fblc zoo $m -o /tmp/zoo/$m.onnx > /dev/null
  timeout 330 $B/fbl-bench step /tmp/zoo/$m.onnx --profile $P --device ${dev:-0} --steps 3 --strategy fblayout \
    --json $R/step-$m.json --svg $R/step-$m.svg 2>&1 | grep -v "macro redefined" | tail -25 > $R/step-$m.txt
  cat $R/step-$m.txt
  save
done
