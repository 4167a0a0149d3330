// Whole-model training on PoCL for every tiny corpus model: the first step's loss and LoRA
// gradients against PyTorch's (the corpus's output_0.pb and grads/*.pb), and 50 AdamW steps
// against the reference executor running the same joint graph.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include "compiler/driver/compile_command.h"
#include "compiler/onnx/tensor_proto.h"
#include "compiler/passes/load_model.h"
#include "compiler/train/ref_trainer.h"
#include "tests/device/device_test_util.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

namespace fs = std::filesystem;

// llama-tiny-folded is apart: its exporter renamed the LoRA weights, which the importer names
// again from the node metadata; its test checks that and the adapters it exports.
const char* const kTinyModels[] = {"llama-tiny", "bert-tiny", "vit-tiny", "bert-tiny-torchscript"};

driver::CompileArgs argsFor(const std::string& model) {
  driver::CompileArgs a;
  a.model = std::string(FBL_TEST_DATA_DIR) + "/" + model + "/model.onnx";
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  a.output = tempDir() + "/" + model + ".fbp";
  a.weights = tempDir() + "/" + model + ".safetensors";
  return a;
}

std::vector<ir::Tensor> readInputs(const std::string& model) {
  std::vector<ir::Tensor> out;
  const std::string dir = std::string(FBL_TEST_DATA_DIR) + "/" + model + "/test_data_set_0";
  for (int i = 0;; ++i) {
    const std::string p = dir + "/input_" + std::to_string(i) + ".pb";
    if (!fs::exists(p)) break;
    auto t = onnx::readTensorProtoFile(p);
    REQUIRE(t.ok());
    out.push_back(t->tensor);
  }
  return out;
}

