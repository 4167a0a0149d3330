// Sequence ops rewritten into tensor ops at import (compiler/onnx/sequence_ops.h): hand-built
// models in the forms PyTorch's exporter writes, imported, loaded and run on the reference
// executor; every output against a naive slice of the input on the host.
#include <catch2/catch.hpp>

#include <random>

#include "compiler/onnx/importer.h"
#include "compiler/onnx/sequence_ops.h"
#include "compiler/passes/load_model.h"
#include "compiler/ref/executor.h"
#include "tests/onnx/onnx_test_util.h"

namespace fbl::onnx {
namespace {

using testing::addInput;
using testing::addNode;
using testing::bytesOf;

// A model of opset 20 with input x f32[R, C] and the nodes `build` adds.
::onnx::ModelProto model(int64_t rows, int64_t cols) {
  ::onnx::ModelProto m = testing::opset20Model("seq");
  addInput(m.mutable_graph(), "x", ::onnx::TensorProto::FLOAT, {rows, cols});
  return m;
}

// Imports, loads (fold and infer) and runs the model on a random x; returns x and the outputs.
std::pair<ir::Tensor, std::vector<ir::Tensor>> run(::onnx::ModelProto& m, const std::vector<std::string>& outputs) {
  for (const std::string& o : outputs) m.mutable_graph()->add_output()->set_name(o);
  auto imported = importModelFromBytes(bytesOf(m), "seq.onnx");
  INFO((imported.ok() ? "" : imported.error().message));
  REQUIRE(imported.ok());
  for (const ir::Node& n : imported->nodes) CHECK(n.op.find("Sequence") == std::string::npos);
  auto g = passes::simplifyModel(*imported);
  INFO((g.ok() ? "" : g.error().message));
  REQUIRE(g.ok());
  const ir::Value& xv = g->values[g->inputs[0]];
  ir::Tensor x(ir::DType::F32, xv.shape);
  std::mt19937 rng(4);
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, std::uniform_real_distribution<float>(-1, 1)(rng));
  auto out = ref::runGraph(*g, {x});
  INFO((out.ok() ? "" : out.error().message));
  REQUIRE(out.ok());
  return {x, out.value()};
}

// x[:, c0:c1] (axis 1) or x[c0:c1, :] (axis 0), the naive way.
ir::Tensor slice(const ir::Tensor& x, int axis, int64_t c0, int64_t c1) {
  const int64_t R = x.shape()[0], C = x.shape()[1];
  ir::Tensor t(ir::DType::F32, axis == 1 ? ir::Shape{R, c1 - c0} : ir::Shape{c1 - c0, C});
  int64_t k = 0;
  for (int64_t r = axis == 0 ? c0 : 0; r < (axis == 0 ? c1 : R); ++r)
    for (int64_t c = axis == 1 ? c0 : 0; c < (axis == 1 ? c1 : C); ++c) t.set(k++, x.at(r * C + c));
  return t;
}

void checkEqual(const ir::Tensor& got, const ir::Tensor& want) {
  REQUIRE(got.numel() == want.numel());
  for (int64_t i = 0; i < want.numel(); ++i) CHECK(got.at(i) == want.at(i));
}

TEST_CASE("sequence ops: a scalar split indexed from the front (GPT-2's qkv)", "[onnx][sequence]") {
  auto m = model(2, 7);
  auto* g = m.mutable_graph();
  testing::addInt64Constant(g, "size", {3}, true);
  auto* split = addNode(g, "SplitToSequence", "node_split", {"x", "size"}, {"parts"});
  testing::addIntAttr(split, "axis", 1);
  for (int p = 0; p < 3; ++p) {
    testing::addInt64Constant(g, "p" + std::to_string(p), {p}, true);
    addNode(g, "SequenceAt", "node_getitem_" + std::to_string(p), {"parts", "p" + std::to_string(p)},
            {"part" + std::to_string(p)});
  }
  auto [x, out] = run(m, {"part0", "part1", "part2"});
  checkEqual(out[0], slice(x, 1, 0, 3));
  checkEqual(out[1], slice(x, 1, 3, 6));
  checkEqual(out[2], slice(x, 1, 6, 7));  // the last part is what remains
  CHECK(out[2].shape() == ir::Shape{2, 1});
}

TEST_CASE("sequence ops: listed sizes, negative positions, unbind and joins", "[onnx][sequence]") {
  SECTION("a 1-D split indexed from the end") {
    auto m = model(2, 7);
    auto* g = m.mutable_graph();
    testing::addInt64Constant(g, "sizes", {2, 5}, false);
    testing::addIntAttr(addNode(g, "SplitToSequence", "split", {"x", "sizes"}, {"parts"}), "axis", -1);
    testing::addInt64Constant(g, "last", {-1}, true);
    addNode(g, "SequenceAt", "at", {"parts", "last"}, {"y"});
    auto [x, out] = run(m, {"y"});
    checkEqual(out[0], slice(x, 1, 2, 7));
  }
  SECTION("unbind (no split, keepdims 0) and stack back") {
    auto m = model(3, 4);
    auto* g = m.mutable_graph();
    auto* s = addNode(g, "SplitToSequence", "unbind", {"x"}, {"rows"});
    testing::addIntAttr(s, "axis", 0);
    testing::addIntAttr(s, "keepdims", 0);
    testing::addInt64Constant(g, "one", {1}, true);
    addNode(g, "SequenceAt", "at", {"rows", "one"}, {"row1"});
    auto* c = addNode(g, "ConcatFromSequence", "stack", {"rows"}, {"again"});
    testing::addIntAttr(c, "axis", 0);
    testing::addIntAttr(c, "new_axis", 1);
    auto [x, out] = run(m, {"row1", "again"});
    CHECK(out[0].shape() == ir::Shape{4});
    checkEqual(out[0], slice(x, 0, 1, 2));
    checkEqual(out[1], x);
  }
  SECTION("a split joined along another axis") {
    auto m = model(4, 6);
    auto* g = m.mutable_graph();
    testing::addInt64Constant(g, "sizes", {3, 3}, false);
    testing::addIntAttr(addNode(g, "SplitToSequence", "split", {"x", "sizes"}, {"halves"}), "axis", 1);
    testing::addIntAttr(addNode(g, "ConcatFromSequence", "cat", {"halves"}, {"tall"}), "axis", 0);
    auto [x, out] = run(m, {"tall"});
    CHECK(out[0].shape() == ir::Shape{8, 3});
    ir::Tensor want(ir::DType::F32, {8, 3});
    const ir::Tensor a = slice(x, 1, 0, 3), b = slice(x, 1, 3, 6);
    for (int64_t i = 0; i < 12; ++i) {
      want.set(i, a.at(i));
      want.set(12 + i, b.at(i));
    }
    checkEqual(out[0], want);
  }
  SECTION("a construct: stacked, indexed and counted") {
    auto m = model(2, 3);
    auto* g = m.mutable_graph();
    addNode(g, "Neg", "neg", {"x"}, {"nx"});
    addNode(g, "SequenceConstruct", "pair", {"x", "nx"}, {"seq"});
    auto* c = addNode(g, "ConcatFromSequence", "stack", {"seq"}, {"stacked"});
    testing::addIntAttr(c, "axis", 1);
    testing::addIntAttr(c, "new_axis", 1);
    testing::addInt64Constant(g, "last", {-1}, true);
    addNode(g, "SequenceAt", "at", {"seq", "last"}, {"second"});
    addNode(g, "SequenceLength", "len", {"seq"}, {"n"});
    auto [x, out] = run(m, {"stacked", "second", "n"});
    REQUIRE(out[0].shape() == ir::Shape{2, 2, 3});
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t c = 0; c < 3; ++c) {
        CHECK(out[0].at((r * 2 + 0) * 3 + c) == x.at(r * 3 + c));
        CHECK(out[0].at((r * 2 + 1) * 3 + c) == -x.at(r * 3 + c));
        CHECK(out[1].at(r * 3 + c) == -x.at(r * 3 + c));
      }
    CHECK(out[2].at(0) == 2);
  }
}

