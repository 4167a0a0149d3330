// Training a corpus export (tests/data/corpus) a few steps, on PoCL through a plan or on the
// reference executor, keeping what a comparison of the two reads: every step's loss and the first
// step's gradients by trainable. Shared by the tests that check a plan option against the
// reference at the same option (base weights, precision).
#pragma once

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "compiler/onnx/tensor_proto.h"
#include "compiler/train/ref_trainer.h"
#include "runtime/session.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {

struct CorpusSteps {
  std::vector<float> losses;
  std::map<std::string, ir::Tensor> grads;  // the first step's, by trainable
};

inline std::string corpusDir(const std::string& arch) { return std::string(FBL_TEST_DATA_DIR) + "/corpus/" + arch; }

// Writes the export's batch (test_data_set_0/input_K.pb) into the plan's inputs.
inline void writeCorpusInputs(rt::Session& s, const planfile::Plan& plan, const std::string& arch) {
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    auto t = onnx::readTensorProtoFile(corpusDir(arch) + "/test_data_set_0/input_" + std::to_string(i) + ".pb");
    REQUIRE(t.ok());
    REQUIRE_OK(s.writeTensor(plan.tensors[plan.inputs[i]].name, t->tensor.raw(), t->tensor.nbytes()));
  }
}

// `steps` train steps of an open session on its written inputs.
inline CorpusSteps trainOnDevice(rt::Session& s, const planfile::Plan& plan, int steps) {
  CorpusSteps out;
  for (int k = 0; k < steps; ++k) {
    float loss = 0;
    REQUIRE_OK(s.trainStep(&loss));
    out.losses.push_back(loss);
    if (k > 0) continue;
    for (const planfile::Trainable& t : plan.trainables) {
      std::vector<unsigned char> bytes;
      REQUIRE_OK(s.readTensor(t.grad, &bytes));
      ir::Tensor g(ir::DType::F32, plan.tensors[t.grad].shape);
      REQUIRE(bytes.size() == g.nbytes());
      std::memcpy(g.raw(), bytes.data(), bytes.size());
      out.grads.emplace(plan.tensors[t.param].name, std::move(g));
    }
  }
  return out;
}

// `steps` of the reference executor on the training graph `tg`, fed `batch` every step.
inline CorpusSteps trainOnReference(autodiff::TrainingGraph tg, const autodiff::OptimizerOptions& optimizer,
                                    const std::map<ir::ValueId, ir::Tensor>& batch, int steps) {
  auto ref = train::RefTrainer::create(std::move(tg), optimizer);
  CorpusSteps out;
  for (int k = 0; k < steps; ++k) {
    auto r = ref->step(batch);
    REQUIRE(r.ok());
    out.losses.push_back(r->loss);
    if (k > 0) continue;
    for (size_t i = 0; i < r->grads.size(); ++i)
      out.grads.emplace(ref->training().graph.values[ref->training().trainables[i].param].name, r->grads[i]);
  }
  return out;
}

}  // namespace fbl::testing
