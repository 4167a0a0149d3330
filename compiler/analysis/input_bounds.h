// The values an integer graph input may take, read from the nodes that use it as an index or a
// label. The plan records them (docs/plan-format.md, `input_checks`) so that the runtime refuses
// a bad batch before any launch; zoo::syntheticInputs draws below them. The analysis:
//   1. walk forward from the input through ops that move ids without changing them (Reshape,
//      Slice, Split, Pad, Squeeze, Unsqueeze, Flatten, Identity, Transpose, Expand, Concat, Cast, Where's
//      branches, the data of Gather/GatherElements): every element they produce is an element
//      of the input or a constant of the graph;
//   2. at Gather / GatherElements indices (axis extent n), record an index bound [-n, n) (ONNX:
//      negative indices count from the end), or [0, n) into an embedding (a 2-D initializer
//      gathered along axis 0: PyTorch's embedding refuses a negative id); at
//      SoftmaxCrossEntropyLoss labels (class count C), record a label bound [0, C) with the node's
//      ignore_index;
//   3. stop at any other op: ids that arithmetic changed (cumsum - 1, ids + offset) are bounded
//      by nothing recorded here, nor are GatherND / ScatterND index tuples (each position of a
//      tuple has a bound of its own); the kernels guard those reads themselves.
// Checking every element of the input against every bound is stricter than needed where a
// Slice drops elements before the consumer; a dropped element is as likely a bug as a used one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "runtime/plan_file.h"

namespace fbl::analysis {

struct InputBound {
  enum class Kind { Index, Label };
  Kind kind = Kind::Index;
  int64_t lo = 0, hi = 0;              // lo <= v < hi
  std::optional<int64_t> ignoreIndex;  // Label: a value outside [lo, hi) that is also accepted
  std::string node;                    // the consumer, for messages
  std::string table;                   // Index: the tensor it indexes

  bool operator==(const InputBound& o) const {
    return kind == o.kind && lo == o.lo && hi == o.hi && ignoreIndex == o.ignoreIndex && node == o.node &&
           table == o.table;
  }
};

// The bounds of `input` in graph order of their consumers, without duplicates; empty for an
// input no index or label consumer reaches (or whose consumers have unknown shapes).
std::vector<InputBound> inputBounds(const ir::Graph& g, ir::ValueId input);

// The runtime's checks of input `v` (plan tensor `tensor`): one per bound, none for float and
// bool inputs. The plan builder writes them into plans; run-ref checks its datasets with them.
// Plus `also`: bounds a rewrite took off the graph (passes/split_rows.h), checked as the rest.
std::vector<planfile::InputCheck> inputChecks(const ir::Graph& g, ir::ValueId v, int32_t tensor,
                                              const std::vector<InputBound>& also = {});

}  // namespace fbl::analysis
