// Building a plan from a joint training graph (or from any forward graph, for kernel tests):
// kernel selection per node, one deduplicated OpenCL program, the launch list in phase order,
// plan tensors with roles, and the memory plan.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "compiler/analysis/input_bounds.h"
#include "compiler/autodiff/training_graph.h"
#include "compiler/passes/pass_manager.h"
#include "compiler/plan/layout_lowering.h"
#include "compiler/plan/profile.h"
#include "runtime/plan_file.h"

namespace fbl::plan {

using planfile::Plan;

// The staging tensor's bound: the host's row-major bytes of a packed tensor (weights, trainables,
// optimizer state) pass through it in chunks this large at most, so loading, checkpoints and
// adapter export never need a second copy of the largest weight.
inline constexpr int64_t kStagingBytes = int64_t{16} << 20;

struct PlanInputs {
  const ir::Graph* graph = nullptr;
  ir::ValueId loss = ir::kNoValue;
  ir::ValueId step = ir::kNoValue;
  // The training loop's scalars (role step, written by the runtime) and gradient accumulators.
  ir::ValueId lr = ir::kNoValue;
  ir::ValueId accumKeep = ir::kNoValue;
  std::vector<ir::ValueId> accumulators;
  std::vector<autodiff::TrainableParam> trainables;
  std::vector<autodiff::OptimizerState> state;
  std::vector<ir::ValueId> buffers;  // autodiff::TrainingGraph::buffers
  // Values whose bytes must survive the step (beyond loss, grads and updated values).
  std::vector<ir::ValueId> keep;
  // The model's outputs before its loss, kept and listed in the plan (Plan::outputs).
  std::vector<ir::ValueId> outputs;
  // Bounds of integer inputs that a rewrite took off the graph (passes/split_rows.h), by input:
  // the runtime checks them as the graph's own.
  std::map<ir::ValueId, std::vector<analysis::InputBound>> lostInputBounds;
  std::string model;
  int64_t stagingBytes = kStagingBytes;  // the staging tensor's bound (addTransfers)
  // peft's adapter_config.json (autodiff/peft_adapter.h); empty: the plan has no adapter to export.
  nlohmann::json adapterConfig = nlohmann::json::object();
  std::string adapterRefusal;  // autodiff::PeftAdapter::refusal
  // Frozen initializers peft saves beside the adapter: value name, key.
  std::vector<std::pair<std::string, std::string>> adapterFrozen;
  // What each node emits under the chosen strategy (layout_lowering.h); null: every node as
  // written, row-major (kernel tests of forward graphs).
  const LayoutLowering* lowering = nullptr;
};

struct BuildStats {
  int64_t kernels = 0;
  int64_t launches = 0;
  int64_t persistentBytes = 0;
  int64_t transientBytes = 0;  // the arena minus the persistent region
  int64_t imageBytes = 0;      // image objects beside the arena (RGBA/FLOAT texels, 16 bytes each)
  // The plan tensor holding each graph value that has one (views and in-place updates share
  // their source's tensor).
  std::map<ir::ValueId, int32_t> tensorOfValue;
};

// The builder's steps, in order (the numbers of the list at the top of plan_builder.cc):
//   select-kernels  1-2: the launches of every live node, its tensors and scratch
//   batch-launches  independent narrow products of one kernel as one launch (launch_batching.h)
//   merge-kernels   3: identical kernel sources as one kernel each, named in order of first use
//   bind-runtime    4, 6: inputs and their bounds, loss, step, trainables, state, commits, outputs
//   add-transfers   the pack and unpack launches of host values stored in another layout, and
//                   the adapter's tensors
//   plan-memory     5: offsets in the arena's pools and images
//   emit-program    the kernels' sources as one OpenCL program
// Like a pass, a step without a `requiredBecause` may be disabled (batch-launches alone).
using passes::PlanStep;
const std::vector<PlanStep>& planSteps();

// The pipeline's options, where it has them, for the steps: `--dump-after STEP` (or "all")
// prints the plan as far as the steps up to STEP built it, as `fblc print-plan` prints a plan
// (plan_printer.h), to `sink` (stdout if empty); `--disable-pass STEP` leaves an optional step
// out and refuses a required one. Names that are not steps belong to the passes.
Result<Plan> buildPlan(const PlanInputs& in, const Profile& profile, BuildStats* stats = nullptr,
                       const passes::PassOptions* options = nullptr);

// The inputs for a joint training graph.
PlanInputs trainingInputs(const autodiff::TrainingGraph& tg, std::string model);

}  // namespace fbl::plan
