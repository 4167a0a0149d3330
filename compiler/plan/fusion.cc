// Fusion: the rewrites are described in fusion.h. Both need to know who reads each value: a
// value fuses only into its one reader (epilogue) or into readers that are all products
// (prologue), and never when the plan must keep it in memory.
#include "compiler/plan/fusion.h"

#include <algorithm>

#include "compiler/codegen/emit_util.h"

namespace fbl::plan {

namespace {

using ir::NodeId;
using ir::ValueId;

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
      : g_(g), keep_(keep), out_(out), views_(views), reads_(valueReads(g, out)) {}

  void epilogues() {
    for (NodeId id = 0; id < static_cast<NodeId>(g_.nodes.size()); ++id) {
      const ir::Node& host = g_.nodes[id];
      if (!runsAlone(host, out_.nodes[id]) || !isTiledMatmul(g_, host) || host.phase == ir::Phase::Optimizer) continue;
      std::vector<codegen::FusedOp> steps;
      for (ValueId cur = host.outputs[0];;) {
        const ValueRead* r = onlyPlainRead(cur);
        if (r == nullptr || !fitsInside(r->node, host, g_.values[host.outputs[0]].shape)) break;
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

  // Roots from the last node back, so that a group is as large as its single-reader tree. A
  // root is a float elementwise node (members have its output's shape) or a float reduction
  // (members produce its input 0, of that input's shape).
  void groups() {
    for (NodeId id = static_cast<NodeId>(g_.nodes.size()) - 1; id >= 0; --id) {
      const ir::Node& root = g_.nodes[id];
      std::vector<NodeId> members;
      if (fitsInside(id, root, g_.values[root.outputs[0]].shape)) {
        collect(root, id, g_.values[root.outputs[0]].shape, c_all, members);
      } else if (codegen::isReduceOp(root.op) && runsAlone(root, out_.nodes[id]) && allFloatData(root) &&
                 root.phase != ir::Phase::Optimizer && !out_.nodes[id].layouts.inputs[0] &&
                 out_.nodes[id].materialise.empty()) {
        collect(root, id, g_.values[root.inputs[0]].shape, 0, members);
      }
      if (members.empty()) continue;
      std::sort(members.begin(), members.end());
      std::vector<codegen::FusedOp>& inlined = out_.nodes[id].layouts.inlined;
      for (NodeId m : members) {
        NodeLowering& ml = out_.nodes[m];
        ml.skip = ml.fused = true;
        out_.inKernelOnly[g_.nodes[m].outputs[0]] = true;
        inlined.push_back({m, -1, {}});
      }
    }
  }

  void prologues() {
    for (NodeId id = 0; id < static_cast<NodeId>(g_.nodes.size()); ++id) {
      const ir::Node& m = g_.nodes[id];
      NodeLowering& ml = out_.nodes[id];
      if (m.op != "Mul" || !runsAlone(m, ml) || m.phase == ir::Phase::Optimizer || !allFloat(g_, m) ||
          m.inputs.size() != 2 || !ml.materialise.empty() || ml.layouts.inputs[0] || ml.layouts.inputs[1] ||
          !ml.layouts.inlined.empty())
        continue;
      const ValueId y = m.outputs[0];
      const ir::Shape& outShape = g_.values[y].shape;
      int xs = -1;
      for (int s = 0; s < 2; ++s) {
        const ir::Shape& other = g_.values[m.inputs[1 - s]].shape;
        if (g_.values[m.inputs[s]].shape == outShape && ir::numElements(other) == 1 && other.size() <= outShape.size())
          xs = s;
      }
      if (xs < 0 || keep_[y] || reads_[y].empty() || out_.inKernelOnly[m.inputs[xs]]) continue;
      bool ok = true;
      for (const ValueRead& r : reads_[y]) {
        const ir::Node& h = g_.nodes[r.node];
        ok = ok && r.slot >= 0 && r.slot < 2 && isTiledMatmul(g_, h) && h.phase != ir::Phase::Optimizer &&
             !out_.nodes[r.node].skip;
      }
      if (!ok) continue;
      const ValueId x = m.inputs[xs];
      for (const ValueRead& r : reads_[y]) {
        NodeLowering& hl = out_.nodes[r.node];
        auto& in = hl.layouts.inputs[r.slot];
        if (in) {
          in->value = x;  // same shape, both row-major: the layout reads x as it read y
        } else {
          in = codegen::OperandLayout{x, layout::Layout::rowMajor(g_.values[x].shape), false, std::nullopt};
          views_[{r.node, r.slot}] = layout::IndexMap::identity(g_.values[x].shape);
        }
        hl.layouts.epilogue.insert(hl.layouts.epilogue.begin(), codegen::FusedOp{id, xs, {}});
        reads_[x].push_back({r.node, r.slot, true});
      }
      ml.skip = ml.fused = true;
      out_.inKernelOnly[y] = true;
    }
  }

 private:
  // The single reader of `v` reading it as stored (not through a map), or null.
  const ValueRead* onlyPlainRead(ValueId v) const {
    if (keep_[v] || reads_[v].size() != 1 || reads_[v][0].through || reads_[v][0].slot < 0) return nullptr;
    return &reads_[v][0];
  }

  static constexpr int c_all = -1;

  // Plain-read inputs of `consumer` (slot `only`, or all) whose producers can be computed in
  // `root`'s kernel at `shape`, recursively.
  void collect(const ir::Node& root, NodeId consumer, const ir::Shape& shape, int only,
               std::vector<NodeId>& members) const {
    const ir::Node& c = g_.nodes[consumer];
    for (size_t s = 0; s < c.inputs.size(); ++s) {
      if ((only != c_all && static_cast<int>(s) != only) || out_.nodes[consumer].layouts.inputs[s]) continue;
      const ir::ValueId v = c.inputs[s];
      const NodeId p = v == ir::kNoValue ? ir::kNoNode : g_.values[v].producer;
      const ValueRead* r = p == ir::kNoNode ? nullptr : onlyPlainRead(v);
      if (r == nullptr || r->node != consumer || !fitsInside(p, root, shape)) continue;
      if (std::find(members.begin(), members.end(), p) != members.end()) continue;
      members.push_back(p);
      collect(root, p, shape, c_all, members);
    }
  }

  // Node `id` can be computed inside `kernel`'s kernel (a group's root, an epilogue's product):
  // float elementwise, the shape the kernel iterates, the kernel's phase, not the optimizer's.
  bool fitsInside(NodeId id, const ir::Node& kernel, const ir::Shape& shape) const {
    const ir::Node& n = g_.nodes[id];
    const NodeLowering& nl = out_.nodes[id];
    return runsAlone(n, nl) && codegen::isElementwiseOp(n.op) && n.op != "Expand" && allFloat(g_, n) &&
           n.inputs.size() <= 3 && n.phase == kernel.phase && n.phase != ir::Phase::Optimizer &&
           nl.materialise.empty() && g_.values[n.outputs[0]].shape == shape;
  }

  // A reduction over floats (its axes input, if any, is integer).
  bool allFloatData(const ir::Node& n) const {
    return n.outputs.size() == 1 && g_.values[n.inputs[0]].dtype == ir::DType::F32 &&
           g_.values[n.outputs[0]].dtype == ir::DType::F32;
  }

  const ir::Graph& g_;
  const std::vector<bool>& keep_;
  LayoutLowering& out_;
  std::map<std::pair<NodeId, int>, layout::IndexMap>& views_;
  std::vector<std::vector<ValueRead>> reads_;
};

}  // namespace

void planFusion(const ir::Graph& g, const std::vector<bool>& keep, LayoutLowering& out,
                std::map<std::pair<ir::NodeId, int>, layout::IndexMap>& views) {
  Fuser f(g, keep, out, views);
  // Prologues before groups: a group would otherwise absorb the producer of a Mul's x, which
  // the products then could not read.
  f.epilogues();
  f.prologues();
  f.groups();
}

namespace {

// Every value an emitted kernel reads from memory, or writes, must exist: not live only inside
// a fused kernel. Register reads (a chained slot, a group member's output) are not memory reads.
Status checkFusion(const ir::Graph& g, const LayoutLowering& out) {
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes.size()); ++id) {
    const NodeLowering& nl = out.nodes[id];
    if (g.nodes[id].dead || nl.skip || nl.deferred) continue;
    const NodeId k = nl.runs != ir::kNoNode ? nl.runs : id;
    const NodeLowering& kl = out.nodes[k];
    std::vector<ValueId> registers;
    for (const codegen::FusedOp& op : kl.layouts.inlined) registers.push_back(g.nodes[op.node].outputs[0]);
    auto reads = [&](const ir::Node& n, const std::vector<std::optional<codegen::OperandLayout>>& ins, int chained) -> Status {
      for (size_t s = 0; s < n.inputs.size(); ++s) {
        if (static_cast<int>(s) == chained || n.inputs[s] == ir::kNoValue) continue;
        const ValueId v = s < ins.size() && ins[s] ? ins[s]->value : n.inputs[s];
        if (std::find(registers.begin(), registers.end(), n.inputs[s]) != registers.end()) continue;
        if (out.inKernelOnly[v])
          return makeError("fusion: {} reads {}, which only exists inside a fused kernel", ir::describeNode(g, n),
                           g.values[v].name);
      }
      return Status::success();
    };
    const ir::Node& kn = g.nodes[k];
    FBL_TRY(reads(kn, kl.layouts.inputs, -1));
    for (const codegen::FusedOp& op : kl.layouts.epilogue) FBL_TRY(reads(g.nodes[op.node], op.inputs, op.chained));
    for (const codegen::FusedOp& op : kl.layouts.inlined) FBL_TRY(reads(g.nodes[op.node], op.inputs, -1));
    const ValueId written = kl.layouts.epilogueOutput != ir::kNoValue ? kl.layouts.epilogueOutput
                            : kn.outputs.empty()                       ? ir::kNoValue
                                                                       : kn.outputs[0];
    if (written != ir::kNoValue && out.inKernelOnly[written])
      return makeError("fusion: {} writes {}, which was fused away", ir::describeNode(g, kn), g.values[written].name);
  }
  return Status::success();
}

}  // namespace

Status finishFusion(const ir::Graph& g, LayoutLowering& out) {
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes.size()); ++id) {
    NodeLowering& hl = out.nodes[id];
    for (codegen::FusedOp& op : hl.layouts.inlined) op.inputs = out.nodes[op.node].layouts.inputs;
    for (codegen::FusedOp& st : hl.layouts.epilogue) {
      const NodeLowering& sl = out.nodes[st.node];
      st.inputs = sl.layouts.inputs;
      st.inputs[st.chained].reset();
      if (sl.runs == id) {  // the chain's last step: the kernel writes its value, as it is stored
        hl.layouts.epilogueOutput = g.nodes[st.node].outputs[0];
        hl.layouts.outputs[0] = sl.layouts.outputs[0];
      }
    }
  }
  return checkFusion(g, out);
}

}  // namespace fbl::plan
