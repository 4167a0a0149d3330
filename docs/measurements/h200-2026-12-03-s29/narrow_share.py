"""The narrow products' share of a step: which of a fbl-bench step JSON's nodes are products with a
side of at most 16 (LoRA's rank side), by the output shapes `fblc explain PLAN` prints for the
same plan, and their device time by kind.
Usage: narrow_share.py EXPLAIN.txt STEP.json
  (fblc zoo llama3.2-1b --layers 2 -o l2.onnx; fblc compile l2.onnx --profile profiles/nvidia-h200.json
   -o l2.fbp; fblc explain l2.fbp > EXPLAIN.txt)"""
import json
import re
import sys

shapes = {}
for line in open(sys.argv[1]):
    m = re.match(r'\s+(\S+)\s+f32\[([0-9,]+)\]', line)
    if m:
        shapes[m.group(1)] = [int(x) for x in m.group(2).split(',')]
r = json.load(open(sys.argv[2]))['results'][0]
time, count = {}, {}
for node, s in r['device_s_by_node'].items():
    phase, rest = node.split('/', 1)
    name = rest.split('+')[0]
    shape = shapes.get(name) or shapes.get(name.replace('node_', '', 1))
    is_product = 'MatMul' in name or re.fullmatch(r'node_linear_\d+', name)
    if not shape or not is_product or min(shape[-2:]) > 16:
        continue
    kind = 'forward x A' if phase == 'forward' else ('backward x^T dt, t^T dy' if 'transpose' in name else 'backward dy B')
    time[kind] = time.get(kind, 0) + s
    count[kind] = count.get(kind, 0) + 1
for k in sorted(time):
    print(f'{k}: {count[k]} products, {time[k] * 1e3:.3f} ms')
print(f"all: {sum(count.values())} products, {sum(time.values()) * 1e3:.3f} of {r['device_s'] * 1e3:.3f} device ms")
