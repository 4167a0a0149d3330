// Runs an ir::Graph on the host with the reference kernels: the ground truth for constant
// folding checks, generated OpenCL kernels and the corpus's PyTorch losses and gradients.
//
// 1. Only the nodes the fetched values depend on run, in graph (topological) order. The walk
//    stops at values that are fed or overridden.
// 2. A value's contents come from, first to last: the run's feeds, setValue() overrides, the
//    node that produces it, Value::data (initializers and constants).
// 3. Each intermediate is freed right after its last consumer (fetched values are kept), so a
//    graph only ever holds its live set.
//
// One Executor is reused across runs (a training loop calls run() with new batches and
// setValue()s the updated parameters in between); the graph must outlive it and not change
// while it runs.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::ref {

struct ExecOptions {
  // After every node, check each output's dtype and shape against the graph's Value (when it is
  // known there): a mismatch is a bug in shape inference or in a kernel, reported by name.
  bool checkInferredTypes = true;
};

class Executor {
 public:
  explicit Executor(const ir::Graph& g, ExecOptions opts = {});

  // Replaces the contents of a value for every later run: an updated parameter, an
  // initializer whose data lives outside the model, a constant under test. The dtype and shape
  // must match the Value's when the graph knows them.
  Status setValue(ir::ValueId id, ir::Tensor t);
  void clearValue(ir::ValueId id);

  // Called after each node with its outputs (nullptr for omitted ones); an error stops the run
  // and is returned from run().
  using NodeCallback =
      std::function<Status(const ir::Node&, const std::vector<const ir::Tensor*>& outputs)>;
  void setNodeCallback(NodeCallback cb) { callback_ = std::move(cb); }

  // Runs the graph: `feeds` supplies every Input the fetched values need (and may supply any
  // other value, which then is not computed). Returns the fetched values in order; an empty
  // `fetch` means the graph's outputs.
  Result<std::vector<ir::Tensor>> run(const std::map<ir::ValueId, ir::Tensor>& feeds,
                                      const std::vector<ir::ValueId>& fetch = {});

  // Bytes of tensors held at once during the last run, at its peak (feeds and initializers
  // excluded): what liveness keeps small.
  size_t lastPeakBytes() const { return peakBytes_; }

 private:
  Status checkAgainstValue(ir::ValueId id, const ir::Tensor& t, std::string_view what) const;

  const ir::Graph& g_;
  ExecOptions opts_;
  std::map<ir::ValueId, std::shared_ptr<const ir::Tensor>> overrides_;
  NodeCallback callback_;
  size_t peakBytes_ = 0;
};

// One-shot convenience: feeds the graph's Inputs in order and returns its outputs.
Result<std::vector<ir::Tensor>> runGraph(const ir::Graph& g, const std::vector<ir::Tensor>& inputs);

}  // namespace fbl::ref
