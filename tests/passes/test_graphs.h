// The graphs the pass tests start from: a graph written in the text IR, or a test model's forward
// or joint training graph (tests/data/<model>/model.onnx). Each fails the test where it cannot.
#pragma once

#include <string>

#include <catch2/catch.hpp>

#include "compiler/autodiff/training_graph.h"
#include "compiler/ir/parser.h"
#include "compiler/passes/load_model.h"

namespace fbl::testing {

// Y = X W forward; dW = X^T dY backward: X is read along rows, then along columns through its
// transpose.
inline constexpr const char* kProductAndGradient = R"(graph "t" opset 20
  input %x : f32[64,128]
  input %dy : f32[64,256]
  init %w : f32[128,256]
  %y : f32[64,256] = MatMul(%x, %w) @fwd
  bwd %xt : f32[128,64] = Transpose(%x) {perm=[1,0]} @xt
  bwd %dw : f32[128,256] = MatMul(%xt, %dy) @dw
  output %y
  output %dw
)";

inline ir::Graph parsedGraph(const char* text) {
  auto g = ir::parseGraph(text);
  INFO((g.ok() ? std::string() : g.error().message));
  REQUIRE(g.ok());
  return std::move(g).value();
}

inline ir::Graph forwardGraph(const std::string& model) {
  auto g = passes::loadModel(std::string(FBL_TEST_DATA_DIR) + "/" + model + "/model.onnx");
  INFO(model << ": " << (g.ok() ? "" : g.error().message));
  REQUIRE(g.ok());
  return std::move(g).value();
}

inline autodiff::TrainingGraph jointGraph(const std::string& model, const autodiff::TrainingOptions& o = {}) {
  auto tg = autodiff::buildTrainingGraph(forwardGraph(model), o);
  INFO(model << ": " << (tg.ok() ? "" : tg.error().message));
  REQUIRE(tg.ok());
  return std::move(tg).value();
}

}  // namespace fbl::testing
