// The training loop on PoCL against PyTorch: every configuration of
// tests/data/loop/gpt2_loop.json compiled by fblc (schedules with warmup, gradient accumulation,
// clipping computed by kernels, all at once) trains the corpus's GPT-2 for 20 optimizer steps
// loss by loss like torch.optim.AdamW + transformers' schedulers + clip_grad_norm_. Then: the three
// schedules share one program (the lr is an input, not a literal), a checkpoint taken in the middle
// of an accumulation window with an lr set by fbl_set_learning_rate resumes exactly, and a plan
// without a schedule refuses fbl_set_learning_rate.
#include <cstdio>
#include <functional>
#include <map>

#include "compiler/onnx/tensor_proto.h"
#include "compiler/driver/compile_command.h"
#include "runtime/include/fbl/fbl_runtime.h"
#include "tests/device/device_test_util.h"
#include "tests/train/loop_reference.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

struct LoopPlan {
  driver::Compiled compiled;
  std::string weights;
  std::vector<ir::Tensor> inputs;  // the stored batch, by plan input order
};

LoopPlan compileLoop(const std::string& name, const nlohmann::json& flags) {
  driver::CompileArgs a;
  a.model = kLoopModel;
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  a.output = tempDir() + "/loop-" + name + ".fbp";
  a.weights = tempDir() + "/loop-" + name + ".safetensors";
  applyLoopFlags(flags, a);
  auto c = driver::compileModel(a);
  INFO((c.ok() ? std::string() : c.error().message));
  REQUIRE(c.ok());
  REQUIRE(driver::writeWeights(a, c->plan).ok());
  LoopPlan lp{std::move(*c), a.weights, {}};
  for (size_t i = 0; i < lp.compiled.plan.inputs.size(); ++i) {
    auto t = onnx::readTensorProtoFile(kLoopData + "/input_" + std::to_string(i) + ".pb");
    REQUIRE(t.ok());
    lp.inputs.push_back(t->tensor);
  }
  return lp;
}

// Micro-batches [from, to) of the reference's batches, one train step each.
std::vector<double> train(rt::Session& s, const LoopPlan& lp, size_t from, size_t to) {
  std::vector<double> losses;
  for (size_t j = from; j < to; ++j) {
    for (size_t i = 0; i < lp.inputs.size(); ++i) {
      const ir::Tensor x = loopBatch(lp.inputs[i], static_cast<int64_t>(j));
      REQUIRE_OK(s.writeTensor(lp.compiled.plan.tensors[lp.compiled.plan.inputs[i]].name, x.raw(), x.nbytes()));
    }
    float loss = 0;
    REQUIRE_OK(s.trainStep(&loss));
    losses.push_back(loss);
  }
  return losses;
}

TEST_CASE("training loop on PoCL: 20 optimizer steps of every configuration follow PyTorch's losses", "[runtime][train-loop]") {
  const auto ref = loopReference();
  std::map<std::string, std::string> programs;
  for (const auto& [name, c] : ref.at("configs").items()) {
    INFO(name);
    const LoopPlan lp = compileLoop(name, c.at("flags"));
    auto s = openPlan(lp.compiled.plan, "loop-" + name);
    REQUIRE_OK(s->loadWeights(lp.weights));
    const auto torch = c.at("losses").get<std::vector<double>>();
    const double worst = worstRelative(train(*s, lp, 0, torch.size()), torch);
    CHECK(s->step() == 20);
    CHECK(s->accumulated() == 0);
    std::printf("loop %s on PoCL: %zu micro-batches, worst relative loss difference %.1e\n", name.c_str(), torch.size(), worst);
    CHECK(worst <= 5e-4);  // as the corpus's trajectories: Adam amplifies rounding near g = 0
    programs[name] = lp.compiled.plan.program;
  }
  // The schedule is a scalar the runtime writes: changing it changes no kernel.
  CHECK(programs.at("constant_warmup") == programs.at("linear_warmup"));
  CHECK(programs.at("constant_warmup") == programs.at("cosine_warmup"));
}

