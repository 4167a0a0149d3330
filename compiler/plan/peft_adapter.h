// What a plan records for exporting LoRA adapters in peft's format (the runtime writes
// adapter_model.safetensors and adapter_config.json from it, runtime/session.cc).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/autodiff/training_graph.h"
#include "compiler/ir/graph.h"

namespace fbl::plan {

// peft's key for a LoRA parameter: the PyTorch name without the export prefix "m." and without
// the adapter name ("lora_A.default.weight" -> "lora_A.weight").
std::string peftAdapterKey(std::string name);

// peft's adapter_config.json for the LoRA parameters among `trainables` (names containing
// ".lora_A."): rank from lora_A's first dimension, target modules from the names. An empty
// object when there are none.
nlohmann::json peftAdapterConfig(const ir::Graph& g, const std::vector<autodiff::TrainableParam>& trainables,
                                 double loraAlpha);

}  // namespace fbl::plan
