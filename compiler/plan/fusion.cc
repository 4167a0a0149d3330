// Fusion: the rewrites are described in fusion.h. Both need to know who reads each value: a
// value fuses only into its one reader (epilogue) or into readers that are all products
// (prologue), and never when the plan must keep it in memory.
#include "compiler/plan/fusion.h"

#include <algorithm>

#include "compiler/codegen/emit_util.h"
#include "compiler/ops/op_traits.h"
#include "compiler/ops/reduction_axis.h"
#include "compiler/passes/assign_rtile.h"
#include "compiler/plan/lowering_printer.h"

namespace fbl::plan {

namespace {

using ir::NodeId;
using ir::ValueId;

bool isTiledMatmul(const ir::Graph& g, const ir::Node& n) {
  return ops::isProduct(n.op) && codegen::usesTiledMatmul(g, n);
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
  Fuser(const ir::Graph& g, LayoutLowering& out)
      : g_(g), out_(out), reads_(valueReads(g, out)) {}

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
      // A low-rank term's Add is the product's only reader, so it is the chain's first step.
      if (out_.nodes[id].layouts.lowRank) steps[0].addsLowRank = true;
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

  // Add(X, Q), X = H's product (H a tiled MatMul or Gemm with alpha 1) read by the Add alone, and
  // Q = P s1 s2 ... (P a MatMul whose K is at most kMaxLowRank and an eighth of H's, each s a
  // Mul by a one-element constant, every value read by the next step alone): H's kernel adds P
  // itself (NodeLayouts::lowRank), so P and its scales run nowhere and Q is never stored. Runs
  // before epilogues() (the low-rank-terms pass, before fusion), which then chains the Add as
  // H's first step: an Add that fitsInside H is the first step of H's chain.
  bool lowRanks() {
    bool any = false;
    for (NodeId id = 0; id < static_cast<NodeId>(g_.nodes.size()); ++id) {
      const ir::Node& add = g_.nodes[id];
      const NodeLowering& al = out_.nodes[id];
      if (add.op != "Add" || add.inputs.size() != 2 || !runsAlone(add, al) || !allFloat(g_, add) ||
          add.phase == ir::Phase::Optimizer || !al.materialise.empty() || al.layouts.inputs[0] || al.layouts.inputs[1])
        continue;
      for (int xs = 0; xs < 2; ++xs)
        if (tryLowRank(id, xs)) {
          any = true;
          break;
        }
    }
    return any;
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
      const int xs = scaledSlot(m);
      if (xs < 0 || out_.keep[y] || reads_[y].empty() || out_.inKernelOnly[m.inputs[xs]]) continue;
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
          out_.views[{r.node, r.slot}] = layout::IndexMap::identity(g_.values[x].shape);
        }
        hl.layouts.epilogue.insert(hl.layouts.epilogue.begin(), codegen::FusedOp{id, xs, {}});
        reads_[x].push_back({r.node, r.slot, true});
      }
      ml.skip = ml.fused = true;
      out_.inKernelOnly[y] = true;
    }
  }

 private:
  // A low-rank term's rank: at most this, and at most an eighth of the host's K, so that the
  // host's kernel, which walks it as extra K tiles, takes at most 1/8 more K steps.
  static constexpr int64_t kMaxLowRank = 64;

  // Mul(x, s) with s one element: x's slot (x has the output's shape), else -1.
  int scaledSlot(const ir::Node& m) const {
    const ir::Shape& outShape = g_.values[m.outputs[0]].shape;
    int xs = -1;
    for (int s = 0; s < 2; ++s) {
      const ir::Shape& other = g_.values[m.inputs[1 - s]].shape;
      if (g_.values[m.inputs[s]].shape == outShape && ir::numElements(other) == 1 && other.size() <= outShape.size())
        xs = s;
    }
    return xs;
  }

  // Add `addId`'s input `xs` is the host product's, the other the low-rank term's (lowRanks()).
  bool tryLowRank(NodeId addId, int xs) {
    const ir::Node& add = g_.nodes[addId];
    const ir::Shape& shape = g_.values[add.outputs[0]].shape;
    const ValueId x = add.inputs[xs];
    const NodeId hostId = g_.values[x].producer;
    if (hostId == ir::kNoNode || shape.size() < 2) return false;
    const ir::Node& host = g_.nodes[hostId];
    const ValueRead* xr = onlyPlainRead(x);
    if (!runsAlone(host, out_.nodes[hostId]) || !isTiledMatmul(g_, host) || host.phase != add.phase ||
        xr == nullptr || xr->node != addId || g_.values[x].shape != shape || !fitsInside(addId, host, shape) ||
        out_.nodes[hostId].layouts.lowRank || (host.op == "Gemm" && host.attrFloat("alpha", 1.0f) != 1.0f))
      return false;
    // Back from Q through the scales to P.
    std::vector<NodeId> scales;
    ValueId cur = add.inputs[1 - xs];
    NodeId reader = addId;
    for (;;) {
      const NodeId p = g_.values[cur].producer;
      const ValueRead* r = onlyPlainRead(cur);
      if (p == ir::kNoNode || r == nullptr || r->node != reader || g_.values[cur].shape != shape ||
          !runsAlone(g_.nodes[p], out_.nodes[p]) || g_.nodes[p].phase != add.phase)
        return false;
      const ir::Node& pn = g_.nodes[p];
      if (pn.op != "Mul") break;
      const NodeLowering& pl = out_.nodes[p];
      const int chained = pn.inputs.size() == 2 ? scaledSlot(pn) : -1;
      if (chained >= 0) {  // the factor must be a constant the kernel can inline
        const ir::Value& factor = g_.values[pn.inputs[1 - chained]];
        if (factor.dtype != ir::DType::F32 || !codegen::scalarLiteral(factor)) return false;
      }
      if (chained < 0 || !allFloat(g_, pn) || !pl.materialise.empty() || pl.layouts.inputs[chained] ||
          !pl.layouts.inlined.empty())
        return false;
      scales.insert(scales.begin(), p);
      reader = p;
      cur = pn.inputs[chained];
    }
    const NodeId pId = g_.values[cur].producer;
    const ir::Node& p = g_.nodes[pId];
    if (p.op != "MatMul" || !isTiledMatmul(g_, p) || !allFloat(g_, p)) return false;
    const ir::Shape& pl = g_.values[p.inputs[0]].shape;
    const ir::Shape& pr = g_.values[p.inputs[1]].shape;
    const std::optional<int64_t> kAxis = ops::reductionAxis(g_, host, 0);
    const int64_t hostK = kAxis ? g_.values[host.inputs[0]].shape[*kAxis] : 1;
    // L2 batched like the output and R2 a matrix: the term folds or batches with the host.
    if (pl.size() != shape.size() || pr.size() != 2 || pl.back() > kMaxLowRank || pl.back() * 8 > hostK ||
        !std::equal(pl.begin(), pl.end() - 2, shape.begin()))
      return false;
    for (ValueId v : {p.inputs[0], p.inputs[1]})
      if (out_.inKernelOnly[v]) return false;
    for (NodeId n : scales) {
      out_.nodes[n].skip = out_.nodes[n].fused = true;
      out_.inKernelOnly[g_.nodes[n].outputs[0]] = true;
    }
    out_.nodes[pId].skip = out_.nodes[pId].fused = true;
    out_.inKernelOnly[p.outputs[0]] = true;
    out_.nodes[hostId].layouts.lowRank = codegen::LowRankTerm{pId, std::move(scales), {}};
    return true;
  }

  // The single reader of `v` reading it as stored (not through a map), or null.
  const ValueRead* onlyPlainRead(ValueId v) const {
    if (out_.keep[v] || reads_[v].size() != 1 || reads_[v][0].through || reads_[v][0].slot < 0) return nullptr;
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
  LayoutLowering& out_;
  std::vector<std::vector<ValueRead>> reads_;
};

}  // namespace

