// The three layout strategies (compiler/strategy/strategy.h) applied to one forward/backward
// operator (paper §2.3, §5.4): which layout every tensor gets in forward and backward, and which
// conversions run between them. `fbl-bench matmul` and the kernel tests run these plans
// (cl_session.h, matmul_run.h); whole models go through the compiler's layout pipeline instead.
//
//   fblayout  one R-Tile layout per tensor that reductions read along both axes (A, B, dC),
//             chosen by selectRTile from all its consuming reductions; backward reads it with no
//             conversion. A tensor R-Tile rejects keeps the plain image (the paper's fallback).
//   reuse     MNN: every tensor keeps the forward-preferred image layout (RGBA along the last
//             axis, MNN's NC4HW4 for a matrix); backward kernels read B^T and A^T through it,
//             i.e. along the axis the texels are not packed in.
//   explicit  TFLite: each kernel gets its preferred layout (its reduction operand packed along
//             its own rows, as a GEMM with no transposes wants), so the backward pass inserts
//             Transpose conversion kernels (B -> B^T before dA, A -> A^T before dB), each reading
//             and writing the whole tensor.
//
// All three compute the same numbers with the same kernel template (codegen/rtile_kernels.h);
// only layouts and conversions differ, so a measured difference is the layouts' doing.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/layout/layout.h"
#include "compiler/layout/rtile.h"
#include "compiler/layout/wave_footprint.h"
#include "compiler/profile/profile.h"
#include "compiler/strategy/strategy.h"
#include "compiler/support/result.h"

namespace fbl::harness {

// C = A * B with A [M x K], B [K x N]; backward dA = dC * B^T, dB = A^T * dC.
struct MatmulShape {
  int64_t m = 0, k = 0, n = 0;
};

enum class MatmulPass { kForward, kGradA, kGradB };
const char* matmulPassName(MatmulPass p);  // "forward", "dA", "dB"

struct Placement {
  layout::Layout layout;
  std::string why;  // one line: the rule (and R-Tile verdict) that chose it
};

// dst = src (transpose: src^T) through rtile_convert.cl; dst is a tensor of the plan.
struct Conversion {
  std::string src, dst;
  bool transpose = false;
};

struct MatmulStep {
  MatmulPass pass = MatmulPass::kForward;
  std::vector<Conversion> before;  // explicit's conversions, run (and timed) with this pass
  std::string lhs, rhs, out;
  bool lhsT = false, rhsT = false;  // operand read transposed through its stored layout
};

struct MatmulPlan {
  strategy::Strategy strategy = strategy::Strategy::kFBLayout;
  MatmulShape shape;
  // "A", "B", "dC" (inputs), "C", "dA", "dB" (outputs), and explicit's converted copies.
  std::map<std::string, Placement> tensors;
  std::vector<MatmulStep> steps;  // forward, dA, dB
  // The profile's texture L1s (its own and its bracket's) where it scores R-Tiles by wave
  // footprint: the products then stage their image operands as a compiled plan's would
  // (codegen/matmul_staging.h), every strategy. Empty: row-major.
  std::vector<layout::TextureL1> textureL1s;
  int64_t wave = 1;
};

// The stored [rows x cols] shape of a plan tensor.
ir::Shape matmulTensorShape(const MatmulShape& s, const std::string& tensor);

// The M, K, N of a pass's product: dA[M,K] = dC[M,N] B^T, dB[K,N] = A^T[K,M] dC.
MatmulShape productShape(const MatmulShape& s, MatmulPass p);

// Errors: an empty shape; for fblayout, a profile whose access table is pending is reported
// (R-Tile cannot choose without it), other R-Tile rejections fall back to the plain image.
Result<MatmulPlan> planMatmul(strategy::Strategy s, const MatmulShape& shape, const profile::HardwareProfile& p);

// The R-Tile selectRTile chooses for `tensor` read by `uses`, as a layout.h value; the plain image
// when R-Tile rejects every candidate (why says so). A pending access table is an error.
Result<Placement> rtilePlacement(const std::string& tensor, const ir::Shape& shape,
                                 const std::vector<layout::ReductionUse>& uses, const profile::HardwareProfile& p);

}  // namespace fbl::harness
