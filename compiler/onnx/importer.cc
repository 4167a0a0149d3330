// ONNX ModelProto -> ir::Graph.
//
// 1. Parse the protobuf; check the ai.onnx opset (13..20). Sequence ops are rewritten into
//    tensor ops first (sequence_ops.h).
// 2. Initializers become Initializer values: inline data is copied and checked against the
//    shape; external data is recorded (location, offset, length) after its path is validated.
// 3. Graph inputs that are not initializers become Input values; every dimension must be
//    static, or overridden by ImportOptions::shapeOverrides.
// 4. Every node output becomes an Intermediate value (one producer each); then node inputs are
//    resolved by name (undefined names are errors).
// 5. If the node list is not in topological order, it is sorted (Kahn, keeping file order
//    among ready nodes); a cycle is reported with a node on it.
// 6. Nodes are appended in that order with their attributes; each is checked for its domain
//    and against its op schema (ops::validateNode). value_info only hints dtypes.
// 7. A BatchNormalization exported in train mode gets its training flag back
//    (export_training_mode.h); then weights the exporter's optimizer renamed get their PyTorch
//    names back from the nodes' metadata (export_names.h), after external data is read.
#include "compiler/onnx/importer.h"

#include <onnx/onnx_pb.h>

#include <charconv>
#include <unordered_map>
#include <unordered_set>

#include "compiler/onnx/export_names.h"
#include "compiler/onnx/export_training_mode.h"
#include "compiler/onnx/external_data.h"
#include "compiler/onnx/proto_tensor.h"
#include "compiler/onnx/sequence_ops.h"
#include "compiler/onnx/tensor_proto.h"
#include "compiler/ops/op_schema.h"

namespace fbl::onnx {

namespace {

constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxOpset = 20;

using ::onnx::AttributeProto;
using ::onnx::GraphProto;
using ::onnx::ModelProto;
using ::onnx::NodeProto;
using ::onnx::TensorProto;

std::string_view attrTypeName(int t) {
  switch (t) {
    case AttributeProto::UNDEFINED: return "UNDEFINED";
    case AttributeProto::GRAPH: return "GRAPH";
    case AttributeProto::GRAPHS: return "GRAPHS";
    case AttributeProto::SPARSE_TENSOR: return "SPARSE_TENSOR";
    case AttributeProto::SPARSE_TENSORS: return "SPARSE_TENSORS";
    case AttributeProto::TYPE_PROTO: return "TYPE_PROTO";
    case AttributeProto::TYPE_PROTOS: return "TYPE_PROTOS";
    case AttributeProto::TENSORS: return "TENSORS";
    default: return "unknown";
  }
}

std::string shapeHint(const ir::Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out.empty() ? "1" : out;
}

class Importer {
 public:
  Importer(const ModelProto& m, const std::string& path, const ImportOptions& opts)
      : m_(m), gp_(m.graph()), file_(path), opts_(opts) {}

  // The nodes' PyTorch origins, by ir::NodeId (filled by run()).
  std::vector<NodeOrigin>& origins() { return origins_; }

  Result<ir::Graph> run() {
    g_.name = gp_.name();
    g_.sourcePath = file_;
    FBL_TRY(readOpset());
    if (gp_.sparse_initializer_size() > 0)
      return makeError("{}: sparse initializers are not supported (tensor '{}')", file_,
                       gp_.sparse_initializer(0).values().name());
    size_t expected = static_cast<size_t>(gp_.initializer_size() + gp_.input_size());
    for (const auto& np : gp_.node()) expected += static_cast<size_t>(np.output_size());
    g_.values.reserve(expected);
    ids_.reserve(expected);
    FBL_TRY(addInitializers());
    FBL_TRY(addInputs());
    FBL_TRY(addNodes());
    FBL_TRY(addOutputs());
    applyTypeHints();
    return std::move(g_);
  }

