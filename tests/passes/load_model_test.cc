// The whole load pipeline (import, fold-and-infer, drop-noops, dead-code) on every corpus model.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <map>

#include "compiler/onnx/load_model.h"
#include "compiler/passes/fold_and_infer.h"

namespace ir = fbl::ir;

namespace {

const char* const kModels[] = {"llama-tiny",        "bert-tiny", "bert-tiny-torchscript",
                               "vit-tiny",          "llama-tiny-folded", "llama-full"};

std::string modelPath(const std::string& m) {
  return std::string(FBL_TEST_DATA_DIR) + "/" + m + "/model.onnx";
}

std::map<std::string, int> histogram(const ir::Graph& g) {
  std::map<std::string, int> h;
  for (const auto& n : g.nodes)
    if (!n.dead) ++h[n.op];
  return h;
}

}  // namespace

TEST_CASE("every corpus model loads with static shapes and nothing left to fold", "[passes]") {
  for (std::string model : kModels) {
    SECTION(model) {
      auto g = fbl::onnx::loadModel(modelPath(model));
      INFO((g.ok() ? std::string() : g.error().message));
      REQUIRE(g.ok());
      CHECK(fbl::passes::countValuesWithoutStaticShape(*g) == 0);
      for (const auto& n : g->nodes) {
        INFO(ir::describeNode(*g, n));
        REQUIRE_FALSE(n.dead);
        for (const char* op : {"Constant", "ConstantOfShape", "Shape", "Identity", "Range",
                               "CumSum"})
          CHECK(n.op != op);
        if (n.op == "Cast" || n.op == "CastLike")
          CHECK(g->values[n.inputs[0]].dtype != g->values[n.outputs[0]].dtype);
        // A node reading only constants should have been folded.
        bool allConst = !n.inputs.empty();
        for (ir::ValueId v : n.inputs)
          allConst = allConst && (v == ir::kNoValue || g->values[v].kind == ir::ValueKind::Constant);
        CHECK_FALSE(allConst);
      }
      CHECK(g->outputs.size() == 1);
      CHECK(g->values[g->outputs[0]].shape == ir::Shape{});
    }
  }
}

TEST_CASE("raw import keeps the file's nodes when simplify is off", "[passes]") {
  fbl::onnx::LoadOptions opts;
  opts.simplify = false;
  auto g = fbl::onnx::loadModel(modelPath("llama-tiny"), opts);
  REQUIRE(g.ok());
  CHECK(g->nodes.size() == 578);
}

// Prints each model's op histogram after loading and the load time: `fbl_tests "[load-report]"`.
TEST_CASE("load report", "[.][load-report]") {
  for (std::string model : kModels) {
    auto start = std::chrono::steady_clock::now();
    auto g = fbl::onnx::loadModel(modelPath(model));
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    REQUIRE(g.ok());
    std::printf("%s: %zu nodes, loaded in %.3f s:", model.c_str(), g->liveNodeCount(), secs);
    for (const auto& [op, count] : histogram(*g)) std::printf(" %s=%d", op.c_str(), count);
    std::printf("\n");
  }
}
