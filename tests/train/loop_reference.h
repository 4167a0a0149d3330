// PyTorch's training-loop trajectories (tests/data/loop/gpt2_loop.json, written by
// tests/data/loop/make_reference.py): the configurations, the batches they were fed and the
// measure both the reference trainer's and the runtime's tests apply.
#pragma once

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "compiler/ir/tensor.h"

namespace fbl::testing {

inline const std::string kLoopModel = std::string(FBL_TEST_DATA_DIR) + "/corpus/gpt2/opt/model.onnx";
inline const std::string kLoopData = std::string(FBL_TEST_DATA_DIR) + "/corpus/gpt2/test_data_set_0";

inline nlohmann::json loopReference() {
  std::ifstream f(std::string(FBL_TEST_DATA_DIR) + "/loop/gpt2_loop.json");
  REQUIRE(f.good());
  return nlohmann::json::parse(f);
}

// A configuration's flags onto fblc's options (CompileArgs and OptimizerOptions share the names).
template <typename Options>
void applyLoopFlags(const nlohmann::json& flags, Options& o) {
  o.lr = flags.at("lr").get<float>();
  o.weightDecay = flags.at("weight_decay").get<float>();
  o.gradAccum = flags.value("grad_accum", 1);
  o.clipGradNorm = flags.value("clip_grad_norm", 0.0f);
  o.lrSchedule = flags.value("lr_schedule", std::string());
  o.warmupSteps = flags.value("warmup_steps", int64_t{0});
  o.totalSteps = flags.value("total_steps", int64_t{0});
}

// Micro-batch j's input: the stored one rolled by j % 4 along its last axis (torch.roll).
inline ir::Tensor loopBatch(const ir::Tensor& t, int64_t j) {
  const ir::Shape& s = t.shape();
  const int64_t n = s.empty() ? 1 : s.back(), shift = j % 4;
  ir::Tensor out(t.dtype(), s);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t row = i / n, col = i % n;
    out.set(row * n + (col + shift) % n, t.at(i));
  }
  return out;
}

// The worst |mine - torch| / |torch| over the trajectory.
inline double worstRelative(const std::vector<double>& mine, const std::vector<double>& torch) {
  REQUIRE(mine.size() == torch.size());
  double worst = 0;
  for (size_t i = 0; i < mine.size(); ++i) worst = std::max(worst, std::abs(mine[i] - torch[i]) / std::abs(torch[i]));
  return worst;
}

}  // namespace fbl::testing
