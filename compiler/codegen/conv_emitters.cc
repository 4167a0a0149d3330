// Convolution and its gradients as direct loops (kernels_cl/conv2d_group.cl, conv2d_grad.cl):
//  1. Read the geometry from the node: x [N,C,H,W], w [M,C/G,KH,KW], y [N,M,OH,OW], strides,
//     begin pads, dilations, group. A 1-D convolution ([N,C,T]) becomes a unit-height image.
//  2. Check it (channels divide by the group, every output extent matches the input, kernel,
//     stride, pads and dilation) so a malformed node is an error naming it, not a wrong kernel.
//  3. Fill the template holes with the geometry as literals. Forward and dx launch one work-item
//     per output or input element, dw one per weight element; each sums its taps in a fixed
//     order, without atomics.
#include "compiler/codegen/conv_emitters.h"

#include <map>
#include <string>

#include <fmt/format.h>

namespace fbl::codegen {
namespace {

using ir::Shape;

struct ConvGeometry {
  int64_t batch = 1, c = 1, h = 1, w = 1;  // x
  int64_t m = 1, kh = 1, kw = 1;           // w: [m, c / groups, kh, kw]
  int64_t oh = 1, ow = 1;                  // y
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
};

// Steps 1-2; `n` carries strides, pads, dilations and group (Conv, or an fbl.ConvGrad* node).
Result<ConvGeometry> readGeometry(const ir::Graph& g, const ir::Node& n, const Shape& x, const Shape& w,
                                  const Shape& y) {
  const size_t rank = x.size();
  if ((rank != 3 && rank != 4) || w.size() != rank || y.size() != rank)
    return makeError("{}: only 1-D and 2-D convolutions are supported (x {}, w {}, y {})", ir::describeNode(g, n),
                     ir::shapeToString(x), ir::shapeToString(w), ir::shapeToString(y));
  const size_t sp = rank - 2;
  const std::string autoPad = n.attrString("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID")
    return makeError("{}: auto_pad {} is not supported; export explicit pads", ir::describeNode(g, n), autoPad);
  const auto strides = n.attrInts("strides", std::vector<int64_t>(sp, 1));
  const auto dil = n.attrInts("dilations", std::vector<int64_t>(sp, 1));
  auto pads = n.attrInts("pads", std::vector<int64_t>(2 * sp, 0));
  if (autoPad == "VALID") pads.assign(2 * sp, 0);
  if (strides.size() != sp || dil.size() != sp || pads.size() != 2 * sp)
    return makeError("{}: strides, dilations and pads must have one entry per spatial dim", ir::describeNode(g, n));
  // A 1-D convolution is a 2-D one over a unit-height image.
  auto at = [&](const Shape& s, size_t d) { return sp == 1 && d == 2 ? int64_t{1} : s[d - (sp == 1 && d == 3)]; };
  auto sdim = [&](const std::vector<int64_t>& v, size_t d, int64_t unit) { return sp == 1 ? (d == 0 ? unit : v[0]) : v[d]; };
  ConvGeometry geo;
  geo.batch = x[0], geo.c = x[1], geo.h = at(x, 2), geo.w = at(x, 3);
  geo.m = w[0], geo.kh = at(w, 2), geo.kw = at(w, 3);
  geo.oh = at(y, 2), geo.ow = at(y, 3);
  geo.sh = sdim(strides, 0, 1), geo.sw = sdim(strides, 1, 1);
  geo.dh = sdim(dil, 0, 1), geo.dw = sdim(dil, 1, 1);
  geo.ph = sp == 1 ? 0 : pads[0], geo.pw = sp == 1 ? pads[0] : pads[1];
  const int64_t padEndH = sp == 1 ? 0 : pads[2], padEndW = sp == 1 ? pads[1] : pads[3];
  geo.groups = n.attrInt("group", 1);
  const bool channelsOk = geo.groups > 0 && geo.c % geo.groups == 0 && geo.m % geo.groups == 0 &&
                          w[1] * geo.groups == geo.c && y[0] == x[0] && y[1] == geo.m;
  if (!channelsOk)
    return makeError("{}: channels do not match the group count {} (x {}, w {}, y {})", ir::describeNode(g, n),
                     geo.groups, ir::shapeToString(x), ir::shapeToString(w), ir::shapeToString(y));
  auto extent = [](int64_t in, int64_t pb, int64_t pe, int64_t k, int64_t d, int64_t s) {
    return (in + pb + pe - (d * (k - 1) + 1)) / s + 1;
  };
  if (geo.sh <= 0 || geo.sw <= 0 || geo.dh <= 0 || geo.dw <= 0 ||
      extent(geo.h, geo.ph, padEndH, geo.kh, geo.dh, geo.sh) != geo.oh ||
      extent(geo.w, geo.pw, padEndW, geo.kw, geo.dw, geo.sw) != geo.ow)
    return makeError("{}: the output's spatial shape does not match the convolution (x {}, w {}, y {})",
                     ir::describeNode(g, n), ir::shapeToString(x), ir::shapeToString(w), ir::shapeToString(y));
  return geo;
}

// Step 3: the holes every template of the family shares.
std::map<std::string, std::string> holes(const ConvGeometry& g) {
  auto s = [](int64_t v) { return std::to_string(v); };
  const int64_t cg = g.c / g.groups;
  return {{"BATCH", s(g.batch)}, {"C", s(g.c)},   {"H", s(g.h)},   {"W", s(g.w)},   {"M", s(g.m)},
          {"KH", s(g.kh)},       {"KW", s(g.kw)}, {"OH", s(g.oh)}, {"OW", s(g.ow)}, {"SH", s(g.sh)},
          {"SW", s(g.sw)},       {"PH", s(g.ph)}, {"PW", s(g.pw)}, {"DH", s(g.dh)}, {"DW", s(g.dw)},
          {"CG", s(cg)},         {"MG", s(g.m / g.groups)},
          {"NX", s(g.batch * g.c * g.h * g.w)}, {"NW", s(g.m * cg * g.kh * g.kw)},
          {"NY", s(g.batch * g.m * g.oh * g.ow)}};
}

const Shape& shapeOf(const ir::Graph& g, ir::ValueId v) { return g.values[v].shape; }

Result<NodeCode> conv(const ir::Graph& g, const ir::Node& n, const Target& t) {
  FBL_ASSIGN(ConvGeometry geo, readGeometry(g, n, shapeOf(g, n.inputs[0]), shapeOf(g, n.inputs[1]),
                                            shapeOf(g, n.outputs[0])));
  std::map<std::string, std::string> vars = holes(geo);
  std::string params = "__global const float* x, __global const float* w, ";
  std::vector<ArgRef> args{val(n.inputs[0]), val(n.inputs[1])};
  vars["BIAS"] = "";
  if (n.input(2) != ir::kNoValue) {
    params += "__global const float* bias, ";
    args.push_back(val(n.inputs[2]));
    vars["BIAS"] = " + bias[m]";
  }
  vars["PARAMS"] = params + "__global float* y";
  args.push_back(val(n.outputs[0]));
  const int64_t count = geo.batch * geo.m * geo.oh * geo.ow;
  NodeCode c;
  c.launches.push_back(launch("conv2d_group", vars, "conv", std::move(args), grid1(count, t), {t.workgroup}));
  return c;
}

// fbl.ConvGradInput(dy, w){shape = x's shape}.
Result<NodeCode> convGradInput(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const Shape x = n.attrInts("shape");
  FBL_ASSIGN(ConvGeometry geo, readGeometry(g, n, x, shapeOf(g, n.inputs[1]), shapeOf(g, n.inputs[0])));
  const int64_t count = ir::numElements(x);
  NodeCode c;
  c.launches.push_back(launch("conv2d_grad", holes(geo), "convgradinput",
                              {val(n.inputs[0]), val(n.inputs[1]), val(n.outputs[0])}, grid1(count, t),
                              {t.workgroup}, "_dx"));
  return c;
}

// fbl.ConvGradWeight(dy, x){shape = w's shape}.
Result<NodeCode> convGradWeight(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const Shape w = n.attrInts("shape");
  FBL_ASSIGN(ConvGeometry geo, readGeometry(g, n, shapeOf(g, n.inputs[1]), w, shapeOf(g, n.inputs[0])));
  const int64_t count = ir::numElements(w);
  NodeCode c;
  c.launches.push_back(launch("conv2d_grad", holes(geo), "convgradweight",
                              {val(n.inputs[0]), val(n.inputs[1]), val(n.outputs[0])}, grid1(count, t),
                              {t.workgroup}, "_dw"));
  return c;
}

}  // namespace

std::vector<EmitterEntry> convEmitters() {
  return {{"Conv", conv}, {"fbl.ConvGradInput", convGradInput}, {"fbl.ConvGradWeight", convGradWeight}};
}

}  // namespace fbl::codegen
