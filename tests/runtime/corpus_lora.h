// The corpus's LoRA names: llama-tiny-folded's exporter renamed (and transposed) the LoRA
// weights to val_N, so tests find them by contents in llama-tiny. Shared by the runtime tests
// that train the corpus models.
#pragma once

#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "compiler/onnx/load_model.h"

namespace fbl::testing {

inline ir::Tensor transposed2d(const ir::Tensor& t) {
  ir::Tensor out(t.dtype(), {t.shape()[1], t.shape()[0]});
  for (int64_t i = 0; i < t.shape()[0]; ++i)
    for (int64_t j = 0; j < t.shape()[1]; ++j) out.set(j * t.shape()[0] + i, t.at(i * t.shape()[1] + j));
  return out;
}

inline bool sameContents(const ir::Tensor& a, const ir::Tensor& b) {
  return a.shape() == b.shape() && a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// llama-tiny-folded's exporter renamed (and transposed) the LoRA weights to val_N: find them by
// contents in llama-tiny. val_N -> (PyTorch name, transposed).
inline std::map<std::string, std::pair<std::string, bool>> foldedLora() {
  auto folded = onnx::loadModel(std::string(FBL_TEST_DATA_DIR) + "/llama-tiny-folded/model.onnx");
  auto named = onnx::loadModel(std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/model.onnx");
  REQUIRE(folded.ok());
  REQUIRE(named.ok());
  std::map<std::string, std::pair<std::string, bool>> lora;
  for (const auto& fv : folded->values) {
    if (fv.kind != ir::ValueKind::Initializer || !fv.data || fv.shape.size() != 2) continue;
    for (const auto& nv : named->values) {
      if (nv.kind != ir::ValueKind::Initializer || !nv.data || nv.name.find("lora_") == std::string::npos) continue;
      if (sameContents(*fv.data, *nv.data)) lora[fv.name] = {nv.name.substr(2), false};
      else if (nv.data->rank() == 2 && sameContents(*fv.data, transposed2d(*nv.data))) lora[fv.name] = {nv.name.substr(2), true};
    }
  }
  REQUIRE(lora.size() == 28);
  return lora;
}

inline std::vector<std::string> trainablesOf(const std::string& model) {
  if (model != "llama-tiny-folded") return {"*lora_*"};
  std::vector<std::string> names;
  for (const auto& [name, m] : foldedLora()) names.push_back(name);
  return names;
}

}  // namespace fbl::testing
