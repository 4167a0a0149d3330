// `fbl-bench estimate MODEL.onnx|PLAN.fbp --profile P`: a full-size training step's time on a
// profile's GPU, per launch and strategy, from the plan's own work and bytes (no device, no
// simulator): the model of compiler/report/step_estimate.h at each ALU efficiency given and
// each L2 bandwidth of the profile's bracket, with the term that binds each phase and the
// costliest launches; with --without, each strategy also with passes switched off. Compare
// strategies by ratio: there is no latency, occupancy or launch overhead.
#pragma once

#include <string>
#include <vector>

namespace fbl::bench {

struct EstimateBenchOptions {
  // MODEL.onnx (compiled per strategy as `fblc compile` would, the profile's compile_defaults
  // included; no weights needed) or PLAN.fbp.
  std::string input;
  std::string profile;
  std::vector<std::string> strategies;  // MODEL only; empty: all three
  // MODEL only: each strategy is also estimated with each of these passes switched off
  // (`fblc compile --disable-pass`: fusion, fuse-attention), so a lead splits into its causes.
  std::vector<std::string> without;
  std::vector<double> aluEfficiency;    // empty: 1
  int top = 10;                         // costliest launches listed per strategy
  bool launches = false;                // the JSON lists every launch's work, in plan order
  // MODEL: take the profile's compile_defaults, as `fblc compile` does; false compiles exactly
  // what the options say, as `fbl-bench cache MODEL` does (to compare the two launch by launch).
  bool profileDefaults = true;
  std::string json;                     // write the report here
};

int runEstimateBench(const EstimateBenchOptions& o);

}  // namespace fbl::bench
