// lower-layouts: the algorithm is steps 1-3 of layout_lowering.h.
#include "compiler/plan/lower_layouts.h"

#include <algorithm>
#include <map>

#include "compiler/codegen/emit_util.h"
#include "compiler/ops/op_traits.h"
#include "compiler/plan/lowering_printer.h"

namespace fbl::plan {

namespace {

using codegen::OperandLayout;
using ir::NodeId;
using ir::ValueId;
using passes::ReadThrough;
using strategy::Strategy;

// Transpose swapping exactly the last two dims (what a MatMul's transposed path reads).
bool swapsLastTwo(const ir::Graph& g, const ir::Node& n) {
  if (n.op != "Transpose" || n.inputs.empty()) return false;
  const size_t rank = g.values[n.inputs[0]].shape.size();
  if (rank < 2) return false;
  std::vector<int64_t> perm = n.attrInts("perm");
  if (perm.size() != rank) return false;
  for (size_t d = 0; d + 2 < rank; ++d)
    if (perm[d] != static_cast<int64_t>(d)) return false;
  return perm[rank - 2] == static_cast<int64_t>(rank - 1) && perm[rank - 1] == static_cast<int64_t>(rank - 2);
}

// Steps 1-3 on one graph.
class ReadLowering {
 public:
  ReadLowering(const ir::Graph& g, const passes::LayoutAssignment& a) : g_(g), a_(a) {}

  Status run(LayoutLowering& out, const std::vector<ValueId>& mustExist) {
    out.strategy = a_.strategy;
    out.nodes.resize(g_.nodes.size());
    for (NodeId id = 0; id < static_cast<NodeId>(g_.nodes.size()); ++id) {
      const ir::Node& n = g_.nodes[id];
      out.nodes[id].layouts.inputs.resize(n.inputs.size());
      out.nodes[id].layouts.outputs.resize(n.outputs.size());
    }
    foldable_.assign(g_.nodes.size(), false);
    out.inKernelOnly.assign(g_.values.size(), false);
    FBL_TRY(candidates(out));
    liveness(out, mustExist);
    out.keep.assign(g_.values.size(), false);
    for (ValueId v : mustExist) out.keep[v] = true;
    for (ValueId v : g_.outputs) out.keep[v] = true;
    return Status::success();
  }

 private:
  NodeId producer(ValueId v) const { return v == ir::kNoValue ? ir::kNoNode : g_.values[v].producer; }

  // Steps 1 and 2.
  Status candidates(LayoutLowering& out) {
    if (a_.strategy == Strategy::kFBLayout) {
      for (NodeId id = 0; id < static_cast<NodeId>(g_.nodes.size()); ++id)
        foldable_[id] = !g_.nodes[id].dead && id < static_cast<NodeId>(a_.transforms.size()) && a_.transforms[id].folded;
      for (const ReadThrough& r : a_.reads) {
        const ir::Node& n = g_.nodes[r.consumer];
        if (n.dead) continue;
        const ir::Value& src = g_.values[r.source];
        auto view = layout::Layout::rowMajor(src.shape).compose(r.view);
        if (!view.ok())
          return makeError("layout lowering: {} input {}: {}", ir::describeNode(g_, n), r.slot, view.error().message);
        OperandLayout ol{r.source, std::move(*view), false, r.sign};
        out.views[{r.consumer, r.slot}] = r.view;
        const bool decided = r.decision == ReadThrough::Decision::kTileMap || r.decision == ReadThrough::Decision::kIndexMap;
        if (!decided && r.structural) continue;  // the chain runs op by op
        const bool readable = codegen::supportsOperandLayouts(g_, n) &&
                              !(ol.sign && (ops::isProduct(n.op) || n.op == "Gather" || codegen::isAttentionOp(n.op)));
        // A chain of views over a row-major source costs nothing as it is (the views alias its
        // bytes), so a consumer that cannot read maps reads it as written, not through a copy.
        const bool viewsOnly = std::all_of(r.chain.begin(), r.chain.end(),
                                           [&](NodeId c) { return ops::isView(g_.nodes[c].op); });
        if (!readable && viewsOnly) continue;
        // An explicit transpose of the last two dims into a MatMul: the MatMul's transposed path
        // reads it as stored (what reuse does), cheaper than a conversion copy.
        if (!decided && readable && ops::isProduct(n.op) && r.slot < 2 && r.chain.size() == 1 &&
            swapsLastTwo(g_, g_.nodes[r.chain[0]]) && !ol.sign) {
          out.nodes[r.consumer].layouts.inputs[r.slot] =
              OperandLayout{r.source, layout::Layout::rowMajor(src.shape), true, {}};
          continue;
        }
        if (decided && readable) {
          out.nodes[r.consumer].layouts.inputs[r.slot] = std::move(ol);
        } else {
          requestMaterialise(n.inputs[r.slot], r.consumer, std::move(ol), r.view);
        }
      }
    } else if (a_.strategy == Strategy::kReuse) {
      for (NodeId id = 0; id < static_cast<NodeId>(g_.nodes.size()); ++id) {
        const ir::Node& n = g_.nodes[id];
        if (n.dead || !ops::isProduct(n.op) || !codegen::supportsOperandLayouts(g_, n)) continue;
        for (int s = 0; s < 2 && s < static_cast<int>(n.inputs.size()); ++s) {
          const NodeId p = producer(n.inputs[s]);
          if (p == ir::kNoNode || !swapsLastTwo(g_, g_.nodes[p])) continue;
          // Gemm's own transA/transB would have to compose with this one; keep it simple.
          if (n.op == "Gemm") continue;
          foldable_[p] = true;
          const ValueId src = g_.nodes[p].inputs[0];
          out.nodes[id].layouts.inputs[s] = OperandLayout{src, layout::Layout::rowMajor(g_.values[src].shape), true, {}};
        }
      }
    }
    for (const auto& [v, req] : materialise_) {
      out.nodes[req.consumer].materialise.emplace_back(v, req.from);
      out.materialiseViews.emplace(v, req.view);
    }
    return Status::success();
  }

