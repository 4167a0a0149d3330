// A hand-built ONNX training graph with the ops found in users' exports, compiled by
// `fblc compile`'s pipeline and trained on PoCL against the reference executor running the same
// joint graph (run-ref's trainer): position ids from the padding mask (integer CumSum), a
// torch.split of the hidden state into a GLU (SplitToSequence + SequenceAt), and a ScatterND on
// the float path to the loss (gradients to both its data and its updates); and a LoRA weight that
// two layers share, read transposed (ALBERT's optimize=True export).
#include <filesystem>

#include "compiler/driver/compile_command.h"
#include "compiler/passes/load_model.h"
#include "compiler/train/ref_trainer.h"
#include "tests/onnx/onnx_test_util.h"
#include "tests/device/device_test_util.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kSeq = 6, kVocab = 10, kHidden = 8, kPositions = 8;

std::vector<float> randomFloats(size_t n, std::mt19937& rng) {
  std::vector<float> v(n);
  for (float& x : v) x = std::uniform_real_distribution<float>(-1, 1)(rng);
  return v;
}

std::string writeModel(const std::string& path) {
  ::onnx::ModelProto m = opset20Model("new-ops");
  auto* g = m.mutable_graph();
  addInput(g, "input_ids", ::onnx::TensorProto::INT64, {1, kSeq});
  addInput(g, "attention_mask", ::onnx::TensorProto::INT64, {1, kSeq});
  addInput(g, "labels", ::onnx::TensorProto::INT64, {1, kSeq});
  std::mt19937 rng(21);
  addF32Initializer(g, "tok.lora_B.weight", {kVocab, kHidden}, randomFloats(kVocab * kHidden, rng));
  addF32Initializer(g, "pos.weight", {kPositions, kHidden}, randomFloats(kPositions * kHidden, rng));
  addF32Initializer(g, "head.lora_A.weight", {kHidden / 2, kVocab}, randomFloats(kHidden / 2 * kVocab, rng));
  // Position ids as HF's create_position_ids_from_input_ids: cumsum(mask) * mask + 1.
  addInt64Constant(g, "one_axis", {1}, true);
  addInt64Constant(g, "one", {1}, true);
  addNode(g, "CumSum", "node_cumsum", {"attention_mask", "one_axis"}, {"cumsum"});
  addNode(g, "Mul", "node_mask", {"cumsum", "attention_mask"}, {"masked"});
  addNode(g, "Add", "node_pos_ids", {"masked", "one"}, {"pos_ids"});
  addNode(g, "Gather", "node_embedding", {"tok.lora_B.weight", "input_ids"}, {"tok"});
  addNode(g, "Gather", "node_pos_embedding", {"pos.weight", "pos_ids"}, {"pos"});
  addNode(g, "Add", "node_add", {"tok", "pos"}, {"h"});
  // torch.split(h, 4, dim=2) into a GLU.
  addInt64Constant(g, "half", {kHidden / 2}, true);
  addIntAttr(addNode(g, "SplitToSequence", "node_split", {"h", "half"}, {"halves"}), "axis", 2);
  addInt64Constant(g, "i0", {0}, true);
  addInt64Constant(g, "i1", {1}, true);
  addNode(g, "SequenceAt", "node_getitem", {"halves", "i0"}, {"a"});
  addNode(g, "SequenceAt", "node_getitem_1", {"halves", "i1"}, {"b"});
  addNode(g, "Sigmoid", "node_sigmoid", {"b"}, {"gate"});
  addNode(g, "Mul", "node_glu", {"a", "gate"}, {"glu"});
  addNode(g, "MatMul", "node_head", {"glu", "head.lora_A.weight"}, {"logits"});
  // logits[0, 5] = 2 * logits[0, 0]: a ScatterND whose updates depend on the trainable too.
  addInt64Constant(g, "s0", {0, 0, 0});
  addInt64Constant(g, "s1", {1, 1, kVocab});
  addNode(g, "Slice", "node_first", {"logits", "s0", "s1"}, {"first"});
  addInt64Constant(g, "upd_shape", {1, kVocab});
  addNode(g, "Reshape", "node_first_flat", {"first", "upd_shape"}, {"first_flat"});
  addNode(g, "Add", "node_double", {"first_flat", "first_flat"}, {"upd"});
  addInt64Constant(g, "where", {0, 5});
  addInt64Constant(g, "idx_shape", {1, 2});
  addNode(g, "Reshape", "node_where", {"where", "idx_shape"}, {"idx"});
  addNode(g, "ScatterND", "node_scatter", {"logits", "idx", "upd"}, {"scattered"});
  auto* tr = addNode(g, "Transpose", "node_transpose", {"scattered"}, {"scores"});
  auto* perm = tr->add_attribute();
  perm->set_name("perm");
  perm->set_type(::onnx::AttributeProto::INTS);
  for (int64_t p : {0, 2, 1}) perm->add_ints(p);
  auto* loss = addNode(g, "SoftmaxCrossEntropyLoss", "node_loss", {"scores", "labels"}, {"loss"});
  addIntAttr(loss, "ignore_index", -100);
  g->add_output()->set_name("loss");
  writeFile(path, bytesOf(m));
  return path;
}