 private:
  Status readOpset() {
    bool found = false;
    for (const auto& o : m_.opset_import()) {
      if (o.domain().empty() || o.domain() == "ai.onnx") {
        g_.opset = o.version();
        found = true;
      }
    }
    if (!found)
      return makeError("{}: the model imports no ai.onnx opset; fbl supports opsets {} to {}",
                       file_, kMinOpset, kMaxOpset);
    if (g_.opset < kMinOpset || g_.opset > kMaxOpset)
      return makeError("{}: ai.onnx opset {} is not supported; fbl supports opsets {} to {} "
                       "(re-export with opset_version={})",
                       file_, g_.opset, kMinOpset, kMaxOpset, kMaxOpset);
    return {};
  }

  Status addInitializers() {
    for (int i = 0; i < gp_.initializer_size(); ++i) {
      const TensorProto& t = gp_.initializer(i);
      if (t.name().empty()) return makeError("{}: initializer #{} has no name", file_, i);
      if (lookup(t.name()) != ir::kNoValue)
        return makeError("{}: initializer '{}' is defined twice", file_, t.name());
      ir::Value v;
      v.name = t.name();
      v.kind = ir::ValueKind::Initializer;
      if (t.data_location() == TensorProto::EXTERNAL) {
        FBL_TRY(describeExternal(t, v));
      } else {
        FBL_ASSIGN(ir::Tensor data, tensorFromProto(t, file_));
        v.dtype = data.dtype();
        v.shape = data.shape();
        v.data = std::make_shared<const ir::Tensor>(std::move(data));
      }
      v.shapeKnown = true;
      define(t.name(), std::move(v));
    }
    return {};
  }

  Status describeExternal(const TensorProto& t, ir::Value& v) {
    std::string what = fmt::format("tensor '{}'", t.name());
    auto dt = supportedDType(t.data_type(), what);
    if (!dt.ok()) return Error{fmt::format("{}: {}", file_, dt.error().message)};
    auto shape = checkedShape(t.dims().data(), t.dims_size(), *dt, what);
    if (!shape.ok()) return Error{fmt::format("{}: {}", file_, shape.error().message)};
    v.dtype = *dt;
    v.shape = std::move(*shape);

    ir::ExternalData ext;
    bool hasLocation = false;
    for (const auto& kv : t.external_data()) {
      const std::string& key = kv.key();
      if (key == "location") {
        ext.location = kv.value();
        hasLocation = true;
      } else if (key == "offset" || key == "length") {
        int64_t n = 0;
        const std::string& s = kv.value();
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
        if (ec != std::errc() || end != s.data() + s.size() || n < 0)
          return makeError("{}: tensor '{}': external data {} '{}' is not a byte count", file_,
                           t.name(), key, s);
        (key == "offset" ? ext.offset : ext.length) = n;
      }
    }
    if (!hasLocation)
      return makeError("{}: tensor '{}' is stored externally but has no location", file_,
                       t.name());
    // Every weight of a large model usually shares one data file: resolve each path once.
    if (resolvedLocations_.count(ext.location) == 0) {
      FBL_TRY(resolveExternalPath(file_, ext.location, t.name()));
      resolvedLocations_.insert(ext.location);
    }
    const int64_t need =
        ir::numElements(v.shape) * static_cast<int64_t>(ir::dtypeSize(v.dtype));
    if (ext.length >= 0 && ext.length != need)
      return makeError("{}: tensor '{}': external data length {} but shape {} of {} needs {}",
                       file_, t.name(), ext.length, ir::shapeToString(v.shape),
                       ir::dtypeName(v.dtype), need);
    v.external = std::move(ext);
    return {};
  }

