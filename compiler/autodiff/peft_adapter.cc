// peft's adapter_config.json and keys from the graph (the algorithm: peft_adapter.h).
#include "compiler/autodiff/peft_adapter.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

namespace fbl::autodiff {

namespace {

constexpr std::string_view kPeftRoot = "base_model.model.";
// Components peft adds inside a module it adapts; what precedes the first is the module.
const std::set<std::string, std::less<>> kPeftInternal = {
    "base_layer", "lora_A", "lora_B", "lora_embedding_A", "lora_embedding_B", "lora_magnitude_vector",
    "lora_dropout", "modules_to_save", "original_module", "ia3_l"};
// The parameter kinds this file knows, by the component that names them.
const std::set<std::string, std::less<>> kParamKinds = {"lora_A",           "lora_B",
                                                        "lora_embedding_A", "lora_embedding_B",
                                                        "lora_magnitude_vector", "modules_to_save", "ia3_l"};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t p; (p = s.find('.', start)) != std::string::npos; start = p + 1) out.push_back(s.substr(start, p - start));
  out.push_back(s.substr(start));
  return out;
}

std::string join(const std::vector<std::string>& c, size_t from = 0, size_t to = std::string::npos) {
  std::string out;
  for (size_t i = from; i < std::min(to, c.size()); ++i) out += (out.empty() ? "" : ".") + c[i];
  return out;
}

bool numeric(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<uint8_t>(c)); });
}

// The name from "base_model.model." on, or without the export wrapper's "m.".
std::string fromRoot(const std::string& name) {
  const size_t p = name.find(kPeftRoot);
  if (p != std::string::npos) return name.substr(p);
  return name.rfind("m.", 0) == 0 ? name.substr(2) : name;
}

// The module path peft's matching sees: after "base_model.model.", peft's own layers folded away.
// Empty for a name outside peft's model.
std::string modulePath(const std::string& name, bool isParameter) {
  const size_t p = name.find(kPeftRoot);
  if (p == std::string::npos) return "";
  std::vector<std::string> c = split(name.substr(p + kPeftRoot.size()));
  if (isParameter && !c.empty()) c.pop_back();
  size_t end = c.size();
  for (size_t i = 0; i < c.size(); ++i)
    if (kPeftInternal.count(c[i])) {
      end = i;
      break;
    }
  return join(c, 0, end);
}

struct PeftParam {
  std::string module;  // path after "base_model.model."
  std::string kind;    // a kParamKinds entry
};

std::optional<PeftParam> parsePeftParam(const std::string& name) {
  const size_t p = name.find(kPeftRoot);
  if (p == std::string::npos) return std::nullopt;
  const std::vector<std::string> c = split(name.substr(p + kPeftRoot.size()));
  for (size_t i = 0; i < c.size(); ++i)
    if (kParamKinds.count(c[i])) return PeftParam{join(c, 0, i), c[i]};
  return std::nullopt;
}

bool nameMatches(const std::string& module, const std::string& target) {  // peft's target_modules test
  return module == target ||
         (module.size() > target.size() && module.compare(module.size() - target.size(), target.size(), target) == 0 &&
          module[module.size() - target.size() - 1] == '.');
}

