#!/bin/bash
# compile_seconds (in-process, fblc compile --report) of each model, 3 runs each, before and after
for m in /work/main/tests/data/llama-full/model.onnx /tmp/zoo/llama3.2-1b.onnx /tmp/zoo/qwen2.5-1.5b.onnx /tmp/zoo/gemma2-2b.onnx; do
  for bin in /work/wtbefore/build/bin/fblc /work/main/build/bin/fblc; do
    vals=""
    for i in 1 2 3; do
      $bin compile $m --profile /work/main/profiles/pocl-cpu.json -o /tmp/ct.fbp --report /tmp/ct.json > /dev/null 2>&1
      vals="$vals $(python3 -c "import json;print(round(json.load(open('/tmp/ct.json'))['compile_seconds'],3))")"
    done
    echo "$(basename $(dirname $m))/$(basename $m) $(echo $bin | cut -d/ -f3) $vals"
  done
done