void planFusion(const ir::Graph& g, LayoutLowering& out) {
  Fuser f(g, out);
  // Prologues before groups: a group would otherwise absorb the producer of a Mul's x, which
  // the products then could not read.
  f.epilogues();
  f.prologues();
  f.groups();
}

bool planLowRankTerms(const ir::Graph& g, LayoutLowering& out) {
  return Fuser(g, out).lowRanks();
}

void withdrawLowRankTerms(const ir::Graph& g, LayoutLowering& out) {
  for (NodeLowering& hl : out.nodes) {
    if (!hl.layouts.lowRank) continue;
    std::vector<NodeId> nodes = hl.layouts.lowRank->scales;
    nodes.push_back(hl.layouts.lowRank->product);
    for (NodeId n : nodes) {
      out.nodes[n].skip = out.nodes[n].fused = false;
      out.inKernelOnly[g.nodes[n].outputs[0]] = false;
    }
    hl.layouts.lowRank.reset();
  }
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
    for (const codegen::FusedOp& op : kl.layouts.epilogue)
      if (!op.addsLowRank) FBL_TRY(reads(g.nodes[op.node], op.inputs, op.chained));
    if (kl.layouts.lowRank) FBL_TRY(reads(g.nodes[kl.layouts.lowRank->product], kl.layouts.lowRank->inputs, -1));
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
    if (hl.layouts.lowRank) hl.layouts.lowRank->inputs = out.nodes[hl.layouts.lowRank->product].layouts.inputs;
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

Result<bool> FusionPass::run(ir::Graph& g) {
  FBL_ASSERT(out_.strategy == strategy::Strategy::kFBLayout);  // the baselines disable the pass
  planFusion(g, out_);
  out_.fusionPlanned = true;
  return std::any_of(out_.nodes.begin(), out_.nodes.end(), [](const NodeLowering& nl) { return nl.fused; });
}

std::string FusionPass::dump(const ir::Graph& g) const { return formatFusion(g, out_); }

}  // namespace fbl::plan