  Status addInputs() {
    std::unordered_set<std::string_view> inputNames;
    for (const auto& in : gp_.input()) {
      const std::string& name = in.name();
      if (name.empty()) return makeError("{}: a graph input has no name", file_);
      if (!inputNames.insert(name).second)
        return makeError("{}: graph input '{}' is listed twice", file_, name);
      // An input that is also an initializer is a parameter with a default: the initializer.
      if (lookup(name) != ir::kNoValue) continue;
      FBL_ASSIGN(ir::Value v, inputValue(in));
      g_.inputs.push_back(define(name, std::move(v)));
    }
    for (const auto& [name, shape] : opts_.shapeOverrides) {
      ir::ValueId id = lookup(name);
      if (id == ir::kNoValue || g_.values[id].kind != ir::ValueKind::Input) {
        std::string names;
        for (ir::ValueId i : g_.inputs) names += (names.empty() ? "" : ", ") + g_.values[i].name;
        return makeError("{}: --shape names '{}', which is not a graph input (inputs: {})",
                         file_, name, names.empty() ? "none" : names);
      }
    }
    return {};
  }

  Result<ir::Value> inputValue(const ::onnx::ValueInfoProto& in) {
    const std::string& name = in.name();
    if (!in.type().has_tensor_type())
      return makeError("{}: input '{}' is not a tensor", file_, name);
    const auto& tt = in.type().tensor_type();
    auto dt = supportedDType(tt.elem_type(), fmt::format("input '{}'", name));
    if (!dt.ok()) return Error{fmt::format("{}: {}", file_, dt.error().message)};
    ir::Value v;
    v.name = name;
    v.kind = ir::ValueKind::Input;
    v.dtype = *dt;
    v.shapeKnown = true;

    auto over = opts_.shapeOverrides.find(name);
    if (over != opts_.shapeOverrides.end()) {
      const ir::Shape& s = over->second;
      if (tt.has_shape() && tt.shape().dim_size() != static_cast<int>(s.size()))
        return makeError("{}: --shape {}={} has rank {} but input '{}' has rank {}", file_, name,
                         shapeHint(s), s.size(), name, tt.shape().dim_size());
      auto checked = checkedShape(s.data(), static_cast<int>(s.size()), *dt,
                                  fmt::format("--shape {}", name));
      if (!checked.ok()) return Error{fmt::format("{}: {}", file_, checked.error().message)};
      v.shape = std::move(*checked);
      return v;
    }
    if (!tt.has_shape())
      return makeError("{}: input '{}' has no shape; pass --shape {}=<dims, e.g. 1x512>", file_,
                       name, name);
    ir::Shape hint;
    std::string firstUnknown;
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      if (d.has_dim_value() && d.dim_value() >= 0) {
        v.shape.push_back(d.dim_value());
        hint.push_back(d.dim_value());
        continue;
      }
      if (d.has_dim_value())
        return makeError("{}: input '{}' has a negative dimension {}", file_, name,
                         d.dim_value());
      hint.push_back(1);
      if (firstUnknown.empty())
        firstUnknown = d.has_dim_param() && !d.dim_param().empty()
                           ? fmt::format("symbolic dimension '{}'", d.dim_param())
                           : fmt::format("an unknown dimension {}", i);
    }
    if (!firstUnknown.empty())
      return makeError("{}: input '{}' has {}; pass --shape {}={}", file_, name, firstUnknown,
                       name, shapeHint(hint));
    auto checked = checkedShape(v.shape.data(), static_cast<int>(v.shape.size()), *dt,
                                fmt::format("input '{}'", name));
    if (!checked.ok()) return Error{fmt::format("{}: {}", file_, checked.error().message)};
    return v;
  }

  // A node's display name for messages before it is in the graph.
  std::string where(int i) const {
    return fmt::format("{}: node '{}' ({})", file_, names_[i], gp_.node(i).op_type());
  }

