// fold-and-infer on hand-built graphs: shape chains, masks, Range, CumSum and RoPE tables fold
// to constants equal to a naive computation done here; weights and run-time values do not.
#include <catch2/catch.hpp>

#include <cmath>

#include "compiler/passes/fold_and_infer.h"
#include "tests/ops/graph_builder.h"

using fbl::ir::DType;
using fbl::ir::Shape;
using fbl::ir::Tensor;
using fbl::testing::GraphBuilder;
namespace ir = fbl::ir;
namespace passes = fbl::passes;

namespace {

const ir::Tensor& contents(const ir::Graph& g, ir::ValueId v) {
  INFO(g.values[v].name);
  REQUIRE(g.values[v].kind == ir::ValueKind::Constant);
  REQUIRE(g.values[v].data != nullptr);
  return *g.values[v].data;
}

void runPass(ir::Graph& g, passes::FoldOptions opts = {}) {
  passes::FoldAndInfer pass(std::move(opts));
  auto r = pass.run(g);
  INFO((r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
  REQUIRE(passes::countValuesWithoutStaticShape(g) == 0);
}

}  // namespace

TEST_CASE("a Shape -> Gather -> Concat chain folds into Reshape's target", "[passes]") {
  GraphBuilder b;
  ir::ValueId x = b.input("x", DType::F32, {2, 3, 4});
  ir::ValueId s = b.op("Shape", {x});
  ir::ValueId d0 = b.op("Gather", {s, b.constant("zero", Tensor::scalar<int64_t>(0))});
  ir::ValueId u = b.op("Unsqueeze", {d0, b.ints<int64_t>("ax", {0})});
  ir::ValueId target = b.op("Concat", {u, b.ints<int64_t>("rest", {-1})}, {{"axis", int64_t{0}}});
  ir::ValueId y = b.op("Reshape", {x, target});
  b.output(y);
  CHECK(passes::countValuesWithoutStaticShape(b.g) > 0);
  runPass(b.g);
  CHECK(b.g.values[y].shape == Shape{2, 12});
  CHECK(contents(b.g, target).toInt64s() == std::vector<int64_t>{2, -1});
  CHECK(b.count("Shape") == 0);
  CHECK(b.count("Concat") == 0);
  CHECK(b.count("Reshape") == 1);
}

TEST_CASE("a causal mask from Range, CumSum and comparisons folds to the naive mask", "[passes]") {
  const int64_t n = 6;
  GraphBuilder b;
  ir::ValueId ids = b.input("ids", DType::I64, {1, n});
  ir::ValueId len = b.op("Gather", {b.op("Shape", {ids}), b.constant("one", Tensor::scalar<int64_t>(1))});
  ir::ValueId pos = b.op("Range", {b.constant("start", Tensor::scalar<int64_t>(0)), len,
                                   b.constant("step", Tensor::scalar<int64_t>(1))});
  // cumsum(ones) - 1 is Range again, the way exporters build position ids.
  ir::ValueId ones = b.op("ConstantOfShape", {b.op("Shape", {ids})},
                          {{"value", Tensor::fromVector<int64_t>({1}, {1})}});
  ir::ValueId cum = b.op("CumSum", {ones, b.constant("axis", Tensor::scalar<int64_t>(1))});
  ir::ValueId posIds = b.op("Sub", {cum, b.constant("one64", Tensor::scalar<int64_t>(1))});
  ir::ValueId row = b.op("Unsqueeze", {pos, b.ints<int64_t>("a1", {1})});
  ir::ValueId mask = b.op("LessOrEqual", {posIds, row});  // [1,n] vs [n,1] -> [n,n]
  ir::ValueId scores = b.input("scores", DType::F32, {n, n});
  ir::ValueId y = b.op("Where", {mask, scores, b.constant("ninf", Tensor::scalar<float>(-1e9f))});
  b.output(y);
  runPass(b.g);

  CHECK(contents(b.g, pos).toInt64s() == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  const Tensor& m = contents(b.g, mask);
  REQUIRE(m.shape() == Shape{n, n});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) CHECK(m.at(i * n + j) == (j <= i ? 1.0 : 0.0));
  CHECK(b.count("Where") == 1);
  CHECK(b.g.liveNodeCount() == 1);
}

TEST_CASE("RoPE tables fold from a buffer initializer, weights stay parameters", "[passes]") {
  const int64_t seq = 5, half = 3;
  std::vector<float> invFreq = {1.f, 0.1f, 0.01f};
  GraphBuilder b;
  ir::ValueId ids = b.input("ids", DType::I64, {1, seq});
  ir::ValueId inv = b.init("m.model.rotary_emb.inv_freq",
                           Tensor::fromVector<float>({half}, invFreq));
  ir::ValueId pos = b.op("Range", {b.constant("s", Tensor::scalar<int64_t>(0)),
                                   b.op("Gather", {b.op("Shape", {ids}),
                                                   b.constant("i1", Tensor::scalar<int64_t>(1))}),
                                   b.constant("d", Tensor::scalar<int64_t>(1))});
  ir::ValueId posF = b.op("Cast", {b.op("Unsqueeze", {pos, b.ints<int64_t>("a", {1})})},
                          {{"to", int64_t{1}}});
  ir::ValueId freqs = b.op("Mul", {posF, b.op("Unsqueeze", {inv, b.ints<int64_t>("a0", {0})})});
  ir::ValueId cosT = b.op("Cos", {freqs});
  ir::ValueId sinT = b.op("Sin", {freqs});
  ir::ValueId w = b.init("m.layer.q_proj.weight", Tensor(DType::F32, {half, half}));
  ir::ValueId wt = b.op("Transpose", {w});
  ir::ValueId q = b.op("MatMul", {b.op("Add", {cosT, sinT}), wt});
  b.output(q);
  runPass(b.g);

  const Tensor& c = contents(b.g, cosT);
  const Tensor& s = contents(b.g, sinT);
  REQUIRE(c.shape() == Shape{seq, half});
  for (int64_t p = 0; p < seq; ++p)
    for (int64_t k = 0; k < half; ++k) {
      float angle = static_cast<float>(p) * invFreq[k];
      CHECK(c.at(p * half + k) == Approx(std::cos(angle)).margin(1e-6));
      CHECK(s.at(p * half + k) == Approx(std::sin(angle)).margin(1e-6));
    }
  // The weight's Transpose is not folded: the weight stays a named parameter.
  CHECK(b.count("Transpose") == 1);
  CHECK(b.g.values[wt].kind == ir::ValueKind::Intermediate);
  CHECK(b.g.values[q].shape == Shape{seq, half});
}

TEST_CASE("default foldable-initializer rule", "[passes]") {
  auto value = [](std::string name, DType t, Shape s) {
    ir::Value v;
    v.name = std::move(name);
    v.dtype = t;
    v.shape = std::move(s);
    v.kind = ir::ValueKind::Initializer;
    return v;
  };
  CHECK(passes::defaultFoldableInitializer(value("m.rotary_emb.inv_freq", DType::F32, {32})));
  CHECK(passes::defaultFoldableInitializer(value("m.lifted_tensor_0", DType::F32, {})));
  CHECK(passes::defaultFoldableInitializer(value("m.embeddings.position_ids", DType::I64, {1, 64})));
  CHECK_FALSE(passes::defaultFoldableInitializer(value("m.norm.weight", DType::F32, {64})));
  CHECK_FALSE(passes::defaultFoldableInitializer(value("m.fc.bias", DType::F32, {64})));
  CHECK_FALSE(passes::defaultFoldableInitializer(value("m.vit.cls_token", DType::F32, {1, 1, 64})));
}

TEST_CASE("fold-and-infer leaves large, run-time and data-less values alone", "[passes]") {
  GraphBuilder b;
  ir::ValueId x = b.input("x", DType::F32, {4, 4});
  ir::ValueId big = b.op("ConstantOfShape", {b.ints<int64_t>("shape", {64, 64})});
  ir::ValueId ext = b.param("ext.scale", DType::F32, {4});  // external data: no contents
  ir::ValueId scaled = b.op("Mul", {b.op("Neg", {ext}), x});
  ir::ValueId y = b.op("Add", {b.op("ReduceSum", {big}), scaled});
  b.output(y);
  passes::FoldOptions opts;
  opts.maxFoldBytes = 1024;
  opts.foldableInitializer = [](const ir::Value&) { return true; };
  passes::FoldAndInfer pass(opts);
  REQUIRE(pass.run(b.g).ok());
  CHECK(pass.stats().tooLarge == 1);
  CHECK(b.count("ConstantOfShape") == 1);
  CHECK(b.count("Neg") == 1);
  CHECK(b.g.values[y].shape == Shape{4, 4});
  CHECK(passes::countValuesWithoutStaticShape(b.g) == 0);
}

TEST_CASE("fold-and-infer reports a shape it cannot infer with the node's name", "[passes]") {
  GraphBuilder b;
  ir::ValueId x = b.input("x", DType::F32, {2, 3});
  ir::ValueId t = b.input("t", DType::I64, {2});
  ir::ValueId y = b.op("Reshape", {x, t});
  b.output(b.op("Relu", {y}));
  passes::FoldAndInfer pass;
  auto r = pass.run(b.g);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message,
             Catch::StartsWith("test.onnx: node 'Reshape_0' (Reshape): input 1 't'") &&
                 Catch::Contains("compile-time constant"));
}

TEST_CASE("equal folded constants are shared, graph outputs keep their own", "[passes]") {
  GraphBuilder b;
  ir::ValueId x = b.input("x", DType::F32, {2, 3});
  ir::ValueId s1 = b.op("Shape", {x});
  ir::ValueId s2 = b.op("Shape", {x});
  ir::ValueId y1 = b.op("Reshape", {x, s1});
  ir::ValueId y2 = b.op("Reshape", {y1, s2});
  ir::ValueId s3 = b.op("Shape", {y2});
  b.output(y2);
  b.output(s3);
  passes::FoldAndInfer pass;
  REQUIRE(pass.run(b.g).ok());
  CHECK(pass.stats().folded == 3);
  CHECK(pass.stats().deduplicated == 1);
  CHECK(b.g.nodes[3].inputs[1] == s1);  // the second Reshape reads the first Shape's value
  CHECK(b.g.values[s3].kind == ir::ValueKind::Constant);
  CHECK(b.g.outputs[1] == s3);
}
