// One model, one layout strategy, measured on an OpenCL device: what `fbl-bench step` and
// `fbl-bench transforms` share. It compiles in-process with the strategy (driver::compileModel),
// opens the plan with launch profiling on (rt::OpenOptions::profileLaunches), trains on synthetic
// inputs and sums the device time of every launch by phase and by kind; the launches of kind
// "transform" and "conversion" are the layout-transformation time.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/ir/graph.h"
#include "compiler/plan/plan_builder.h"
#include "runtime/tools/xml_escape.h"

namespace fbl::bench {

// "all" expands to every strategy of strategy::kAllStrategies; an unknown name is an error
// (returned, one line).
Status expandStrategies(const std::vector<std::string>& requested, std::vector<std::string>* out);

struct RunOptions {
  std::string model, profile, strategy;
  int steps = 10;          // training steps; the first is timed apart
  int device = -1;
  uint64_t seed = 0;
  bool phaseRounds = true;  // also time runPhases({phase}) per phase, steps-1 rounds
  std::vector<std::string> disabledPasses;  // layout passes switched off (ablation)
  std::string variant;                      // the ablation's name for this run; "" otherwise
  std::string storage = "auto";             // driver::CompileArgs::storage
  bool labelStorage = false;                // name runs "<strategy>/<storage>" (several storages asked)
  bool unprofiled = true;                   // also time the steps in a session without launch profiling
  std::optional<int64_t> recompute = std::nullopt;  // driver::CompileArgs::recomputeSegments
  int64_t stagingBytes = plan::kStagingBytes;       // driver::CompileArgs::stagingBytes
  std::string lossChunkRows = "auto";                // driver::CompileArgs::lossChunkRows
  std::string baseWeights = "fp32";                 // driver::CompileArgs::baseWeights
  bool labelBaseWeights = false;                    // name runs ".../<base weights>" (several asked)
  std::string precision = "fp32";                   // driver::CompileArgs::precision
  bool labelPrecision = false;                      // name runs ".../<precision>" (several asked)
};

struct StrategyRun {
  std::string strategy, device;
  std::string variant;                      // RunOptions::variant
  std::vector<std::string> disabledPasses;  // RunOptions::disabledPasses
  std::string storage;                      // "buffer" or "image": what the plan used
  bool labelStorage = false;                // RunOptions::labelStorage
  std::string baseWeights;                  // RunOptions::baseWeights
  bool labelBaseWeights = false;            // RunOptions::labelBaseWeights
  std::string precision;                    // RunOptions::precision
  bool labelPrecision = false;              // RunOptions::labelPrecision
  int64_t imageTensors = 0, imageBytes = 0; // from the plan
  int64_t recomputedSegments = 0;           // forward segments the backward recomputes
  double compileS = 0, firstStepS = 0, stepS = 0, samplesPerS = 0;
  // Session::loadWeights: reading the safetensors file and packing every weight through the
  // staging tensor (stagingBytes, the plan's staging tensor's bytes).
  double loadWeightsS = 0;
  int64_t stagingBytes = 0;
  // The median wall time of the same steps in a second session without launch profiling, as an
  // app runs them (NVIDIA's driver serialises profiled launches); 0 when not measured.
  double unprofiledStepS = 0;
  std::map<std::string, double> phaseS;  // wall-clock runPhases({phase}) medians (phaseRounds)

  // From the plan.
  int64_t launchesPerStep = 0, commits = 0, kernels = 0, bytesMoved = 0, peakBytes = 0;
  std::map<std::string, int64_t> launchesByPhase, launchesByKind;
  std::map<std::string, int64_t> layoutLaunchesByPhase;  // kind transform or conversion
  int64_t layoutLaunches = 0, layoutBytes = 0;
  uint64_t planDigest = 0;  // program and launches: equal digests mean the same plan

  // Measured: OpenCL device time per timed step (means over steps 2..N, or step 1 if N = 1).
  int timedSteps = 0;
  double deviceS = 0, layoutS = 0;
  std::map<std::string, double> deviceSByPhase, deviceSByKind, layoutSByPhase;
  // "<phase>/<kernel tag>" ("forward/matmul", "backward/mul", ...) and per launch node: where
  // the device time goes (the report keeps the 12 slowest nodes).
  std::map<std::string, double> deviceSByKernel, deviceSByNode;

  float firstLoss = 0, lastLoss = 0;
  bool randomWeights = false;
  std::string weightsNote;
};

inline bool isLayoutKind(const std::string& kind) { return kind == "transform" || kind == "conversion"; }

// Returns "" or one line saying what failed.
Status runStrategy(const RunOptions& o, const ir::Graph& g, StrategyRun* r);

nlohmann::json toJson(const StrategyRun& r);

// What the runs' plans say about themselves: whether any launch is marked transform/conversion,
// and whether the strategies produced distinct plans. One line each, for tables and JSON.
std::string planComparison(const std::vector<StrategyRun>& runs, bool* identical);

Status writeTextFile(const std::string& path, const std::string& text);

// A report's end: its wall time since `start` in `wall_s` and printed, then the JSON written to
// `jsonPath` (none when empty); an error message, or "".
Status finishReport(nlohmann::json& report, double wallSeconds, const std::string& jsonPath);

}  // namespace fbl::bench
