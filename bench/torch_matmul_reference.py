"""cuBLAS fp32 (TF32 off) reference for fbl-bench matmul's Figure-16 shapes.

Runs only where torch and a CUDA GPU exist (the H200 of docs/results/speed-h200.md); never part of the build or tests.
Prints min and median ms and TFLOP/s for forward C=A*B, dA=dC*B^T and dB=A^T*dC.
Usage: torch_matmul_reference.py [M K N]   (default: Figure 16's 512 2048 8192, as fbl-bench matmul)
"""
import json
import sys

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
M, K, N = (int(v) for v in sys.argv[1:4]) if len(sys.argv) == 4 else (512, 2048, 8192)
dev = "cuda"
g = torch.Generator(device=dev).manual_seed(0)
A = torch.randn(M, K, device=dev, generator=g)
B = torch.randn(K, N, device=dev, generator=g)
dC = torch.randn(M, N, device=dev, generator=g)
cases = {
    "forward": lambda: A @ B,
    "dA": lambda: dC @ B.t(),
    "dB": lambda: A.t() @ dC,
}
out = {}
for name, fn in cases.items():
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    flops = 2.0 * M * K * N
    out[name] = {"min_ms": times[0], "median_ms": times[len(times) // 2],
                 "tflops": flops / (times[0] * 1e-3) / 1e12}
json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "shape": {"M": M, "K": K, "N": N},
           "results": out},
          sys.stdout, indent=1)
print()
