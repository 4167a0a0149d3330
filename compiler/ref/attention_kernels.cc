// fbl.Attention / fbl.AttentionGrad reference kernels (semantics in ops/attention.h). They
// materialise one row of scores at a time, in double, so they stay the checker for the OpenCL
// flash kernels and for the fuse-attention rewrite.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "compiler/ops/attention.h"
#include "compiler/ops/broadcast.h"
#include "compiler/ref/training_kernels.h"

namespace fbl::ref {

namespace {

using ir::Shape;
using ir::Tensor;
using ops::AttentionDims;
using ops::attentionDims;

using Out = Result<std::vector<Tensor>>;

// One row of scores s[i, 0..Sk) of head (b, h), -inf where masked by index; `tanhOf` keeps
// tanh(raw / softcap) per key for the backward's chain rule. The mask is added in fp32 (see
// ops/attention.h): in double a finfo.min entry would keep the score's differences, which the
// unfused graph loses.
struct ScoreRow {
  const AttentionDims& d;
  const float *q, *k, *mask;
  std::vector<int64_t> maskStrides;  // over [B, H, Sq, Sk]

  void compute(int64_t b, int64_t h, int64_t i, std::vector<double>& s, std::vector<double>* tanhOf) const {
    const int64_t kvh = h / d.group();
    const float* qi = q + ((b * d.heads + h) * d.qLen + i) * d.headDim;
    for (int64_t j = 0; j < d.kvLen; ++j) {
      if (!d.visible(i, j)) {
        s[j] = -std::numeric_limits<double>::infinity();
        continue;
      }
      const float* kj = k + ((b * d.kvHeads + kvh) * d.kvLen + j) * d.headDim;
      double dot = 0;
      for (int64_t e = 0; e < d.headDim; ++e) dot += double(qi[e]) * kj[e];
      double x = d.scale * dot;
      if (d.softcap > 0) {
        const double t = std::tanh(x / d.softcap);
        if (tanhOf) (*tanhOf)[j] = t;
        x = d.softcap * t;
      }
      if (mask) {
        const float sum = static_cast<float>(x) + mask[b * maskStrides[0] + h * maskStrides[1] + i * maskStrides[2] +
                                                        j * maskStrides[3]];
        x = std::max(sum, std::numeric_limits<float>::lowest());
      }
      s[j] = x;
    }
  }
};

Result<ScoreRow> scoreRow(const ir::Node& n, const AttentionDims& d, const Tensor& q, const Tensor& k,
                          const Tensor* mask) {
  ScoreRow r{d, q.data<float>(), k.data<float>(), nullptr, {}};
  if (mask) {
    if (mask->dtype() != ir::DType::F32) return kernelError(n, "the mask must be f32");
    if (Status st = ops::attentionMaskFits(mask->shape(), d); !st.ok()) return kernelError(n, st.error().message);
    r.mask = mask->data<float>();
    r.maskStrides = ops::broadcastStrides(mask->shape(), {d.batch, d.heads, d.qLen, d.kvLen});
  }
  return r;
}

Out attention(const ir::Node& n, const Inputs& in) {
  FBL_TRY(requireF32(n, in, 3));
  auto dims = attentionDims(n, in[0]->shape(), in[1]->shape(), in[2]->shape());
  if (!dims.ok()) return kernelError(n, dims.error().message);
  const AttentionDims& d = *dims;
  FBL_ASSIGN(ScoreRow row, scoreRow(n, d, *in[0], *in[1], in.size() > 3 ? in[3] : nullptr));
  Tensor o(ir::DType::F32, {d.batch, d.heads, d.qLen, d.valueDim});
  Tensor lse(ir::DType::F32, {d.batch, d.heads, d.qLen, 2});
  const float* v = in[2]->data<float>();
  std::vector<double> s(d.kvLen), acc(d.valueDim);
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.heads; ++h)
      for (int64_t i = 0; i < d.qLen; ++i) {
        row.compute(b, h, i, s, nullptr);
        double m = -std::numeric_limits<double>::infinity();
        for (double x : s) m = std::max(m, x);
        double sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        const float* vb = v + (b * d.kvHeads + h / d.group()) * d.kvLen * d.valueDim;
        for (int64_t j = 0; j < d.kvLen; ++j) {
          const double p = std::exp(s[j] - m);
          sum += p;
          if (p != 0)
            for (int64_t e = 0; e < d.valueDim; ++e) acc[e] += p * vb[j * d.valueDim + e];
        }
        const int64_t row0 = (b * d.heads + h) * d.qLen + i;
        for (int64_t e = 0; e < d.valueDim; ++e) o.data<float>()[row0 * d.valueDim + e] = static_cast<float>(acc[e] / sum);
        lse.data<float>()[2 * row0] = static_cast<float>(m);
        lse.data<float>()[2 * row0 + 1] = static_cast<float>(std::log(sum));
      }
  std::vector<Tensor> out;
  out.push_back(std::move(o));
  out.push_back(std::move(lse));
  return out;
}

Out attentionGrad(const ir::Node& n, const Inputs& in) {
  FBL_TRY(requireF32(n, in, 6));
  auto dims = attentionDims(n, in[1]->shape(), in[2]->shape(), in[3]->shape());
  if (!dims.ok()) return kernelError(n, dims.error().message);
  const AttentionDims& d = *dims;
  FBL_ASSIGN(ScoreRow row, scoreRow(n, d, *in[1], *in[2], in.size() > 6 ? in[6] : nullptr));
  const float *dO = in[0]->data<float>(), *q = in[1]->data<float>(), *k = in[2]->data<float>(),
              *v = in[3]->data<float>(), *o = in[4]->data<float>(), *lse = in[5]->data<float>();
  std::vector<double> dq(ir::numElements(in[1]->shape())), dk(ir::numElements(in[2]->shape())),
      dv(ir::numElements(in[3]->shape()));
  std::vector<double> s(d.kvLen), t(d.kvLen);
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.heads; ++h) {
      const int64_t kvBase = b * d.kvHeads + h / d.group();
      for (int64_t i = 0; i < d.qLen; ++i) {
        row.compute(b, h, i, s, &t);
        const int64_t r = (b * d.heads + h) * d.qLen + i;
        const float* dOi = dO + r * d.valueDim;
        double rowTerm = 0;
        for (int64_t e = 0; e < d.valueDim; ++e) rowTerm += double(dOi[e]) * o[r * d.valueDim + e];
        const double rowMax = lse[2 * r], logSum = lse[2 * r + 1];
        for (int64_t j = 0; j < d.kvLen; ++j) {
          const double p = std::exp(s[j] - rowMax - logSum);
          if (p == 0) continue;
          const int64_t kj = kvBase * d.kvLen + j;
          double dp = 0;
          for (int64_t e = 0; e < d.valueDim; ++e) {
            dp += double(dOi[e]) * v[kj * d.valueDim + e];
            dv[kj * d.valueDim + e] += p * dOi[e];
          }
          double ds = p * (dp - rowTerm);
          if (d.softcap > 0) ds *= 1 - t[j] * t[j];
          ds *= d.scale;
          for (int64_t e = 0; e < d.headDim; ++e) {
            dq[r * d.headDim + e] += ds * k[kj * d.headDim + e];
            dk[kj * d.headDim + e] += ds * q[r * d.headDim + e];
          }
        }
      }
    }
  auto toTensor = [](const std::vector<double>& x, const Shape& shape) {
    Tensor t(ir::DType::F32, shape);
    for (size_t i = 0; i < x.size(); ++i) t.data<float>()[i] = static_cast<float>(x[i]);
    return t;
  };
  std::vector<Tensor> out;
  out.push_back(toTensor(dq, in[1]->shape()));
  out.push_back(toTensor(dk, in[2]->shape()));
  out.push_back(toTensor(dv, in[3]->shape()));
  return out;
}

}  // namespace

std::vector<KernelEntry> attentionKernels() {
  return {{"fbl.Attention", attention}, {"fbl.AttentionGrad", attentionGrad}};
}

}  // namespace fbl::ref
