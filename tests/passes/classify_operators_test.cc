// classify-operators: Table 1 on small graphs, and the read analysis (views, roll joins).
#include <catch2/catch.hpp>

#include <random>

#include "compiler/ir/parser.h"
#include "compiler/passes/classify_operators.h"
#include "compiler/passes/layout_assignment_printer.h"
#include "compiler/ref/executor.h"
#include "tests/passes/test_graphs.h"

using namespace fbl;
using passes::OpClass;

namespace {

OpClass classOf(const ir::Graph& g, const passes::LayoutAssignment& a, const char* node) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].name == node) return a.nodeClass[i];
  FAIL("no node " << node);
  return OpClass::kNone;
}

ir::NodeId nodeId(const ir::Graph& g, const char* node) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].name == node) return static_cast<ir::NodeId>(i);
  return ir::kNoNode;
}

}  // namespace

TEST_CASE("classify-operators: Table 1 classes", "[passes][layout-pipeline]") {
  ir::Graph g = fbl::testing::parsedGraph(R"(graph "t" opset 20
  input %x : f32[4,8]
  init %w : f32[8,8]
  const %s : f32[] = [2.0]
  const %shape : i64[2] = [8,4]
  %a : f32[4,8] = Add(%x, %x) @add
  %m : f32[4,8] = Mul(%a, %s) @scale
  %r : f32[4,8] = Relu(%m) @relu
  %sg : f32[4,8] = Sigmoid(%r) @sigmoid
  %sm : f32[4,8] = Softmax(%sg) {axis=-1} @softmax
  %y : f32[4,8] = MatMul(%sm, %w) @mm
  %q : f32[4,8] = Mul(%y, %r) @mul
  %t : f32[8,4] = Transpose(%q) {perm=[1,0]} @tr
  %rs : f32[8,4] = Reshape(%q, %shape) @reshape
  %o : f32[8,4] = Sub(%t, %rs) @sub
  output %o
)");
  passes::LayoutAssignment a;
  passes::ClassifyOperators pass(a);
  auto changed = pass.run(g);
  REQUIRE(changed.ok());
  CHECK(*changed);
  CHECK(classOf(g, a, "add") == OpClass::kFtiC);
  CHECK(classOf(g, a, "scale") == OpClass::kFtiC);  // the paper's "Scale"
  CHECK(classOf(g, a, "sub") == OpClass::kFtiC);
  CHECK(classOf(g, a, "relu") == OpClass::kFtdC);
  CHECK(classOf(g, a, "sigmoid") == OpClass::kFtdC);
  CHECK(classOf(g, a, "softmax") == OpClass::kFtdC);
  CHECK(classOf(g, a, "mul") == OpClass::kFtdC);  // a product of two activations
  CHECK(classOf(g, a, "tr") == OpClass::kFtiD);
  CHECK(classOf(g, a, "reshape") == OpClass::kFtiD);
  CHECK(classOf(g, a, "mm") == OpClass::kFtdD);
  // The table rows the paper names.
  for (auto op : {"Add", "Sub"}) CHECK(ops::opClass(op) == OpClass::kFtiC);
  for (auto op : {"Relu", "Sigmoid", "Tanh", "Softmax", "Dropout"}) CHECK(ops::opClass(op) == OpClass::kFtdC);
  for (auto op : {"Transpose", "Reshape"}) CHECK(ops::opClass(op) == OpClass::kFtiD);
  for (auto op : {"MatMul", "Conv", "BatchNormalization", "LayerNormalization"})
    CHECK(ops::opClass(op) == OpClass::kFtdD);
  // Two reads through transformations: Sub's inputs.
  REQUIRE(a.reads.size() == 2);
  const passes::ReadThrough* r = a.readAt(nodeId(g, "sub"), 0);
  REQUIRE(r != nullptr);
  CHECK(g.values[r->source].name == "q");
  CHECK(r->view.str() == "[8,4] -> [4,8]: (i1, i0)");
  std::string text = passes::formatClassification(g, a);
  CHECK(text.find("FTD-D: MatMul 1") != std::string::npos);
  CHECK(passes::classificationToJson(g, a)["FTI-D"]["total"] == 2);
}

