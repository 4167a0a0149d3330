// export_training_mode: a BatchNormalization of a train-mode export trains with batch statistics,
// read from the ATen call in its metadata; an eval-mode call or a node without metadata keeps the
// file's inference mode; a training batch norm folded into a Conv is refused by node.
#include <catch2/catch.hpp>

#include "compiler/onnx/export_training_mode.h"
#include "tests/ops/graph_builder.h"

namespace fbl {
namespace {

using testing::GraphBuilder;

const char* kTrainCall =
    "%_native_batch_norm_legit_functional : [num_users=3] = call_function[target=torch.ops.aten."
    "_native_batch_norm_legit_functional.default](args = (%view_1, %p_bn_weight, %p_bn_bias, %b_bn_running_mean, "
    "%b_bn_running_var, True, 0.1, 1e-05), kwargs = {})";
const char* kEvalCall =
    "%_native_batch_norm_legit_no_training : [num_users=1] = call_function[target=torch.ops.aten."
    "_native_batch_norm_legit_no_training.default](args = (%view_1, %p_bn_weight, %p_bn_bias, %b_bn_running_mean, "
    "%b_bn_running_var, 0.1, 1e-05), kwargs = {})";

TEST_CASE("the fx call tells a training batch norm from an eval one", "[onnx][export]") {
  CHECK(onnx::fxBatchNormTrains(kTrainCall));
  CHECK_FALSE(onnx::fxBatchNormTrains(kEvalCall));
  CHECK(onnx::fxBatchNormTrains("%bn : = call_function[target=torch.ops.aten.batch_norm.default](args = (%x, %w, "
                                "%b, %m, %v, True, 0.1, 1e-05, True), kwargs = {})"));
  CHECK_FALSE(onnx::fxBatchNormTrains("%bn : = call_function[target=torch.ops.aten.batch_norm.default](args = (%x, "
                                      "%w, %b, %m, %v, False, 0.1, 1e-05, True), kwargs = {})"));
  CHECK_FALSE(onnx::fxBatchNormTrains("%linear : = call_function[target=torch.ops.aten.linear.default](args = (%x, "
                                      "%w, %b, %m, %v, True), kwargs = {})"));
  CHECK_FALSE(onnx::fxBatchNormTrains(""));
}

struct BatchNormGraph {
  GraphBuilder t;
  std::vector<onnx::NodeOrigin> origins;
  explicit BatchNormGraph(const std::string& call, bool foldedIntoConv = false) {
    const ir::ValueId x = t.input("x", ir::DType::F32, {2, 3, 4, 4});
    if (foldedIntoConv) {
      t.op("Conv", {x, t.randomParam("w", {3, 3, 1, 1})});
    } else {
      std::vector<ir::ValueId> ins{x};
      for (const char* p : {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}) ins.push_back(t.randomParam(p, {3}));
      t.op("BatchNormalization", ins);
    }
    origins.push_back({call, {}});
  }
};

TEST_CASE("a train-mode export's BatchNormalization gets training_mode=1, eval and unknown keep inference",
          "[onnx][export]") {
  BatchNormGraph train(kTrainCall), eval(kEvalCall), bare("");
  CHECK(onnx::restoreBatchNormTraining(train.t.g, train.origins).value() == 1);
  CHECK(train.t.g.nodes[0].attrInt("training_mode", 0) == 1);
  CHECK(onnx::restoreBatchNormTraining(eval.t.g, eval.origins).value() == 0);
  CHECK_FALSE(eval.t.g.nodes[0].hasAttr("training_mode"));
  CHECK(onnx::restoreBatchNormTraining(bare.t.g, bare.origins).value() == 0);
  CHECK_FALSE(bare.t.g.nodes[0].hasAttr("training_mode"));
}

TEST_CASE("a training batch norm the exporter's optimizer folded into a Conv is refused by node", "[onnx][export]") {
  BatchNormGraph folded(kTrainCall, true);
  auto r = onnx::restoreBatchNormTraining(folded.t.g, folded.origins);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("Conv_0") && Catch::Contains("optimize=False") &&
                                    Catch::Contains("model.eval()"));
  BatchNormGraph evalFolded(kEvalCall, true);  // eval semantics are what the fold computes
  CHECK(onnx::restoreBatchNormTraining(evalFolded.t.g, evalFolded.origins).ok());
}

// The exporter's optimizer merged two layers' equal starting statistics into one initializer;
// each layer gets its own buffer back, named after its module (torch.export lower-cases the
// placeholder, so a module path with capitals must still match), and a node whose fx call names
// another buffer keeps what it reads.
TEST_CASE("train-mode BatchNorms that share merged running statistics get their own buffers", "[onnx][export]") {
  GraphBuilder t;
  const ir::ValueId x = t.input("x", ir::DType::F32, {2, 3, 4, 4});
  const ir::ValueId w = t.randomParam("w", {3}), b = t.randomParam("b", {3});
  const ir::ValueId mean = t.randomParam("Enc.bn1.running_mean", {3}), var = t.randomParam("Enc.bn1.running_var", {3});
  std::vector<onnx::NodeOrigin> origins;
  auto call = [](const std::string& placeholder) {
    return "%bn : = call_function[target=torch.ops.aten._native_batch_norm_legit_functional.default](args = (%x, "
           "%p_w, %p_b, %b_" + placeholder + "_running_mean, %b_" + placeholder + "_running_var, True, 0.1, 1e-05), kwargs = {})";
  };
  const ir::ValueId y1 = t.op("BatchNormalization", {x, w, b, mean, var}, {{"training_mode", int64_t{1}}});
  origins.push_back({call("enc_bn1"), {"", "Enc", "Enc.bn1", "_native_batch_norm_legit_functional"}});
  const ir::ValueId y2 = t.op("BatchNormalization", {y1, w, b, mean, var}, {{"training_mode", int64_t{1}}});
  origins.push_back({call("enc_bn2"), {"", "Enc", "Enc.bn2", "_native_batch_norm_legit_functional"}});
  t.op("BatchNormalization", {y2, w, b, mean, var}, {{"training_mode", int64_t{1}}});
  origins.push_back({call("other"), {"", "Enc", "Enc.bn3", "_native_batch_norm_legit_functional"}});
  CHECK(onnx::separateBatchNormBuffers(t.g, origins) == 2);
  CHECK(t.g.nodes[0].inputs[3] == mean);
  CHECK(t.g.nodes[0].inputs[4] == var);
  const ir::Value& own = t.g.values[t.g.nodes[1].inputs[3]];
  CHECK(own.name == "Enc.bn2.running_mean");
  CHECK(own.kind == ir::ValueKind::Initializer);
  CHECK(own.data == t.g.values[mean].data);
  CHECK(t.g.values[t.g.nodes[1].inputs[4]].name == "Enc.bn2.running_var");
  CHECK(t.g.nodes[2].inputs[3] == mean);  // its call names no buffer of its module: left as it is
}

}  // namespace
}  // namespace fbl
