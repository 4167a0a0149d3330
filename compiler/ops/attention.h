// Fused attention (the fuse-attention pass, compiler/passes/fuse_attention.h, writes it):
//
//   fbl.Attention(q, k, v[, mask]){scale, softcap, causal, window} -> o, lse
//     q [B, H, Sq, D], k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv], H a multiple of Hkv: query head h
//     reads key/value head h / (H / Hkv) (what repeat_kv's Expand + Reshape computes);
//     s[i,j] = scale * q[i] . k[j]
//     s      = softcap * tanh(s / softcap)          when softcap > 0 (Gemma 2), before the mask
//     s      = max(s + mask[.., i, j], finfo.min)   mask broadcasts to [B, H, Sq, Sk]; the sum
//                                                   rounded to fp32, as the unfused graph adds it
//     s      = -inf where causal and j > i, or window > 0 and i - j >= window
//     o[i]   = sum_j softmax_j(s)[i,j] v[j]         o [B, H, Sq, Dv]
//     lse[i] = (m[i], log sum_j exp(s[i,j] - m[i])) lse [B, H, Sq, 2], m[i] = max_j s[i,j]: the
//                                                   log-sum-exp as its two terms, for backward
//
//   A finfo.min entry swallows its score in fp32, as in PyTorch's eager attention: a query row
//   whose every key the mask hides (a left-padded position) attends uniformly to those keys. Its
//   log-sum-exp, finfo.min + log(n), would round to finfo.min and lose the 1/n: that is why lse
//   keeps m and the log-sum apart. A -inf entry counts as finfo.min, so such a row is uniform
//   where PyTorch's would be NaN.
//
//   fbl.AttentionGrad(dO, q, k, v, o, lse[, mask]){same attributes} -> dq, dk, dv (each optional)
//     P = exp(s - m - logsum), Dr[i] = dO[i] . o[i], dS = P * (dO v^T - Dr), through the softcap
//     dS *= 1 - tanh^2; dq = scale dS k; dk = scale dS^T q and dv = P^T dO, summed over the
//     query heads of each key/value head's group.
//
// No [Sq, Sk] tensor exists outside a kernel: the OpenCL pair (codegen/attention_emitters.cc)
// walks key blocks with an online softmax. The reference kernels (ref/attention_kernels.cc) define the semantics.
#pragma once

#include <vector>

#include "compiler/ops/op_schema.h"

namespace fbl::ops {

struct AttentionDims {
  int64_t batch = 0, heads = 0, kvHeads = 0, qLen = 0, kvLen = 0, headDim = 0, valueDim = 0;
  float scale = 1.0f, softcap = 0.0f;
  bool causal = false;
  int64_t window = 0;  // 0: unlimited

  int64_t group() const { return heads / kvHeads; }
  // Key j is visible from query i under the index masks (causal, window).
  bool visible(int64_t i, int64_t j) const {
    if (causal && j > i) return false;
    return window <= 0 || i - j < window;
  }
};

// The dimensions and attributes of an fbl.Attention or fbl.AttentionGrad node from its q, k, v
// shapes; an error (message only) when they do not fit together.
Result<AttentionDims> attentionDims(const ir::Node& n, const ir::Shape& q, const ir::Shape& k, const ir::Shape& v);

// An error unless `mask` broadcasts to the scores [batch, heads, q_len, kv_len].
Status attentionMaskFits(const ir::Shape& mask, const AttentionDims& d);
std::vector<OpSchema> attentionSchemas();  // their shape rules; the kernels are ref::attentionKernels()

}  // namespace fbl::ops
