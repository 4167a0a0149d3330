// fold-and-infer: gives every tensor a static shape and dtype, and replaces every node that
// depends only on compile-time constants and static shapes by its value (shape chains, masks,
// Range, CumSum, RoPE tables). One pass does both because each needs the other: a Reshape's
// shape rule reads the folded target shape, and folding Shape needs the inferred shape.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::passes {

// Default rule for which initializers fold like constants. Initializers are parameters unless
// they look like buffers: a name ending in ".weight" or ".bias" is always a parameter; any
// other non-float initializer (position_ids, token_type_ids) or float one of rank <= 1
// (rotary_emb.inv_freq, the exporter's lifted scalars `lifted_tensor_N`) is a buffer and folds.
// Float tensors of rank >= 2 (ViT's cls_token, position_embeddings) stay parameters.
bool defaultFoldableInitializer(const ir::Value& v);

struct FoldOptions {
  std::function<bool(const ir::Value&)> foldableInitializer = defaultFoldableInitializer;
  // A node whose outputs together would exceed this many bytes is computed at run time instead.
  int64_t maxFoldBytes = int64_t{64} << 20;
};

struct FoldStats {
  int64_t inferred = 0;      // nodes whose outputs got a shape and dtype
  int64_t folded = 0;        // nodes replaced by constants
  int64_t deduplicated = 0;  // folded values replaced by an equal earlier constant
  int64_t tooLarge = 0;      // foldable nodes left alone because of maxFoldBytes
  int64_t noKernel = 0;      // foldable nodes left alone because no reference kernel exists
};

class FoldAndInfer {
 public:
  explicit FoldAndInfer(FoldOptions opts = {}) : opts_(std::move(opts)) {}
  static constexpr std::string_view name() { return "fold-and-infer"; }
  // True when any node was folded. Errors (an op without a rule, a shape that cannot be
  // inferred, a kernel failure while folding) name the node.
  Result<bool> run(ir::Graph& g);
  const FoldStats& stats() const { return stats_; }

 private:
  bool isCompileTimeConstant(const ir::Value& v) const;
  Result<bool> tryFold(ir::Graph& g, ir::NodeId id);

  FoldOptions opts_;
  FoldStats stats_;
};

// Live values (see Graph::liveValues) that lack a static shape or a dtype: the
// `tensors_without_static_shape` figure, 0 after a successful fold-and-infer.
int64_t countValuesWithoutStaticShape(const ir::Graph& g);

}  // namespace fbl::passes
