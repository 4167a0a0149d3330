// Matrix kernels: MatMul (numpy batching and 1-D operands), Gemm, and 1-D and 2-D Conv (im2col,
// then the same product; 1-D as 2-D of height 1). All of them reduce to matmulF32, a blocked i-k-j loop:
//   1. C is cut into tiles of kTileM x kTileN, accumulated in a double buffer.
//   2. K is cut into panels of kTileK, so the kTileK x kTileN block of B a tile reads stays in
//      cache while every row of A in the tile streams past it.
//   3. The inner loop runs over j with unit stride in both B and the accumulator, for kRows
//      rows of A at once, so each element of B is loaded and widened once per kRows rows.
#include <algorithm>
#include <cstring>

#include "compiler/ops/conv_1d.h"
#include "compiler/ref/kernels_common.h"

namespace fbl::ref::detail {

namespace {
constexpr int64_t kTileM = 32;  // a multiple of kRows
constexpr int64_t kTileN = 256;
constexpr int64_t kTileK = 128;
constexpr int64_t kRows = 4;  // rows of A that share each converted element of B

// acc[r][0..n) += a[r] * b[0..n) for kRows rows at once: the hot loop. A full tile has a
// compile-time trip count, which lets -O2 vectorize it; the ragged edge takes the generic path.
template <int64_t kN>
inline void axpyRows(double* __restrict acc0, double* __restrict acc1, double* __restrict acc2,
                     double* __restrict acc3, const float* __restrict b, const double* a,
                     int64_t n) {
  const int64_t count = kN > 0 ? kN : n;
  for (int64_t j = 0; j < count; ++j) {
    const double bj = b[j];
    acc0[j] += a[0] * bj;
    acc1[j] += a[1] * bj;
    acc2[j] += a[2] * bj;
    acc3[j] += a[3] * bj;
  }
}
}  // namespace

void matmulF32(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
  std::vector<double> acc(kTileM * kTileN);
  // Distinct accumulators for the rows past m in the last block (the __restrict rows must not
  // overlap); they are never read.
  std::vector<double> scratch(kRows * kTileN);
  for (int64_t i0 = 0; i0 < m; i0 += kTileM) {
    const int64_t mi = std::min(kTileM, m - i0);
    for (int64_t j0 = 0; j0 < n; j0 += kTileN) {
      const int64_t nj = std::min(kTileN, n - j0);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t k0 = 0; k0 < k; k0 += kTileK) {
        const int64_t kk = std::min(kTileK, k - k0);
        for (int64_t i = 0; i < mi; i += kRows) {
          double* rows[kRows];
          for (int64_t r = 0; r < kRows; ++r)
            rows[r] = (i + r < mi ? acc.data() + i * kTileN : scratch.data()) + r * kTileN;
          for (int64_t p = 0; p < kk; ++p) {
            double av[kRows];
            for (int64_t r = 0; r < kRows; ++r) av[r] = i + r < mi ? a[(i0 + i + r) * k + k0 + p] : 0.0;
            const float* bRow = b + (k0 + p) * n + j0;
            if (nj == kTileN) {
              axpyRows<kTileN>(rows[0], rows[1], rows[2], rows[3], bRow, av, nj);
            } else {
              axpyRows<0>(rows[0], rows[1], rows[2], rows[3], bRow, av, nj);
            }
          }
        }
      }
      for (int64_t i = 0; i < mi; ++i)
        for (int64_t j = 0; j < nj; ++j)
          c[(i0 + i) * n + j0 + j] = static_cast<float>(acc[i * kTileN + j]);
    }
  }
}

namespace {

Outputs matMulOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* a, input(n, in, 0));
  FBL_ASSIGN(const Tensor* b, input(n, in, 1));
  FBL_TRY(expectDType(n, *a, 0, {DType::F32}));
  FBL_TRY(expectDType(n, *b, 1, {DType::F32}));
  if (a->rank() == 0 || b->rank() == 0) return nodeError(n, "operands must have rank >= 1");
  // A 1-D operand is a row (A) or column (B) vector whose unit dim is dropped from the result.
  Shape sa = a->shape(), sb = b->shape();
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  const int64_t m = sa[sa.size() - 2], k = sa.back(), n2 = sb.back();
  if (sb[sb.size() - 2] != k)
    return nodeError(n, "inner dimensions differ: {} x {}", ir::shapeToString(a->shape()),
                     ir::shapeToString(b->shape()));
  Shape batchA(sa.begin(), sa.end() - 2), batchB(sb.begin(), sb.end() - 2);
  FBL_ASSIGN(Shape batch, broadcastShapes(n, {&batchA, &batchB}));
  Shape out = batch;
  if (a->rank() > 1) out.push_back(m);
  if (b->rank() > 1) out.push_back(n2);
  FBL_TRY(checkShape(n, out));
  Tensor y(DType::F32, out);
  // Per batch index, the offsets of its A and B matrices (0 stride on broadcast batch dims).
  auto matStrides = [&](const Shape& s, int64_t matSize) {
    auto st = broadcastStrides(s, batch);
    for (auto& v : st) v *= matSize;
    return st;
  };
  const float* pa = a->data<float>();
  const float* pb = b->data<float>();
  float* py = y.data<float>();
  forEachIndex<2>(batch, {View{0, matStrides(batchA, m * k)}, View{0, matStrides(batchB, k * n2)}},
                  [&](int64_t i, const std::array<int64_t, 2>& o) {
                    matmulF32(pa + o[0], pb + o[1], py + i * m * n2, m, k, n2);
                  });
  return single(std::move(y));
}

