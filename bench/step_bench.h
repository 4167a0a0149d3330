// `fbl-bench step`: whole training steps of a model on an OpenCL device, per layout strategy.
// It compiles the model in-process (driver::compileModel), opens the plan with fbl::rt::Session,
// feeds synthetic inputs (zoo::syntheticInputs) and reports samples/s, time per phase, launches,
// modelled bytes moved, layout-movement launches and the planned peak, as a table or JSON, and
// optionally as an SVG bar chart. With `ablation`, the runs are the layout pipeline's breakdown
// (fblayout with passes switched off) instead of the three strategies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/plan/plan_builder.h"

namespace fbl::bench {

struct StepBenchOptions {
  std::string model;
  std::string profile;
  std::vector<std::string> strategies;  // all | fblayout | reuse | explicit; empty: all
  // buffer | image | auto (driver::CompileArgs::storage), each run per strategy; empty: auto. Given,
  // results are named "<strategy>/<storage>".
  std::vector<std::string> storages;
  int steps = 10;
  int device = -1;                      // OpenCL device index; -1: first GPU, else first device
  uint64_t seed = 0;                    // synthetic inputs and (missing) random weights
  std::string json;                     // JSON report path ("-": stdout)
  std::string svg;                      // SVG chart path
  // The paper's Figure-14 breakdown instead of `strategies`: reuse, R-Tile alone, + index
  // elimination, full fblayout (ablationVariants()), each with its speed-up over reuse.
  bool ablation = false;
  // Passes switched off in every run (--disable-pass: fuse-attention, fusion, a layout pass).
  std::vector<std::string> disabledPasses;
  // Forward segments the backward pass recomputes in every run (--recompute; -1: all).
  std::optional<int64_t> recompute;
  // The staging tensor's bound in every run (--staging-bytes; driver::CompileArgs::stagingBytes).
  int64_t stagingBytes = plan::kStagingBytes;
  // The loss in chunks of rows in every run (--loss-chunk-rows; driver::CompileArgs::lossChunkRows).
  std::string lossChunkRows = "auto";
  // fp32 | fp16 | int8 | int4 (driver::CompileArgs::baseWeights), each run per strategy and
  // storage; empty: fp32. Given, results are named "<strategy>/<base weights>".
  std::vector<std::string> baseWeights;
  // fp32 | fp16 | bf16 (driver::CompileArgs::precision), each run per base weights; empty: fp32.
  // Given, results are named ".../<precision>".
  std::vector<std::string> precisions;
};

struct AblationVariant {
  std::string name, strategy;
  std::vector<std::string> disabledPasses;  // compiler/passes/layout_pipeline.h's names
};
// In the order they run and print; the first is the baseline of the speed-ups.
const std::vector<AblationVariant>& ablationVariants();

// Prints the table; writes the JSON/SVG asked for; returns the process exit code.
int runStepBench(const StepBenchOptions& o);

}  // namespace fbl::bench
