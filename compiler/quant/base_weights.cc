#include "compiler/quant/base_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "compiler/autodiff/training_graph.h"
#include "compiler/ops/reduction_axis.h"
#include "compiler/support/float16.h"
#include "runtime/plan_file.h"

namespace fbl::quant {

namespace {

// The scale index of element (r, c).
int64_t scaleIndex(const layout::Encoding& e, int64_t r, int64_t c) {
  return e.axis == 1 ? r * (e.cols / e.group) + c / e.group : (r / e.group) * e.cols + c;
}

}  // namespace

Result<BaseWeights> parseBaseWeights(const std::string& text, int64_t group) {
  if (group < 4 || group % 4 != 0) return makeError("--base-weights-group {} is not a positive multiple of 4", group);
  for (int bits : {32, 16, 8, 4})
    if (text == (bits == 32 ? "fp32" : planfile::encodingName(bits))) return BaseWeights{bits, group};
  return makeError("--base-weights '{}' is not fp32, fp16, int8 or int4", text);
}

std::map<std::string, layout::Encoding> chooseEncodings(const ir::Graph& g, const std::set<std::string>& trainables,
                                                        BaseWeights base, std::map<std::string, std::string>* skipped) {
  const int bits = base.bits;
  const int64_t group = base.group;
  std::map<std::string, layout::Encoding> out;
  if (bits == 32) return out;
  const std::vector<std::vector<ir::NodeId>> consumers = g.consumers();
  std::vector<bool> isOutput(g.values.size(), false);
  for (ir::ValueId o : g.outputs) isOutput[o] = true;
  for (ir::ValueId v = 0; v < static_cast<ir::ValueId>(g.values.size()); ++v) {
    const ir::Value& w = g.values[v];
    if (w.kind != ir::ValueKind::Initializer || w.dtype != ir::DType::F32 || w.shape.size() != 2) continue;
    if (trainables.count(w.name)) continue;
    auto skip = [&](std::string why) {
      if (skipped) (*skipped)[w.name] = std::move(why);
    };
    // An adapted embedding's base layer: peft saves it with the adapter (autodiff/peft_adapter.h,
    // step 6), which the runtime exports from the plan's fp32 tensor.
    if (w.name.find("embed_tokens.base_layer.") != std::string::npos ||
        w.name.find("lm_head.base_layer.") != std::string::npos) {
      skip("peft saves it with the adapter (an adapted embedding's base layer)");
      continue;
    }
    // Follow the weight through transposes to its readers; `swapped`: the value seen has the
    // weight's axes swapped. The first product's reduction axis is the groups' axis.
    std::optional<int> axis;
    std::string refused;
    bool read = false;
    std::vector<std::pair<ir::ValueId, bool>> work{{v, false}};
    while (!work.empty() && refused.empty()) {
      const auto [seen, swapped] = work.back();
      work.pop_back();
      if (isOutput[seen]) refused = "it is a graph output";
      for (ir::NodeId id : consumers[seen]) {
        const ir::Node& n = g.nodes[id];
        for (int slot = 0; slot < static_cast<int>(n.inputs.size()) && refused.empty(); ++slot) {
          if (n.inputs[slot] != seen) continue;
          read = true;
          if (n.op == "Transpose" && slot == 0) {
            const std::vector<int64_t> perm = n.attrInts("perm", {1, 0});
            if (perm == std::vector<int64_t>{1, 0}) work.emplace_back(n.outputs[0], !swapped);
            else if (perm == std::vector<int64_t>{0, 1}) work.emplace_back(n.outputs[0], swapped);
            else refused = fmt::format("transposed by {}", ir::describeNode(g, n));
          } else if ((n.op == "MatMul" || n.op == "Gemm") && slot < 2) {
            const std::optional<int64_t> r = ops::reductionAxis(g, n, slot);
            if (!axis && r && *r >= 0 && *r < 2) axis = static_cast<int>(swapped ? 1 - *r : *r);
          } else if (n.op == "Gather" && slot == 0) {
            // An embedding table: each row read whole.
          } else {
            refused = fmt::format("read by {}", ir::describeNode(g, n));
          }
        }
      }
    }
    if (!refused.empty()) {
      skip(refused);
      continue;
    }
    if (!read) continue;
    layout::Encoding e{bits, bits == 16 ? 0 : group, axis.value_or(1), w.shape[0], w.shape[1]};
    if (e.scaled() && w.shape[e.axis] % group != 0) {
      skip(fmt::format("its {} {} are not whole groups of {}", w.shape[e.axis], e.axis == 0 ? "rows" : "columns", group));
      continue;
    }
    out.emplace(w.name, e);
  }
  return out;
}

Result<std::map<std::string, layout::Encoding>> encodingsFor(const ir::Graph& forward,
                                                             const std::vector<std::string>& trainableGlobs,
                                                             BaseWeights base, std::map<std::string, std::string>* skipped) {
  if (base.bits == 32) return std::map<std::string, layout::Encoding>();
  FBL_ASSIGN(const std::vector<ir::ValueId> trainable, autodiff::selectTrainables(forward, trainableGlobs));
  std::set<std::string> names;
  for (ir::ValueId v : trainable) names.insert(forward.values[v].name);
  return chooseEncodings(forward, names, base, skipped);
}

Result<std::vector<uint8_t>> encode(const std::string& name, std::span<const float> values, const layout::Encoding& e) {
  if (static_cast<int64_t>(values.size()) != e.rows * e.cols)
    return makeError("--base-weights {}: initializer '{}' has {} values, not {}x{}", e.str(), name, values.size(), e.rows, e.cols);
  // fp16's largest finite value, times the largest integer magnitude a scale multiplies.
  const float limit = 65504.0f * static_cast<float>(e.bits == 16 ? 1 : 1 << (e.bits - 1));
  for (float x : values)
    if (!std::isfinite(x) || std::fabs(x) > limit)
      return makeError("--base-weights {}: initializer '{}' holds {}, which {} cannot store", e.str(), name, x, e.str());
  std::vector<uint8_t> bytes(static_cast<size_t>(planfile::encodedBytes(e.bits, e.group, e.rows, e.cols)), 0);
  if (e.bits == 16) {
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t h = toHalf(values[i]);
      std::memcpy(&bytes[2 * i], &h, 2);
    }
    return bytes;
  }
  // The scales: per group, the element of largest magnitude over -2^(bits-1), in fp16.
  const int64_t lo = -(int64_t{1} << (e.bits - 1)), hi = -lo - 1;
  const int64_t groups = e.rows * e.cols / e.group;
  std::vector<float> extreme(static_cast<size_t>(groups), 0.0f);
  for (int64_t r = 0; r < e.rows; ++r)
    for (int64_t c = 0; c < e.cols; ++c) {
      const float x = values[r * e.cols + c];
      float& m = extreme[scaleIndex(e, r, c)];
      if (std::fabs(x) > std::fabs(m)) m = x;
    }
  std::vector<float> scale(static_cast<size_t>(groups));
  const int64_t scalesAt = planfile::encodedScalesOffset(e.bits, e.rows, e.cols);
  for (int64_t s = 0; s < groups; ++s) {
    uint16_t h = extreme[s] == 0.0f ? 0 : toHalf(extreme[s] / static_cast<float>(lo));
    // A nonzero group never gets a zero scale, whose values would all decode to 0.
    if ((h & 0x7fffu) == 0 && extreme[s] != 0.0f) h = 1;
    scale[s] = fromHalf(h);
    std::memcpy(&bytes[scalesAt + 2 * s], &h, 2);
  }
  for (int64_t r = 0; r < e.rows; ++r)
    for (int64_t c = 0; c < e.cols; ++c) {
      const int64_t i = r * e.cols + c;
      const float s = scale[scaleIndex(e, r, c)];
      const int64_t q = s == 0.0f ? 0 : std::clamp<int64_t>(std::llround(values[i] / s), lo, hi);
      if (e.bits == 8) {
        bytes[i] = static_cast<uint8_t>(static_cast<int8_t>(q));
      } else {
        bytes[i / 2] |= static_cast<uint8_t>(((q + 8) & 15) << (i % 2 ? 4 : 0));
      }
    }
  return bytes;
}

