#include "compiler/zoo/synthetic_inputs.h"

#include <algorithm>
#include <random>

#include "compiler/analysis/input_bounds.h"

namespace fbl::zoo {

int64_t integerInputBound(const ir::Graph& g, ir::ValueId input) {
  int64_t bound = -1;
  for (const analysis::InputBound& b : analysis::inputBounds(g, input))
    if (b.hi > 0) bound = bound < 0 ? b.hi : std::min(bound, b.hi);
  return bound > 0 ? bound : kDefaultIntegerBound;
}

Result<std::map<ir::ValueId, ir::Tensor>> syntheticInputs(const ir::Graph& g, uint64_t seed,
                                                          int64_t step) {
  std::map<ir::ValueId, ir::Tensor> out;
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(step));
  for (ir::ValueId id : g.inputs) {
    const ir::Value& v = g.values[id];
    if (!v.shapeKnown)
      return makeError("input '{}' has no static shape: give one with --shape {}=...", v.name, v.name);
    ir::Tensor t(v.dtype, v.shape);
    if (v.dtype == ir::DType::F32) {
      std::normal_distribution<float> normal(0.0f, 1.0f);
      float* p = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = normal(rng);
    } else if (v.dtype == ir::DType::I64 || v.dtype == ir::DType::I32) {
      std::uniform_int_distribution<int64_t> pick(0, integerInputBound(g, id) - 1);
      for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>(pick(rng)));
    } else if (v.dtype == ir::DType::Bool) {
      std::uniform_int_distribution<int> pick(0, 1);
      for (int64_t i = 0; i < t.numel(); ++i) t.set(i, pick(rng));
    } else {
      return makeError("input '{}': no synthetic data for dtype {}", v.name, ir::dtypeName(v.dtype));
    }
    out.emplace(id, std::move(t));
  }
  return out;
}

}  // namespace fbl::zoo