// Compiles `model` for PoCL, trains it 3 steps from `batch` there and with the reference
// executor (run-ref's trainer, AdamW at the same rate), and checks every loss and the first
// step's gradients; `trainables` is how many the plan must have.
void trainsLikeTheReference(const std::string& model, const std::vector<ir::Tensor>& batch, size_t trainables) {
  driver::CompileArgs a;
  a.model = model;
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  a.weights = tempDir() + "/" + fs::path(model).stem().string() + ".safetensors";
  a.lr = 1e-2f;
  auto c = driver::compileModel(a);
  INFO((c.ok() ? std::string() : c.error().message));
  REQUIRE(c.ok());
  REQUIRE(c->plan.trainables.size() == trainables);
  REQUIRE(driver::writeWeights(a, c->plan).ok());
  auto s = openPlan(c->plan, fs::path(model).stem().string());
  REQUIRE_OK(s->loadWeights(a.weights));
  for (size_t i = 0; i < batch.size(); ++i)
    REQUIRE_OK(s->writeTensor(c->plan.tensors[c->plan.inputs[i]].name, batch[i].raw(), batch[i].nbytes()));

  auto forward = passes::loadModel(model);
  REQUIRE(forward.ok());
  train::RunRefArgs ra;
  ra.lr = a.lr;
  auto opts = train::trainingOptions(ra);
  REQUIRE(opts.ok());
  auto tg = autodiff::buildTrainingGraph(*forward, *opts);
  INFO((tg.ok() ? std::string() : tg.error().message));
  REQUIRE(tg.ok());
  auto trainer = train::RefTrainer::create(std::move(tg.value()));
  std::map<ir::ValueId, ir::Tensor> feeds;
  for (size_t i = 0; i < batch.size(); ++i) feeds[forward->inputs[i]] = batch[i];
  for (int step = 1; step <= 3; ++step) {
    auto want = trainer->step(feeds);
    REQUIRE(want.ok());
    float loss = 0.0f;
    REQUIRE_OK(s->trainStep(&loss));
    INFO("step " << step << ": device " << loss << ", reference " << want->loss);
    CHECK(std::fabs(loss - want->loss) <= 1e-5 * std::max(1.0f, std::fabs(want->loss)));
    if (step == 1)
      for (size_t t = 0; t < c->plan.trainables.size(); ++t) {
        const planfile::Trainable& pt = c->plan.trainables[t];
        size_t k = 0;  // the reference's trainable of the same name
        while (k < trainer->training().trainables.size() &&
               trainer->training().graph.values[trainer->training().trainables[k].param].name != c->plan.tensors[pt.param].name)
          ++k;
        REQUIRE(k < want->grads.size());
        std::vector<unsigned char> bytes;
        REQUIRE_OK(s->readTensor(pt.grad, &bytes));
        ir::Tensor grad(ir::DType::F32, want->grads[k].shape());
        REQUIRE(bytes.size() == grad.nbytes());
        std::memcpy(grad.raw(), bytes.data(), bytes.size());
        INFO("gradient of " << c->plan.tensors[pt.param].name);
        CHECK(relativeToMaxAbs(grad, want->grads[k]) <= 1e-5);
        double scale = 0.0;
        for (int64_t i = 0; i < grad.numel(); ++i) scale = std::max(scale, std::fabs(want->grads[k].at(i)));
        CHECK(scale > 0.0);
      }
  }
}

