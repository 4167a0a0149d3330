// End to end: every tiny corpus model, loaded by the compiler's pipeline and run by the
// reference executor, reproduces the loss PyTorch computed (output_0.pb).
#include <chrono>
#include <cmath>
#include <iomanip>
#include <string>

#include "compiler/onnx/tensor_proto.h"
#include "compiler/passes/load_model.h"
#include "compiler/ref/executor.h"
#include "tests/ref/ref_test_util.h"

using namespace fbl;

namespace {

struct Forward {
  double loss = 0;
  double expected = 0;
  double ms = 0;  // the executor's run alone
};

Forward runForward(const std::string& model, bool simplify) {
  const std::string dir = std::string(FBL_TEST_DATA_DIR) + "/" + model;
  passes::LoadOptions opts;
  opts.simplify = simplify;
  auto g = passes::loadModel(dir + "/model.onnx", opts);
  INFO((g.ok() ? "" : g.error().message));
  REQUIRE(g.ok());
  std::map<ir::ValueId, ir::Tensor> feeds;
  for (size_t i = 0; i < g->inputs.size(); ++i) {
    auto t = onnx::readTensorProtoFile(dir + "/test_data_set_0/input_" + std::to_string(i) + ".pb");
    INFO((t.ok() ? "" : t.error().message));
    REQUIRE(t.ok());
    feeds.emplace(g->inputs[i], std::move(t->tensor));
  }
  auto expected = onnx::readTensorProtoFile(dir + "/test_data_set_0/output_0.pb");
  REQUIRE(expected.ok());
  REQUIRE(g->outputs.size() == 1);
  ref::Executor ex(*g);
  auto t0 = std::chrono::steady_clock::now();
  auto out = ex.run(feeds);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  INFO((out.ok() ? "" : out.error().message));
  REQUIRE(out.ok());
  REQUIRE(out->at(0).numel() == 1);
  return Forward{out->at(0).at(0), expected->tensor.at(0), ms};
}

}  // namespace

TEST_CASE("reference forward pass reproduces PyTorch's loss on every tiny model", "[ref][e2e]") {
  for (const char* model :
       {"llama-tiny", "bert-tiny", "bert-tiny-torchscript", "vit-tiny", "llama-tiny-folded"}) {
    for (bool simplify : {true, false}) {
      Forward f = runForward(model, simplify);
      INFO(model << (simplify ? " (loaded)" : " (raw import)") << std::setprecision(9) << ": loss "
                 << f.loss << ", PyTorch " << f.expected << ", relative error "
                 << std::abs(f.loss - f.expected) / std::abs(f.expected) << ", "
                 << std::setprecision(3) << f.ms << " ms");
      CHECK(std::abs(f.loss - f.expected) <= 1e-4 * std::abs(f.expected));
    }
  }
}
