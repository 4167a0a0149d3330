"""One line per fbl-bench step JSON: device ms a step, launches, the product kernels' device ms
split at 30 us a node (LoRA's rank-side products and the elementwise work around them are the
small ones), the attention row term's ms and the losses."""
import json
import sys

for path in sys.argv[1:]:
    r = json.load(open(path))['results'][0]
    nodes = r['device_s_by_node']
    small = sum(s for n, s in nodes.items() if s < 30e-6)
    count = sum(1 for s in nodes.values() if s < 30e-6)
    k = r['device_s_by_kernel']
    mm = sum(s for n, s in k.items() if n.endswith('/matmul') or n.endswith('/splitk'))
    row = sum(s for n, s in k.items() if 'rowterm' in n)
    print(f"{path.rsplit('/', 1)[-1]}: device {r['device_s'] * 1e3:.3f} ms, launches {r['launches_per_step']}, "
          f"products {mm * 1e3:.3f} ms, nodes under 30 us {count} taking {small * 1e3:.3f} ms, "
          f"rowterm {row * 1e3:.3f} ms, step {r['unprofiled_step_s'] * 1e3:.2f} ms, loss {r['first_loss']:.6f} -> {r['last_loss']:.6f}")
