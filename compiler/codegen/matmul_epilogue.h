// The code of elementwise nodes fused into a tiled MatMul's store (NodeLayouts::epilogue, chosen
// by compiler/plan/fusion.h): one scalar function applies the steps in order to one output
// element, given its flat row-major index over the product's output; EPILOGUE applies it to
// the four lanes of a stored texel. Each step's other operands are kernel parameters read
// through their layouts and broadcast against the output (scalar constants are inlined), so a
// LoRA branch's `* scale` and `+ base` cost no launch and no intermediate tensor.
#pragma once

#include <string>
#include <vector>

#include "compiler/codegen/operand_layout.h"
#include "compiler/codegen/rtile_kernels.h"

namespace fbl::codegen {

struct EpilogueCode {
  MatmulEpilogue kernel;   // the text rtile_matmul.cl / rtile_splitk.cl take
  std::vector<ArgRef> args;  // bound after the kernel's own arguments, in `params` order
};

// `outShape`: the product's output (the index the steps broadcast against). Every step's node
// must be float elementwise with that output shape, its running operand at `slot`.
Result<EpilogueCode> emitMatmulEpilogue(const ir::Graph& g, const std::vector<EpilogueStep>& steps,
                                        const ir::Shape& outShape);

}  // namespace fbl::codegen
