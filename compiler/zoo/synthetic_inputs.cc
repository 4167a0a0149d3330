#include "compiler/zoo/synthetic_inputs.h"

#include <cstring>
#include <string>
#include <vector>

#include "compiler/analysis/input_bounds.h"

namespace fbl::zoo {

int64_t integerInputBound(const ir::Graph& g, ir::ValueId input) {
  std::vector<int64_t> his;
  for (const analysis::InputBound& b : analysis::inputBounds(g, input)) his.push_back(b.hi);
  return rt::syntheticBound(his);
}

Result<std::map<ir::ValueId, ir::Tensor>> syntheticInputs(const ir::Graph& g, uint64_t seed,
                                                          int64_t step) {
  std::vector<rt::SyntheticInput> specs;
  for (ir::ValueId id : g.inputs) {
    const ir::Value& v = g.values[id];
    if (!v.shapeKnown)
      return makeError("input '{}' has no static shape: give one with --shape {}=...", v.name, v.name);
    const bool integer = v.dtype == ir::DType::I64 || v.dtype == ir::DType::I32;
    specs.push_back({v.name, std::string(ir::dtypeName(v.dtype)), std::vector<int64_t>(v.shape.begin(), v.shape.end()),
                     integer ? integerInputBound(g, id) : rt::kDefaultIntegerBound});
  }
  FBL_ASSIGN(const std::vector<std::vector<unsigned char>> bytes, rt::syntheticBatch(specs, seed, step));
  std::map<ir::ValueId, ir::Tensor> out;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const ir::Value& v = g.values[g.inputs[i]];
    ir::Tensor t(v.dtype, v.shape);
    if (!bytes[i].empty()) std::memcpy(t.raw(), bytes[i].data(), bytes[i].size());
    out.emplace(g.inputs[i], std::move(t));
  }
  return out;
}

}  // namespace fbl::zoo
