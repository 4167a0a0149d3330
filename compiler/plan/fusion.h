// Fusion (the last part of global layout selection, paper section 4.4): once every layout is
// decided, elementwise nodes next to a tiled MatMul run inside its kernel, so their launches and
// their intermediate tensors disappear and the memory plan (built on the launches the plan
// builder emits) shrinks with them. Three rewrites, fblayout only, run by the `fusion` pass
// (FusionPass below) and switched off with `--disable-pass fusion`:
//
//   epilogue  MatMul -> E1 -> ... -> Ek: each Ei float elementwise with the product's output
//             shape, reading the previous value as its only reader, in the same phase. The
//             product's kernel applies E1..Ek to every element before storing it and writes Ek's
//             value (through Ek's storage layout); Ei's other operands are read through their
//             own layouts, broadcast. The kernel runs where Ek stood (every operand exists by
//             then, and nothing in between reads the chain). The LoRA branch's `* scale` and
//             `+ base`, backward gradient sums (dX = dX_base + dX_lora) and attention's score
//             scaling are such chains.
//   prologue  Mul(x, s), s a one-element float, whose every reader is a tiled MatMul: since
//             (s * X) @ W = s * (X @ W), each product reads x and applies `* s` first in its
//             epilogue (LoRA backward's dY * scale feeding dA and dB).
//   group     A float elementwise node computes, in registers, the tree of float elementwise
//             producers of its own output shape that only it reads (RoPE's x*cos + rot(x)*sin,
//             SiLU times up); a reduction (Reduce*, fbl.ReduceSumTo) likewise computes its
//             input per reduced element (RMSNorm's x^2 before the mean).
//
// A fourth rewrite runs first, as its own pass (low-rank-terms, LowRankTermsPass; `--disable-pass
// low-rank-terms`), since it decides which product's chain takes an Add:
//   low rank  Add(X, Q), X a tiled product's output and Q = P * s1 * ... (P a MatMul of small K:
//             LoRA's t B in the forward, dt A in the backward; each s a one-element constant).
//             X's kernel adds s1 ... P itself after its own K walk (codegen::LowRankTerm,
//             kernels_cl/rtile_low_rank.cl), then runs the Add as an epilogue step that passes
//             its value through: P and its scales get no launch, and Q (M x N) is never stored.
//
// planFusion runs after liveness and before storage is chosen (fused intermediate values are
// never stored, so they never get an R-Tile); finishFusion runs after storage, copying each
// step's operand layouts and the last step's output layout onto the product.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/plan/layout_lowering.h"

namespace fbl::plan {

// Reads `out.keep` (values that must exist in memory: read back, graph outputs) and adds to
// `out.views` (consumer index -> source index per read through a layout) for a rewritten read.
void planFusion(const ir::Graph& g, LayoutLowering& out);

// The low rank rewrite (before planFusion, whose epilogues chain the Adds). True when any term
// was found. withdrawLowRankTerms undoes it where planFusion does not run (fusion disabled).
bool planLowRankTerms(const ir::Graph& g, LayoutLowering& out);
void withdrawLowRankTerms(const ir::Graph& g, LayoutLowering& out);

// Also checks the result: an error names a kernel that would read or write a value that only
// exists inside another fused kernel.
Status finishFusion(const ir::Graph& g, LayoutLowering& out);

// The fusion pass: planFusion on the lowering lower-layouts (and low-rank-terms) left; fblayout
// only. assign-storage calls finishFusion once storage is chosen. Never changes the IR.
class FusionPass {
 public:
  explicit FusionPass(LayoutLowering& out) : out_(out) {}
  static constexpr std::string_view name() { return "fusion"; }
  Result<bool> run(ir::Graph& g);  // true when any node fused
  std::string dump(const ir::Graph& g) const;

 private:
  LayoutLowering& out_;
};

}  // namespace fbl::plan
