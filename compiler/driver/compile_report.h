// The compile report's `storage` block (`fblc compile --report`, Compiled::storage): how the
// plan stores the model's weights and trainables, and what --base-weights encoded.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "compiler/autodiff/training_graph.h"
#include "compiler/layout/layout.h"
#include "compiler/plan/plan_builder.h"

namespace fbl::driver {

// Frozen MatMul weights and how many are R-Tiled, the trainables stored R-Tiled, image tensors
// and bytes, buffer bytes.
nlohmann::json storageReport(const autodiff::TrainingGraph& tg, const plan::Plan& plan, const plan::BuildStats& stats);

// storage.base_weights: what --base-weights (`option`) stored narrower, and what it left f32
// (`skipped`, with the reason).
nlohmann::json baseWeightsReport(const std::string& option, const std::map<std::string, layout::Encoding>& encodings,
                                 const std::map<std::string, std::string>& skipped, const plan::Plan& plan);

}  // namespace fbl::driver
