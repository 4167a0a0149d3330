// Fusion: the rewrites are described in fusion.h. Both need to know who reads each value: a
// value fuses only into its one reader (epilogue) or into readers that are all products
// (prologue), and never when the plan must keep it in memory.
#include "compiler/plan/fusion.h"

#include "compiler/codegen/emit_util.h"

namespace fbl::plan {

namespace {

using ir::NodeId;
using ir::ValueId;

struct Read {
  NodeId node = ir::kNoNode;
  int slot = -1;         // -1: a copy kernel's source
  bool through = false;  // through an OperandLayout (a folded chain or a transposed read)
};

bool isTiledMatmul(const ir::Graph& g, const ir::Node& n) {
  return (n.op == "MatMul" || n.op == "Gemm") && codegen::usesTiledMatmul(g, n);
}

bool allFloat(const ir::Graph& g, const ir::Node& n) {
  for (ValueId v : n.inputs)
    if (v == ir::kNoValue || g.values[v].dtype != ir::DType::F32) return false;
  return n.outputs.size() == 1 && g.values[n.outputs[0]].dtype == ir::DType::F32;
}

// Still emitted as its own kernel, and free to be rewritten.
bool runsAlone(const ir::Node& n, const NodeLowering& nl) {
  return !n.dead && !nl.skip && !nl.fused && !nl.deferred && nl.runs == ir::kNoNode;
}

class Fuser {
 public:
  Fuser(const ir::Graph& g, const std::vector<bool>& keep, LayoutLowering& out,
        std::map<std::pair<NodeId, int>, layout::IndexMap>& views)
      : g_(g), keep_(keep), out_(out), views_(views), reads_(g.values.size()) {
    for (NodeId id = 0; id < static_cast<NodeId>(g_.nodes.size()); ++id) {
      const ir::Node& n = g_.nodes[id];
      const NodeLowering& nl = out_.nodes[id];
      if (n.dead || nl.skip) continue;
      for (size_t s = 0; s < n.inputs.size(); ++s) {
        if (nl.layouts.inputs[s]) reads_[nl.layouts.inputs[s]->value].push_back({id, static_cast<int>(s), true});
        else if (n.inputs[s] != ir::kNoValue) reads_[n.inputs[s]].push_back({id, static_cast<int>(s), false});
      }
      for (const auto& [v, from] : nl.materialise) reads_[from.value].push_back({id, -1, true});
    }
  }

  void epilogues() {
    for (NodeId id = 0; id < static_cast<NodeId>(g_.nodes.size()); ++id) {
      const ir::Node& host = g_.nodes[id];
      if (!runsAlone(host, out_.nodes[id]) || !isTiledMatmul(g_, host) || host.phase == ir::Phase::Optimizer) continue;
      std::vector<codegen::EpilogueStep> steps;
      for (ValueId cur = host.outputs[0];;) {
        const Read* r = onlyPlainRead(cur);
        if (r == nullptr || !fitsEpilogue(host, r->node)) break;
        steps.push_back({r->node, r->slot, {}});
        cur = g_.nodes[r->node].outputs[0];
      }
      if (steps.empty()) continue;
      out_.nodes[id].deferred = true;
      out_.inKernelOnly[host.outputs[0]] = true;
      for (size_t k = 0; k < steps.size(); ++k) {
        NodeLowering& nl = out_.nodes[steps[k].node];
        nl.fused = true;
        if (k + 1 < steps.size()) {
          nl.skip = true;
          out_.inKernelOnly[g_.nodes[steps[k].node].outputs[0]] = true;
        } else {
          nl.runs = id;
        }
      }
      out_.nodes[id].layouts.epilogue = std::move(steps);
    }
  }

