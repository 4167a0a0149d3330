#!/usr/bin/env python3
"""Assembles h200-speed.json (docs/measurements/speed-h200/full-depth/) from one `bash bench/h200_run.sh speed` run.

Reads, from the run's output folder: matmul-h200.json (fbl-bench matmul --json), cublas.json
(bench/torch_matmul_reference.py), step-<model>.json (fbl-bench step, fblayout) and
torch-<model>.json (bench/torch_lora_step.py) for each model. Writes one JSON object with the
figures docs/results/speed-h200.md reports, every number copied from those files (nothing is computed here but
sums and ratios). Usage: speed_report.py RUN_DIR OUT.json
"""
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    run, out = sys.argv[1], sys.argv[2]
    mm = load(f"{run}/matmul-h200.json")
    cub = load(f"{run}/cublas.json")["results"]
    report = {"device": mm["device"], "matmul": {}, "note": "one run, same binaries; ms are minima (matmul) "
              "and medians (steps) of the timed repetitions; raw outputs beside this file"}
    for s in mm["strategies"]:
        passes = {p["pass"]: p for p in s["passes"]}
        report["matmul"][s["strategy"]] = {
            "fbl_ms": passes["forward+backward"]["min_ms"],
            "forward_ms": passes["forward"]["min_ms"], "dA_ms": passes["backward dA"]["min_ms"],
            "dB_ms": passes["backward dB"]["min_ms"]}
    cublas_ms = sum(cub[k]["min_ms"] for k in ("forward", "dA", "dB"))
    fbl = report["matmul"]["fblayout"]
    report["matmul"].update({"fbl_ms": fbl["fbl_ms"], "cublas_ms": cublas_ms,
                             "cublas_forward_ms": cub["forward"]["min_ms"], "cublas_dA_ms": cub["dA"]["min_ms"],
                             "cublas_dB_ms": cub["dB"]["min_ms"], "fbl_share_of_cublas": cublas_ms / fbl["fbl_ms"]})
    for m in sys.argv[3:] if len(sys.argv) > 3 else ["llama3.2-1b", "qwen2.5-1.5b", "gemma2-2b"]:
        try:
            step = load(f"{run}/step-{m}.json")["results"][0]
            torch = load(f"{run}/torch-{m}.json")
        except (OSError, ValueError, KeyError, IndexError) as e:
            report[m] = {"error": str(e)}
            continue
        # An app's step: without launch profiling (older reports have only the profiled one).
        app_s = step.get("unprofiled_step_s") or step["step_s"]
        report[m] = {"fbl_step_ms": 1e3 * app_s, "fbl_profiled_step_ms": 1e3 * step["step_s"],
                     "fbl_device_ms": 1e3 * step["device_s"],
                     "fbl_peak_bytes": step["peak_device_bytes"], "fbl_launches": step["launches_per_step"],
                     "torch_step_ms": torch["step_ms_median"], "torch_peak_bytes": torch["peak_mem_bytes"],
                     "layers": torch["layers"], "ratio": 1e3 * app_s / torch["step_ms_median"]}
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
