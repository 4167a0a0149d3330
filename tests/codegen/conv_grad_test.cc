// The convolution kernels of conv_emitters.cc (kernels_cl/conv2d_group.cl, conv2d_grad.cl) on
// PoCL against the reference executor's Conv and fbl.ConvGradInput/fbl.ConvGradWeight kernels,
// on random data: strides, asymmetric pads, dilations, groups, depthwise (with and without a
// channel multiplier), 1-D. The emitters are called directly, so Conv with groups is checked
// whichever emitter the table picks for "Conv".
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <map>
#include <random>

#include "compiler/codegen/conv_emitters.h"
#include "compiler/ops/op_schema.h"
#include "compiler/ref/executor.h"
#include "harness/cl_session.h"
#include "tests/ops/graph_builder.h"

namespace fbl::testing {
namespace {

using ir::DType;
using ir::Shape;
using Ints = std::vector<int64_t>;

struct ConvCase {
  Shape x;  // [N, C, H, W] or [N, C, T]
  int64_t features = 1;
  Ints kernel, strides, pads, dilations;
  int64_t group = 1;
  bool bias = false;
};

ir::Tensor randomTensor(const Shape& s, std::mt19937& rng) {
  ir::Tensor t(DType::F32, s);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

codegen::EmitFn emitterFor(const std::string& op) {
  for (const auto& [name, fn] : codegen::convEmitters())
    if (name == op) return fn;
  FAIL("no conv emitter for " << op);
  return nullptr;
}

harness::ClSession& session() {
  static std::unique_ptr<fbl::harness::ClSession> s = [] {
    setenv("POCL_CACHE_DIR", FBL_SOURCE_DIR "/build-pocl-cache", 0);
    auto r = fbl::harness::ClSession::open();
    if (!r.ok()) FAIL(r.error().message);
    return std::move(*r);
  }();
  return *s;
}

// Runs node `n`'s launches on PoCL with `values` as the contents of its inputs; returns output 0.
std::vector<float> runOnDevice(const ir::Graph& g, const ir::Node& n, const std::map<ir::ValueId, ir::Tensor>& values) {
  auto code = emitterFor(n.op)(g, n, codegen::Target{});
  INFO((code.ok() ? std::string() : code.error().message));
  REQUIRE(code.ok());
  REQUIRE(code->scratch.empty());
  auto& s = session();
  std::map<ir::ValueId, cl_mem> mem;
  for (ir::ValueId v : n.inputs) {
    auto b = s.buffer(values.at(v).numel(), values.at(v).data<float>());
    REQUIRE(b.ok());
    mem[v] = *b;
  }
  const size_t outCount = static_cast<size_t>(ir::numElements(g.values[n.outputs[0]].shape));
  auto out = s.buffer(outCount);
  REQUIRE(out.ok());
  mem[n.outputs[0]] = *out;
  for (const codegen::LaunchSpec& l : code->launches) {
    codegen::RTileKernel k;
    k.name = "k" + l.entry;
    // ClSession caches kernels by source alone; both gradients' launches share one source.
    k.source = l.source + "\n// entry " + k.name + "\n";
    for (size_t p; (p = k.source.find("{{NAME}}")) != std::string::npos;) k.source.replace(p, 8, "k");
    k.global.assign(l.global.begin(), l.global.end());
    k.local.assign(l.local.begin(), l.local.end());
    k.args.assign(l.args.size(), "buffer");
    std::vector<cl_mem> args;
    for (const codegen::ArgRef& a : l.args) args.push_back(mem.at(a.index));
    auto ran = s.run(k, args);
    INFO((ran.ok() ? std::string() : ran.error().message));
    REQUIRE(ran.ok());
  }
  auto got = s.readBuffer(*out, outCount);
  REQUIRE(got.ok());
  for (auto& [v, m] : mem) s.release(m);
  return *got;
}

void requireClose(const std::vector<float>& got, const ir::Tensor& want, const std::string& what) {
  REQUIRE(static_cast<int64_t>(got.size()) == want.numel());
  double scale = 1.0, err = 0.0;
  int64_t worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    scale = std::max(scale, std::fabs(want.at(i)));
    if (std::fabs(got[i] - want.at(i)) > err) err = std::fabs(got[i] - want.at(i)), worst = i;
  }
  INFO(what << ": max error " << err << " at " << worst << " (got " << got[worst] << ", want " << want.at(worst) << ")");
  REQUIRE(err <= 1e-5 * scale);
}

// Builds Conv(x, w[, b]), fbl.ConvGradInput(dy, w) and fbl.ConvGradWeight(dy, x) for one geometry,
// runs them with the reference executor, then each node's kernels on PoCL.
void checkCase(const ConvCase& cc, unsigned seed) {
  const size_t sp = cc.x.size() - 2;
  Shape ws{cc.features, cc.x[1] / cc.group};
  ws.insert(ws.end(), cc.kernel.begin(), cc.kernel.end());
  const Ints strides = cc.strides.empty() ? Ints(sp, 1) : cc.strides;
  const Ints dil = cc.dilations.empty() ? Ints(sp, 1) : cc.dilations;
  const Ints pads = cc.pads.empty() ? Ints(2 * sp, 0) : cc.pads;
  Shape ys{cc.x[0], cc.features};
  for (size_t d = 0; d < sp; ++d)
    ys.push_back((cc.x[d + 2] + pads[d] + pads[d + sp] - (dil[d] * (cc.kernel[d] - 1) + 1)) / strides[d] + 1);
  const std::map<std::string, ir::AttrValue> common{{"strides", strides}, {"pads", pads}, {"dilations", dil}, {"group", cc.group}};

  GraphBuilder b;
  std::mt19937 rng(seed);
  std::vector<ir::Tensor> feeds{randomTensor(cc.x, rng), randomTensor(ws, rng), randomTensor(ys, rng),
                                randomTensor({cc.features}, rng)};
  const ir::ValueId x = b.input("x", DType::F32, cc.x), w = b.input("w", DType::F32, ws);
  const ir::ValueId dy = b.input("dy", DType::F32, ys), bias = b.input("b", DType::F32, {cc.features});
  auto withShape = [&](const Shape& s) {
    std::map<std::string, ir::AttrValue> a = common;
    a["shape"] = Ints(s);
    return a;
  };
  const ir::ValueId dx = b.op("fbl.ConvGradInput", {dy, w}, withShape(cc.x));
  const ir::ValueId dw = b.op("fbl.ConvGradWeight", {dy, x}, withShape(ws));
  b.output(dx);
  b.output(dw);
  const bool forward = sp == 2;  // the reference Conv is 2-D only
  if (forward) b.output(b.op("Conv", cc.bias ? std::vector<ir::ValueId>{x, w, bias} : std::vector<ir::ValueId>{x, w}, common));
  for (const ir::Node& n : b.g.nodes) REQUIRE(ops::inferNode(b.g, n).ok());
  REQUIRE(b.g.values[b.g.outputs.back()].shape == (forward ? ys : ws));
  auto want = ref::runGraph(b.g, feeds);
  INFO((want.ok() ? std::string() : want.error().message));
  REQUIRE(want.ok());

  std::map<ir::ValueId, ir::Tensor> values{{x, feeds[0]}, {w, feeds[1]}, {dy, feeds[2]}, {bias, feeds[3]}};
  for (size_t i = 0; i < b.g.nodes.size(); ++i) {
    const ir::Node& n = b.g.nodes[i];
    INFO(n.op << " x " << ir::shapeToString(cc.x) << " w " << ir::shapeToString(ws) << " group " << cc.group);
    requireClose(runOnDevice(b.g, n, values), want.value()[i], n.op);
  }
}

TEST_CASE("conv kernels match the reference: strides, pads, dilations", "[conv-grad][codegen]") {
  checkCase({{2, 3, 7, 6}, 4, {3, 3}, {}, {1, 1, 1, 1}, {}, 1, true}, 1);
  checkCase({{1, 4, 9, 8}, 6, {3, 2}, {2, 2}, {1, 0, 0, 1}, {}, 1, false}, 2);   // stride 2, uneven pads
  checkCase({{2, 2, 8, 7}, 3, {3, 3}, {2, 1}, {2, 2, 2, 2}, {2, 2}, 1, true}, 3);  // dilation 2
  checkCase({{1, 3, 10, 10}, 2, {1, 1}, {3, 3}, {}, {}, 1, false}, 4);             // 1x1, stride 3
  checkCase({{2, 2, 5, 5}, 3, {5, 5}, {2, 2}, {0, 0, 0, 0}, {}, 1, true}, 5);     // kernel = image
}

TEST_CASE("conv kernels match the reference: groups and depthwise", "[conv-grad][codegen]") {
  checkCase({{1, 4, 9, 8}, 6, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 2, true}, 6);     // 2 groups
  checkCase({{2, 6, 7, 7}, 6, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 6, false}, 7);    // depthwise, stride 2
  checkCase({{2, 5, 6, 6}, 5, {3, 3}, {}, {1, 1, 1, 1}, {}, 5, true}, 8);         // depthwise, stride 1
  checkCase({{1, 3, 8, 6}, 6, {3, 3}, {1, 2}, {2, 1, 2, 1}, {2, 1}, 3, false}, 9);  // multiplier 2, dilated
}

TEST_CASE("conv gradient kernels match the reference on 1-D convolutions", "[conv-grad][codegen]") {
  checkCase({{2, 4, 10}, 5, {3}, {}, {0, 1}, {}, 1, false}, 10);   // zoo's Conv1d: [B, C, T]
  checkCase({{1, 4, 11}, 4, {3}, {2}, {1, 1}, {2}, 2, false}, 11);
}

TEST_CASE("malformed convolutions are errors naming the node", "[conv-grad][codegen]") {
  GraphBuilder b;
  const ir::ValueId dy = b.input("dy", DType::F32, {1, 4, 5, 5}), w = b.input("w", DType::F32, {4, 2, 3, 3});
  // x's 3 channels do not split into 2 groups of w's 2 input channels.
  b.op("fbl.ConvGradInput", {dy, w}, {{"shape", Ints{1, 3, 5, 5}}, {"pads", Ints{1, 1, 1, 1}}, {"group", int64_t{2}}});
  b.g.values[b.g.nodes[0].outputs[0]].shape = {1, 3, 5, 5};
  auto code = emitterFor("fbl.ConvGradInput")(b.g, b.g.nodes[0], codegen::Target{});
  REQUIRE_FALSE(code.ok());
  CHECK(code.error().message.find(b.g.nodes[0].name) != std::string::npos);
  CHECK(codegen::findSpecialEmitter("fbl.ConvGradInput") != nullptr);
  CHECK(codegen::findSpecialEmitter("fbl.ConvGradWeight") != nullptr);
}

}  // namespace
}  // namespace fbl::testing
