// fbl.Attention / fbl.AttentionGrad: their dimensions and shape rules (semantics in
// attention.h; the reference kernels are ref/attention_kernels.cc).
#include "compiler/ops/attention.h"

#include <fmt/format.h>

#include "compiler/ops/broadcast.h"

namespace fbl::ops {

Result<AttentionDims> attentionDims(const ir::Node& n, const ir::Shape& q, const ir::Shape& k, const ir::Shape& v) {
  if (q.size() != 4 || k.size() != 4 || v.size() != 4)
    return makeError("q, k and v must be [batch, heads, length, head_dim], got {}, {}, {}", ir::shapeToString(q),
                     ir::shapeToString(k), ir::shapeToString(v));
  AttentionDims d;
  d.batch = q[0];
  d.heads = q[1];
  d.qLen = q[2];
  d.headDim = q[3];
  d.kvHeads = k[1];
  d.kvLen = k[2];
  d.valueDim = v[3];
  if (k[0] != d.batch || v[0] != d.batch || k[3] != d.headDim || v[1] != d.kvHeads || v[2] != d.kvLen)
    return makeError("q {}, k {} and v {} do not fit together", ir::shapeToString(q), ir::shapeToString(k),
                     ir::shapeToString(v));
  if (d.kvHeads <= 0 || d.heads % d.kvHeads != 0)
    return makeError("{} query heads are not a multiple of {} key/value heads", d.heads, d.kvHeads);
  d.scale = n.attrFloat("scale", 1.0f);
  d.softcap = n.attrFloat("softcap", 0.0f);
  d.causal = n.attrInt("causal", 0) != 0;
  d.window = n.attrInt("window", 0);
  if (d.softcap < 0 || d.window < 0) return makeError("softcap and window must not be negative");
  return d;
}

Status attentionMaskFits(const ir::Shape& mask, const AttentionDims& d) {
  const ir::Shape full{d.batch, d.heads, d.qLen, d.kvLen};
  if (!broadcastsTo(mask, full))
    return makeError("mask {} does not broadcast to {}", ir::shapeToString(mask), ir::shapeToString(full));
  return Status::success();
}

namespace {

using ir::Shape;
using ir::Tensor;


Status inferAttention(InferContext& c) {
  auto d = attentionDims(c.node, c.in[0].shape, c.in[1].shape, c.in[2].shape);
  if (!d.ok()) return c.fail(d.error().message);
  if (c.in.size() > 3 && c.in[3].dtype != ir::DType::Undefined)
    if (Status st = attentionMaskFits(c.in[3].shape, *d); !st.ok()) return c.fail(st.error().message);
  c.out.assign(c.node.outputs.size(), TensorType{});
  c.out[0] = {c.in[0].dtype, {d->batch, d->heads, d->qLen, d->valueDim}};
  if (c.out.size() > 1) c.out[1] = {c.in[0].dtype, {d->batch, d->heads, d->qLen, 2}};
  return Status::success();
}

// Inputs dO, q, k, v, o, lse[, mask]; outputs dq, dk, dv with the shapes of q, k, v.
Status inferAttentionGrad(InferContext& c) {
  auto d = attentionDims(c.node, c.in[1].shape, c.in[2].shape, c.in[3].shape);
  if (!d.ok()) return c.fail(d.error().message);
  const Shape o{d->batch, d->heads, d->qLen, d->valueDim};
  if (c.in[0].shape != o || c.in[4].shape != o)
    return c.fail(fmt::format("dO {} and o {} must be {}", ir::shapeToString(c.in[0].shape),
                              ir::shapeToString(c.in[4].shape), ir::shapeToString(o)));
  if (c.in[5].shape != Shape{d->batch, d->heads, d->qLen, 2}) return c.fail("lse must be [batch, heads, q_len, 2]");
  if (c.in.size() > 6 && c.in[6].dtype != ir::DType::Undefined)
    if (Status st = attentionMaskFits(c.in[6].shape, *d); !st.ok()) return c.fail(st.error().message);
  c.out.assign(c.node.outputs.size(), TensorType{});
  for (size_t i = 0; i < c.out.size() && i < 3; ++i) c.out[i] = c.in[i + 1];
  return Status::success();
}
}  // namespace

std::vector<OpSchema> attentionSchemas() {
  const std::vector<std::string_view> attrs{"scale", "softcap", "causal", "window"};
  return {
      {"fbl.Attention", 3, 4, attrs, inferAttention},
      {"fbl.AttentionGrad", 6, 7, attrs, inferAttentionGrad},
  };
}

}  // namespace fbl::ops
