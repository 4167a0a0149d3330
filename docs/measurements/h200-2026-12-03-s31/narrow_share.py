"""The narrow products' share of a step, by kind: which of a fbl-bench step JSON's launches run
products with a side of at most 16 (LoRA's rank side), by the output shapes `fblc explain PLAN`
prints for the same plan. A batched launch (node names joined by '+', compiler/plan/
launch_batching.h) counts once as a launch and once per product it runs.
Usage: narrow_share.py EXPLAIN.txt STEP.json
  (fblc zoo llama3.2-1b --layers 2 -o l2.onnx; fblc compile l2.onnx --profile P -o l2.fbp;
   fblc explain l2.fbp > EXPLAIN.txt)"""
import json
import re
import sys

shapes = {}
for line in open(sys.argv[1]):
    m = re.match(r'\s+(\S+)\s+f32\[([0-9,]+)\]', line)
    if m:
        shapes[m.group(1)] = [int(x) for x in m.group(2).split(',')]
r = json.load(open(sys.argv[2]))['results'][0]


def narrow_product(name):
    shape = shapes.get(name) or shapes.get(name.replace('node_', '', 1))
    is_product = 'MatMul' in name or re.fullmatch(r'node_linear_\d+', name)
    return bool(shape and is_product and min(shape[-2:]) <= 16)


time, launches, products = {}, {}, {}
for node, s in r['device_s_by_node'].items():
    phase, rest = node.split('/', 1)
    names = [n for n in rest.split('+') if narrow_product(n)]
    if not names or not narrow_product(rest.split('+')[0]):
        continue
    name = names[0]
    kind = 'forward x A' if phase == 'forward' else ('backward x^T dt, t^T dy' if 'transpose' in name else 'backward dy B')
    time[kind] = time.get(kind, 0) + s
    launches[kind] = launches.get(kind, 0) + 1
    products[kind] = products.get(kind, 0) + len(names)
for k in sorted(time):
    print(f'{k}: {products[k]} products in {launches[k]} launches, {time[k] * 1e3:.3f} ms')
print(f"all: {sum(products.values())} products in {sum(launches.values())} launches, "
      f"{sum(time.values()) * 1e3:.3f} of {r['device_s'] * 1e3:.3f} device ms")