Tensor transpose2d(const Tensor& t) {
  const int64_t r = t.shape()[0], c = t.shape()[1];
  return gatherView(t, View{0, {1, c}}, {c, r});
}

Outputs gemmOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* a, input(n, in, 0));
  FBL_ASSIGN(const Tensor* b, input(n, in, 1));
  const Tensor* c = optionalInput(in, 2);
  FBL_TRY(expectDType(n, *a, 0, {DType::F32}));
  FBL_TRY(expectDType(n, *b, 1, {DType::F32}));
  if (c) FBL_TRY(expectDType(n, *c, 2, {DType::F32}));
  if (a->rank() != 2 || b->rank() != 2) return nodeError(n, "A and B must be 2-D");
  Tensor at = n.attrInt("transA", 0) ? transpose2d(*a) : *a;
  Tensor bt = n.attrInt("transB", 0) ? transpose2d(*b) : *b;
  const int64_t m = at.shape()[0], k = at.shape()[1], n2 = bt.shape()[1];
  if (bt.shape()[0] != k)
    return nodeError(n, "inner dimensions differ: {} x {} (after transA/transB)",
                     ir::shapeToString(at.shape()), ir::shapeToString(bt.shape()));
  Shape out{m, n2};
  Tensor y(DType::F32, out);
  matmulF32(at.data<float>(), bt.data<float>(), y.data<float>(), m, k, n2);
  const float alpha = n.attrFloat("alpha", 1.0f), beta = n.attrFloat("beta", 1.0f);
  float* py = y.data<float>();
  if (alpha != 1.0f)
    for (int64_t i = 0; i < y.numel(); ++i) py[i] *= alpha;
  if (c && beta != 0.0f) {
    FBL_ASSIGN(Shape bc, broadcastShapes(n, {&c->shape(), &out}));
    if (bc != out)
      return nodeError(n, "C of shape {} does not broadcast to {}", ir::shapeToString(c->shape()),
                       ir::shapeToString(out));
    const float* pc = c->data<float>();
    forEachIndex<1>(out, {View{0, broadcastStrides(c->shape(), out)}},
                    [&](int64_t i, const std::array<int64_t, 1>& o) { py[i] += beta * pc[o[0]]; });
  }
  return single(std::move(y));
}

Outputs conv2dOp(const Node& n, const Inputs& in);

// [N, C, L] -> [N, C, 1, L].
Shape withUnitAt2(Shape s) {
  s.insert(s.begin() + 2, 1);
  return s;
}

// 1-D convolution (ops/conv_1d.h): the 2-D one on [N, C, 1, L], then the 1 dropped.
Outputs conv1dOp(const Node& n, const Inputs& in) {
  const Tensor x = in[0]->reshaped(withUnitAt2(in[0]->shape())), w = in[1]->reshaped(withUnitAt2(in[1]->shape()));
  Inputs in2 = in;
  in2[0] = &x;
  in2[1] = &w;
  FBL_ASSIGN(auto y, conv2dOp(ops::conv1dAs2d(n), in2));
  Shape s = y[0].shape();
  s.erase(s.begin() + 2);
  y[0] = y[0].reshaped(s);
  return y;
}

Outputs convOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  FBL_ASSIGN(const Tensor* w, input(n, in, 1));
  if (ops::isConv1d(x->shape(), w->shape())) return conv1dOp(n, in);
  return conv2dOp(n, in);
}