TEST_CASE("training loop on PoCL: a checkpoint inside an accumulation window resumes exactly", "[runtime][train-loop]") {
  const auto ref = loopReference();
  const LoopPlan lp = compileLoop("resume", ref.at("configs").at("all").at("flags"));
  auto a = openPlan(lp.compiled.plan, "loop-resume-a");
  REQUIRE_OK(a->loadWeights(lp.weights));
  train(*a, lp, 0, 10);  // 2 optimizer steps and 2 micro-batches of the third
  REQUIRE(a->step() == 2);
  REQUIRE(a->accumulated() == 2);
  const double scheduled = a->learningRate();
  REQUIRE_OK(a->setLearningRate(0.02f));
  CHECK(a->learningRate() == Approx(scheduled * 2).epsilon(1e-6));  // the base lr changed, the factor did not
  const std::string ckpt = tempDir() + "/loop-resume.checkpoint.safetensors";
  REQUIRE_OK(a->saveCheckpoint(ckpt));
  const auto straight = train(*a, lp, 10, 20);

  auto b = openPlan(lp.compiled.plan, "loop-resume-b");
  REQUIRE_OK(b->loadWeights(lp.weights));
  REQUIRE_OK(b->loadCheckpoint(ckpt));
  CHECK(b->step() == 2);
  CHECK(b->accumulated() == 2);
  CHECK(b->learningRate() == Approx(scheduled * 2).epsilon(1e-6));
  const auto resumed = train(*b, lp, 10, 20);
  CHECK(resumed == straight);  // bit for bit
}

TEST_CASE("training loop on PoCL: fbl_set_learning_rate needs a plan with a schedule", "[runtime][train-loop]") {
  const auto ref = loopReference();
  const LoopPlan lp = compileLoop("fixed-lr", ref.at("configs").at("clip").at("flags"));
  const std::string path = tempDir() + "/loop-fixed-lr.fbp";
  REQUIRE_OK(safetensors::writeFileAtomic(path, planfile::serialize(lp.compiled.plan)));
  fbl_session* s = nullptr;
  REQUIRE(fbl_open(path.c_str(), -1, nullptr, &s) == FBL_OK);
  CHECK(fbl_set_learning_rate(s, 0.5f) == FBL_ERROR);
  CHECK(std::string(fbl_last_error()).find("--lr-schedule") != std::string::npos);
  CHECK(fbl_learning_rate(s) == Approx(1e-2));
  CHECK(fbl_accumulated(s) == 0);
  fbl_close(s);
}

}  // namespace
}  // namespace fbl::testing

namespace fbl::testing {
namespace {

TEST_CASE("training loop: plan loading refuses a bad training_loop", "[runtime][train-loop]") {
  const auto ref = loopReference();
  const LoopPlan lp = compileLoop("check", ref.at("configs").at("all").at("flags"));
  const planfile::Plan& good = lp.compiled.plan;
  planfile::Plan parsed, out;  // parse() fills what the writer derives (kernel_work)
  parsed = fbl::testing::requireValue(rt::loadPlan(planfile::serialize(good), "good.fbp", nullptr));
  out = parsed;
  CHECK(out.loop.gradAccum == 4);
  CHECK(out.loop.schedule == "cosine");
  CHECK(out.loop.accumulators.size() == good.trainables.size());
  const int32_t weight = good.trainables[0].param;
  std::vector<std::pair<std::function<void(planfile::Plan&)>, std::string>> bad = {
      {[](planfile::Plan& p) { p.loop.gradAccum = 0; }, "grad_accum 0"},
      {[](planfile::Plan& p) { p.loop.schedule = "step"; }, "unknown schedule 'step'"},
      {[](planfile::Plan& p) { p.loop.lr = -1; }, "lr"},
      {[](planfile::Plan& p) { p.loop.clipGradNorm = -2; }, "clip_grad_norm"},
      {[weight](planfile::Plan& p) { p.loop.lrTensor = weight; }, "lr_tensor must be one f32"},
      {[](planfile::Plan& p) { p.loop.accumKeep = 1 << 20; }, "accum_keep"},
      {[weight](planfile::Plan& p) { p.loop.accumulators[0] = weight; }, "not one of the plan's state tensors"},
      {[](planfile::Plan& p) { p.loop.accumulators.clear(); }, "needs accum_keep and accumulators"},
  };
  for (const auto& [corrupt, says] : bad) {
    INFO(says);
    planfile::Plan p = parsed;
    corrupt(p);
    const std::string e = fbl::testing::errorText(rt::loadPlan(planfile::serialize(p), "bad.fbp", nullptr));
    INFO(e);
    CHECK(e.find(says) != std::string::npos);
    CHECK(e.find('\n') == std::string::npos);
  }
}

}  // namespace
}  // namespace fbl::testing
