// Training on the host with the reference executor: the library side of `fblc run-ref`.
//
// A RefTrainer owns a joint training graph (compiler/autodiff) and an Executor over it. Each
// step() feeds one batch and the step number, runs forward, backward and the optimizer, and
// carries the updated parameters and optimizer state into the next step with
// Executor::setValue, exactly as a runtime would swap the graph's "updated" outputs back in.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/autodiff/training_graph.h"
#include "compiler/ir/graph.h"
#include "compiler/ref/executor.h"
#include "compiler/support/result.h"
#include "runtime/training_loop.h"

namespace fbl::train {

// `fblc run-ref MODEL.onnx --data DIR [--steps N] [--dump OUT] [--trainable GLOB]...
//  [--optimizer adamw|sgd] [--lr X] [--momentum X] [--weight-decay X] [--grad-accum K]
//  [--clip-grad-norm X] [--lr-schedule constant|linear|cosine --warmup-steps W --total-steps T]
//  [--shape NAME=1x16]...`; with --grad-accum K each printed step is one micro-batch.
// The optimizer and training loop: autodiff::TrainingFlags, as `fblc compile` takes them.
struct RunRefArgs : autodiff::TrainingFlags {
  std::string model;
  std::string dataDir;   // a dataset in any form fbl-train reads (ref_dataset.h)
  std::optional<uint64_t> seed;  // the samples' order, as fbl-train --seed; none: file order
  int steps = 1;
  std::string dumpDir;   // empty: no dump; else OUT/loss.pb and OUT/grads/<initializer>.pb
  std::vector<std::string> trainable;  // empty: what peft trains (autodiff::peftTrainableGlobs)
  std::map<std::string, ir::Shape> shapes;  // graph-input shape overrides
};

// Prints one "step N loss X" line per step to stdout; errors go to stderr as one line.
// Returns the process exit code (0 ok, 1 error).
int runRefCommand(const RunRefArgs& args);

// --base-weights (and --base-weights-group) of `flags`: the frozen weights a plan would store
// narrower take the values it decodes, chosen as `fblc compile` chooses them on the forward
// graph (compiler/quant/base_weights.h); `trainableGlobs` say what is not frozen.
Status applyBaseWeights(ir::Graph& forward, const autodiff::TrainingFlags& flags,
                        const std::vector<std::string>& trainableGlobs);

// --precision fp16|bf16 on the joint graph (compiler/passes/pack_saved.h): the forward values the
// backward pass reads are read back through 16 bits. A plan packs the same values when nothing
// else changes what it keeps (no recompute, no fused attention, no chunked loss).
Status applyPrecision(autodiff::TrainingGraph& tg, const std::string& precision);

// The command's options as training options ("adamw"/"sgd" checked here).
Result<autodiff::TrainingOptions> trainingOptions(const RunRefArgs& args);

// Reads DIR/input_0.pb, input_1.pb, ... for the graph's inputs (a file whose tensor is named
// after an input feeds that input, otherwise the N-th file feeds the N-th input).
Result<std::map<ir::ValueId, ir::Tensor>> loadInputs(const ir::Graph& g, const std::string& dir);

struct StepResult {
  float loss = 0;
  std::vector<ir::Tensor> grads;  // one per trainable, in TrainingGraph::trainables order
};

class RefTrainer {
 public:
  // The trainer keeps the graph at a stable address for its Executor. `opts` must be the ones the
  // graph was built with: their training loop (accumulation, schedule) drives step().
  static std::unique_ptr<RefTrainer> create(autodiff::TrainingGraph tg, const autodiff::OptimizerOptions& opts = {});

  // One training step on `batch` (feeds for the forward graph's inputs): with gradient
  // accumulation one micro-batch, the optimizer running on a window's last.
  Result<StepResult> step(const std::map<ir::ValueId, ir::Tensor>& batch);

  const autodiff::TrainingGraph& training() const { return tg_; }
  int64_t stepsDone() const { return steps_; }  // optimizer steps
  int32_t accumulated() const { return micro_; }  // micro-batches since the last optimizer step
  // The current value of a trainable (after the steps run so far).
  Result<ir::Tensor> parameter(size_t trainableIndex);
  // The current value of a trainable, optimizer state or updated buffer: a value the steps carry.
  Result<ir::Tensor> current(ir::ValueId v);

 private:
  RefTrainer(autodiff::TrainingGraph tg, const autodiff::OptimizerOptions& opts);

  autodiff::TrainingGraph tg_;
  ref::Executor exec_;
  planfile::TrainingLoop loop_;
  int64_t steps_ = 0;
  int32_t micro_ = 0;
};

}  // namespace fbl::train
