// analysis::inputBounds: which index and label consumers an integer input reaches, through
// which ops, and the bounds they record.
#include <catch2/catch.hpp>

#include "compiler/analysis/input_bounds.h"
#include "tests/ops/graph_builder.h"

namespace fbl::testing {
namespace {

using analysis::InputBound;
using ir::DType;

TEST_CASE("input bounds: gathers and losses reached through id-moving ops", "[analysis][inputs]") {
  GraphBuilder b;
  auto ids = b.input("ids", DType::I64, {2, 8});
  auto table = b.param("embed", DType::F32, {100, 4});
  auto flat = b.op("Reshape", {ids, b.ints<int64_t>("s", {16})});
  b.op("Gather", {table, flat});
  // A second table, gathered along axis 1, through a Slice and a Concat.
  auto wide = b.param("wide", DType::F32, {3, 7});
  auto part = b.op("Slice", {ids, b.ints<int64_t>("st", {0}), b.ints<int64_t>("en", {1}), b.ints<int64_t>("ax", {0})});
  b.op("Gather", {wide, b.op("Concat", {part, part}, {{"axis", int64_t{0}}})}, {{"axis", int64_t{1}}});
  // Labels through Where's branch (the HF mask -> -100 idiom) into the loss.
  auto scores = b.input("scores", DType::F32, {16, 100});
  auto mask = b.input("mask", DType::Bool, {16});
  auto labels = b.op("Where", {mask, flat, b.ints<int64_t>("ig", {-100})});
  b.op("SoftmaxCrossEntropyLoss", {scores, labels}, {{"ignore_index", int64_t{-100}}});
  // Arithmetic ends the walk: ids + 1 is bounded by nothing recorded here.
  b.op("Gather", {b.param("other", DType::F32, {5, 2}), b.op("Add", {ids, b.ints<int64_t>("one", {1})})});

  const std::vector<InputBound> got = analysis::inputBounds(b.g, ids);
  REQUIRE(got.size() == 3);
  CHECK(got[0].kind == InputBound::Kind::Index);
  CHECK(got[0].lo == 0);  // an embedding: PyTorch refuses negative ids
  CHECK(got[0].hi == 100);
  CHECK(got[0].table == "embed");
  CHECK(got[0].node == b.g.nodes[1].name);
  CHECK(got[1].kind == InputBound::Kind::Index);
  CHECK(got[1].lo == -7);
  CHECK(got[1].hi == 7);
  CHECK(got[1].table == "wide");
  CHECK(got[2].kind == InputBound::Kind::Label);
  CHECK(got[2].lo == 0);
  CHECK(got[2].hi == 100);
  CHECK(got[2].ignoreIndex == std::optional<int64_t>(-100));
  // The mask and the scores are no ids: Where's condition and a loss's scores carry none.
  CHECK(analysis::inputBounds(b.g, mask).empty());
  CHECK(analysis::inputBounds(b.g, scores).empty());
}

TEST_CASE("input bounds: a gather's data carries ids, its indices do not become data", "[analysis][inputs]") {
  GraphBuilder b;
  auto ids = b.input("ids", DType::I64, {6});
  auto pos = b.input("pos", DType::I64, {3});
  // picked = ids[pos]: pos indexes ids (6 of them); picked's values are ids, bounded by embed.
  auto picked = b.op("Gather", {ids, pos});
  b.op("Gather", {b.param("embed", DType::F32, {50, 4}), picked});
  // GatherElements of float data by pos: its output is data, and reaches no table.
  auto data = b.input("data", DType::F32, {2, 9});
  b.op("GatherElements", {data, b.op("Reshape", {pos, b.ints<int64_t>("s", {1, 3})})}, {{"axis", int64_t{1}}});
  const auto idsBounds = analysis::inputBounds(b.g, ids);
  REQUIRE(idsBounds.size() == 1);
  CHECK(idsBounds[0].lo == 0);
  CHECK(idsBounds[0].hi == 50);
  const auto posBounds = analysis::inputBounds(b.g, pos);
  REQUIRE(posBounds.size() == 2);
  CHECK(posBounds[0].lo == -6);  // ids is an input, not a table: ONNX's negative positions
  CHECK(posBounds[0].hi == 6);
  CHECK(posBounds[0].table == "ids");
  CHECK(posBounds[1].lo == -9);
  CHECK(posBounds[1].hi == 9);
}

TEST_CASE("input bounds: labels split into a loss's chunks keep one bound, named by the first chunk",
          "[analysis][inputs]") {
  GraphBuilder b;
  auto labels = b.input("labels", DType::I64, {10});
  const auto parts = b.node("Split", {labels, b.ints<int64_t>("rows", {4, 4, 2})}, {{"axis", int64_t{0}}}, 3);
  const std::vector<int64_t> rows{4, 4, 2};
  for (size_t c = 0; c < parts.size(); ++c)
    b.op("SoftmaxCrossEntropyLoss", {b.input("x" + std::to_string(c), DType::F32, {rows[c], 12}), parts[c]},
         {{"ignore_index", int64_t{-100}}, {"reduction", std::string("sum")}});
  const auto got = analysis::inputBounds(b.g, labels);
  REQUIRE(got.size() == 1);
  CHECK(got[0].kind == InputBound::Kind::Label);
  CHECK(got[0].hi == 12);
  CHECK(got[0].ignoreIndex == std::optional<int64_t>(-100));
  CHECK(got[0].node == b.g.nodes[1].name);
}

TEST_CASE("input bounds: a loss without ignore_index accepts only its classes", "[analysis][inputs]") {
  GraphBuilder b;
  auto labels = b.input("labels", DType::I64, {4});
  b.op("SoftmaxCrossEntropyLoss", {b.input("x", DType::F32, {4, 10}), labels});
  const auto got = analysis::inputBounds(b.g, labels);
  REQUIRE(got.size() == 1);
  CHECK(got[0].kind == InputBound::Kind::Label);
  CHECK(got[0].hi == 10);
  CHECK_FALSE(got[0].ignoreIndex.has_value());
}

}  // namespace
}  // namespace fbl::testing
