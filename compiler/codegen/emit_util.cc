#include "compiler/codegen/emit_util.h"

#include <cctype>

#include <fmt/format.h>

#include "compiler/codegen/index_code.h"
#include "compiler/codegen/templates.h"

namespace fbl::codegen {

EmitFn findSpecialEmitter(std::string_view op) {
  static const std::vector<EmitterEntry> table = [] {
    std::vector<EmitterEntry> all = movementEmitters();
    for (auto& e : computeEmitters()) all.push_back(e);
    for (auto& e : trainingEmitters()) all.push_back(e);
    for (auto& e : indexEmitters()) all.push_back(e);
    return all;
  }();
  for (const auto& [name, fn] : table)
    if (name == op) return fn;
  return nullptr;
}

const ir::Tensor* constData(const ir::Graph& g, ir::ValueId v) {
  if (v == ir::kNoValue) return nullptr;
  const ir::Value& val = g.values[v];
  // Folded exports keep shape-like operands (axes, starts, pads) as initializers: their
  // contents are read at compile time too. Weights are never read this way (they stay named).
  const bool known = val.kind == ir::ValueKind::Constant ||
                     (val.kind == ir::ValueKind::Initializer && !ir::isFloat(val.dtype));
  return known && val.data ? val.data.get() : nullptr;
}

std::optional<double> constScalar(const ir::Graph& g, ir::ValueId v) {
  const ir::Tensor* t = constData(g, v);
  if (!t || t->numel() != 1) return std::nullopt;
  return t->at(0);
}

std::optional<std::string> scalarLiteral(const ir::Value& v) {
  if (v.kind != ir::ValueKind::Constant || !v.data || v.data->numel() != 1) return std::nullopt;
  const double x = v.data->at(0);
  switch (v.dtype) {
    case ir::DType::F32:
    case ir::DType::F64: return floatLiteral(x);
    case ir::DType::I64: return fmt::format("{}L", static_cast<int64_t>(x));
    case ir::DType::I32: return fmt::format("{}", static_cast<int64_t>(x));
    case ir::DType::Bool:
    case ir::DType::U8:
    case ir::DType::I8: return fmt::format("{}", static_cast<int64_t>(x));
    default: return std::nullopt;
  }
}

std::optional<std::vector<int64_t>> constInts(const ir::Graph& g, ir::ValueId v) {
  const ir::Tensor* t = constData(g, v);
  if (!t) return std::nullopt;
  return t->toInt64s();
}

std::vector<int64_t> grid1(int64_t count, const Target& t) { return gridItems(count, 1, t); }

std::vector<int64_t> gridItems(int64_t count, int64_t per, const Target& t) {
  const int64_t w = t.workgroup, items = (count + per - 1) / per;
  return {std::max<int64_t>(1, (items + w - 1) / w) * w};
}

LaunchSpec elementwiseLaunch(const ElementwiseKernel& k, std::string_view tag, std::vector<ArgRef> args,
                             const Target& t) {
  const int64_t items = t.tuning.elementwiseItems;
  const std::string n = std::to_string(k.count);
  if (items <= 1)
    return launch("elementwise",
                  {{"PARAMS", k.params}, {"N", n}, {"INDEX", k.index}, {"BODY", k.body},
                   {"STORE", storeElement(k.stored, "out", k.outAt, k.value)}},
                  tag, std::move(args), grid1(k.count, t), {t.workgroup});
  // Unrolled here rather than looped in the template: every element's offsets and values are
  // named by the generated code, and each block keeps its names to itself.
  std::string elements, stores;
  for (int64_t e = 0; e < items; ++e) {
    elements += fmt::format("  {{\n    const uint i = g + {}u * S;\n    if (i < {}u) {{\n{}\n{}    v[{}] = {};\n"
                            "    at[{}] = {};\n    }}\n  }}\n",
                            e, n, k.index, k.body, e, k.value, e, k.outAt);
    stores += fmt::format("  if (g + {}u * S < {}u) {};\n", e, n,
                          storeElement(k.stored, "out", fmt::format("at[{}]", e), fmt::format("v[{}]", e)));
  }
  elements.pop_back();
  stores.pop_back();
  return launch("elementwise_items",
                {{"PARAMS", k.params}, {"ITEMS", std::to_string(items)}, {"OUT_T", k.outT}, {"ELEMENTS", elements},
                 {"STORES", stores}},
                tag, std::move(args), gridItems(k.count, items, t), {t.workgroup});
}

std::string_view bufferClType(ir::DType t) {
  return t == ir::DType::F16 ? "half" : t == ir::DType::BF16 ? "ushort" : clType(t);
}

std::string loadElement(ir::DType t, std::string_view ptr, std::string_view at) {
  if (t == ir::DType::F16) return fmt::format("vload_half({}, {})", at, ptr);
  if (t == ir::DType::BF16) return fmt::format("as_float((uint){}[{}] << 16)", ptr, at);
  return fmt::format("{}[{}]", ptr, at);
}

std::string storeElement(ir::DType t, std::string_view ptr, std::string_view at, std::string_view value) {
  if (t == ir::DType::F16) return fmt::format("vstore_half_rte({}, {}, {})", value, at, ptr);
  // support/float16.h's toBfloat16: NaN stays a quiet NaN, anything else rounds to nearest even.
  if (t == ir::DType::BF16)
    return fmt::format("{{ const uint u_ = as_uint({}); {}[{}] = (ushort)((u_ & 0x7fffffffu) > 0x7f800000u ? "
                       "(u_ >> 16) | 0x40u : (u_ + 0x7fffu + ((u_ >> 16) & 1u)) >> 16); }}",
                       value, ptr, at);
  return fmt::format("{}[{}] = {}", ptr, at, value);
}

std::string lowerTag(std::string_view op) {
  if (op.substr(0, 4) == "fbl.") op.remove_prefix(4);
  std::string s;
  for (char c : op) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Result<SceLossShape> sceLossShape(const ir::Graph& g, const ir::Node& n, ir::ValueId scores, ir::ValueId labels,
                                  const Target& t) {
  const ir::Shape& s = g.values[scores].shape;
  if (s.size() < 2) return makeError("{}: scores must be [N, C, ...]", ir::describeNode(g, n));
  const std::string reduction = n.attrString("reduction", "mean");
  if (reduction == "none") return makeError("{}: reduction 'none' is not supported", ir::describeNode(g, n));
  int64_t inner = 1;
  for (size_t d = 2; d < s.size(); ++d) inner *= s[d];
  SceLossShape sh;
  sh.rows = s[0] * inner;
  // The profile's lanes per row (GPUs: 256 whatever the 1-D work-group: rows are few, a
  // vocabulary row long, and bandwidth needs many lanes in flight).
  const int64_t cap = t.tuning.lossWorkgroup;
  while (sh.wg * 2 <= cap) sh.wg *= 2;
  // Without ignore_index every label counts; INT64_MIN never equals a real label.
  const std::string ignore = n.hasAttr("ignore_index") ? std::to_string(n.attrInt("ignore_index", 0)) + "L"
                                                       : "(-9223372036854775807L - 1)";
  sh.vars = {{"WG", std::to_string(sh.wg)},           {"C", std::to_string(s[1])},
             {"INNER", std::to_string(inner)},         {"ROWS", std::to_string(sh.rows)},
             {"IGNORE", ignore},                       {"MEAN", reduction == "mean" ? "1" : "0"},
             {"TL", std::string(clType(g.values[labels].dtype))}};
  // The loss without log_prob: the gradient instantiates the same source (so a plan holding
  // both builds one program text for the two), the loss overrides these when it writes logp.
  sh.vars["PARAMS"] = fmt::format("__global const float* x, __global const {}* labels, __global float* row_loss, "
                                  "__global float* row_w", sh.vars.at("TL"));
  sh.vars["LOGPROB"] = "";
  return sh;
}

int64_t normAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

LaunchSpec launch(std::string_view tmpl, const std::map<std::string, std::string>& vars,
                  std::string_view tag, std::vector<ArgRef> args, std::vector<int64_t> global,
                  std::vector<int64_t> local, std::string_view entry) {
  return {instantiate(kernelTemplate(tmpl), vars), std::string(entry), std::string(tag),
          std::move(args), std::move(global), std::move(local)};
}

std::string instantiate(std::string_view tmpl, const std::map<std::string, std::string>& vars) {
  FBL_ASSERT(!tmpl.empty());
  // The template's opening comment is for its readers, not for the generated program.
  size_t pos = 0;
  while (tmpl.substr(pos, 2) == "//") {
    const size_t nl = tmpl.find('\n', pos);
    pos = nl == std::string_view::npos ? tmpl.size() : nl + 1;
  }
  std::string out;
  while (true) {
    const size_t open = tmpl.find("{{", pos);
    if (open == std::string_view::npos) break;
    const size_t close = tmpl.find("}}", open);
    FBL_ASSERT(close != std::string_view::npos);
    out.append(tmpl.substr(pos, open - pos));
    const std::string key(tmpl.substr(open + 2, close - open - 2));
    auto it = vars.find(key);
    if (key == "NAME") {
      out += "{{NAME}}";  // filled once the plan names its kernels
    } else {
      if (it == vars.end()) {
        std::fprintf(stderr, "fbl internal error: template hole {{%s}} has no value\n", key.c_str());
        std::abort();
      }
      out += it->second;
    }
    pos = close + 2;
  }
  out.append(tmpl.substr(pos));
  return out;
}

}  // namespace fbl::codegen
