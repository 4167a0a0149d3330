// The graphs the pass tests start from: a graph written in the text IR, or a test model's forward
// or joint training graph (tests/data/<model>/model.onnx). Each fails the test where it cannot.
#pragma once

#include <string>

#include <catch2/catch.hpp>

#include "compiler/autodiff/training_graph.h"
#include "compiler/ir/parser.h"
#include "compiler/passes/load_model.h"

namespace fbl::testing {

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