TEST_CASE("sequence ops: the rewritten node keeps its name, output and exporter metadata", "[onnx][sequence]") {
  auto m = model(2, 4);
  auto* g = m.mutable_graph();
  testing::addInt64Constant(g, "size", {2}, true);
  testing::addIntAttr(addNode(g, "SplitToSequence", "split", {"x", "size"}, {"parts"}), "axis", 1);
  testing::addInt64Constant(g, "zero", {0}, true);
  auto* at = addNode(g, "SequenceAt", "node_getitem", {"parts", "zero"}, {"q"});
  // NodeProto.metadata_props (field 9) is newer than ONNX 1.12's protos: an unknown field here.
  at->GetReflection()->MutableUnknownFields(at)->AddLengthDelimited(9, "pkg.torch.onnx.fx_node");
  REQUIRE(rewriteSequenceOps(g, "seq.onnx").ok());
  const ::onnx::NodeProto* slice = nullptr;
  for (const auto& n : g->node()) {
    CHECK(n.op_type() != "SplitToSequence");
    if (n.name() == "node_getitem") slice = &n;
  }
  REQUIRE(slice != nullptr);
  CHECK(slice->op_type() == "Slice");
  CHECK(slice->output(0) == "q");
  CHECK(slice->GetReflection()->GetUnknownFields(*slice).field_count() == 1);
}