  Status addNodes() {
    const int n = gp_.node_size();
    names_.resize(n);
    // Views into names_, whose strings stay in place once assigned (no resize after this).
    // A repeated name gets the next free "_k" suffix; the counter per name keeps a file with
    // thousands of equal names linear.
    std::unordered_set<std::string_view> used;
    std::unordered_map<std::string_view, int> nextSuffix;
    used.reserve(static_cast<size_t>(n) * 2);
    for (int i = 0; i < n; ++i) {
      const NodeProto& np = gp_.node(i);
      const std::string& base = np.name().empty() ? np.op_type() : np.name();
      names_[i] = np.name().empty() ? fmt::format("{}_{}", np.op_type(), i) : np.name();
      if (used.count(names_[i])) {
        int& k = nextSuffix[base];
        do {
          names_[i] = fmt::format("{}_{}", base, ++k);
        } while (used.count(names_[i]));
      }
      used.insert(names_[i]);
    }
    g_.nodes.reserve(n);

    // Outputs first, so that a node may read a value produced later in the file (sorted below).
    std::vector<int> producerNode;  // by ValueId; -1 for inputs and initializers
    producerNode.assign(g_.values.size(), -1);
    for (int i = 0; i < n; ++i) {
      for (const std::string& out : gp_.node(i).output()) {
        if (out.empty()) continue;
        ir::ValueId prev = lookup(out);
        if (prev != ir::kNoValue) {
          int p = producerNode[prev];
          if (p >= 0)
            return makeError("{}: value '{}' is produced twice, by node '{}' and node '{}'",
                             file_, out, names_[p], names_[i]);
          return makeError("{}: writes '{}', which is already a graph input or initializer",
                           where(i), out);
        }
        ir::Value v;
        v.name = out;
        define(out, std::move(v));
        producerNode.push_back(i);
      }
    }

    // Resolve inputs and the producer-node edges for ordering.
    std::vector<std::vector<ir::ValueId>> ins(n);
    std::vector<std::vector<int>> preds(n);
    bool sorted = true;
    for (int i = 0; i < n; ++i) {
      const NodeProto& np = gp_.node(i);
      ins[i].reserve(np.input_size());
      for (const std::string& in : np.input()) {
        if (in.empty()) {
          ins[i].push_back(ir::kNoValue);
          continue;
        }
        ir::ValueId id = lookup(in);
        if (id == ir::kNoValue)
          return makeError("{} reads '{}', which no graph input, initializer or node output "
                           "defines",
                           where(i), in);
        ins[i].push_back(id);
        int p = producerNode[id];
        if (p >= 0) {
          preds[i].push_back(p);
          if (p >= i) sorted = false;
        }
      }
    }
    std::vector<int> order;
    if (sorted) {
      order.resize(n);
      for (int i = 0; i < n; ++i) order[i] = i;
    } else {
      FBL_ASSIGN(order, topoOrder(preds));
    }

    for (int i : order) FBL_TRY(appendNode(i, std::move(ins[i])));
    for (const ir::Node& node : g_.nodes) FBL_TRY(ops::validateNode(g_, node));
    return {};
  }

  // Kahn's algorithm, taking ready nodes in file order; on a cycle, names a node on it.
  Result<std::vector<int>> topoOrder(const std::vector<std::vector<int>>& preds) {
    const int n = static_cast<int>(preds.size());
    std::vector<int> pending(n, 0);
    std::vector<std::vector<int>> succ(n);
    for (int i = 0; i < n; ++i) {
      for (int p : preds[i]) {
        succ[p].push_back(i);
        ++pending[i];
      }
    }
    std::vector<int> order;
    order.reserve(n);
    // A min-heap would keep strict file order; a FIFO seeded in file order is close enough and
    // deterministic.
    std::vector<int> queue;
    for (int i = 0; i < n; ++i)
      if (pending[i] == 0) queue.push_back(i);
    for (size_t head = 0; head < queue.size(); ++head) {
      int i = queue[head];
      order.push_back(i);
      for (int s : succ[i])
        if (--pending[s] == 0) queue.push_back(s);
    }
    if (static_cast<int>(order.size()) == n) return order;

    // Walk back through unfinished predecessors until a node repeats: it lies on a cycle.
    int cur = 0;
    while (pending[cur] == 0) ++cur;
    std::vector<int> seenAt(n, -1);
    std::vector<int> path;
    while (seenAt[cur] < 0) {
      seenAt[cur] = static_cast<int>(path.size());
      path.push_back(cur);
      for (int p : preds[cur]) {
        if (pending[p] > 0) {
          cur = p;
          break;
        }
      }
    }
    std::string cycle;
    for (size_t k = path.size(); k-- > static_cast<size_t>(seenAt[cur]);)
      cycle += fmt::format("'{}' -> ", names_[path[k]]);
    cycle += fmt::format("'{}'", names_[cur]);
    return makeError("{}: the graph has a cycle through node '{}' ({}): {}", file_, names_[cur],
                     gp_.node(cur).op_type(), cycle);
  }

