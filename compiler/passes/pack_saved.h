// pack-saved (--precision fp16|bf16): the activations the backward pass reads are kept in 16
// bits between the two passes, and everything is computed in f32. On the joint graph, after
// recompute and schedule-loss-chunks, so that it sees what is really kept:
//
//   1. A saved value is an f32 activation (a value computed from a graph input, so not a
//      weight's transpose) of more than one element that a forward node computes and a backward
//      node reads (with recompute, the segments' inputs), and that need not live to the end of
//      the step (the loss, kept outputs). Row statistics stay f32 (a norm's mean and inverse
//      deviation, attention's log-sum-exp): they are a hidden size smaller than the rows they
//      describe, and the backward pass turns their absolute error into a relative error of
//      whole rows (exp(s - lse), (x - mean) * inv). So do the values a backward node normalizes
//      again: fused attention's q and k (its gradient recomputes exp(q k^T - lse)) and a
//      LayerNormalization's input (its gradient recomputes (x - mean) * inv, which loses the
//      low bits of a value far from its mean). And so do the values a backward node compares
//      with another computed value (a max pool's Equal(tap, max)): two values that round alike
//      would tie, and the gradient would go to both.
//   2. Right after its producer, Cast(v, to = f16|bf16) stores its packed copy; the forward pass
//      goes on reading v in f32, which then dies at its last forward reader.
//   3. Right before its first backward reader, Cast(packed, to = f32) unpacks it, and every
//      backward reader reads that instead.
//
// So the forward pass, its loss included, computes exactly what an f32 plan computes, and the
// backward pass differs only by the rounding of what it reads back (to nearest even: 11
// significant bits for fp16, 8 for bf16). The gradients of activations, the trainables, their
// gradients and the optimizer's state stay f32. An fp16 value beyond 65504 becomes infinite and
// the gradients it feeds are not finite, which the runtime's check of the (f32) loss does not
// see; bf16 has f32's range, so the phone profiles take it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::passes {

// --precision: fp32 (F32: nothing is packed), fp16 (F16) or bf16 (BF16); an error for anything else.
Result<ir::DType> parsePrecision(const std::string& text);

class PackSaved {
 public:
  // `keep`: values that live to the end of the step (the loss, kept outputs), never packed; read
  // when the pass runs.
  explicit PackSaved(const std::vector<ir::ValueId>& keep) : keep_(keep) {}
  static constexpr std::string_view name() { return "pack-saved"; }
  Result<bool> run(ir::Graph& g);

  ir::DType format = ir::DType::F32;  // F16 or BF16 packs; F32 leaves the graph as it is

  int64_t packed() const { return packed_; }       // values
  int64_t packedBytes() const { return bytes_; }   // their f32 bytes (the packed copies take half)

 private:
  const std::vector<ir::ValueId>& keep_;
  int64_t packed_ = 0, bytes_ = 0;
};

}  // namespace fbl::passes
