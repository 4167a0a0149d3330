#!/bin/bash
# Median wall and in-process compile_seconds of 5 runs, the two binaries alternating, per model and profile.
# usage: ctime.sh BEFORE_FBLC AFTER_FBLC (the zoo models first: fblc zoo NAME -o /tmp/zoo/NAME.onnx)
for m in llama3.2-1b qwen2.5-1.5b gemma2-2b; do for p in nvidia-h200 adreno-830; do
  declare -A W C
  for bin in before after; do W[$bin]=""; C[$bin]=""; done
  for i in 1 2 3 4 5; do for bin in before after; do
    exe=$1; [ $bin = after ] && exe=$2
    /usr/bin/time -f "%e" -o /tmp/t.txt $exe compile /tmp/zoo/$m.onnx --profile /work/main/profiles/$p.json -o /tmp/ct.fbp --report /tmp/ct.json >/dev/null 2>&1
    W[$bin]="${W[$bin]} $(cat /tmp/t.txt)"; C[$bin]="${C[$bin]} $(python3 -c "import json;print(round(json.load(open('/tmp/ct.json'))['compile_seconds'],3))")"
  done; done
  med() { echo $@ | tr ' ' '\n' | sort -n | sed -n 3p; }
  echo "$m $p wall $(med ${W[before]}) -> $(med ${W[after]}) inproc $(med ${C[before]}) -> $(med ${C[after]})   raw: ${W[before]} |${W[after]}"
done; done