TEST_CASE("a model with CumSum, a sequence split and ScatterND trains on PoCL as on the reference",
          "[runtime][train][index]") {
  const ir::Tensor ids = ir::Tensor::fromVector<int64_t>({1, kSeq}, {3, 9, 0, 4, 1, 1});
  const ir::Tensor mask = ir::Tensor::fromVector<int64_t>({1, kSeq}, {1, 1, 1, 1, 0, 0});
  const ir::Tensor labels = ir::Tensor::fromVector<int64_t>({1, kSeq}, {9, 0, 4, 1, -100, -100});
  // The head, and the token table through split and GLU.
  trainsLikeTheReference(writeModel(tempDir() + "/new-ops.onnx"), {ids, mask, labels}, 2);
}

// ALBERT's optimize=True export: one layer's LoRA A used by two layers, stored transposed by the
// exporter (read as Transpose(A)). Its gradient is the transpose of a sum, which the optimizer
// reads through a map; the AdamW kernel once bound the map to the transpose's own output.
std::string writeSharedTransposedModel(const std::string& path) {
  ::onnx::ModelProto m = opset20Model("shared-transposed");
  auto* g = m.mutable_graph();
  addInput(g, "input_ids", ::onnx::TensorProto::INT64, {1, kSeq});
  addInput(g, "labels", ::onnx::TensorProto::INT64, {1, kSeq});
  std::mt19937 rng(5);
  addF32Initializer(g, "tok.weight", {kVocab, kHidden}, randomFloats(kVocab * kHidden, rng));
  addF32Initializer(g, "layer.lora_A.weight", {4, kHidden}, randomFloats(4 * kHidden, rng));
  addF32Initializer(g, "layer.up.weight", {4, kHidden}, randomFloats(4 * kHidden, rng));
  addF32Initializer(g, "head.weight", {4, kVocab}, randomFloats(4 * kVocab, rng));
  addNode(g, "Gather", "node_embedding", {"tok.weight", "input_ids"}, {"h"});
  addNode(g, "Transpose", "node_a_t", {"layer.lora_A.weight"}, {"a_t"});
  addNode(g, "MatMul", "node_layer_1", {"h", "a_t"}, {"down_1"});
  addNode(g, "MatMul", "node_up", {"down_1", "layer.up.weight"}, {"h2"});
  addNode(g, "MatMul", "node_layer_2", {"h2", "a_t"}, {"down_2"});
  addNode(g, "MatMul", "node_head", {"down_2", "head.weight"}, {"logits"});
  auto* tr = addNode(g, "Transpose", "node_scores", {"logits"}, {"scores"});
  auto* perm = tr->add_attribute();
  perm->set_name("perm");
  perm->set_type(::onnx::AttributeProto::INTS);
  for (int64_t p : {0, 2, 1}) perm->add_ints(p);
  addNode(g, "SoftmaxCrossEntropyLoss", "node_loss", {"scores", "labels"}, {"loss"});
  g->add_output()->set_name("loss");
  writeFile(path, bytesOf(m));
  return path;
}

TEST_CASE("a shared LoRA weight read transposed trains on PoCL as on the reference", "[runtime][train]") {
  const ir::Tensor ids = ir::Tensor::fromVector<int64_t>({1, kSeq}, {3, 9, 0, 4, 1, 1});
  const ir::Tensor labels = ir::Tensor::fromVector<int64_t>({1, kSeq}, {9, 0, 4, 1, 2, 7});
  trainsLikeTheReference(writeSharedTransposedModel(tempDir() + "/shared-transposed.onnx"), {ids, labels}, 1);
}

}  // namespace
}  // namespace fbl::testing
