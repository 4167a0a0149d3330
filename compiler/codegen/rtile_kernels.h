// Layout-parameterised kernels: the OpenCL source of one matmul or conversion, specialised for
// its operands' layouts. One template per op in kernels_cl/rtile_*.cl;
// the layout enters as generated access functions (layoutAccess), built from the Layout value's
// index map, so a row-major buffer, a plain image and an R-Tile image share one kernel body.
//
// Conventions shared by every template:
//   - operands are 2D ([rows x cols], the last two dims of Layout::shape());
//   - a texel access reads or writes 4 consecutive columns (c a multiple of 4): images keep the
//     RGBA lane along the last axis in every Layout this supports, buffers read 4 elements;
//   - reads past the last row or column return 0 (MASKED), so padding never enters a sum.
// The caller binds arguments in the order of RTileKernel::args and launches global/local.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <array>

#include "compiler/codegen/kernel_emitter.h"
#include "compiler/codegen/matmul_tiling.h"
#include "compiler/layout/layout.h"
#include "compiler/layout/wave_footprint.h"
#include "compiler/support/result.h"

namespace fbl::codegen {

struct MatmulOperand {
  MatmulOperand() = default;
  MatmulOperand(layout::Layout s, bool t, layout::StagingOrder order = {})
      : stored(std::move(s)), transposed(t), staging(order) {}

