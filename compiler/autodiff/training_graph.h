// The joint training graph: the forward graph, reverse-mode gradients of the loss for the
// trainable initializers, and optimizer update nodes, in one ir::Graph (Node::phase tells which
// part a node belongs to). Optimizer state lives in graph values: each state tensor is an
// Initializer-like input value whose updated version is a graph output.
#pragma once

#include <string>
#include <vector>

#include "compiler/autodiff/peft_trainables.h"
#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::autodiff {

enum class OptimizerKind { SGD, AdamW };

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::AdamW;
  float lr = 1e-3f;
  float momentum = 0.0f;      // SGD
  float beta1 = 0.9f;         // AdamW
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weightDecay = 0.0f;
  // The training loop (runtime/training_loop.h); every default leaves the graph as before.
  int gradAccum = 1;           // micro-batches per optimizer step, averaged (PyTorch's loss / K)
  float clipGradNorm = 0.0f;   // > 0: clip the gradient's global L2 norm on the device
  std::string lrSchedule;      // "": lr baked into the kernels; constant | linear | cosine: an lr input
  int64_t warmupSteps = 0;
  int64_t totalSteps = 0;
  // The frozen base's storage (compiler/quant/base_weights.h): fp32, fp16, int8 or int4, with an
  // fp16 scale per this many elements (int8, int4).
  std::string baseWeights = "fp32";
  int64_t baseWeightsGroup = 32;
  // What the activations the backward pass reads are kept in between the passes
  // (compiler/passes/pack_saved.h): fp32, fp16 or bf16. Everything computes in f32.
  std::string precision = "fp32";
};

// The optimizer and training-loop settings as `fblc compile` and `fblc run-ref` take them on the
// command line; both commands' argument structs derive from it.
struct TrainingFlags {
  std::string optimizer = "adamw";  // adamw | sgd
  float lr = 1e-3f;
  float momentum = 0.0f;     // SGD
  float weightDecay = 0.0f;  // AdamW's decoupled decay, SGD's L2 term
  // The training loop (runtime/training_loop.h, docs/runtime.md "The training loop").
  int gradAccum = 1;
  float clipGradNorm = 0.0f;
  std::string lrSchedule;    // "" (the lr baked in), constant, linear or cosine
  int64_t warmupSteps = 0;
  int64_t totalSteps = 0;
  // The frozen base's storage (compiler/quant/base_weights.h): fp32, fp16, int8 or int4, with an
  // fp16 scale per this many elements (int8, int4).
  std::string baseWeights = "fp32";
  int64_t baseWeightsGroup = 32;
  // What the activations the backward pass reads are kept in between the passes
  // (compiler/passes/pack_saved.h): fp32, fp16 or bf16. Everything computes in f32.
  std::string precision = "fp32";
};

// The flags as optimizer options; an error naming --optimizer when it is neither adamw nor sgd
// (the values themselves are checked where the optimizer is built).
Result<OptimizerOptions> optimizerOptions(const TrainingFlags& f);

struct TrainingOptions {
  std::vector<std::string> trainableGlobs = peftTrainableGlobs();
  OptimizerOptions optimizer;
};

struct TrainableParam {
  ir::ValueId param = ir::kNoValue;    // the initializer
  ir::ValueId grad = ir::kNoValue;     // d loss / d param
  ir::ValueId updated = ir::kNoValue;  // the parameter after one optimizer step
};

struct OptimizerState {
  ir::ValueId current = ir::kNoValue;  // read by the step (Initializer kind, zero at start)
  ir::ValueId updated = ir::kNoValue;  // written by the step
  ir::ValueId param = ir::kNoValue;    // the trainable this state belongs to; none for a buffer
};

struct TrainingGraph {
  ir::Graph graph;
  ir::ValueId loss = ir::kNoValue;
  // A scalar i64 graph input holding the 1-based step number (AdamW's bias correction).
  ir::ValueId step = ir::kNoValue;
  // Scalar f32 graph inputs the loop writes each step: the learning rate (with a schedule) and
  // the accumulated gradient's keep factor (0 on a window's first micro-batch; grad accumulation).
  ir::ValueId lr = ir::kNoValue;
  ir::ValueId accumKeep = ir::kNoValue;
  std::vector<TrainableParam> trainables;
  // Optimizer state, the gradient accumulators among them (their `current` values are also in
  // `accumulators`: a micro-batch that does not end a window commits only those).
  std::vector<OptimizerState> state;
  std::vector<ir::ValueId> accumulators;
  // The buffers the forward pass updates (ir::Graph::stateUpdates: BatchNorm's running
  // statistics), also in `state`: they start from the model's values, not zero, and every
  // micro-batch commits them, as every PyTorch forward in train mode updates them.
  std::vector<ir::ValueId> buffers;
};

// Graph outputs of the result: the forward outputs (the loss among them), then every updated
// parameter, then every updated optimizer state, in `trainables` and `state` order. Forward
// values read by backward nodes have Value::reusedByBackward set.
Result<TrainingGraph> buildTrainingGraph(const ir::Graph& forward, const TrainingOptions& opts);

// The initializers whose names match any glob, in graph order. When none match, the error lists
// some initializer names and the likely reason (weights folded by the exporter, no LoRA).
Result<std::vector<ir::ValueId>> selectTrainables(const ir::Graph& g,
                                                  const std::vector<std::string>& globs);

// The graph output that is the loss: the only output, or the one named "loss"; a float scalar.
Result<ir::ValueId> findLoss(const ir::Graph& g);

// Appends the optimizer's update nodes for every trainable (whose grad is set) and its state.
Status appendOptimizer(TrainingGraph& tg, const OptimizerOptions& opts);

}  // namespace fbl::autodiff