bool endsWith(const std::string& s, const std::string& suffix) {  // peft's modules_to_save test
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string groupOf(const std::string& path) {
  std::vector<std::string> c = split(path);
  for (size_t i = 0; i + 1 < c.size(); ++i)
    if (numeric(c[i])) c[i] = "*";
  return join(c);
}

// The dotted suffixes of `path`, shortest first, none starting with a layer index but the leaf.
std::vector<std::string> suffixes(const std::string& path) {
  const std::vector<std::string> c = split(path);
  std::vector<std::string> out;
  for (size_t k = 1; k <= c.size(); ++k) {
    if (k > 1 && numeric(c[c.size() - k])) break;
    out.push_back(join(c, c.size() - k));
  }
  return out;
}

// Names for `chosen` (module paths) that select, among `all`, none of the others (peft_adapter.h, 4
// and 5). `matches`: peft's test of a module against a name.
template <typename Match>
std::set<std::string> namesFor(const std::set<std::string>& chosen, const std::set<std::string>& all, Match matches) {
  auto selectsOnly = [&](const std::string& name, const std::set<std::string>& allowed) {
    return std::all_of(all.begin(), all.end(), [&](const std::string& m) { return !matches(m, name) || allowed.count(m); });
  };
  std::map<std::string, std::set<std::string>> groups;
  for (const std::string& m : chosen) groups[groupOf(m)].insert(m);
  std::set<std::string> out;
  for (const auto& [key, members] : groups) {
    const std::vector<std::string> cands = suffixes(*members.begin());
    std::optional<std::string> pick;
    if (selectsOnly(cands.front(), chosen)) pick = cands.front();
    for (size_t i = 0; !pick && i < cands.size(); ++i)
      if (selectsOnly(cands[i], members)) pick = cands[i];
    for (size_t i = 0; !pick && i < cands.size(); ++i)
      if (selectsOnly(cands[i], chosen)) pick = cands[i];
    if (pick) out.insert(*pick);
    else out.insert(members.begin(), members.end());
  }
  return out;
}

bool isMovement(const std::string& op) {
  static const std::set<std::string, std::less<>> ops = {"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten",
                                                         "Identity",  "Cast",    "Expand"};
  return ops.count(op) > 0;
}

std::optional<double> scalarConstant(const ir::Graph& g, ir::ValueId v) {
  const ir::Value& val = g.values[v];
  if (!val.data || val.data->numel() != 1 || !ir::isFloat(val.dtype)) return std::nullopt;
  if (val.kind != ir::ValueKind::Constant && val.kind != ir::ValueKind::Initializer) return std::nullopt;
  return val.data->at(0);
}

// The scaling of lora_B's product read from `v` on (peft_adapter.h, 2): every path's factor.
void scalingsAfter(const ir::Graph& g, const std::vector<std::vector<ir::NodeId>>& readers, ir::ValueId v,
                   double factor, int depth, std::vector<double>& out) {
  if (depth > 16) return;
  for (ir::NodeId id : readers[v]) {
    const ir::Node& n = g.nodes[id];
    if (n.outputs.empty()) continue;
    if (n.op == "Mul" && n.inputs.size() == 2) {
      const ir::ValueId other = n.inputs[0] == v ? n.inputs[1] : n.inputs[0];
      if (auto s = scalarConstant(g, other)) out.push_back(factor * *s);
      else scalingsAfter(g, readers, n.outputs[0], factor, depth + 1, out);
    } else if (n.op == "Add" || n.op == "Sub") {
      out.push_back(factor);
    } else if (isMovement(n.op)) {
      scalingsAfter(g, readers, n.outputs[0], factor, depth + 1, out);
    }
  }
}

// From lora_B's weight over movement ops to its products (MatMul, Gemm, Conv), then on.
void productsOf(const ir::Graph& g, const std::vector<std::vector<ir::NodeId>>& readers, ir::ValueId v, int depth,
                std::vector<double>& out) {
  if (depth > 8) return;
  for (ir::NodeId id : readers[v]) {
    const ir::Node& n = g.nodes[id];
    if (n.outputs.empty()) continue;
    if (n.op == "MatMul" || n.op == "Conv") scalingsAfter(g, readers, n.outputs[0], 1.0, 0, out);
    else if (n.op == "Gemm") scalingsAfter(g, readers, n.outputs[0], n.attrFloat("alpha", 1.0f), 0, out);
    else if (isMovement(n.op)) productsOf(g, readers, n.outputs[0], depth + 1, out);
  }
}

bool close(double a, double b) { return std::abs(a - b) <= 1e-4 * std::max({1.0, std::abs(a), std::abs(b)}); }
bool whole(double x) { return close(x, std::round(x)); }
nlohmann::json number(double x) {  // peft writes a whole alpha as an int
  if (whole(x)) return static_cast<int64_t>(std::llround(x));
  return x;
}

struct LoraModule {
  std::string path;
  std::string loraB;  // the initializer whose product is scaled
  int64_t r = 0;
  double scaling = 0;
  bool embedding = false;
};

template <typename T>
T mostCommon(const std::vector<T>& xs) {
  std::map<T, int> n;
  for (const T& x : xs) ++n[x];
  return std::max_element(n.begin(), n.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->first;
}

// The module paths peft's matching sees: every initializer's module and `extra`, with each
// module's ancestors (peft matches containers too, "stages.1").
std::set<std::string> existingModules(const ir::Graph& g, const std::vector<std::string>& extra) {
  std::set<std::string> all;
  auto addModule = [&](const std::string& path) {
    const std::vector<std::string> c = split(path);
    for (size_t k = 1; k <= c.size(); ++k) all.insert(join(c, 0, k));
  };
  for (const ir::Value& v : g.values)
    if (v.kind == ir::ValueKind::Initializer)
      if (std::string m = modulePath(v.name, true); !m.empty()) addModule(m);
  for (const std::string& path : extra) addModule(path);
  return all;
}

std::set<std::string> headNames(const std::set<std::string>& saved, const std::set<std::string>& all) {
  std::set<std::string> heads = namesFor(saved, all, endsWith);
  if (heads.count("classifier") || heads.count("score")) heads.insert({"classifier", "score"});
  return heads;
}

nlohmann::json namesOrNull(const std::set<std::string>& names) {
  return names.empty() ? nlohmann::json(nullptr) : nlohmann::json(std::vector<std::string>(names.begin(), names.end()));
}

// The fields every peft config starts with; the graph knows no task type or base model name.
nlohmann::json configHead(const char* peftType) {
  nlohmann::json c;
  c["peft_type"] = peftType;
  c["task_type"] = nullptr;
  c["base_model_name_or_path"] = nullptr;
  c["revision"] = nullptr;
  c["inference_mode"] = true;
  return c;
}

// IA3: one `ia3_l` vector per module, [out, 1] scaling its output, or [1, in] scaling its input
// (the feedforward modules; Conv: [out, 1, 1, 1] or [1, in, 1, 1]).
nlohmann::json ia3Config(const ir::Graph& g, const std::map<std::string, bool>& ia3, const std::set<std::string>& saved) {
  std::vector<std::string> paths(saved.begin(), saved.end());
  std::set<std::string> targeted, feedforward;
  for (const auto& [path, ff] : ia3) {
    paths.push_back(path);
    targeted.insert(path);
    if (ff) feedforward.insert(path);
  }
  const std::set<std::string> all = existingModules(g, paths);
  nlohmann::json c = configHead("IA3");
  c["target_modules"] = namesOrNull(namesFor(targeted, all, nameMatches));
  c["feedforward_modules"] = namesOrNull(feedforward.empty() ? feedforward : namesFor(feedforward, all, nameMatches));
  c["modules_to_save"] = namesOrNull(headNames(saved, all));
  c["fan_in_fan_out"] = false;
  c["init_ia3_weights"] = true;
  return c;
}

}  // namespace

std::string peftAdapterKey(const std::string& name) {
  std::vector<std::string> c = split(fromRoot(name));
  for (size_t i = 0; i + 1 < c.size(); ++i) {
    if (!kParamKinds.count(c[i])) continue;
    if (c[i] == "modules_to_save") {
      c.erase(c.begin() + static_cast<std::ptrdiff_t>(i), c.begin() + static_cast<std::ptrdiff_t>(i + 2));
    } else {
      if (c[i] == "lora_magnitude_vector" && c.size() == i + 3 && c.back() == "weight") c.pop_back();
      c.erase(c.begin() + static_cast<std::ptrdiff_t>(i + 1));
    }
    break;
  }
  return join(c);
}

namespace {

// Step 1's sort of the trainables by method and module.
struct PeftParams {
  std::map<std::string, LoraModule> lora;
  std::map<std::string, bool> ia3;  // module -> scales its input (a feedforward module)
  std::set<std::string> saved;      // modules_to_save
  bool dora = false;
};

Result<PeftParams> collectPeftParams(const ir::Graph& g, const std::vector<std::string>& trainables,
                                     const std::string& file) {
  PeftParams out;
  std::map<std::string, LoraModule>& lora = out.lora;
  for (const std::string& name : trainables) {
    auto p = parsePeftParam(name);
    if (!p) continue;
    if (p->kind == "modules_to_save") {
      out.saved.insert(p->module);
      continue;
    }
    if (p->kind == "ia3_l") {
      const ir::ValueId v = g.findValue(name);
      if (v == ir::kNoValue) return makeError("{}: trainable '{}' is not in the graph", file, name);
      const ir::Shape& s = g.values[v].shape;
      out.ia3[p->module] = s.size() >= 2 && s[0] == 1 && s[1] > 1;
      continue;
    }
    out.dora |= p->kind == "lora_magnitude_vector";
    LoraModule& m = lora[p->module];
    m.path = p->module;
    const ir::ValueId v = g.findValue(name);
    if (v == ir::kNoValue) return makeError("{}: trainable '{}' is not in the graph", file, name);
    if (p->kind == "lora_A" || p->kind == "lora_embedding_A") {
      if (g.values[v].shape.empty()) return makeError("{}: LoRA parameter '{}' has no shape", file, name);
      m.r = g.values[v].shape[0];
      m.embedding = p->kind == "lora_embedding_A";
    } else if (p->kind == "lora_B" || p->kind == "lora_embedding_B") {
      m.loraB = name;
    }
  }
  return out;
}

// LoRA on a module's parameters (peft's target_parameters, as on MoE experts): peft wraps the
// module once per parameter, nesting them (`experts.base_layer.lora_A`), and keys each wrapper's
// rank by the experts. Training is the graph's; the adapter's layout is not written yet.
std::string parameterLoraRefusal(const ir::Graph& g, const std::map<std::string, LoraModule>& lora) {
  for (const auto& [path, m] : lora) {
    const std::vector<std::string> c = split(path);
    bool wrapsParameters = std::find(c.begin(), c.end(), "base_layer") != c.end();
    const std::string base = kPeftRoot.data() + path + ".base_layer.";
    for (const ir::Value& v : g.values) {
      const size_t at = v.name.find(base);
      if (v.kind != ir::ValueKind::Initializer || at == std::string::npos) continue;
      const std::string rest = v.name.substr(at + base.size());
      wrapsParameters |= rest != "weight" && rest != "bias";
    }
    if (wrapsParameters) {
      return fmt::format("'{}' has LoRA on its parameters (peft's target_parameters), which fbl trains but does "
                                "not yet export as peft's adapter; save a checkpoint instead",
                                modulePath(kPeftRoot.data() + path + ".x", true));
    }
  }
  return {};
}

// Step 2: each module's scaling, from the product lora_B feeds; its rank by module.
Result<std::vector<int64_t>> findScalings(const ir::Graph& g, std::map<std::string, LoraModule>& lora,
                                          const std::string& file) {
  const auto readers = g.consumers();
  std::vector<int64_t> ranks;
  for (auto& [path, m] : lora) {
    if (m.r == 0 || m.loraB.empty())
      return makeError("{}: LoRA module '{}' trains {} but not {}: peft saves both", file, path,
                       m.r ? "lora_A" : "lora_B", m.r ? "lora_B" : "lora_A");
    std::vector<double> found;
    productsOf(g, readers, g.findValue(m.loraB), 0, found);
    if (found.empty())
      return makeError("{}: no scaling found for LoRA module '{}': lora_B's product reaches neither a Mul by a "
                       "scalar constant nor the sum with the base output", file, path);
    for (double s : found)
      if (!close(s, found.front()))
        return makeError("{}: LoRA module '{}' scales lora_B's product by both {} and {}", file, path, found.front(), s);
    m.scaling = found.front();
    ranks.push_back(m.r);
  }

  return ranks;
}

// Step 3: alpha and use_rslora.
struct AlphaReading {
  bool rslora = false;
  std::string note;            // how alpha was settled, where the graph alone does not
  std::vector<double> alphas;  // by module, in `lora` order
};

Result<AlphaReading> readAlpha(const std::map<std::string, LoraModule>& lora, const std::vector<int64_t>& ranks,
                               const PeftAdapterOptions& opts, const std::string& file) {
  AlphaReading out;
  bool& rslora = out.rslora;
  std::string& note = out.note;
  bool plainWhole = true, rsWhole = true;
  for (const auto& [path, m] : lora) {
    plainWhole &= whole(m.scaling * static_cast<double>(m.r));
    rsWhole &= whole(m.scaling * std::sqrt(static_cast<double>(m.r)));
  }
  if (opts.loraAlpha && !lora.empty()) {
    const LoraModule* ref = nullptr;
    const int64_t r0 = mostCommon(ranks);
    for (const auto& [path, m] : lora)
      if (m.r == r0 && !ref) ref = &m;
    const double a = *opts.loraAlpha;
    const bool plain = close(a / static_cast<double>(r0), ref->scaling);
    const bool rs = close(a / std::sqrt(static_cast<double>(r0)), ref->scaling);
    if (!plain && !rs)
      return makeError("{}: --lora-alpha {} does not give the graph's LoRA scaling {} of '{}' at r={}: alpha/r = {}, "
                       "alpha/sqrt(r) = {}", file, a, ref->scaling, ref->path, r0, a / static_cast<double>(r0),
                       a / std::sqrt(static_cast<double>(r0)));
    rslora = rs && !plain;
    if (plainWhole == rsWhole) note = fmt::format("lora_alpha and use_rslora from fblc compile --lora-alpha {}", a);
  } else if (plainWhole != rsWhole) {
    rslora = rsWhole;
  } else if (!lora.empty()) {
    note = fmt::format("assumed lora_alpha = scaling * r (no rsLoRA): the graph's scaling fits both readings; "
                       "fblc compile --lora-alpha settles it");
  }
  for (const auto& [path, m] : lora)
    out.alphas.push_back(m.scaling * (rslora ? std::sqrt(static_cast<double>(m.r)) : static_cast<double>(m.r)));

  return out;
}

// Steps 4 and 5: LoRA's adapter_config.json.
nlohmann::json loraConfig(const ir::Graph& g, const PeftParams& params, const std::vector<int64_t>& ranks,
                          const AlphaReading& alpha, const std::set<std::string>& targets,
                          const std::set<std::string>& heads) {
  const std::map<std::string, LoraModule>& lora = params.lora;
  const std::vector<double>& alphas = alpha.alphas;
  nlohmann::json c = configHead("LORA");
  c["r"] = lora.empty() ? 8 : mostCommon(ranks);
  c["lora_alpha"] = lora.empty() ? nlohmann::json(8) : number(mostCommon(alphas));
  c["use_rslora"] = alpha.rslora;
  c["use_dora"] = params.dora;
  c["target_modules"] = std::vector<std::string>(targets.begin(), targets.end());
  c["modules_to_save"] = namesOrNull(heads);
  c["rank_pattern"] = nlohmann::json::object();
  c["alpha_pattern"] = nlohmann::json::object();
  size_t i = 0;
  for (const auto& [path, m] : lora) {
    if (m.r != c["r"].get<int64_t>()) c["rank_pattern"][path] = m.r;
    if (!close(alphas[i], c["lora_alpha"].get<double>())) c["alpha_pattern"][path] = number(alphas[i]);
    ++i;
  }
  c["lora_dropout"] = 0.0;
  c["bias"] = "none";
  // Conv1D (GPT-2) keeps its weight [in, out]: peft's fan_in_fan_out.
  bool fanInFanOut = false;
  for (const ir::Value& v : g.values) {
    if (v.kind != ir::ValueKind::Initializer || v.shape.size() != 2) continue;
    const std::string suffix = ".base_layer.weight";
    if (!endsWith(v.name, suffix)) continue;
    auto it = lora.find(modulePath(v.name, true));
    if (it == lora.end() || it->second.embedding) continue;
    const ir::ValueId b = g.findValue(it->second.loraB);
    const int64_t out = g.values[b].shape.empty() ? -1 : g.values[b].shape[0];
    fanInFanOut |= v.shape[1] == out && v.shape[0] != out;
  }
  c["fan_in_fan_out"] = fanInFanOut;
  if (!alpha.note.empty()) c["fbl_lora_alpha"] = alpha.note;
  return c;

}

// Step 6: an adapted embedding's frozen weights, which peft saves with the adapter.
Status addFrozenEmbeddings(const ir::Graph& g, const std::map<std::string, LoraModule>& lora,
                           const std::set<std::string>& targets, const std::string& file, PeftAdapter& out) {
  if (targets.count("embed_tokens") || targets.count("lm_head"))
    for (const auto& [path, m] : lora) {
      const std::string leaf = split(path).back();
      if (leaf != "embed_tokens" && leaf != "lm_head") continue;
      const std::string base = path + ".base_layer.";
      bool any = false;
      for (const ir::Value& v : g.values) {
        if (v.kind != ir::ValueKind::Initializer) continue;
        const size_t p = v.name.find(kPeftRoot);
        if (p == std::string::npos || v.name.compare(p + kPeftRoot.size(), base.size(), base) != 0) continue;
        out.frozen.emplace_back(v.name, peftAdapterKey(v.name));
        any = true;
      }
      if (!any)
        return makeError("{}: peft saves the frozen weight of the adapted embedding '{}' with the adapter, and the graph "
                         "holds no initializer named '...{}weight'", file, path, base);
    }
  return {};
}

}  // namespace

Result<PeftAdapter> peftAdapter(const ir::Graph& g, const std::vector<std::string>& trainables,
                                const PeftAdapterOptions& opts) {
  const std::string file = g.sourcePath.empty() ? g.name : g.sourcePath;
  FBL_ASSIGN(PeftParams params, collectPeftParams(g, trainables, file));
  const std::map<std::string, LoraModule>& lora = params.lora;
  PeftAdapter out;
  out.refusal = parameterLoraRefusal(g, lora);
  if (!out.refusal.empty()) return out;
  if (!params.ia3.empty() && !lora.empty())
    return makeError("{}: the trainables hold both LoRA and IA3 parameters; a peft adapter is of one method", file);
  if (!params.ia3.empty()) {
    out.config = ia3Config(g, params.ia3, params.saved);
    return out;
  }
  if (lora.empty() && params.saved.empty()) return out;
  FBL_ASSIGN(std::vector<int64_t> ranks, findScalings(g, params.lora, file));
  FBL_ASSIGN(AlphaReading alpha, readAlpha(lora, ranks, opts, file));

  // 4, 5: the names peft matches, among the modules that exist.
  // peft matches every named module, containers too ("stages.1"): each module's ancestors count.
  std::set<std::string> targeted;
  std::vector<std::string> paths(params.saved.begin(), params.saved.end());
  for (const auto& [path, m] : lora) {
    targeted.insert(path);
    paths.push_back(path);
  }
  const std::set<std::string> all = existingModules(g, paths);
  const std::set<std::string> targets = lora.empty() ? std::set<std::string>{} : namesFor(targeted, all, nameMatches);
  const std::set<std::string> heads = headNames(params.saved, all);
  out.config = loraConfig(g, params, ranks, alpha, targets, heads);
  FBL_TRY(addFrozenEmbeddings(g, lora, targets, file, out));
  return out;
}

}  // namespace fbl::autodiff