std::string importError(::onnx::ModelProto m, const std::vector<std::string>& outputs) {
  for (const std::string& o : outputs) m.mutable_graph()->add_output()->set_name(o);
  auto r = importModelFromBytes(bytesOf(m), "seq.onnx");
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

TEST_CASE("sequence ops: what cannot be rewritten is one line naming the node", "[onnx][sequence]") {
  auto base = model(2, 7);
  testing::addInt64Constant(base.mutable_graph(), "size", {3}, true);
  testing::addIntAttr(addNode(base.mutable_graph(), "SplitToSequence", "split", {"x", "size"}, {"parts"}), "axis", 1);
  SECTION("a negative position into a scalar split") {
    auto m = base;
    testing::addInt64Constant(m.mutable_graph(), "last", {-1}, true);
    addNode(m.mutable_graph(), "SequenceAt", "at", {"parts", "last"}, {"y"});
    CHECK_THAT(importError(m, {"y"}), Catch::Contains("node 'at' (SequenceAt): position -1 counts from the end"));
  }
  SECTION("a position computed at run time") {
    auto m = base;
    addInput(m.mutable_graph(), "p", ::onnx::TensorProto::INT64, {});
    addNode(m.mutable_graph(), "SequenceAt", "at", {"parts", "p"}, {"y"});
    CHECK_THAT(importError(m, {"y"}), Catch::Contains("the position 'p' must be a constant scalar"));
  }
  SECTION("another reader of the sequence") {
    auto m = base;
    addNode(m.mutable_graph(), "Identity", "id", {"parts"}, {"y"});
    CHECK_THAT(importError(m, {"y"}), Catch::Contains("node 'id' (Identity) reads the sequence 'parts'"));
  }
  SECTION("the sequence as a graph output") {
    CHECK_THAT(importError(base, {"parts"}), Catch::Contains("the graph outputs the sequence 'parts'"));
  }
  SECTION("a sequence op fbl does not rewrite") {
    auto m = base;
    addNode(m.mutable_graph(), "SequenceErase", "erase", {"parts"}, {"fewer"});
    CHECK_THAT(importError(m, {"fewer"}), Catch::Contains("node 'erase': op SequenceErase is not supported"));
  }
}

}  // namespace
}  // namespace fbl::onnx