  Status appendNode(int i, std::vector<ir::ValueId> inputs) {
    const NodeProto& np = gp_.node(i);
    if (!np.domain().empty() && np.domain() != "ai.onnx")
      return makeError("{}: op '{}' of domain '{}' is not supported (only the default ONNX "
                       "domain is)",
                       where(i), np.op_type(), np.domain());
    ir::Node node;
    node.op = np.op_type();
    node.name = names_[i];
    node.inputs = std::move(inputs);
    node.outputs.reserve(np.output_size());
    for (const std::string& out : np.output())
      node.outputs.push_back(out.empty() ? ir::kNoValue : lookup(out));
    for (const AttributeProto& a : np.attribute()) {
      FBL_ASSIGN(ir::AttrValue v, convertAttr(i, a));
      if (!node.attrs.emplace(a.name(), std::move(v)).second)
        return makeError("{} has attribute '{}' twice", where(i), a.name());
    }
    g_.addNode(std::move(node));
    origins_.push_back(readNodeOrigin(np));
    return {};
  }

  Result<ir::AttrValue> convertAttr(int i, const AttributeProto& a) {
    if (!a.ref_attr_name().empty())
      return makeError("{}: attribute '{}' refers to a function attribute, which fbl does not "
                       "support",
                       where(i), a.name());
    switch (a.type()) {
      case AttributeProto::INT: return ir::AttrValue(static_cast<int64_t>(a.i()));
      case AttributeProto::FLOAT: return ir::AttrValue(a.f());
      case AttributeProto::STRING: return ir::AttrValue(a.s());
      case AttributeProto::INTS:
        return ir::AttrValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
      case AttributeProto::FLOATS:
        return ir::AttrValue(std::vector<float>(a.floats().begin(), a.floats().end()));
      case AttributeProto::STRINGS:
        return ir::AttrValue(std::vector<std::string>(a.strings().begin(), a.strings().end()));
      case AttributeProto::TENSOR: {
        auto t = tensorFromProto(a.t(), where(i) + fmt::format(": attribute '{}'", a.name()));
        if (!t.ok()) return t.error();
        return ir::AttrValue(std::move(t).value());
      }
      default:
        return makeError("{}: attribute '{}' has type {}, which fbl does not support", where(i),
                         a.name(), attrTypeName(a.type()));
    }
  }

  Status addOutputs() {
    for (const auto& out : gp_.output()) {
      ir::ValueId id = lookup(out.name());
      if (id == ir::kNoValue)
        return makeError("{}: graph output '{}' is not produced by any node, input or "
                         "initializer",
                         file_, out.name());
      g_.outputs.push_back(id);
    }
    return {};
  }

