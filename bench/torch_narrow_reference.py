"""cuBLAS fp32 (TF32 off) reference for the narrow LoRA products fbl-bench matmul --only lora times.

Runs only where torch and a CUDA GPU exist (the H200 of docs/results/speed-h200.md); never part of the build or tests.
For M tokens, hidden size K and rank r, the four narrow products of a LoRA layer:
  x A^T  [M x K] x [K x r]  (A stored [r x K])      dy B   [M x K] x [K x r]
  t^T dy [r x M] x [M x K]                          x^T dt [K x M] x [M x r]
each timed four ways, in us:
  alone:  one call between two CUDA events, the fastest of 20;
  queued: 100 calls back to back between two events, per call (as an eager step queues them:
          Python's dispatch is in it);
  graph:  the same 100 calls captured in a CUDA graph and replayed, per call (the GPU's own
          time, launches without the host);
  x3:     100 rounds of three such products with distinct operands back to back, per product,
          queued and as a graph.
and two floors, queued and as a graph: the launch (a one-element add) and a stream of the
product's large operand (its sum, one read of M x K floats).
Usage: torch_narrow_reference.py [M K]   (default 512 2048, as fbl-bench matmul --only lora)
"""
import json
import sys

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
M, K = (int(v) for v in sys.argv[1:3]) if len(sys.argv) == 3 else (512, 2048)
dev = "cuda"
g = torch.Generator(device=dev).manual_seed(0)


def randn(*shape):
    return torch.randn(*shape, device=dev, generator=g)


def timed(fn, calls):
    """us per call of fn, `calls` calls between two events; the fastest of 5 repeats."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(calls):
            fn()
        e.record()
        torch.cuda.synchronize()
        best = min(best, s.elapsed_time(e) * 1e3 / calls)
    return best


def graphed(fn, calls):
    """us per call of fn, `calls` calls captured in one CUDA graph and replayed; fastest of 5."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        graph.replay()
        e.record()
        torch.cuda.synchronize()
        best = min(best, s.elapsed_time(e) * 1e3 / calls)
    return best


def alone(fn):
    for _ in range(3):
        fn()
    times = []
    for _ in range(20):
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    return min(times)


out = {}
one = torch.zeros(1, device=dev)
launch_floor = timed(lambda: one.add_(1.0), 100)
launch_floor_graph = graphed(lambda: one.add_(1.0), 100)
for r in (8, 16):
    sets = [{"x": randn(M, K), "A": randn(r, K), "dy": randn(M, K), "B": randn(K, r), "t": randn(M, r),
             "dt": randn(M, r)} for _ in range(3)]
    products = {
        "x A^T": lambda o: o["x"] @ o["A"].t(),
        "dy B": lambda o: o["dy"] @ o["B"],
        "t^T dy": lambda o: o["t"].t() @ o["dy"],
        "x^T dt": lambda o: o["x"].t() @ o["dt"],
    }
    big = {"x A^T": "x", "dy B": "dy", "t^T dy": "dy", "x^T dt": "x"}
    for name, fn in products.items():
        o = sets[0]

        def three(fn=fn):
            for s in sets:
                fn(s)

        out[f"{name} r{r}"] = {
            "alone_us": alone(lambda: fn(o)),
            "queued_us": timed(lambda: fn(o), 100),
            "graph_us": graphed(lambda: fn(o), 100),
            "x3_queued_us_per_product": timed(three, 100) / 3,
            "x3_graph_us_per_product": graphed(three, 100) / 3,
            "stream_floor_queued_us": timed(lambda: o[big[name]].sum(), 100),
            "stream_floor_graph_us": graphed(lambda: o[big[name]].sum(), 100),
            "launch_floor_queued_us": launch_floor,
            "launch_floor_graph_us": launch_floor_graph,
            "bytes": 4 * (M * K + K * r + M * r),  # the large operand, the small one, the output
        }
json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "shape": {"M": M, "K": K},
           "results": out}, sys.stdout, indent=1)
print()
