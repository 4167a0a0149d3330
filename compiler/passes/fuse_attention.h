// fuse-attention: replaces every attention block of a forward graph by one fbl.Attention node
// (compiler/ops/attention.h), so that neither the forward nor the backward (autodiff turns
// it into one fbl.AttentionGrad) stores the [B, H, Sq, Sk] scores. Runs before autodiff, under
// --strategy fblayout only (reuse and explicit are the baselines); --disable-pass fuse-attention.
//
//   1. From each Softmax over the last axis, walk back through the scores chain, each value
//      read once: masks `+ m` (at most one), a softcap `c * tanh(x / c)`, scalar scales
//      (`* s`, `/ s`), down to MatMul(a, b). Softcap and scale must come in that order, which is
//      the op's own (scale, softcap, mask).
//   2. The Softmax output must be read only by MatMul(P, v'). a, b and v' are rank 4; scalar
//      scales on a and on b (the exporters' q * sqrt(s), k^T * sqrt(s)) fold into the scale.
//   3. k = b with its last two dims swapped: the input of a Transpose that swapped them, or a new
//      Transpose (a read-through view for the layout pipeline, not a copy). k and v' that both
//      come from repeat_kv (Unsqueeze, Expand, Reshape) are replaced by their sources: the
//      kernel maps query head h to key/value head h / group (GQA).
//   4. A compile-time mask is classified: all zeros (none), causal (0 on and below the
//      diagonal), causal with a sliding window of W keys; "masked" means <= -1e30. A classified
//      mask is dropped (the kernels compute it from indices and skip masked key blocks); any
//      other mask stays an input that the kernels read through its broadcast. A mask that
//      depends on a float parameter is not fused (the op has no gradient for its mask); scalar
//      and 1-D buffers (the exporter's lifted constants) are constants here, as when folding.
//   5. The QK MatMul's slot takes the Transpose of step 3 (or dies), the PV MatMul's slot the
//      fbl.Attention node (its output keeps the PV value, a second output is the row
//      log-sum-exp); the chain between dies, and dead-code removes what no longer has readers.
#pragma once

#include <string>
#include <string_view>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::passes {

class FuseAttention {
 public:
  static constexpr std::string_view name() { return "fuse-attention"; }
  Result<bool> run(ir::Graph& g);

  struct Counts {
    int64_t fused = 0, causal = 0, window = 0, maskInput = 0, softcap = 0, grouped = 0;
    int64_t softmaxes = 0;  // Softmax nodes seen (fused or not)
  };
  const Counts& counts() const { return counts_; }
  std::string summary() const;  // "2 of 2 attention blocks fused (2 causal, ...)"

 private:
  Counts counts_;
};

}  // namespace fbl::passes
