// A training step's time on a profile's GPU, per launch, from the plan's own work and bytes: the
// model behind `fbl-bench estimate` (docs/benchmarks.md) and the estimate line of `fblc explain
// --profile`. Per launch the largest of three terms:
//
//   compute  executed FLOPs / (peak x ALU efficiency). A tiled MatMul's FLOPs are its padded
//            tiles' (2 x Mp x Np x Kp from the kernel's #defines, a LoRA term's K2 in whole TK
//            steps, plus its fused work); any other launch's are its nodes' modelled FLOPs. The
//            efficiency applies to MatMul and attention kernels.
//   DRAM     each distinct argument's bytes once (images at 16 B a texel); a tiled MatMul's right
//            operand larger than L2 (and a system-level cache, where one is assumed) once per
//            TM-row panel, its left panel once per round of groups along N when it exceeds half.
//   L2       a tiled MatMul's K panels, each group's once ((TM + TN) x Kp x 4 B), and its output;
//            any other launch's DRAM bytes. Off when the L2 bandwidth is 0.
// No latency, occupancy or launch overhead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/profile/profile.h"
#include "compiler/report/explain.h"
#include "compiler/support/result.h"
#include "runtime/plan_file.h"

namespace fbl::report {

struct EstimateRates {
  double peakGflops = 0, dramGBs = 0;
  double l2GBs = 0;  // 0: no L2 term
  int64_t l2Bytes = 0, computeUnits = 1;
  int64_t slcBytes = 0;  // a system-level cache behind L2 (the profile's bracket); 0: none
};
// The profile's rates; l2GBs as given. An error when peak or DRAM bandwidth is pending.
Result<EstimateRates> estimateRates(const profile::HardwareProfile& p, double l2GBs);

struct LaunchWork {
  std::string phase, node, kernel;
  bool product = false;  // a MatMul or attention kernel: the ALU efficiency applies
  double flops = 0, dramBytes = 0, l2Bytes = 0;
};

struct LaunchTime {
  double compute = 0, dram = 0, l2 = 0;  // seconds
  double seconds() const;
  const char* binds() const;  // "compute", "DRAM" or "L2"
};

// Every launch's work, in plan order; `report` is buildExplainReport(plan).
Result<std::vector<LaunchWork>> launchWork(const planfile::Plan& plan, const ExplainReport& report,
                                           const EstimateRates& r);
LaunchTime launchTime(const LaunchWork& w, const EstimateRates& r, double aluEfficiency);

// "1.085 s a step at the FP32 peak on adreno-830 (forward 0.683 s, 91% of it compute-bound; ...)".
std::string estimateLine(const std::vector<LaunchWork>& work, const EstimateRates& r, double aluEfficiency,
                         const std::string& profile);

}  // namespace fbl::report
