// `fbl-bench estimate MODEL.onnx|PLAN.fbp --profile P`: a full-size training step's time on a
// profile's GPU, per launch, from the plan's own work and bytes (no device, no simulator), per
// strategy. Per launch the largest of three terms:
//
//   compute  executed FLOPs / (peak_gflops x ALU efficiency). A tiled MatMul's FLOPs are its
//            padded tiles' (2 x Mp x Np x Kp, from the kernel's #defines: the kernel computes
//            them); any other launch's are its nodes' modelled FLOPs (fblc explain). The ALU
//            efficiency (--alu-efficiency, repeatable; default 1, the peak) applies to MatMul and
//            attention kernels; elementwise kernels are bound by memory anyway.
//   DRAM     each distinct argument's bytes once (images at 16 B a texel); a tiled MatMul's right
//            operand larger than L2 once per 128-row panel of M, and its left panel once per round
//            of groups along N when it exceeds half of L2.
//   L2       a tiled MatMul's K panels, each group's once (TM + TN) x Kp x 4 B, and its output;
//            any other launch's DRAM bytes. At every L2 bandwidth of the profile's bracket.
//
// No latency, occupancy or launch overhead: read the result as a floor for the ALU efficiency
// given, and compare strategies by ratio. docs/benchmarks.md lists what it leaves out.
#pragma once

#include <string>
#include <vector>

namespace fbl::bench {

struct EstimateBenchOptions {
  std::string input;                    // MODEL.onnx (compiled per strategy, no weights needed) or PLAN.fbp
  std::string profile;
  std::vector<std::string> strategies;  // MODEL only; empty: all three
  // MODEL only: each strategy is also estimated with each of these passes switched off
  // (`fblc compile --disable-pass`: fusion, fuse-attention), so a lead splits into its causes.
  std::vector<std::string> without;
  std::vector<double> aluEfficiency;    // empty: 1
  int top = 10;                         // costliest launches listed per strategy
  bool launches = false;                // the JSON lists every launch's work, in plan order
  std::string json;                     // write the report here
};

int runEstimateBench(const EstimateBenchOptions& o);

}  // namespace fbl::bench
