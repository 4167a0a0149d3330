// Recovering PyTorch parameter names from the dynamo exporter's node metadata (export_names.h).
#include "compiler/onnx/export_names.h"

#include <google/protobuf/unknown_field_set.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>
#include <set>
#include <unordered_map>

namespace fbl::onnx {

std::string mangle(std::string_view path) {
  std::string out(path);
  for (char& c : out) c = c == '.' ? '_' : static_cast<char>(std::tolower(static_cast<uint8_t>(c)));
  return out;
}

namespace {

constexpr int kMetadataPropsField = 9;  // NodeProto.metadata_props (ONNX 1.17+)
constexpr int kValueInfoMetadataField = 4;  // ValueInfoProto.metadata_props
constexpr std::string_view kFoldedFrom = "pkg.onnxscript.optimizer.folded_from";
constexpr std::string_view kFxNode = "pkg.torch.onnx.fx_node";
constexpr std::string_view kNameScopes = "pkg.torch.onnx.name_scopes";

// "['', 'm', 'm.base_model.model']" -> its quoted strings.
std::vector<std::string> parseScopes(const std::string& text) {
  std::vector<std::string> out;
  size_t i = 0;
  while ((i = text.find('\'', i)) != std::string::npos) {
    size_t end = text.find('\'', i + 1);
    if (end == std::string::npos) break;
    out.push_back(text.substr(i + 1, end - i - 1));
    i = end + 1;
  }
  return out;
}

void keep(NodeOrigin& o, const std::string& key, const std::string& value) {
  if (key == kFxNode) o.fxNode = value;
  else if (key == kNameScopes) o.scopes = parseScopes(value);
}

struct FxCall {
  std::string target;                  // "torch.ops.aten.linear.default"
  std::vector<std::string> paramArgs;  // the `%p_...` arguments, without `%p_`
};

FxCall parseFxCall(const std::string& fx) {
  FxCall call;
  size_t t = fx.find("target=");
  if (t != std::string::npos) {
    size_t end = fx.find(']', t);
    call.target = fx.substr(t + 7, end == std::string::npos ? std::string::npos : end - t - 7);
  }
  size_t a = fx.find("args = (");
  for (size_t i = a == std::string::npos ? fx.size() : a; (i = fx.find("%p_", i)) != std::string::npos;) {
    size_t end = i + 3;
    while (end < fx.size() && (std::isalnum(static_cast<uint8_t>(fx[end])) || fx[end] == '_')) ++end;
    call.paramArgs.push_back(fx.substr(i + 3, end - i - 3));
    i = end;
  }
  return call;
}

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The 2-D transpose of `t`, byte for byte.
ir::Tensor transposed(const ir::Tensor& t) {
  const int64_t rows = t.shape()[0], cols = t.shape()[1];
  ir::Tensor out(t.dtype(), {cols, rows});
  const size_t es = ir::dtypeSize(t.dtype());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      std::memcpy(out.raw() + (j * rows + i) * es, t.raw() + (i * cols + j) * es, es);
  return out;
}

bool sameBytes(const ir::Tensor& a, const ir::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

struct Recovery {
  std::string name;
  bool transposed = false;
};

// "permute_3" -> "permute": the fx node a folded initializer is named after.
std::string fxOpOf(const std::string& name) {
  size_t end = name.size();
  while (end > 0 && std::isdigit(static_cast<uint8_t>(name[end - 1]))) --end;
  if (end < name.size() && end > 0 && name[end - 1] == '_') return name.substr(0, end - 1);
  return name;
}

class NameRecovery {
 public:
  NameRecovery(ir::Graph& g, const std::vector<NodeOrigin>& origins, const FoldedFrom& foldedFrom)
      : g_(g), origins_(origins), foldedFrom_(foldedFrom) {
    for (const NodeOrigin& o : origins_)
      for (const std::string& s : o.scopes)
        if (!s.empty()) paths_.emplace(mangle(s), s);
  }

  Result<int> run() {
    auto readers = g_.consumers();
    std::vector<ir::Node> transposes;
    int renamed = 0;
    for (ir::ValueId v = 0; v < static_cast<ir::ValueId>(g_.values.size()); ++v) {
      if (g_.values[v].kind != ir::ValueKind::Initializer || !looksExporterRenamed(g_.values[v].name))
        continue;
      std::string loraArg;
      auto r = recover(v, readers[v], loraArg);
      if (r && apply(v, *r, transposes)) {
        ++renamed;
      } else if (!loraArg.empty()) {
        // A LoRA weight left under its val_N name would silently not train under '*lora_*'.
        return makeError("{}: initializer '{}' is the exporter's copy of the LoRA parameter '{}', whose name "
                         "and orientation the node metadata does not settle (its readers disagree or it is "
                         "stored elsewhere); re-export with torch.onnx.export(..., optimize=False)",
                         g_.sourcePath, g_.values[v].name, loraArg);
      }
    }
    renamed += recoverSingleSourceFolds(transposes);
    recoverDroppedBiases();
    if (!transposes.empty()) {
      // The new Transposes read only initializers: first in topological order.
      std::vector<ir::Node> nodes = std::move(transposes);
      for (auto& n : g_.nodes) nodes.push_back(std::move(n));
      g_.nodes = std::move(nodes);
      g_.compact();
    }
    noteFoldedParameters();
    return renamed;
  }

 private:
  // `loraArg`: a LoRA parameter some reader's fx call names, whether or not recovery succeeds.
  std::optional<Recovery> recover(ir::ValueId v, const std::vector<ir::NodeId>& readers, std::string& loraArg) {
    const ir::Value& val = g_.values[v];
    std::optional<Recovery> found;
    for (ir::NodeId r : readers) {
      if (r >= static_cast<ir::NodeId>(origins_.size()) || origins_[r].fxNode.empty()) return std::nullopt;
      FxCall call = parseFxCall(origins_[r].fxNode);
      std::vector<std::string> fit;
      for (const std::string& a : call.paramArgs)
        if (endsWith(a, "_bias") == (val.shape.size() == 1)) fit.push_back(a);
      for (const std::string& a : fit)
        if (a.find("_lora_") != std::string::npos) loraArg = "p_" + a;
      if (fit.size() != 1) return std::nullopt;
      auto name = nameOf(fit[0]);
      if (!name) return std::nullopt;
      const ir::Node& n = g_.nodes[r];
      bool linear = call.target.find("aten.linear") != std::string::npos;
      bool asB = n.inputs.size() > 1 && n.inputs[1] == v;
      bool t = linear && asB && val.shape.size() == 2 &&
               (n.op == "MatMul" || (n.op == "Gemm" && n.attrInt("transB", 0) == 0));
      if (found && (found->name != *name || found->transposed != t)) return std::nullopt;
      found = Recovery{*name, t};
    }
    return found;
  }

  // "m_base_model_..._lora_a_default_weight" -> "m.base_model....lora_A.default.weight".
  std::optional<std::string> nameOf(const std::string& arg) const {
    for (size_t cut = arg.size(); cut > 0; --cut) {
      if (arg[cut - 1] != '_' || cut == arg.size()) continue;
      auto it = paths_.find(arg.substr(0, cut - 1));
      if (it != paths_.end()) return it->second + "." + arg.substr(cut);
    }
    return std::nullopt;
  }

  bool apply(ir::ValueId v, const Recovery& r, std::vector<ir::Node>& transposes) {
    ir::Value& val = g_.values[v];
    if (r.transposed && !val.data) return false;  // external data not read (fuzz imports)
    std::shared_ptr<const ir::Tensor> data =
        r.transposed ? std::make_shared<const ir::Tensor>(transposed(*val.data)) : val.data;
    ir::ValueId existing = g_.findValue(r.name);
    if (existing != ir::kNoValue) {
      // Two folded copies of one parameter (or a copy beside the original): share it.
      const ir::Value& e = g_.values[existing];
      if (e.kind != ir::ValueKind::Initializer || !e.data || !data || !sameBytes(*e.data, *data))
        return false;
    }
    // The weight under its name (a new value: Graph indexes names as values are added).
    ir::ValueId weight = existing;
    if (weight == ir::kNoValue) {
      ir::Value w;
      w.name = r.name;
      w.kind = ir::ValueKind::Initializer;
      w.dtype = val.dtype;
      w.shape = r.transposed ? ir::Shape{val.shape[1], val.shape[0]} : val.shape;
      w.shapeKnown = true;
      w.data = std::move(data);
      if (!r.transposed) w.external = val.external;
      weight = g_.addValue(std::move(w));
    }
    // The old value keeps its id and name: now the Transpose's output, read as before.
    ir::Value& folded = g_.values[v];
    folded.kind = ir::ValueKind::Intermediate;
    folded.data.reset();
    folded.external.reset();
    ir::Node t;
    t.op = r.transposed ? "Transpose" : "Identity";  // drop-noops removes the Identity at load
    t.name = g_.uniqueName("fbl_unfold_" + folded.name);
    t.inputs = {weight};
    t.outputs = {v};
    if (r.transposed) t.attrs.emplace("perm", std::vector<int64_t>{1, 0});
    transposes.push_back(std::move(t));
    return true;
  }

  bool isInitializer(const std::string& name) const {
    const ir::ValueId v = g_.findValue(name);
    return v != ir::kNoValue && g_.values[v].kind == ir::ValueKind::Initializer;
  }

  // export_names.h, 5.
  int recoverSingleSourceFolds(std::vector<ir::Node>& transposes) {
    int renamed = 0;
    for (ir::ValueId v = 0; v < static_cast<ir::ValueId>(g_.values.size()); ++v) {
      const ir::Value& val = g_.values[v];
      auto it = foldedFrom_.find(val.name);
      if (val.kind != ir::ValueKind::Initializer || it == foldedFrom_.end() || it->second.size() != 1) continue;
      const std::string& source = it->second[0];
      if (source.find('.') == std::string::npos || g_.findValue(source) != ir::kNoValue) continue;
      const std::string op = fxOpOf(val.name);
      const bool transpose = (op == "permute" || op == "t" || op == "transpose" || op == "numpy_T") && val.shape.size() == 2;
      const bool copy = op == "clone" || op == "alias" || op == "detach" || op == "contiguous";
      if ((transpose || copy) && apply(v, Recovery{source, transpose}, transposes)) ++renamed;
    }
    return renamed;
  }

  // export_names.h, 6.
  void recoverDroppedBiases() {
    for (ir::NodeId r = 0; r < static_cast<ir::NodeId>(g_.nodes.size()) && r < static_cast<ir::NodeId>(origins_.size()); ++r) {
      ir::Node& n = g_.nodes[r];
      if (n.op != "Gemm" || n.inputs.size() != 2 || origins_[r].fxNode.empty()) continue;
      FxCall call = parseFxCall(origins_[r].fxNode);
      if (call.target.find("aten.linear") == std::string::npos || call.paramArgs.size() != 2 ||
          !endsWith(call.paramArgs[1], "_bias"))
        continue;
      auto name = nameOf(call.paramArgs[1]);
      const ir::Value& w = g_.values[n.inputs[1]];
      if (!name || g_.findValue(*name) != ir::kNoValue || w.shape.size() != 2 || !ir::isFloat(w.dtype)) continue;
      const int64_t out = n.attrInt("transB", 0) ? w.shape[0] : w.shape[1];
      ir::Tensor zeros(w.dtype, {out});
      std::memset(zeros.raw(), 0, zeros.nbytes());
      ir::Value b;
      b.name = *name;
      b.kind = ir::ValueKind::Initializer;
      b.dtype = w.dtype;
      b.shape = {out};
      b.shapeKnown = true;
      b.data = std::make_shared<const ir::Tensor>(std::move(zeros));
      const ir::ValueId id = g_.addValue(std::move(b));
      g_.nodes[r].inputs.push_back(id);
    }
  }

  // export_names.h, 7.
  void noteFoldedParameters() {
    // A parameter of a ParameterDict (IA3's `ia3_l.default`) may be spelled with the dict's key
    // joined by '_' where no name scope names the dict: it is there under its mangled name.
    std::set<std::string> mangledInitializers;
    for (const ir::Value& val : g_.values)
      if (val.kind == ir::ValueKind::Initializer) mangledInitializers.insert(mangle(val.name));
    std::set<std::string> folded;
    for (const NodeOrigin& o : origins_)
      if (!o.fxNode.empty())
        for (const std::string& a : parseFxCall(o.fxNode).paramArgs)
          if (auto name = nameOf(a); name && !isInitializer(*name) && !mangledInitializers.count(mangle(*name)))
            folded.insert(*name);
    for (const ir::Value& val : g_.values) {
      auto it = foldedFrom_.find(val.name);
      if (val.kind != ir::ValueKind::Initializer || it == foldedFrom_.end()) continue;
      for (const std::string& source : it->second)
        if (source.find('.') != std::string::npos) folded.insert(source);
    }
    g_.foldedParameters.assign(folded.begin(), folded.end());
  }

  ir::Graph& g_;
  const std::vector<NodeOrigin>& origins_;
  const FoldedFrom& foldedFrom_;
  std::unordered_map<std::string, std::string> paths_;  // mangled module path -> module path
};

}  // namespace

bool looksExporterRenamed(std::string_view name) {
  if (name.substr(0, 4) != "val_" || name.size() == 4) return false;
  return std::all_of(name.begin() + 4, name.end(), [](char c) { return std::isdigit(static_cast<uint8_t>(c)); });
}

namespace {

// Calls f(key, value) for each metadata entry stored as unknown field `field` (metadata_props, newer
// than the protos here).
template <typename F>
void forEachMetadataEntry(const google::protobuf::UnknownFieldSet& unknown, int field, F&& f) {
  for (int i = 0; i < unknown.field_count(); ++i) {
    const auto& u = unknown.field(i);
    if (u.number() != field || u.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) continue;
    ::onnx::StringStringEntryProto entry;
    if (entry.ParseFromString(u.length_delimited())) f(entry.key(), entry.value());
  }
}

}  // namespace

NodeOrigin readNodeOrigin(const ::onnx::NodeProto& node) {
  NodeOrigin o;
  forEachMetadataEntry(node.unknown_fields(), kMetadataPropsField,
                       [&](const std::string& key, const std::string& value) { keep(o, key, value); });
  return o;
}

FoldedFrom readFoldedFrom(const ::onnx::GraphProto& graph) {
  FoldedFrom out;
  for (const auto& vi : graph.value_info())
    forEachMetadataEntry(vi.unknown_fields(), kValueInfoMetadataField,
                         [&](const std::string& key, const std::string& value) {
                           if (key == kFoldedFrom) out[vi.name()] = parseScopes(value);
                         });
  return out;
}

Result<int> recoverExportNames(ir::Graph& g, const std::vector<NodeOrigin>& origins, const FoldedFrom& foldedFrom) {
  return NameRecovery(g, origins, foldedFrom).run();
}

}  // namespace fbl::onnx