// Compiles, writes plan and weights, opens the plan and feeds the corpus inputs.
std::unique_ptr<rt::Session> openModel(const std::string& model, driver::Compiled* compiled) {
  driver::CompileArgs a = argsFor(model);
  auto c = driver::compileModel(a);
  INFO((c.ok() ? std::string() : c.error().message));
  REQUIRE(c.ok());
  REQUIRE(driver::writeWeights(a, c->plan).ok());
  auto s = openPlan(c->plan, model);
  REQUIRE_OK(s->loadWeights(a.weights));
  const std::vector<ir::Tensor> inputs = readInputs(model);
  REQUIRE(inputs.size() == c->plan.inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    REQUIRE_OK(s->writeTensor(c->plan.tensors[c->plan.inputs[i]].name, inputs[i].raw(), inputs[i].nbytes()));
  *compiled = std::move(c.value());
  return s;
}

ir::Tensor readAs(rt::Session& s, int32_t t, ir::DType dt) {
  std::vector<unsigned char> bytes;
  REQUIRE_OK(s.readTensor(t, &bytes));
  ir::Tensor out(dt, s.plan().tensors[t].shape);
  REQUIRE(bytes.size() == out.nbytes());
  std::memcpy(out.raw(), bytes.data(), bytes.size());
  return out;
}

TEST_CASE("first step matches PyTorch's loss and LoRA gradients", "[runtime][train]") {
  for (const char* model : kTinyModels) {
    INFO(model);
    driver::Compiled c;
    auto s = openModel(model, &c);
    float loss = 0.0f;
    REQUIRE_OK(s->trainStep(&loss));
    auto expected = onnx::readTensorProtoFile(std::string(FBL_TEST_DATA_DIR) + "/" + model + "/test_data_set_0/output_0.pb");
    REQUIRE(expected.ok());
    CHECK(std::fabs(loss - expected->tensor.at(0)) <= 1e-4 * std::max(1.0, std::fabs(expected->tensor.at(0))));
    std::map<std::string, ir::Tensor> torchGrads;
    for (const auto& f : fs::directory_iterator(std::string(FBL_TEST_DATA_DIR) + "/" + model + "/grads")) {
      auto g = onnx::readTensorProtoFile(f.path().string());
      REQUIRE(g.ok());
      torchGrads[g->name] = g->tensor;
    }
    int compared = 0;
    double worst = 0.0;
    for (const planfile::Trainable& t : c.plan.trainables) {
      std::string name = c.plan.tensors[t.param].name;
      if (name.rfind("m.", 0) == 0) name = name.substr(2);
      auto it = torchGrads.find(name);
      if (it == torchGrads.end()) continue;
      INFO("gradient of " << name);
      const double err = relativeToMaxAbs(readAs(*s, t.grad, ir::DType::F32), it->second);
      CHECK(err <= 1e-4);
      worst = std::max(worst, err);
      ++compared;
    }
    std::printf("%s on %s: loss %.7f (PyTorch %.7f), worst gradient error %.2e of max-abs over %d tensors\n",
                model, s->device().name.c_str(), loss, expected->tensor.at(0), worst, compared);
    CHECK(compared == static_cast<int>(torchGrads.size()));
  }
}

// The exporter's optimizer renamed the LoRA weights to val_N and folded lora_A's transpose; the
// importer takes names and orientation back from the node metadata (onnx/export_names.h). So the
// default glob trains all 28, the gradients are PyTorch's name for name, and after one AdamW step
// the adapters it exports are those the reference executor gets from the optimize=False export
// of the same model (peft's keys, PyTorch's orientation).
TEST_CASE("llama-tiny-folded trains on the device under its PyTorch names", "[runtime][train]") {
  const std::string model = "llama-tiny-folded";
  driver::Compiled c;
  auto s = openModel(model, &c);
  float loss = 0.0f;
  REQUIRE_OK(s->trainStep(&loss));
  auto expected = onnx::readTensorProtoFile(std::string(FBL_TEST_DATA_DIR) + "/" + model + "/test_data_set_0/output_0.pb");
  REQUIRE(expected.ok());
  CHECK(std::fabs(loss - expected->tensor.at(0)) <= 1e-4 * std::fabs(expected->tensor.at(0)));
  std::map<std::string, ir::Tensor> torch;
  for (const auto& f : fs::directory_iterator(std::string(FBL_TEST_DATA_DIR) + "/" + model + "/grads")) {
    auto g = onnx::readTensorProtoFile(f.path().string());
    REQUIRE(g.ok());
    torch["m." + g->name] = g->tensor;
  }
  REQUIRE(c.plan.trainables.size() == 28);
  for (const planfile::Trainable& t : c.plan.trainables) {
    const std::string& name = c.plan.tensors[t.param].name;
    INFO("gradient of " << name);
    REQUIRE(torch.count(name) == 1);
    CHECK(relativeToMaxAbs(readAs(*s, t.grad, ir::DType::F32), torch.at(name)) <= 1e-4);
  }
  const std::string dir = tempDir() + "/adapter-" + model;
  fs::create_directories(dir);
  REQUIRE_OK(s->exportAdapter(dir));
  const auto adapter = readSafetensors(dir + "/adapter_model.safetensors");
  REQUIRE(adapter.size() == 28);

  auto named = passes::loadModel(argsFor("llama-tiny").model);
  REQUIRE(named.ok());
  auto tg = autodiff::buildTrainingGraph(named.value(), {});
  REQUIRE(tg.ok());
  auto batch = train::loadInputs(named.value(), std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/test_data_set_0");
  REQUIRE(batch.ok());
  auto ref = train::RefTrainer::create(std::move(tg).value());
  REQUIRE(ref->step(batch.value()).ok());
  const auto& tr = ref->training();
  for (size_t i = 0; i < tr.trainables.size(); ++i) {
    std::string key = tr.graph.values[tr.trainables[i].param].name.substr(2);  // without "m."
    key.erase(key.find(".default."), 8);                                        // peft drops the adapter name
    INFO(key);
    REQUIRE(adapter.count(key) == 1);
    auto want = ref->parameter(i);
    REQUIRE(want.ok());
    REQUIRE(adapter.at(key).shape() == want->shape());
    CHECK(relativeToMaxAbs(adapter.at(key), *want) <= 1e-4);
  }
}

TEST_CASE("50 steps follow the reference executor's loss curve", "[runtime][train]") {
  std::vector<std::string> models(std::begin(kTinyModels), std::end(kTinyModels));
  models.push_back("llama-tiny-folded");
  for (const std::string& model : models) {
    INFO(model);
    driver::Compiled c;
    auto s = openModel(model, &c);
    // The same joint graph on the reference executor, parameters and state carried by hand.
    auto fwd = passes::loadModel(argsFor(model).model);
    REQUIRE(fwd.ok());
    autodiff::TrainingOptions to;
    auto tg = autodiff::buildTrainingGraph(fwd.value(), to);
    REQUIRE(tg.ok());
    ref::Executor ex(tg->graph);
    std::map<ir::ValueId, ir::Tensor> feeds;
    const std::vector<ir::Tensor> inputs = readInputs(model);
    size_t k = 0;
    for (ir::ValueId v : tg->graph.inputs)
      if (v != tg->step) feeds[v] = inputs[k++];
    std::vector<ir::ValueId> fetch{tg->loss};
    for (const auto& t : tg->trainables) fetch.push_back(t.updated);
    for (const auto& st : tg->state) fetch.push_back(st.updated);
    double worst = 0.0;
    const auto start = std::chrono::steady_clock::now();
    double deviceSeconds = 0.0;
    for (int step = 1; step <= 50; ++step) {
      feeds[tg->step] = ir::Tensor::scalar<int64_t>(step);
      auto r = ex.run(feeds, fetch);
      REQUIRE(r.ok());
      size_t i = 1;
      for (const auto& t : tg->trainables) REQUIRE(ex.setValue(t.param, r.value()[i++]).ok());
      for (const auto& st : tg->state) REQUIRE(ex.setValue(st.current, r.value()[i++]).ok());
      float loss = 0.0f;
      const auto t0 = std::chrono::steady_clock::now();
      REQUIRE_OK(s->trainStep(&loss));
      deviceSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      worst = std::max(worst, std::fabs(loss - r.value()[0].at(0)));
    }
    (void)start;
    std::printf("%s on %s: %.2f ms/step, max |loss - reference| over 50 steps %.2e\n", model.c_str(), s->device().name.c_str(),
                1e3 * deviceSeconds / 50, worst);
    CHECK(worst <= 1e-3);
  }
}

}  // namespace
}  // namespace fbl::testing