// 2-D convolution, NCHW, via im2col: per image and group, the patch matrix
// col[(c, ki, kj), (oh, ow)] times the group's filters W[m, (c, ki, kj)].
Outputs conv2dOp(const Node& n, const Inputs& in) {
  FBL_ASSIGN(const Tensor* x, input(n, in, 0));
  FBL_ASSIGN(const Tensor* w, input(n, in, 1));
  const Tensor* bias = optionalInput(in, 2);
  FBL_TRY(expectDType(n, *x, 0, {DType::F32}));
  FBL_TRY(expectDType(n, *w, 1, {DType::F32}));
  if (bias) FBL_TRY(expectDType(n, *bias, 2, {DType::F32}));
  if (x->rank() != 4 || w->rank() != 4)
    return nodeError(n, "only 1-D and 2-D convolution (3-D or 4-D X and W) are supported");
  const int64_t batch = x->shape()[0], cin = x->shape()[1], h = x->shape()[2], wd = x->shape()[3];
  const int64_t cout = w->shape()[0], cg = w->shape()[1], kh = w->shape()[2], kw = w->shape()[3];
  const int64_t group = n.attrInt("group", 1);
  if (group <= 0 || cin != cg * group || cout % group != 0)
    return nodeError(n, "channels do not match: X {} W {} group {}", ir::shapeToString(x->shape()),
                     ir::shapeToString(w->shape()), group);
  if (bias && (bias->rank() != 1 || bias->shape()[0] != cout))
    return nodeError(n, "bias must have shape [{}]", cout);
  auto ks = n.attrInts("kernel_shape", {kh, kw});
  if (ks != std::vector<int64_t>{kh, kw}) return nodeError(n, "kernel_shape does not match W");
  auto strides = n.attrInts("strides", {1, 1});
  auto dil = n.attrInts("dilations", {1, 1});
  auto pads = n.attrInts("pads", {0, 0, 0, 0});
  if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4)
    return nodeError(n, "strides, dilations and pads must have 2, 2 and 4 entries");
  // Bounds that keep the index arithmetic below far from overflow.
  constexpr int64_t kMaxParam = int64_t{1} << 20;
  for (int64_t v : strides)
    if (v <= 0 || v > kMaxParam) return nodeError(n, "stride {} is out of range", v);
  for (int64_t v : dil)
    if (v <= 0 || v > kMaxParam) return nodeError(n, "dilation {} is out of range", v);
  for (int64_t v : pads)
    if (v < 0 || v > kMaxParam) return nodeError(n, "pad {} is out of range", v);
  const int64_t extH = (kh - 1) * dil[0] + 1, extW = (kw - 1) * dil[1] + 1;
  std::string autoPad = n.attrString("auto_pad", "NOTSET");
  if (autoPad == "VALID") {
    pads = {0, 0, 0, 0};
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    const int64_t in2[2] = {h, wd}, ext[2] = {extH, extW};
    for (int d = 0; d < 2; ++d) {
      int64_t outD = (in2[d] + strides[d] - 1) / strides[d];
      int64_t total = std::max<int64_t>(0, (outD - 1) * strides[d] + ext[d] - in2[d]);
      int64_t small = total / 2, big = total - small;
      pads[d] = autoPad == "SAME_UPPER" ? small : big;
      pads[d + 2] = autoPad == "SAME_UPPER" ? big : small;
    }
  } else if (autoPad != "NOTSET") {
    return nodeError(n, "auto_pad '{}' is not supported", autoPad);
  }
  const int64_t oh = (h + pads[0] + pads[2] - extH) / strides[0] + 1;
  const int64_t ow = (wd + pads[1] + pads[3] - extW) / strides[1] + 1;
  if (oh <= 0 || ow <= 0) return nodeError(n, "the kernel is larger than the padded input");
  Shape out{batch, cout, oh, ow};
  FBL_TRY(checkShape(n, out));
  Tensor y(DType::F32, out);
  const int64_t patch = cg * kh * kw, pixels = oh * ow, mg = cout / group;
  std::vector<float> col(patch * pixels);
  const float* px = x->data<float>();
  const float* pw = w->data<float>();
  float* py = y.data<float>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t g = 0; g < group; ++g) {
      for (int64_t c = 0; c < cg; ++c)
        for (int64_t ki = 0; ki < kh; ++ki)
          for (int64_t kj = 0; kj < kw; ++kj) {
            float* row = col.data() + ((c * kh + ki) * kw + kj) * pixels;
            const float* plane = px + ((b * cin) + g * cg + c) * h * wd;
            for (int64_t r = 0; r < oh; ++r)
              for (int64_t s = 0; s < ow; ++s) {
                int64_t ih = r * strides[0] - pads[0] + ki * dil[0];
                int64_t iw = s * strides[1] - pads[1] + kj * dil[1];
                bool inside = ih >= 0 && ih < h && iw >= 0 && iw < wd;
                row[r * ow + s] = inside ? plane[ih * wd + iw] : 0.0f;
              }
          }
      float* dst = py + (b * cout + g * mg) * pixels;
      matmulF32(pw + g * mg * patch, col.data(), dst, mg, patch, pixels);
      if (bias)
        for (int64_t m = 0; m < mg; ++m)
          for (int64_t p = 0; p < pixels; ++p) dst[m * pixels + p] += bias->data<float>()[g * mg + m];
    }
  return single(std::move(y));
}

}  // namespace

std::vector<KernelEntry> linalgKernels() {
  return {{"MatMul", matMulOp}, {"Gemm", gemmOp}, {"Conv", convOp}};
}

}  // namespace fbl::ref::detail
