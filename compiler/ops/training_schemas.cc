// fbl's own backward and optimizer ops (names prefixed "fbl."): their schemas (shape rules)
// here, their reference kernels in ref/training_kernels*.cc. Every op's output type is fixed by
// its inputs and attributes, since a gradient has the shape of what it differentiates:
//   fbl.ReduceSumTo(x){shape}                      sum x over broadcast dims down to `shape`
//   fbl.SoftmaxGrad(dy, y){axis}                   y * (dy - sum(dy * y, axis))
//   fbl.LayerNormGrad(dy, x, scale){axis,epsilon}  -> dx, dscale, dbias (each optional)
//   fbl.GeluGrad(dy, x){approximate} fbl.ErfGrad(dy, x) fbl.SigmoidGrad(dy, y) fbl.TanhGrad(dy, y)
//   fbl.SoftmaxCrossEntropyLossGrad(dloss, scores, labels[, weights]){reduction,ignore_index}
//   fbl.GatherGrad(dy, indices){axis,shape}        scatter-add of dy into zeros(shape)
//   fbl.SliceGrad(dy){shape,axes,starts,steps}     dy written into zeros(shape)
//   fbl.ConvGradInput(dy, w){shape,strides,pads,dilations,group}
//   fbl.ConvGradWeight(dy, x){shape,strides,pads,dilations,group}
//   fbl.SGD(p, g[, buf]){lr,momentum,weight_decay} -> p'[, buf']
//   fbl.AdamW(p, g, m, v, step[, lr, grad_scale]){lr,beta1,beta2,epsilon,weight_decay} -> p', m', v'
//     (the two scalar inputs, together: the lr replaces the attribute, g is multiplied by grad_scale)
//   fbl.Attention, fbl.AttentionGrad: attention.h
#include "compiler/ops/attention.h"
#include "compiler/ops/broadcast.h"
#include "compiler/ops/schema_tables.h"

namespace fbl::ops {

namespace {

Status sizeOutputs(InferContext& c) {
  c.out.assign(c.node.outputs.size(), TensorType{});
  return Status::success();
}

// Outputs 0.. take the types of the given inputs (an absent input leaves its output Undefined).
template <int... Ins>
Status likeInputs(InferContext& c) {
  FBL_TRY(sizeOutputs(c));
  size_t o = 0;
  for (int i : {Ins...}) {
    if (o < c.out.size() && static_cast<size_t>(i) < c.in.size()) c.out[o] = c.in[i];
    ++o;
  }
  return Status::success();
}

// Elementwise gradient ops: dy and the saved tensor have one shape, which dx takes.
Status pointwiseGrad(InferContext& c) {
  if (c.in[0].shape != c.in[1].shape)
    return c.fail("dy " + ir::shapeToString(c.in[0].shape) + " and the saved tensor " +
                  ir::shapeToString(c.in[1].shape) + " differ in shape");
  return likeInputs<1>(c);
}

// The output is dy's dtype with the shape in the `shape` attribute.
Status shapeAttr(InferContext& c) {
  FBL_TRY(sizeOutputs(c));
  std::vector<int64_t> s = c.node.attrInts("shape");
  for (int64_t d : s)
    if (d < 0) return c.fail("negative dimension in the shape attribute");
  if (!c.out.empty()) c.out[0] = TensorType{c.in[0].dtype, s};
  return Status::success();
}

Status reduceSumTo(InferContext& c) {
  if (!broadcastsTo(c.node.attrInts("shape"), c.in[0].shape))
    return c.fail("shape " + ir::shapeToString(c.node.attrInts("shape")) +
                  " does not broadcast to the input's " + ir::shapeToString(c.in[0].shape));
  return shapeAttr(c);
}

Status sceGrad(InferContext& c) {
  if (c.in[1].shape.size() < 2) return c.fail("scores must have rank 2 or more");
  return likeInputs<1>(c);
}

}  // namespace

std::vector<OpSchema> trainingSchemas() {
  const std::vector<std::string_view> conv{"shape", "strides", "pads", "dilations", "group"};
  std::vector<OpSchema> all = attentionSchemas();
  for (OpSchema& s : std::vector<OpSchema>{
      {"fbl.ReduceSumTo", 1, 1, {"shape"}, reduceSumTo},
      {"fbl.SoftmaxGrad", 2, 2, {"axis"}, pointwiseGrad},
      {"fbl.LayerNormGrad", 3, 3, {"axis", "epsilon"}, likeInputs<1, 2, 2>},
      {"fbl.GeluGrad", 2, 2, {"approximate"}, pointwiseGrad},
      {"fbl.ErfGrad", 2, 2, {}, pointwiseGrad},
      {"fbl.SigmoidGrad", 2, 2, {}, pointwiseGrad},
      {"fbl.TanhGrad", 2, 2, {}, pointwiseGrad},
      {"fbl.SoftmaxCrossEntropyLossGrad", 3, 4, {"reduction", "ignore_index"}, sceGrad},
      {"fbl.GatherGrad", 2, 2, {"axis", "shape"}, shapeAttr},
      {"fbl.SliceGrad", 1, 1, {"shape", "axes", "starts", "steps"}, shapeAttr},
      {"fbl.ConvGradInput", 2, 2, conv, shapeAttr},
      {"fbl.ConvGradWeight", 2, 2, conv, shapeAttr},
      {"fbl.SGD", 2, 3, {"lr", "momentum", "weight_decay"}, likeInputs<0, 2>},
      {"fbl.AdamW", 5, 7, {"lr", "beta1", "beta2", "epsilon", "weight_decay"}, likeInputs<0, 2, 3>},
       })
    all.push_back(std::move(s));
  return all;
}

}  // namespace fbl::ops