TEST_CASE("classify-operators: chains compose into one view, graph outputs stay materialised",
          "[passes][layout-pipeline]") {
  ir::Graph g = fbl::testing::parsedGraph(R"(graph "t" opset 20
  input %x : f32[1,16,64]
  const %s4 : i64[4] = [1,16,4,16]
  %r : f32[1,16,4,16] = Reshape(%x, %s4) @reshape
  %t : f32[1,4,16,16] = Transpose(%r) {perm=[0,2,1,3]} @transpose
  %e : f32[1,4,16,16] = Exp(%t) @exp
  %t2 : f32[1,4,16,16] = Transpose(%r) {perm=[0,2,1,3]} @transpose_out
  output %e
  output %t2
)");
  passes::LayoutAssignment a;
  passes::ClassifyOperators pass(a);
  REQUIRE(pass.run(g).ok());
  const passes::ReadThrough* r = a.readAt(nodeId(g, "exp"), 0);
  REQUIRE(r != nullptr);
  CHECK(r->chain.size() == 2);
  CHECK(r->view.str() == "[1,4,16,16] -> [1,16,64]: (0, i2, i1 * 16 + i3)");
  CHECK(a.transforms[nodeId(g, "transpose")].folded);
  CHECK_FALSE(a.transforms[nodeId(g, "transpose_out")].folded);
  // transpose_out is not folded, so it reads its input through a one-op view.
  CHECK(a.readAt(nodeId(g, "transpose_out"), 0) != nullptr);
}

// rotate_half(x) = Concat(-x[..., h:], x[..., :h]) and its backward mirror, the Add of two
// fbl.SliceGrad slabs: each is one roll view with a sign; checked against the reference
// executor element by element.
TEST_CASE("classify-operators: RoPE rotate-half and its mirror are rolls", "[passes][layout-pipeline]") {
  ir::Graph g = fbl::testing::parsedGraph(R"(graph "t" opset 20
  input %x : f32[1,2,4,8]
  const %s0 : i64[1] = [0]
  const %s4 : i64[1] = [4]
  const %s8 : i64[1] = [8]
  const %ax : i64[1] = [3]
  %hi : f32[1,2,4,4] = Slice(%x, %s4, %s8, %ax) @slice_hi
  %lo : f32[1,2,4,4] = Slice(%x, %s0, %s4, %ax) @slice_lo
  %nh : f32[1,2,4,4] = Neg(%hi) @neg
  %rot : f32[1,2,4,8] = Concat(%nh, %lo) {axis=-1} @concat
  %y : f32[1,2,4,8] = Exp(%rot) @use
  %g0 : f32[1,2,4,4] = Slice(%x, %s0, %s4, %ax) @g_slice_lo
  %g1 : f32[1,2,4,4] = Slice(%x, %s4, %s8, %ax) @g_slice_hi
  %gn : f32[1,2,4,4] = Neg(%g0) @g_neg
  %p0 : f32[1,2,4,8] = fbl.SliceGrad(%gn) {axes=[3], shape=[1,2,4,8], starts=[4], steps=[1]} @g_pad_hi
  %p1 : f32[1,2,4,8] = fbl.SliceGrad(%g1) {axes=[3], shape=[1,2,4,8], starts=[0], steps=[1]} @g_pad_lo
  %dx : f32[1,2,4,8] = Add(%p0, %p1) @g_add
  %z : f32[1,2,4,8] = Exp(%dx) @g_use
  output %y
  output %z
)");
  passes::LayoutAssignment a;
  passes::ClassifyOperators pass(a);
  REQUIRE(pass.run(g).ok());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> xs(64);
  for (float& v : xs) v = dist(rng);
  ir::Tensor x = ir::Tensor::fromVector<float>({1, 2, 4, 8}, xs);
  ref::Executor ex(g);
  for (const char* use : {"use", "g_use"}) {
    const passes::ReadThrough* r = a.readAt(nodeId(g, use), 0);
    REQUIRE(r != nullptr);
    CHECK(g.values[r->source].name == "x");
    REQUIRE(r->sign.has_value());
    CHECK(r->chain.size() == (std::string(use) == "use" ? 4u : 6u));
    auto got = ex.run({{g.inputs[0], x}}, {g.nodes[nodeId(g, use)].inputs[0]});
    REQUIRE(got.ok());
    const ir::Tensor& ref = (*got)[0];
    for (int64_t i = 0; i < 64; ++i) {
      std::vector<int64_t> idx = {0, i / 32, i / 8 % 4, i % 8};
      std::vector<int64_t> src = r->view.apply(idx);
      int64_t flat = ((src[0] * 2 + src[1]) * 4 + src[2]) * 8 + src[3];
      double sign = static_cast<double>(layout::eval(*r->sign, idx));
      CHECK(ref.at(i) == Approx(sign * xs[flat]));
    }
  }
  // The slabs and the negation are absorbed: no read of their own.
  CHECK(a.transforms[nodeId(g, "neg")].folded);
  CHECK(a.transforms[nodeId(g, "g_pad_hi")].folded);
  CHECK(a.readAt(nodeId(g, "concat"), 0) == nullptr);
}