  // The first consumer (in node order) that needs `v` materialised gets the copy.
  void requestMaterialise(ValueId v, NodeId consumer, OperandLayout from, const layout::IndexMap& view) {
    auto it = materialise_.find(v);
    if (it == materialise_.end() || consumer < it->second.consumer) materialise_[v] = {consumer, std::move(from), view};
  }

  // Step 3.
  void liveness(LayoutLowering& out, const std::vector<ValueId>& mustExist) {
    std::vector<bool> needed(g_.nodes.size(), false);
    auto need = [&](ValueId v) {
      const NodeId p = producer(v);
      if (p != ir::kNoNode) needed[p] = true;
    };
    for (ValueId v : mustExist) need(v);
    for (ValueId v : g_.outputs) need(v);
    for (NodeId id = static_cast<NodeId>(g_.nodes.size()) - 1; id >= 0; --id) {
      const ir::Node& n = g_.nodes[id];
      NodeLowering& nl = out.nodes[id];
      if (n.dead) continue;
      if (foldable_[id] && !needed[id]) {
        nl.skip = true;
        continue;
      }
      for (auto& [v, from] : nl.materialise) need(from.value);
      for (size_t s = 0; s < n.inputs.size(); ++s) {
        if (n.inputs[s] == ir::kNoValue) continue;
        if (nl.layouts.inputs[s]) need(nl.layouts.inputs[s]->value);
        else if (!materialise_.count(n.inputs[s])) need(n.inputs[s]);
      }
    }
    // A value whose own chain runs after all (another reader needed it) is not copied as well.
    for (NodeId id = 0; id < static_cast<NodeId>(g_.nodes.size()); ++id) {
      auto& m = out.nodes[id].materialise;
      std::erase_if(m, [&](const auto& e) {
        const NodeId p = producer(e.first);
        return p != ir::kNoNode && !out.nodes[p].skip;
      });
    }
  }

  const ir::Graph& g_;
  const passes::LayoutAssignment& a_;
  std::vector<bool> foldable_;
  // Values copied from a source (step 2): who copies first, from where, through which view.
  struct Materialise {
    NodeId consumer;
    OperandLayout from;
    layout::IndexMap view;  // consumer index -> source index (composed again if the source is tiled)
  };
  std::map<ValueId, Materialise> materialise_;
};

}  // namespace

Result<bool> LowerLayoutsPass::run(ir::Graph& g) {
  if (a_.transforms.size() != g.nodes.size() && a_.strategy == Strategy::kFBLayout)
    return makeError("layout lowering: the assignment covers {} nodes, the graph has {}", a_.transforms.size(),
                     g.nodes.size());
  out_ = LayoutLowering{};
  FBL_TRY(ReadLowering(g, a_).run(out_, mustExist_));
  return false;
}

std::string LowerLayoutsPass::dump(const ir::Graph& g) const { return formatLoweredReads(g, out_); }

}  // namespace fbl::plan
