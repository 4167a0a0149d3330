// fxBatchNormTrains: find the ATen target after `target=torch.ops.aten.`, check it is a batch
// norm overload, and split `args = (...)` at its top-level commas; the sixth argument is the
// training flag, except for the overloads that always train or never do.
// restoreBatchNormTraining groups the nodes by the training call they came from: the optimizer
// (optimize=True) folds a BatchNorm into the Conv before it as if in eval mode, and that Conv
// keeps the batch norm's metadata, which is how the fold is found and refused.
// separateBatchNormBuffers reads the same arguments: the fourth and fifth name the buffers.
#include "compiler/onnx/export_training_mode.h"

#include <map>
#include <string>

namespace fbl::onnx {

namespace {

constexpr std::string_view kTarget = "target=torch.ops.aten.";

// The top-level arguments of the first `args = (...)` in `s`, trimmed.
std::vector<std::string> fxArgs(std::string_view s) {
  std::vector<std::string> args;
  const size_t at = s.find("args = (");
  if (at == std::string_view::npos) return args;
  int depth = 0;
  std::string cur;
  for (size_t i = at + 8; i < s.size(); ++i) {
    const char c = s[i];
    if (depth == 0 && (c == ',' || c == ')')) {
      const size_t b = cur.find_first_not_of(' '), e = cur.find_last_not_of(' ');
      if (b != std::string::npos) args.push_back(cur.substr(b, e - b + 1));
      cur.clear();
      if (c == ')') break;
      continue;
    }
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    cur += c;
  }
  return args;
}

}  // namespace

bool fxBatchNormTrains(std::string_view fxNode) {
  const size_t at = fxNode.find(kTarget);
  if (at == std::string_view::npos) return false;
  const std::string_view rest = fxNode.substr(at + kTarget.size());
  const std::string_view op = rest.substr(0, rest.find_first_of(".]"));
  if (op == "_native_batch_norm_legit_functional" || op == "_batch_norm_with_update" ||
      op == "_batch_norm_with_update_functional")
    return true;
  if (op != "batch_norm" && op != "native_batch_norm" && op != "_native_batch_norm_legit" && op != "_batch_norm_impl_index")
    return false;
  const std::vector<std::string> args = fxArgs(rest);
  return args.size() > 5 && args[5] == "True";
}

Result<int> restoreBatchNormTraining(ir::Graph& g, const std::vector<NodeOrigin>& origins) {
  // Per training batch-norm call, the nodes it became: a BatchNormalization, or statistics
  // computed op by op (a reduction among them); else the optimizer folded it into a Conv.
  std::map<std::string_view, std::vector<size_t>> calls;
  for (size_t i = 0; i < g.nodes.size() && i < origins.size(); ++i)
    if (fxBatchNormTrains(origins[i].fxNode)) calls[origins[i].fxNode].push_back(i);
  int restored = 0;
  for (const auto& [call, nodes] : calls) {
    bool normalized = false;
    for (size_t i : nodes) {
      ir::Node& n = g.nodes[i];
      normalized |= n.op == "BatchNormalization" || n.op.rfind("Reduce", 0) == 0;
      if (n.op != "BatchNormalization" || n.hasAttr("training_mode")) continue;
      n.attrs["training_mode"] = int64_t{1};
      ++restored;
    }
    if (!normalized)
      return makeError(
          "{}: the exporter's optimizer folded a train-mode BatchNorm into this {} with its running statistics, so "
          "the file computes what PyTorch computes in eval mode; export with optimize=False to train with batch "
          "statistics, or call model.eval() before exporting to fine-tune with frozen ones",
          ir::describeNode(g, g.nodes[nodes[0]]), g.nodes[nodes[0]].op);
  }
  return restored;
}

int separateBatchNormBuffers(ir::Graph& g, const std::vector<NodeOrigin>& origins) {
  int separated = 0;
  for (size_t i = 0; i < g.nodes.size() && i < origins.size(); ++i) {
    ir::Node& n = g.nodes[i];
    const NodeOrigin& o = origins[i];
    if (n.op != "BatchNormalization" || n.attrInt("training_mode", 0) == 0 || o.scopes.size() < 2) continue;
    const std::string& module = o.scopes[o.scopes.size() - 2];  // the last scope is the call's own
    const size_t at = o.fxNode.find(kTarget);
    if (at == std::string::npos) continue;
    const std::vector<std::string> args = fxArgs(std::string_view(o.fxNode).substr(at));
    for (size_t k : {3, 4}) {
      const ir::ValueId in = n.input(k);
      const std::string buffer = module + (k == 3 ? ".running_mean" : ".running_var");
      if (in == ir::kNoValue || g.values[in].kind != ir::ValueKind::Initializer || g.values[in].name == buffer ||
          args.size() <= k || args[k] != "%b_" + mangle(buffer))
        continue;
      ir::ValueId own = g.findValue(buffer);
      if (own == ir::kNoValue) {
        ir::Value v = g.values[in];  // the same starting values (data or external reference)
        v.name = buffer;
        v.producer = ir::kNoNode;
        own = g.addValue(std::move(v));
      } else if (g.values[own].kind != ir::ValueKind::Initializer || g.values[own].shape != g.values[in].shape) {
        continue;
      }
      n.inputs[k] = own;
      ++separated;
    }
  }
  return separated;
}

}  // namespace fbl::onnx