std::vector<float> decode(std::span<const uint8_t> bytes, const layout::Encoding& e) {
  std::vector<float> out(static_cast<size_t>(e.rows * e.cols));
  FBL_ASSERT(static_cast<int64_t>(bytes.size()) == planfile::encodedBytes(e.bits, e.group, e.rows, e.cols));
  const int64_t scalesAt = planfile::encodedScalesOffset(e.bits, e.rows, e.cols);
  for (int64_t r = 0; r < e.rows; ++r)
    for (int64_t c = 0; c < e.cols; ++c) {
      const int64_t i = r * e.cols + c;
      uint16_t h;
      if (e.bits == 16) {
        std::memcpy(&h, &bytes[2 * i], 2);
        out[i] = fromHalf(h);
        continue;
      }
      std::memcpy(&h, &bytes[scalesAt + 2 * scaleIndex(e, r, c)], 2);
      const int q = e.bits == 8 ? static_cast<int8_t>(bytes[i]) : ((bytes[i / 2] >> (i % 2 ? 4 : 0)) & 15) - 8;
      out[i] = fromHalf(h) * static_cast<float>(q);
    }
  return out;
}

Status applyToData(ir::Graph& g, const std::map<std::string, layout::Encoding>& encodings) {
  for (const auto& [name, e] : encodings) {
    const ir::ValueId v = g.findValue(name);
    if (v == ir::kNoValue || !g.values[v].data || g.values[v].data->dtype() != ir::DType::F32)
      return makeError("--base-weights: initializer '{}' has no f32 data", name);
    ir::Tensor t = *g.values[v].data;  // shared with other graphs: replaced, never changed
    const std::span<const float> values(t.data<float>(), static_cast<size_t>(t.numel()));
    FBL_ASSIGN(const std::vector<uint8_t> bytes, encode(name, values, e));
    const std::vector<float> decoded = decode(bytes, e);
    std::copy(decoded.begin(), decoded.end(), t.data<float>());
    g.values[v].data = std::make_shared<const ir::Tensor>(std::move(t));
  }
  return Status::success();
}

}  // namespace fbl::quant
