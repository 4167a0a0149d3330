// The training loop on the reference trainer against PyTorch: each configuration of
// tests/data/loop/gpt2_loop.json (transformers' schedules with warmup, gradient accumulation,
// clip_grad_norm_, all of them at once; AdamW with weight decay) for 20 optimizer steps on the
// corpus's GPT-2, loss by loss. The schedule's learning rates are checked against torch's too,
// and every bad option is refused with one line.
#include <catch2/catch.hpp>

#include <cstdio>

#include "compiler/autodiff/training_graph.h"
#include "compiler/passes/load_model.h"
#include "compiler/train/ref_trainer.h"
#include "runtime/training_loop.h"
#include "tests/train/loop_reference.h"

namespace fbl::testing {
namespace {

std::vector<double> refTrajectory(const nlohmann::json& flags, size_t microBatches) {
  auto g = passes::loadModel(kLoopModel);
  REQUIRE(g.ok());
  auto batch = train::loadInputs(*g, kLoopData);
  REQUIRE(batch.ok());
  autodiff::TrainingOptions opts;
  applyLoopFlags(flags, opts.optimizer);
  auto tg = autodiff::buildTrainingGraph(*g, opts);
  INFO((tg.ok() ? std::string() : tg.error().message));
  REQUIRE(tg.ok());
  auto trainer = train::RefTrainer::create(std::move(*tg), opts.optimizer);
  std::vector<double> losses;
  for (size_t j = 0; j < microBatches; ++j) {
    std::map<ir::ValueId, ir::Tensor> feeds;
    for (const auto& [v, t] : *batch) feeds[v] = loopBatch(t, static_cast<int64_t>(j));
    auto r = trainer->step(feeds);
    INFO((r.ok() ? std::string() : r.error().message));
    REQUIRE(r.ok());
    losses.push_back(r->loss);
  }
  CHECK(trainer->stepsDone() == static_cast<int64_t>(microBatches) / opts.optimizer.gradAccum);
  return losses;
}

TEST_CASE("training loop: 20 optimizer steps of every configuration follow PyTorch's losses", "[train][train-loop]") {
  const auto ref = loopReference();
  for (const auto& [name, c] : ref.at("configs").items()) {
    INFO(name);
    const auto torch = c.at("losses").get<std::vector<double>>();
    const double worst = worstRelative(refTrajectory(c.at("flags"), torch.size()), torch);
    std::printf("loop %s on the reference trainer: %zu micro-batches, worst relative loss difference %.1e\n",
                name.c_str(), torch.size(), worst);
    CHECK(worst <= 1e-4);
  }
}

TEST_CASE("training loop: the schedules give transformers' learning rates", "[train][train-loop]") {
  const auto ref = loopReference();
  for (const auto& [name, c] : ref.at("configs").items()) {
    INFO(name);
    const auto& flags = c.at("flags");
    planfile::TrainingLoop loop;
    loop.schedule = flags.value("lr_schedule", std::string());
    loop.warmupSteps = flags.value("warmup_steps", int64_t{0});
    loop.totalSteps = flags.value("total_steps", int64_t{0});
    const auto lrs = c.at("lrs").get<std::vector<double>>();
    for (size_t s = 0; s < lrs.size(); ++s) {
      const double lr = flags.at("lr").get<double>();
      const double mine = loop.schedule.empty() ? lr : planfile::scheduledLr(loop, lr, static_cast<int64_t>(s) + 1);
      CHECK(mine == Approx(lrs[s]).margin(1e-15).epsilon(1e-12));
    }
  }
}

TEST_CASE("training loop: weight decay uses the scheduled lr (none at warmup's lr 0)", "[train][train-loop]") {
  auto g = passes::loadModel(kLoopModel);
  REQUIRE(g.ok());
  auto batch = train::loadInputs(*g, kLoopData);
  REQUIRE(batch.ok());
  for (const int64_t warmup : {0, 2}) {
    autodiff::TrainingOptions opts;
    opts.optimizer.lr = 1e-2f;
    opts.optimizer.weightDecay = 0.5f;
    opts.optimizer.lrSchedule = "constant";
    opts.optimizer.warmupSteps = warmup;
    auto tg = autodiff::buildTrainingGraph(*g, opts);
    REQUIRE(tg.ok());
    auto trainer = train::RefTrainer::create(std::move(*tg), opts.optimizer);
    auto before = trainer->parameter(0);
    REQUIRE(before.ok());
    REQUIRE(trainer->step(*batch).ok());
    auto after = trainer->parameter(0);
    REQUIRE(after.ok());
    bool same = true;
    for (int64_t i = 0; i < before->numel(); ++i) same = same && before->at(i) == after->at(i);
    // torch's AdamW: p *= 1 - lr * wd with the scheduler's lr, 0 on warmup's first step.
    CHECK(same == (warmup > 0));
  }
}

TEST_CASE("training loop: a bad option is refused with one line", "[train][train-loop]") {
  auto g = passes::loadModel(kLoopModel);
  REQUIRE(g.ok());
  struct Bad {
    autodiff::OptimizerOptions o;
    const char* says;
  };
  std::vector<Bad> bad(7);
  bad[0].o.gradAccum = 0, bad[0].says = "--grad-accum";
  bad[1].o.clipGradNorm = -1, bad[1].says = "--clip-grad-norm";
  bad[2].o.lrSchedule = "step", bad[2].says = "--lr-schedule 'step'";
  bad[3].o.lrSchedule = "cosine", bad[3].says = "needs --total-steps";
  bad[4].o.warmupSteps = 3, bad[4].says = "need --lr-schedule";
  bad[5].o.kind = autodiff::OptimizerKind::SGD, bad[5].o.clipGradNorm = 1, bad[5].says = "need --optimizer adamw";
  bad[6].o.lrSchedule = "linear", bad[6].o.totalSteps = 10, bad[6].o.warmupSteps = -1, bad[6].says = "--warmup-steps";
  for (const Bad& b : bad) {
    INFO(b.says);
    autodiff::TrainingOptions opts;
    opts.optimizer = b.o;
    auto tg = autodiff::buildTrainingGraph(*g, opts);
    REQUIRE_FALSE(tg.ok());
    CHECK(tg.error().message.find(b.says) != std::string::npos);
    CHECK(tg.error().message.find('\n') == std::string::npos);
  }
}

}  // namespace
}  // namespace fbl::testing
