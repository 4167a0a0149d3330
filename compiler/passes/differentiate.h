// autodiff as a pass: the forward graph in, the joint training graph (forward, backward,
// optimizer: autodiff/training_graph.h) out. On the forward graph, before it is replaced, it also
// reads what later stages need of it:
//   1. the frozen base's encodings (quant/base_weights.h), chosen as `fblc run-ref` chooses them;
//   2. peft's adapter (autodiff/peft_adapter.h): lora_B's scaling is a forward Mul;
// and on the joint graph:
//   3. the values that must be computed whatever the strategy folds (the loss, gradients, updated
//      parameters and state, and with --outputs the model's outputs);
//   4. the host's side of the plan (HostInterface): what the runtime fills or reads, and what the
//      optimizer updates in place.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/autodiff/peft_adapter.h"
#include "compiler/autodiff/training_graph.h"
#include "compiler/ir/graph.h"
#include "compiler/layout/layout.h"
#include "compiler/quant/base_weights.h"
#include "compiler/support/result.h"

namespace fbl::passes {

// What the runtime writes and reads from the host, and the frozen weights it writes encoded;
// the lowering stores each accordingly (plan/layout_lowering.h).
struct HostInterface {
  // Values the runtime fills or reads from the host (weights, trainables, optimizer state):
  // stored in another layout, the runtime packs them at load and unpacks them on read-back.
  std::vector<ir::ValueId> hostValues;
  // (current, updated) pairs the optimizer writes in place: `updated` is stored like `current`,
  // and `current` stays in a buffer under image storage (an OpenCL 1.2 kernel cannot read and
  // write one image).
  std::vector<std::pair<ir::ValueId, ir::ValueId>> inPlaceUpdates;
  // Frozen weights stored narrower (compiler/quant/base_weights.h): a row-major buffer of the
  // encoded bytes where every kernel that reads the weight dequantizes (products, gathers);
  // otherwise f32 (the values are the decoded ones either way), with the reason in storageWhy.
  std::map<ir::ValueId, layout::Encoding> encodings;
};

class Differentiate {
 public:
  // `mustExist` and `host` are filled when the pass runs, for the passes after it.
  Differentiate(const autodiff::TrainingOptions& o, std::vector<ir::ValueId>& mustExist, HostInterface& host)
      : opts_(o), mustExist_(mustExist), host_(host) {}
  static constexpr std::string_view name() { return "autodiff"; }
  Result<bool> run(ir::Graph& g);

  // Set before the pass runs.
  autodiff::PeftAdapterOptions adapterOpts;
  quant::BaseWeights baseWeights;  // --base-weights
  bool keepOutputs = false;        // --outputs

  // Filled by the pass. `tg.graph` is moved out into the pipeline's graph.
  autodiff::TrainingGraph tg;
  autodiff::PeftAdapter adapter;
  std::vector<ir::ValueId> outputs;                      // modelOutputs(), when kept
  std::map<std::string, layout::Encoding> encodings;     // by initializer name
  std::map<std::string, std::string> encodingsSkipped;  // frozen matrices left fp32, and why

 private:
  const autodiff::TrainingOptions& opts_;
  std::vector<ir::ValueId>& mustExist_;
  HostInterface& host_;
};

// Values the plan reads back or keeps: they must be computed even when their producer is a
// movement op the strategy would fold into its readers.
std::vector<ir::ValueId> valuesThatMustExist(const autodiff::TrainingGraph& tg);

// The model's outputs before its loss: the scores each SoftmaxCrossEntropyLoss of the forward
// pass reads, followed back through reshapes, slices and casts (a causal LM's shift) to the value
// a compute op produced: the logits, for a classifier or a language model. An error for a loss
// of another kind.
Result<std::vector<ir::ValueId>> modelOutputs(const ir::Graph& g);

}  // namespace fbl::passes
