// The model's outputs (fblc compile --outputs): the logits a tiny model's cross-entropy reads are
// kept, listed in the plan, and after an evaluation step on PoCL hold what the reference executor
// computes for the same batch, before and after a training step changed the adapters; after a
// training step they hold that step's forward logits (the cross-entropy's gradient, which
// otherwise writes over them, leaves kept logits alone). On corpus exports of every head (causal
// LMs with tied and untied heads and left padding, a masked LM, a seq2seq, sequence and image
// classifiers) they are PyTorch's logits.
#include <cstring>

#include "compiler/driver/compile_command.h"
#include "compiler/onnx/tensor_proto.h"
#include "compiler/passes/differentiate.h"
#include "compiler/passes/load_model.h"
#include "compiler/ref/executor.h"
#include "tests/device/device_test_util.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

struct Model {
  std::string name;
  int inputs;
};

// MODEL compiled for PoCL with --outputs into tempDir()/NAME.fbp, its weights beside it; the plan
// keeps one output.
driver::Compiled compiledWithOutputs(const std::string& model, const std::string& name, driver::CompileArgs* a) {
  a->model = model;
  a->profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  a->output = tempDir() + "/" + name + ".fbp";
  a->weights = tempDir() + "/" + name + ".safetensors";
  a->keepOutputs = true;
  auto c = driver::compileModel(*a);
  INFO((c.ok() ? std::string() : c.error().message));
  REQUIRE(c.ok());
  REQUIRE(driver::writeWeights(*a, c->plan).ok());
  REQUIRE(c->plan.outputs.size() == 1);
  return std::move(*c);
}

void outputsMatchTheReference(const Model& m) {
  driver::CompileArgs a;
  const driver::Compiled c =
      compiledWithOutputs(std::string(FBL_TEST_DATA_DIR) + "/" + m.name + "/model.onnx", m.name + "-outputs", &a);
  const planfile::Plan& p = c.plan;
  const planfile::Tensor& out = p.tensors[p.outputs[0]];
  CHECK(out.layout == "row_major");
  CHECK_FALSE(out.image());

  // The reference: the forward graph as imported, the same batch, the plan's trainables.
  auto g = passes::loadModel(a.model);
  REQUIRE(g.ok());
  const ir::ValueId logits = g->findValue(out.name);
  REQUIRE(logits != ir::kNoValue);
  CHECK(g->values[logits].shape == out.shape);
  ref::Executor exec(*g);
  std::map<ir::ValueId, ir::Tensor> feeds;
  auto s = openPlan(p, m.name + "-outputs");
  REQUIRE_OK(s->loadWeights(a.weights));
  REQUIRE(static_cast<int>(p.inputs.size()) == m.inputs);
  for (int i = 0; i < m.inputs; ++i) {
    auto t = onnx::readTensorProtoFile(std::string(FBL_TEST_DATA_DIR) + "/" + m.name + "/test_data_set_0/input_" +
                                       std::to_string(i) + ".pb");
    REQUIRE(t.ok());
    REQUIRE_OK(s->writeTensor(p.tensors[p.inputs[i]].name, t->tensor.raw(), t->tensor.nbytes()));
    feeds.emplace(g->inputs[static_cast<size_t>(i)], t->tensor);
  }
  for (int step = 0; step < 2; ++step) {
    INFO("after " << step << " training steps");
    float loss = 0;
    REQUIRE_OK(s->evalStep(&loss));
    std::vector<unsigned char> bytes;
    REQUIRE_OK(s->readTensor(p.outputs[0], &bytes));
    ir::Tensor mine(ir::DType::F32, out.shape);
    REQUIRE(bytes.size() == mine.nbytes());
    std::memcpy(mine.raw(), bytes.data(), bytes.size());
    for (const planfile::Trainable& t : p.trainables) {
      std::vector<unsigned char> w;
      REQUIRE_OK(s->readTensor(t.param, &w));
      ir::Tensor param(ir::DType::F32, p.tensors[t.param].shape);
      std::memcpy(param.raw(), w.data(), w.size());
      REQUIRE(exec.setValue(g->findValue(p.tensors[t.param].name), param).ok());
    }
    auto want = exec.run(feeds, {logits});
    REQUIRE(want.ok());
    const double err = relativeToMaxAbs(mine, want->at(0));
    std::printf("%s: outputs '%s' after %d steps within %.1e of the reference executor's (of max-abs)\n",
                m.name.c_str(), out.name.c_str(), step, err);
    CHECK(err <= 1e-5);
    REQUIRE_OK(s->trainStep(&loss));
    REQUIRE_OK(s->readTensor(p.outputs[0], &bytes));
    std::memcpy(mine.raw(), bytes.data(), bytes.size());
    CHECK(relativeToMaxAbs(mine, want->at(0)) <= 1e-5);
  }
}

