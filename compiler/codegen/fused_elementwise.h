// Fused elementwise code: float elementwise nodes computed in one kernel, each reading earlier
// results from registers instead of memory (compiler/plan/fusion.h decides which). Two users:
//
//   - a tiled MatMul's epilogue (NodeLayouts::epilogue): the steps run on every output element
//     before it is stored; emitMatmulEpilogue wraps them in EPILOGUE (rtile_matmul.cl);
//   - an elementwise kernel computing its fused producers inline (NodeLayouts::inlined):
//     emitElementwiseGroup, through elementwiseLaunch as any elementwise node (emit_util.h);
//   - a reduction computing the element it reduces from its fused producers (emitFusedValue,
//     used by the Reduce* emitter).
//
// Every operand that is not a register is a kernel parameter read through its own layout and
// broadcast against the kernel's output index (scalar constants are inlined), so e.g. RoPE's
// x*cos + rotate(x)*sin is one kernel reading x twice, through two maps.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/codegen/kernel_emitter.h"
#include "compiler/codegen/operand_layout.h"
#include "compiler/codegen/rtile_kernels.h"

namespace fbl::codegen {

// Rewrites the template text of a tiled MatMul: EPILOGUE and its kernel parameters, and the
// values they bind after the kernel's own arguments.
struct EpilogueCode {
  MatmulEpilogue kernel;
  std::vector<ArgRef> args;
};

// `steps` in order, each applied to the running value (the product's element, then each step's
// result) at its `chained` slot; `outShape`: the product's output.
Result<EpilogueCode> emitMatmulEpilogue(const ir::Graph& g, const std::vector<FusedOp>& steps,
                                        const ir::Shape& outShape);

// The kernel of elementwise node `root` computing `layouts.inlined` (its producers, in order) in
// registers; root's and every member's other inputs through their layouts, the output through
// layouts.outputs[0].
Result<NodeCode> emitElementwiseGroup(const ir::Graph& g, const ir::Node& root, const Target& t,
                                      const NodeLayouts& layouts);

// `ops` (a group's members, in order) as statements computing the last one's value at flat
// row-major index `linear` of `shape`: `index` declares the operands' offsets, `body` the
// registers, `result` names the value; `params` (", __global const float* restrict e0, ...")
// and `args` are the operands the kernel must take.
struct FusedValue {
  std::string params, index, body, result;
  std::vector<ArgRef> args;
};
Result<FusedValue> emitFusedValue(const ir::Graph& g, const std::vector<FusedOp>& ops, const ir::Shape& shape,
                                  const std::string& linear, const std::string& indent);

}  // namespace fbl::codegen
