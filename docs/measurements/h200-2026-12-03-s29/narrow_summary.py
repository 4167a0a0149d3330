"""One line per narrow product of fbl-bench matmul --sweep JSONs (lab20.sh, lab21.sh): the narrow
kernel at the profile's settings and the fastest variant, beside the stream floor (one launch
streaming the same bytes) and an empty launch, in us."""
import json
import sys

for path in sys.argv[1:]:
    d = json.load(open(path))
    for p in d['products']:
        n = p.get('narrow')
        if not n:
            continue
        ok = [r for r in n['runs'] if r['max_rel_err'] < 1e-3]
        prof = [r for r in ok if r['profile']][0]
        best = min(ok, key=lambda r: r['min_us'])
        print(f"{path.rsplit('/', 1)[-1]}: {p['name']} [{p['m']}x{p['k']}x{p['n']}]: profile {prof['min_us']:.1f}, "
              f"fastest {best['min_us']:.1f} ({best.get('work_items')}/{best.get('fill_work_items')}"
              f"{'/side ' + str(best['block_side']) if 'block_side' in best else ''}), stream floor {n['stream_us']:.1f}, "
              f"empty launch {n['empty_launch_us']:.1f}, profile / floor {prof['min_us'] / n['stream_us']:.2f}")