// The launch of the cross-entropy's gradient: [dloss, scores, labels, dscores].
const planfile::Launch& sceGradLaunch(const planfile::Plan& p) {
  for (const planfile::Launch& l : p.launches)
    if (l.node.find("fbl.SoftmaxCrossEntropyLossGrad") != std::string::npos) return l;
  FAIL("no launch of fbl.SoftmaxCrossEntropyLossGrad");
  return p.launches.front();
}

TEST_CASE("fblc compile --outputs keeps the logits, and an evaluation step leaves them as the reference computes them",
          "[runtime][outputs]") {
  outputsMatchTheReference({"llama-tiny", 1});
  outputsMatchTheReference({"bert-tiny", 2});
}

TEST_CASE("fblc compile --outputs keeps PyTorch's logits on corpus exports of every head", "[runtime][outputs][hf-corpus]") {
  const std::pair<const char*, const char*> exports[] = {{"llama_rslora", "opt"}, {"qwen2_left", "opt"}, {"gpt2", "opt"},
                                                         {"bert_left", "opt"},    {"t5", "opt"},         {"bert_seqcls", "opt"},
                                                         {"deit", "opt"}};
  for (const auto& [arch, style] : exports) {
    INFO(arch << "/" << style);
    const std::string dir = std::string(FBL_TEST_DATA_DIR) + "/corpus/" + arch;
    driver::CompileArgs a;
    const driver::Compiled c = compiledWithOutputs(dir + "/" + style + "/model.onnx", std::string(arch) + "-logits", &a);
    const planfile::Plan& p = c.plan;
    auto s = openPlan(p, std::string(arch) + "-logits");
    REQUIRE_OK(s->loadWeights(a.weights));
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      auto t = onnx::readTensorProtoFile(dir + "/test_data_set_0/input_" + std::to_string(i) + ".pb");
      REQUIRE(t.ok());
      REQUIRE_OK(s->writeTensor(p.tensors[p.inputs[i]].name, t->tensor.raw(), t->tensor.nbytes()));
    }
    float loss = 0;
    REQUIRE_OK(s->evalStep(&loss));
    std::vector<unsigned char> bytes;
    REQUIRE_OK(s->readTensor(p.outputs[0], &bytes));
    auto torch = onnx::readTensorProtoFile(dir + "/logits.pb");
    REQUIRE(torch.ok());
    // The plan keeps the value the loss reads, before any reshape: the same elements.
    REQUIRE(bytes.size() == torch->tensor.nbytes());
    ir::Tensor mine(ir::DType::F32, torch->tensor.shape());
    std::memcpy(mine.raw(), bytes.data(), bytes.size());
    const double err = relativeToMaxAbs(mine, torch->tensor);
    std::printf("corpus %s/%s: --outputs '%s' %s within %.1e of PyTorch's logits (of max-abs)\n", arch, style,
                p.tensors[p.outputs[0]].name.c_str(), ir::shapeToString(torch->tensor.shape()).c_str(), err);
    CHECK(err <= 1e-5);
  }
}

TEST_CASE("the cross-entropy's gradient writes over the logits, unless the plan keeps them", "[runtime][outputs]") {
  for (const bool keep : {false, true}) {
    driver::CompileArgs a;
    a.model = std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/model.onnx";
    a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
    a.keepOutputs = keep;
    auto c = driver::compileModel(a);
    REQUIRE(c.ok());
    const planfile::Launch& l = sceGradLaunch(c->plan);
    REQUIRE(l.args.size() == 4);
    CHECK((l.args[1] == l.args[3]) == !keep);
  }
}

TEST_CASE("the model's outputs are found from a cross-entropy loss, and no other", "[runtime][outputs]") {
  ir::Graph g;
  CHECK_THAT(passes::modelOutputs(g).error().message, Catch::Contains("not a cross-entropy"));
}

}  // namespace
}  // namespace fbl::testing