  void prologues() {
    for (NodeId id = 0; id < static_cast<NodeId>(g_.nodes.size()); ++id) {
      const ir::Node& m = g_.nodes[id];
      NodeLowering& ml = out_.nodes[id];
      if (m.op != "Mul" || !runsAlone(m, ml) || m.phase == ir::Phase::Optimizer || !allFloat(g_, m) ||
          m.inputs.size() != 2 || !ml.materialise.empty() || ml.layouts.inputs[0] || ml.layouts.inputs[1])
        continue;
      const ValueId y = m.outputs[0];
      const ir::Shape& outShape = g_.values[y].shape;
      int xs = -1;
      for (int s = 0; s < 2; ++s) {
        const ir::Shape& other = g_.values[m.inputs[1 - s]].shape;
        if (g_.values[m.inputs[s]].shape == outShape && ir::numElements(other) == 1 && other.size() <= outShape.size())
          xs = s;
      }
      if (xs < 0 || keep_[y] || reads_[y].empty()) continue;
      bool ok = true;
      for (const Read& r : reads_[y]) {
        const ir::Node& h = g_.nodes[r.node];
        ok = ok && r.slot >= 0 && r.slot < 2 && isTiledMatmul(g_, h) && h.phase != ir::Phase::Optimizer &&
             !out_.nodes[r.node].skip;
      }
      if (!ok) continue;
      const ValueId x = m.inputs[xs];
      for (const Read& r : reads_[y]) {
        NodeLowering& hl = out_.nodes[r.node];
        auto& in = hl.layouts.inputs[r.slot];
        if (in) {
          in->value = x;  // same shape, both row-major: the layout reads x as it read y
        } else {
          in = codegen::OperandLayout{x, layout::Layout::rowMajor(g_.values[x].shape), false, std::nullopt};
          views_[{r.node, r.slot}] = layout::IndexMap::identity(g_.values[x].shape);
        }
        hl.layouts.epilogue.insert(hl.layouts.epilogue.begin(), codegen::EpilogueStep{id, xs, {}});
        reads_[x].push_back({r.node, r.slot, true});
      }
      ml.skip = ml.fused = true;
      out_.inKernelOnly[y] = true;
    }
  }

 private:
  // The single reader of `v` reading it as stored (not through a map), or null.
  const Read* onlyPlainRead(ValueId v) const {
    if (keep_[v] || reads_[v].size() != 1 || reads_[v][0].through || reads_[v][0].slot < 0) return nullptr;
    return &reads_[v][0];
  }

  bool fitsEpilogue(const ir::Node& host, NodeId id) const {
    const ir::Node& n = g_.nodes[id];
    const NodeLowering& nl = out_.nodes[id];
    return runsAlone(n, nl) && codegen::isElementwiseOp(n.op) && n.op != "Expand" && allFloat(g_, n) &&
           n.inputs.size() <= 3 && n.phase == host.phase && nl.materialise.empty() &&
           g_.values[n.outputs[0]].shape == g_.values[host.outputs[0]].shape;
  }

  const ir::Graph& g_;
  const std::vector<bool>& keep_;
  LayoutLowering& out_;
  std::map<std::pair<NodeId, int>, layout::IndexMap>& views_;
  std::vector<std::vector<Read>> reads_;
};

}  // namespace

void planFusion(const ir::Graph& g, const std::vector<bool>& keep, LayoutLowering& out,
                std::map<std::pair<ir::NodeId, int>, layout::IndexMap>& views) {
  Fuser f(g, keep, out, views);
  f.epilogues();
  f.prologues();
}

void finishFusion(const ir::Graph& g, LayoutLowering& out) {
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes.size()); ++id) {
    NodeLowering& hl = out.nodes[id];
    for (codegen::EpilogueStep& st : hl.layouts.epilogue) {
      const NodeLowering& sl = out.nodes[st.node];
      st.inputs = sl.layouts.inputs;
      st.inputs[st.slot].reset();
      if (sl.runs == id) {  // the chain's last step: the kernel writes its value, as it is stored
        hl.layouts.epilogueOutput = g.nodes[st.node].outputs[0];
        hl.layouts.outputs[0] = sl.layouts.outputs[0];
      }
    }
  }
}

}  // namespace fbl::plan