  layout::Layout stored;     // how the tensor lies in memory
  bool transposed = false;   // the operand is stored^T (read through the same layout)
  // The order rtile_matmul.cl's work-items read a K tile of it (matmul_staging.h chooses one for
  // a texture cache); row-major by default. The narrow kernel reads in its own order.
  layout::StagingOrder staging;
};

// A low-rank term the product adds before its epilogue (rtile_low_rank.cl): out += scale * L2 R2,
// lhs.stored [M x k] ([k x M] when transposed), rhs.stored [k x N] ([N x k]), batched like the
// product's operands. `scale`: an OpenCL float expression ("1.0f", "0.5f * 2.0f"). Args lhs2,
// rhs2 follow the product's out (or partial).
struct LowRankOperands {
  MatmulOperand lhs, rhs;
  int64_t k = 0;
  std::string scale = "1.0f";
};

// Does emitRTileMatmul fold the output's batch into M (an unbatched rhs under an untransposed,
// fully batched lhs, and a low-rank term's operands likewise)? The caller then sizes tiles and
// split-K for a [B*M x N] product.
bool matmulFoldsBatch(const MatmulOperand& lhs, const MatmulOperand& rhs, const layout::Layout& out,
                      const LowRankOperands* lowRank = nullptr);

struct RTileKernel {
  std::string name;
  std::string source;  // complete OpenCL C 1.2 program
  std::vector<std::string> args;  // argument roles, in order ("lhs", "rhs", "out", ...)
  std::vector<size_t> global, local;
  // Narrow products only: the parameter list narrowBatchEntry repeats per product, the walk and
  // tile the kernel was generated with (for reports: fbl-bench matmul --sweep), and whether it
  // stages its narrow operand through local memory (NarrowOptions::stageNarrowOperand where the
  // operand and the room allow it).
  std::string productParams;
  NarrowOrder narrowOrder = NarrowOrder::kSlices;
  NarrowTiling narrowTiling;
  bool stagesNarrowOperand = false;
  // Narrow products with K in chunks (NarrowTiling::chunks > 1): the kernel's last two
  // parameters, after the epilogue's, are `partials` (this many floats, scratch) and `arrivals`
  // (this many ints, zero before the first launch; each launch leaves them zero).
  int64_t chunkPartialFloats = 0, chunkArrivals = 0;
};

// Elementwise work fused into a product's store (compiler/codegen/fused_elementwise.h builds it
// from graph nodes): `code` defines EPILOGUE(v, b, r, c), the float4 of outputs (b, r, c..c+3)
// as the template numbers them, after the work; `params` (", __global const float* restrict
// e0, ...") are kernel parameters that follow the kernel's own arguments. Without one, EPILOGUE
// is the identity.
struct MatmulEpilogue {
  std::string code;
  std::string params;
};

// The output columns [begin, end) one product launch covers (a MatmulSchedule's main part or its
// tail); end = 0: every column. Both ends are multiples of 4 (whole texels) or N.
struct ColumnRange {
  int64_t begin = 0, end = 0;
};

// C[M x N] = L[M x K] * R[K x N]. lhs.stored is [M x K] ([K x M] when transposed), rhs [K x N]
// ([N x K] when transposed), out [M x N]. Args: lhs, rhs, out; with tiling.splitK > 1 the third
// argument is "partial", a float buffer of splitK x M x N, and emitRTileSplitKSum finishes.
// Batched: out is [B..., M, N] and lhs/rhs carry batch dims of their own that broadcast to B
// (numpy rules; a transposed operand swaps only its last two dims); the partial buffer is then
// B x splitK x M x N. An unbatched rhs under an untransposed lhs folds the batch into M.
// `cols`: only those output columns (the partial planes are then cols.end - cols.begin wide).
Result<RTileKernel> emitRTileMatmul(const std::string& name, int64_t m, int64_t k, int64_t n,
                                    const MatmulOperand& lhs, const MatmulOperand& rhs,
                                    const layout::Layout& out, const MatmulTiling& tiling,
                                    const MatmulEpilogue* epilogue = nullptr, ColumnRange cols = {},
                                    const LowRankOperands* lowRank = nullptr);

// The same product for narrow shapes (isNarrowProduct: LoRA's rank side) through
// rtile_matmul_narrow.cl: one launch, no partial planes, tiled by chooseNarrowTiling; the narrow
// operand is staged (NarrowOptions::stageNarrowOperand) only within `localMemoryBytes` (0: the
// 32 KB every OpenCL 1.2 device has). Operands, batching and epilogue as emitRTileMatmul; args
// lhs, rhs, out. `launchProducts`: how many such products the launch will run (narrowBatchEntry);
// NarrowOptions::fillWorkItems counts the work-items of them all.
Result<RTileKernel> emitRTileMatmulNarrow(const std::string& name, int64_t m, int64_t k, int64_t n,
                                          const MatmulOperand& lhs, const MatmulOperand& rhs,
                                          const layout::Layout& out, const NarrowOptions& options,
                                          int64_t localMemoryBytes = 0, const MatmulEpilogue* epilogue = nullptr,
                                          const LowRankOperands* lowRank = nullptr, int64_t launchProducts = 1);

// An entry point `name` + narrowBatchEntryName(products) that runs `products` narrow products
// of one kernel source in one launch (compiler/plan/launch_batching.h), appended to that source;
// `name` is the kernel's own (RTileKernel::name, or the "{{NAME}}" hole plans fill later). Its parameters are the kernel's (`params`, RTileKernel::productParams) once per product,
// names suffixed _0, _1, ...; product p runs as groups [p batch, (p + 1) batch) of dimension 2,
// so the launch's global[2] is products x batch (the product's own global[2]).
std::string narrowBatchEntry(const std::string& name, const std::string& params, int64_t products,
                             int64_t batch);
std::string narrowBatchEntryName(int64_t products);

// out = sum of the splitK planes of `partial` (per batch matrix of out). Args: partial, out
// (then the epilogue's, which runs here, not in the split product).
// `workgroup`: work-items per group, one output texel each (the profile's kernels block).
// `cols`: the product launch's columns.
Result<RTileKernel> emitRTileSplitKSum(const std::string& name, int64_t m, int64_t n, int64_t splitK,
                                       const layout::Layout& out, const MatmulEpilogue* epilogue = nullptr,
                                       int64_t workgroup = kSplitKSumWorkgroup, ColumnRange cols = {});

// The runtime's transfer of an image tensor `image` (2-D) between its row-major bytes and the
// image, `chunkRows` rows at a time (rtile_transfer.cl): pack reads a row-major [chunkRows, cols]
// staging buffer into rows [first, first + chunkRows) of the image, unpack the other way round;
// `first` is read from an i64 the runtime writes before each launch. Args: src, dst, first row.
Result<RTileKernel> emitRTileTransfer(const std::string& name, const layout::Layout& image, bool unpack,
                                      int64_t chunkRows, std::array<int64_t, 2> workgroup);

// dst = src (transpose: dst = src^T), any layout to any layout, a 4x4 element block per
// work-item, in work-groups of `workgroup` (x along columns). Args: src, dst.
Result<RTileKernel> emitRTileConvert(const std::string& name, const layout::Layout& src, bool transpose,
                                     const layout::Layout& dst,
                                     std::array<int64_t, 2> workgroup = kConvertWorkgroup);

// `float4 <fn>(<arg>, uint i0, uint i1)` reading stored (i0, i1..i1+3), or for write
// `void <fn>(<arg>, uint i0, uint i1, float4 v)`; lanes past the last column are not touched
// (buffers) or land in the texel's padding (images).
Result<std::string> layoutAccess(const std::string& fn, const layout::Layout& l, bool write);
// Does a buffer layout hold every texel (4 consecutive last-dim elements, the first a multiple of
// 4) at consecutive offsets, so that one vload4 reads it? Does an image layout put them in one
// texel, element j in lane j, so that one read_imagef fetches it?
bool texelsContiguous(const layout::Layout& l);

// The kernel parameter declaring an operand of layout `l` ("__read_only image2d_t x", ...).
std::string layoutParam(const layout::Layout& l, const std::string& name, bool write);
// `inline float <fn>(__global const uchar* p, uint e)`: element e (row-major over the matrix)
// of a buffer encoded as `e` (layout::Encoding), dequantized to f32.
std::string encodedElementFunction(const std::string& fn, const layout::Encoding& e);

}  // namespace fbl::codegen