  // value_info and graph outputs may name the dtype of an intermediate value: kept as a hint
  // for shape inference, never required and never trusted for shapes.
  void applyTypeHints() {
    auto hint = [&](const ::onnx::ValueInfoProto& vi) {
      if (!vi.type().has_tensor_type()) return;
      ir::ValueId id = lookup(vi.name());
      if (id == ir::kNoValue || g_.values[id].kind != ir::ValueKind::Intermediate) return;
      if (auto dt = ir::dtypeFromOnnx(vi.type().tensor_type().elem_type()))
        if (supportedDType(static_cast<int32_t>(*dt), "").ok()) g_.values[id].dtype = *dt;
    };
    for (const auto& vi : gp_.value_info()) hint(vi);
    for (const auto& vi : gp_.output()) hint(vi);
  }

  // Graph::findValue is an ordered map; import does ~10k lookups on large models, so it keeps
  // its own hash index keyed by views into the ModelProto's strings (alive for the import).
  ir::ValueId lookup(std::string_view name) const {
    auto it = ids_.find(name);
    return it == ids_.end() ? ir::kNoValue : it->second;
  }
  ir::ValueId define(const std::string& protoName, ir::Value v) {
    ir::ValueId id = g_.addValue(std::move(v));
    ids_.emplace(protoName, id);
    return id;
  }

  const ModelProto& m_;
  const GraphProto& gp_;
  const std::string& file_;
  const ImportOptions& opts_;
  ir::Graph g_;
  std::vector<std::string> names_;  // node display names, by file index
  std::vector<NodeOrigin> origins_;  // by ir::NodeId
  std::unordered_set<std::string> resolvedLocations_;
  std::unordered_map<std::string_view, ir::ValueId> ids_;
};

}  // namespace

namespace {

struct Imported {
  ir::Graph graph;
  std::vector<NodeOrigin> origins;
  FoldedFrom foldedFrom;
};

Result<Imported> importProto(const std::string& bytes, const std::string& path,
                             const ImportOptions& opts) {
  if (bytes.empty()) return makeError("{}: empty file (0 bytes), not an ONNX model", path);
  ModelProto m;
  if (!m.ParseFromString(bytes))
    return makeError("{}: not a valid ONNX model (protobuf parse failed)", path);
  if (!m.has_graph()) return makeError("{}: not a valid ONNX model (it has no graph)", path);
  FBL_TRY(rewriteSequenceOps(m.mutable_graph(), path));
  Importer importer(m, path, opts);
  FBL_ASSIGN(ir::Graph g, importer.run());
  return Imported{std::move(g), std::move(importer.origins()), readFoldedFrom(m.graph())};
}

}  // namespace

namespace {

Result<ir::Graph> importFromBytes(const std::string& bytes, const std::string& path, const ImportOptions& opts) {
  FBL_ASSIGN(Imported imp, importProto(bytes, path, opts));
  if (opts.loadExternalData) FBL_TRY(loadAvailableExternalData(imp.graph));
  FBL_TRY(restoreBatchNormTraining(imp.graph, imp.origins));  // before recovery adds nodes: origins index g.nodes
  separateBatchNormBuffers(imp.graph, imp.origins);
  if (opts.recoverExportNames) FBL_TRY(recoverExportNames(imp.graph, imp.origins, imp.foldedFrom));
  return std::move(imp.graph);
}

}  // namespace

// Errors leave through oneLine: they quote names read from the file.
Result<ir::Graph> importModelFromBytes(const std::string& bytes, const std::string& path,
                                       const ImportOptions& opts) {
  ImportOptions bytesOnly = opts;
  bytesOnly.loadExternalData = false;  // no file beside the bytes to resolve external data against
  auto g = importFromBytes(bytes, path, bytesOnly);
  if (!g.ok()) return oneLine(g.error());
  return g;
}

Result<ir::Graph> importModel(const std::string& path, const ImportOptions& opts) {
  auto bytes = readWholeFile(path);
  if (!bytes.ok()) return oneLine(bytes.error());
  auto g = importFromBytes(*bytes, path, opts);
  if (!g.ok()) return oneLine(g.error());
  return g;
}

}  // namespace fbl::onnx
