// layout lowering: the algorithm is in layout_lowering.h (steps 1-6; fusion in fusion.cc).
#include "compiler/plan/layout_lowering.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "compiler/codegen/emit_util.h"
#include "compiler/ops/reduction_axis.h"
#include "compiler/passes/assign_rtile.h"
#include "compiler/plan/fusion.h"
#include "compiler/plan/lowering_printer.h"

namespace fbl::plan {

namespace {

using codegen::OperandLayout;
using ir::NodeId;
using ir::ValueId;
using passes::ReadThrough;
using strategy::Strategy;

// Ops the plan builder turns into aliases of their input's bytes (kernel_emitter.cc's views).
bool isViewOp(const std::string& op) {
  return op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" || op == "Flatten" || op == "Identity" ||
         op == "Dropout";
}

bool isMatmul(const ir::Node& n) { return n.op == "MatMul" || n.op == "Gemm"; }

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

class Lowerer {
 public:
  Lowerer(const ir::Graph& g, const passes::LayoutAssignment& a) : g_(g), a_(a) {}

  // Steps 1-3 (lower-layouts).
  Status reads(LayoutLowering& out, const std::vector<ValueId>& mustExist) {
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
    keep_.assign(g_.values.size(), false);
    for (ValueId v : mustExist) keep_[v] = true;
    for (ValueId v : g_.outputs) keep_[v] = true;
    return Status::success();
  }

  // Step 5's low-rank terms (fusion.h): fblayout only, and withdrawn again unless fuse() runs.
  bool lowRank(LayoutLowering& out) {
    if (a_.strategy != Strategy::kFBLayout) return false;
    return planLowRankTerms(g_, keep_, out);
  }

  // Step 5's plan (fusion): fblayout only. True when any node fused.
  bool fuse(LayoutLowering& out) {
    if (a_.strategy != Strategy::kFBLayout) return false;
    planFusion(g_, keep_, out, views_);
    fused_ = true;
    return std::any_of(out.nodes.begin(), out.nodes.end(), [](const NodeLowering& nl) { return nl.fused; });
  }

  // Step 4, the end of step 5, step 6 (assign-storage).
  Status storage(LayoutLowering& out, const LoweringOptions& options) {
    if (!fused_) withdrawLowRankTerms(g_, out);
    FBL_TRY(chooseStorage(out, keep_, options));
    if (fused_) FBL_TRY(finishFusion(g_, out));
    // 6: kinds and counts.
    for (NodeId id = 0; id < static_cast<NodeId>(g_.nodes.size()); ++id) {
      const ir::Node& n = g_.nodes[id];
      NodeLowering& nl = out.nodes[id];
      if (n.dead) continue;
      if (nl.fused) ++out.counts.fusedNodes;
      if (!nl.layouts.epilogue.empty()) ++out.counts.fusedMatmuls;
      if (!nl.layouts.inlined.empty()) ++out.counts.fusedElementwise;
      if (nl.layouts.lowRank) ++out.counts.lowRankTerms;
      if (nl.skip) {
        if (!nl.fused) ++out.counts.skippedNodes;
        continue;
      }
      if (a_.nodeClass.size() > static_cast<size_t>(id) && a_.nodeClass[id] == passes::OpClass::kFtiD) {
        nl.kind = "transform";
        if (!isViewOp(n.op)) ++out.counts.movementKernels;
      }
      for (const auto& in : nl.layouts.inputs)
        if (in) {
          ++out.counts.readsThrough;
          if (in->transposed) ++out.counts.transposedReads;
        }
      out.counts.materialised += static_cast<int64_t>(nl.materialise.size());
    }
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
        views_[{r.consumer, r.slot}] = r.view;
        const bool decided = r.decision == ReadThrough::Decision::kTileMap || r.decision == ReadThrough::Decision::kIndexMap;
        if (!decided && r.structural) continue;  // the chain runs op by op
        const bool readable = codegen::supportsOperandLayouts(g_, n) &&
                              !(ol.sign && (isMatmul(n) || n.op == "Gather" || codegen::isAttentionOp(n.op)));
        // A chain of views over a row-major source costs nothing as it is (the views alias its
        // bytes), so a consumer that cannot read maps reads it as written, not through a copy.
        const bool viewsOnly = std::all_of(r.chain.begin(), r.chain.end(),
                                           [&](NodeId c) { return isViewOp(g_.nodes[c].op); });
        if (!readable && viewsOnly) continue;
        // An explicit transpose of the last two dims into a MatMul: the MatMul's transposed path
        // reads it as stored (what reuse does), cheaper than a conversion copy.
        if (!decided && readable && isMatmul(n) && r.slot < 2 && r.chain.size() == 1 &&
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
        if (n.dead || !isMatmul(n) || !codegen::supportsOperandLayouts(g_, n)) continue;
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
    for (const auto& [v, req] : materialise_) out.nodes[req.consumer].materialise.emplace_back(v, req.from);
    return Status::success();
  }

  // The first consumer (in node order) that needs `v` materialised gets the copy.
  void requestMaterialise(ValueId v, NodeId consumer, OperandLayout from, const layout::IndexMap& view) {
    auto it = materialise_.find(v);
    if (it == materialise_.end() || consumer < it->second.consumer) materialise_[v] = {consumer, std::move(from), view};
  }

  // Step 4.
  Status chooseStorage(LayoutLowering& out, const std::vector<bool>& keep, const LoweringOptions& options) {
    // Who reads each value, and how: plain slots, reads through a map, copies (slot -1). A fused
    // node's operands are read by the kernel it runs in, through its slots' layouts (finishFusion).
    const std::vector<std::vector<ValueRead>> reads = valueReads(g_, out);
    std::vector<bool> host(g_.values.size(), false), updatedInPlace(g_.values.size(), false),
        update(g_.values.size(), false);
    for (ValueId v : options.host.hostValues) host[v] = true;
    for (const auto& [current, updated] : options.host.inPlaceUpdates) {
      updatedInPlace[current] = true;
      if (updated != ir::kNoValue) update[updated] = true;
    }
    for (ValueId v = 0; v < static_cast<ValueId>(g_.values.size()); ++v) {
      if (out.inKernelOnly[v]) continue;  // fused away: no buffer to lay out
      if (update[v]) continue;            // stored like the value it updates (below)
      FBL_ASSIGN(std::optional<StorageChoice> choice, chooseFor(v, out, reads[v], keep, host, updatedInPlace, options));
      if (!choice) continue;
      FBL_TRY(store(v, *choice, out, reads[v]));
    }
    FBL_TRY(stateLikeParameters(out, reads, host));
    // The optimizer writes an updated value where its current value lies (in place, or through a
    // commit that copies bytes).
    for (const auto& [current, updated] : options.host.inPlaceUpdates) {
      auto it = out.storage.find(current);
      if (it == out.storage.end() || updated == ir::kNoValue) continue;
      const NodeId p = producer(updated);
      if (p == ir::kNoNode || !codegen::supportsOperandLayouts(g_, g_.nodes[p]))
        return makeError("layout lowering: {} is stored as {} but its update {} is not written through layouts",
                         g_.values[current].name, out.storageNote.at(current), g_.values[updated].name);
      const ir::Node& pn = g_.nodes[p];
      for (size_t o = 0; o < pn.outputs.size(); ++o)
        if (pn.outputs[o] == updated) out.nodes[p].layouts.outputs[o] = it->second;
      for (const ValueRead& r : reads[updated])
        if (r.slot >= 0 && !r.through) out.nodes[r.node].layouts.inputs[r.slot] = OperandLayout{updated, it->second, false, {}};
      out.storage.emplace(updated, it->second);
      out.storageNote[updated] = out.storageNote.at(current);
    }
    return Status::success();
  }

  struct StorageChoice {
    layout::Layout layout;
    std::string note;  // "rtile 16x64 strips", "image", "texture", "transposed"
  };

  // The layout the strategy gives `v`, or nullopt for row-major; records why a layout the
  // strategy wanted was not used.
  Result<std::optional<StorageChoice>> chooseFor(ValueId v, LayoutLowering& out, const std::vector<ValueRead>& reads,
                                                 const std::vector<bool>& keep, const std::vector<bool>& host,
                                                 const std::vector<bool>& updatedInPlace,
                                                 const LoweringOptions& options) {
    const ir::Value& val = g_.values[v];
    if (auto enc = options.host.encodings.find(v); enc != options.host.encodings.end()) {
      const std::string why = encodedUnreadable(reads);
      if (why.empty()) {
        FBL_ASSIGN(layout::Layout l, layout::Layout::encodedMatrix(enc->second));
        return std::optional<StorageChoice>(StorageChoice{std::move(l), enc->second.str()});
      }
      out.storageWhy[v] = fmt::format("{} values stored f32: {}", enc->second.str(), why);
    }
    const passes::RTileEntry* entry = nullptr;
    bool transpose = false;  // a narrow weight stored transposed (narrowWeightReadAlongK)
    if (a_.strategy == Strategy::kFBLayout) {
      if (v < static_cast<ValueId>(a_.values.size()) && a_.values[v].kind == passes::ValueLayout::Kind::kRTile)
        entry = a_.rtileOf(v);
      transpose = entry == nullptr && host[v] && narrowWeightReadAlongK(v, reads, options.narrowWeightSide);
      if (entry == nullptr && !transpose) return std::optional<StorageChoice>();
    } else if (!options.storage.images) {
      return std::optional<StorageChoice>();  // the baselines keep buffers row-major
    }
    auto demote = [&](std::string why) -> Result<std::optional<StorageChoice>> {
      if (entry) {
        ++out.counts.rtileDemoted;
        out.storageWhy[v] = std::move(why);
      }
      return std::optional<StorageChoice>();
    };
    const NodeId p = producer(v);
    const bool hostWritten = p == ir::kNoNode && host[v];
    if (val.dtype != ir::DType::F32 || val.shape.size() < 2) return demote("not a float matrix");
    if (p == ir::kNoNode && !hostWritten) return demote("a constant of the plan, uploaded as it is");
    if (p != ir::kNoNode && (out.nodes[p].skip || !codegen::supportsOperandLayouts(g_, g_.nodes[p])))
      return demote(fmt::format("its producer {} writes row-major", g_.nodes[p].op));
    if (keep[v] && !hostWritten) return demote("read back by the runtime");
    bool read = false;
    for (const ValueRead& r : reads) {
      if (r.slot < 0) continue;  // a copy reads any buffer layout
      read = true;
      if (!codegen::supportsOperandLayouts(g_, g_.nodes[r.node]))
        return demote(fmt::format("read by {}, which reads row-major", g_.nodes[r.node].op));
    }
    if (!read) return demote("no kernel reads it");
    if (transpose) return std::optional<StorageChoice>(transposedStorage(val.shape));
    // Image storage: a writer of whole texels, readers that fetch texels, not updated in place.
    if (options.storage.images && !updatedInPlace[v]) {
      FBL_ASSIGN(std::optional<layout::Layout> image, imageLayoutFor(v, entry, options.storage));
      if (image && writesTexels(v, out) && readsTexels(*image, reads, out))
        return std::optional<StorageChoice>(StorageChoice{*image, entry ? "rtile " + entry->spec().str()
                                                                          : (a_.strategy == Strategy::kReuse ? "image" : "texture")});
    }
    if (!entry) return std::optional<StorageChoice>();
    auto tiled = layout::Layout::rtile(val.shape, entry->spec(), layout::Storage::Buffer);
    if (!tiled.ok()) return demote(tiled.error().message);
    return std::optional<StorageChoice>(StorageChoice{*tiled, "rtile " + entry->spec().str()});
  }

  // Why some kernel cannot read an encoded weight ("" when every one dequantizes it,
  // codegen::readsEncoded): copies and kernels other than products and gathers do not.
  std::string encodedUnreadable(const std::vector<ValueRead>& reads) const {
    for (const ValueRead& r : reads) {
      if (r.slot < 0) return "a copy reads it";
      if (!codegen::readsEncoded(g_, g_.nodes[r.node], r.slot)) return fmt::format("read by {}", ir::describeNode(g_, g_.nodes[r.node]));
    }
    return "";
  }

  // Is `v` a narrow weight that a product walks along its columns: a float matrix at most
  // `side` columns wide and longer than wide whose columns some MatMul operand reduces over?
  // Stored row-major, each step of that walk is the next short row (a cache line each for a
  // product's neighbouring K slices); stored transposed, the walk is contiguous. Products that
  // reduce along its rows (h B^T) read the transposed storage as a plain row-major operand.
  bool narrowWeightReadAlongK(ValueId v, const std::vector<ValueRead>& reads, int64_t side) const {
    const ir::Value& val = g_.values[v];
    if (side <= 0 || producer(v) != ir::kNoNode || val.dtype != ir::DType::F32 || val.shape.size() != 2) return false;
    if (val.shape[1] > side || val.shape[0] <= val.shape[1]) return false;
    for (const ValueRead& r : reads) {
      const ir::Node& n = g_.nodes[r.node];
      if (r.slot < 0 || r.slot > 1 || !isMatmul(n)) continue;
      const std::optional<int64_t> axis = ops::reductionAxis(g_, n, r.slot);
      if (!axis) continue;
      const int64_t dim = r.through ? passes::landingDim(views_.at({r.node, r.slot}), *axis) : *axis;
      if (dim == 0) return true;
    }
    return false;
  }

  static StorageChoice transposedStorage(const ir::Shape& shape) {
    auto l = layout::Layout::permuted(shape, {1, 0});
    FBL_ASSERT(l.ok());
    return StorageChoice{*l, "transposed"};
  }

  // Optimizer state (AdamW's m and v, SGD's momentum) is stored like the parameter it belongs
  // to where that is transposed, so the update reads every operand alike (emitOptimizer then
  // walks the storage in order).
  Status stateLikeParameters(LayoutLowering& out, const std::vector<std::vector<ValueRead>>& reads,
                             const std::vector<bool>& host) {
    for (NodeId id = 0; id < static_cast<NodeId>(g_.nodes.size()); ++id) {
      const ir::Node& n = g_.nodes[id];
      if (n.dead || !codegen::isOptimizerOp(n.op) || n.inputs.empty()) continue;
      auto param = out.storageNote.find(n.inputs[0]);
      if (param == out.storageNote.end() || param->second != "transposed") continue;
      const layout::Layout& l = out.storage.at(n.inputs[0]);
      for (int slot : codegen::optimizerUpdatedInputs(n.op)) {
        if (slot == 0 || slot >= static_cast<int>(n.inputs.size()) || n.inputs[slot] == ir::kNoValue) continue;
        const ValueId st = n.inputs[slot];
        if (!host[st] || producer(st) != ir::kNoNode || out.storage.count(st) || g_.values[st].shape != l.shape()) continue;
        const bool layoutsEverywhere = std::all_of(reads[st].begin(), reads[st].end(), [&](const ValueRead& r) {
          return r.slot < 0 || codegen::supportsOperandLayouts(g_, g_.nodes[r.node]);
        });
        if (layoutsEverywhere) FBL_TRY(store(st, transposedStorage(l.shape()), out, reads[st]));
      }
    }
    return Status::success();
  }

  // The strategy's image layout of `v`, fitted to the device's extent; nullopt if it cannot fit.
  Result<std::optional<layout::Layout>> imageLayoutFor(ValueId v, const passes::RTileEntry* entry,
                                                       const StorageOptions& so) {
    const ir::Shape& shape = g_.values[v].shape;
    std::optional<layout::Layout> image;
    int64_t alignW = so.blockW, alignH = so.blockH;
    if (entry) {
      auto l = layout::Layout::rtile(shape, entry->spec(), layout::Storage::Image2D);
      if (!l.ok()) return std::optional<layout::Layout>();
      image = *l;
      // Wrapped bands hold whole tiles.
      alignW = entry->choice.layout.tile.rectW;
      alignH = entry->choice.layout.tile.rectH;
    } else {
      image = a_.strategy == Strategy::kReuse ? layout::Layout::image(shape) : layout::Layout::texture(shape);
    }
    auto fitted = image->fitImage(so.maxImageWidth, so.maxImageHeight, alignW, alignH);
    if (!fitted.ok()) return std::optional<layout::Layout>();
    if (so.maxImageBytes > 0 && fitted->imageWidth() * fitted->imageHeight() * 16 > so.maxImageBytes)
      return std::optional<layout::Layout>();
    return std::optional<layout::Layout>(*fitted);
  }

  // Does the kernel that writes `v` write whole texels (the tiled MatMul, also when an epilogue's
  // last step is what it stores), or does the runtime pack it?
  bool writesTexels(ValueId v, const LayoutLowering& out) const {
    const NodeId p = producer(v);
    if (p == ir::kNoNode) return true;  // a host value: the runtime's pack kernel writes it
    const NodeId writer = out.nodes[p].runs != ir::kNoNode ? out.nodes[p].runs : p;
    return codegen::writesImageTexels(g_, g_.nodes[writer]);
  }

  // Does every reader fetch `v`'s texels as `image` lays them out?
  bool readsTexels(const layout::Layout& image, const std::vector<ValueRead>& reads, const LayoutLowering& out) const {
    for (const ValueRead& r : reads) {
      if (r.slot < 0) return false;  // copies read buffers
      const ir::Node& n = g_.nodes[r.node];
      const auto& in = out.nodes[r.node].layouts.inputs[r.slot];
      layout::Layout seen = image;
      if (r.through && !in->transposed) {
        auto composed = image.compose(views_.at({r.node, r.slot}));
        if (!composed.ok()) return false;
        seen = *composed;
      }
      if (!codegen::readsImageTexels(g_, n, r.slot, seen)) return false;
    }
    return true;
  }

  // Stores `v` as `choice`: its producer writes through it, every read composes with it.
  Status store(ValueId v, const StorageChoice& choice, LayoutLowering& out, const std::vector<ValueRead>& reads) {
    const layout::Layout& l = choice.layout;
    const NodeId p = producer(v);
    if (p != ir::kNoNode) {
      const ir::Node& pn = g_.nodes[p];
      for (size_t o = 0; o < pn.outputs.size(); ++o)
        if (pn.outputs[o] == v) out.nodes[p].layouts.outputs[o] = l;
    } else {
      ++out.counts.packedValues;
    }
    for (const ValueRead& r : reads) {
      if (r.slot < 0) {
        for (auto& [mv, from] : out.nodes[r.node].materialise) {
          if (from.value != v) continue;
          FBL_ASSIGN(from.layout, l.compose(materialise_.at(mv).view));
        }
        continue;
      }
      auto& in = out.nodes[r.node].layouts.inputs[r.slot];
      if (!r.through) {
        in = OperandLayout{v, l, false, {}};
        continue;
      }
      if (in->transposed) {
        in->layout = l;  // read as stored, through the MatMul's transposed path
        continue;
      }
      FBL_ASSIGN(in->layout, l.compose(views_.at({r.node, r.slot})));
    }
    out.storage.emplace(v, l);
    out.storageNote[v] = choice.note;
    if (choice.note.rfind("rtile", 0) == 0) ++out.counts.rtileValues;
    if (l.storage() == layout::Storage::Image2D) ++out.counts.imageValues;
    return Status::success();
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
  std::vector<bool> keep_;  // by value: must exist in memory (read back, graph outputs)
  bool fused_ = false;
  // Values copied from a source (step 2): who copies first, from where, through which view.
  struct Materialise {
    NodeId consumer;
    OperandLayout from;
    layout::IndexMap view;  // consumer index -> source index (composed again if the source is tiled)
  };
  std::map<ValueId, Materialise> materialise_;
  std::map<std::pair<NodeId, int>, layout::IndexMap> views_;  // fblayout reads: consumer index -> source index
};

}  // namespace

std::vector<std::vector<ValueRead>> valueReads(const ir::Graph& g, const LayoutLowering& l) {
  std::vector<std::vector<ValueRead>> reads(g.values.size());
  for (NodeId id = 0; id < static_cast<NodeId>(g.nodes.size()); ++id) {
    const ir::Node& n = g.nodes[id];
    const NodeLowering& nl = l.nodes[id];
    if (n.dead || (nl.skip && !nl.fused)) continue;
    for (size_t s = 0; s < n.inputs.size(); ++s) {
      if (nl.layouts.inputs[s]) reads[nl.layouts.inputs[s]->value].push_back({id, static_cast<int>(s), true});
      else if (n.inputs[s] != ir::kNoValue) reads[n.inputs[s]].push_back({id, static_cast<int>(s), false});
    }
    for (const auto& [v, from] : nl.materialise) reads[from.value].push_back({id, -1, true});
  }
  return reads;
}

struct LoweringState {
  const passes::LayoutAssignment& assignment;
  const std::vector<ValueId>& mustExist;
  const LoweringOptions& options;
  LayoutLowering out;
  std::optional<Lowerer> lowerer;  // made by lower-layouts, on the graph the three passes share
};

Result<bool> LowerLayoutsPass::run(ir::Graph& g) {
  const passes::LayoutAssignment& a = s_.assignment;
  if (a.transforms.size() != g.nodes.size() && a.strategy == Strategy::kFBLayout)
    return makeError("layout lowering: the assignment covers {} nodes, the graph has {}", a.transforms.size(),
                     g.nodes.size());
  s_.out = LayoutLowering{};
  s_.lowerer.emplace(g, a);
  FBL_TRY(s_.lowerer->reads(s_.out, s_.mustExist));
  return false;
}

Result<bool> LowRankTermsPass::run(ir::Graph&) {
  FBL_ASSERT(s_.lowerer.has_value());
  return s_.lowerer->lowRank(s_.out);
}

Result<bool> FusionPass::run(ir::Graph&) {
  FBL_ASSERT(s_.lowerer.has_value());
  return s_.lowerer->fuse(s_.out);
}

Result<bool> AssignStoragePass::run(ir::Graph&) {
  FBL_ASSERT(s_.lowerer.has_value());
  FBL_TRY(s_.lowerer->storage(s_.out, s_.options));
  return false;
}

std::string LowerLayoutsPass::dump(const ir::Graph& g) const { return formatLoweredReads(g, s_.out); }
std::string LowRankTermsPass::dump(const ir::Graph& g) const { return formatFusion(g, s_.out); }
std::string FusionPass::dump(const ir::Graph& g) const { return formatFusion(g, s_.out); }
std::string AssignStoragePass::dump(const ir::Graph& g) const { return formatStorage(g, s_.out); }

LoweringPasses::LoweringPasses(const passes::LayoutAssignment& a, const std::vector<ValueId>& mustExist,
                               const LoweringOptions& options)
    : state_(std::make_unique<LoweringState>(LoweringState{a, mustExist, options, {}, std::nullopt})),
      lower_(*state_),
      lowRank_(*state_),
      fusion_(*state_),
      storage_(*state_) {}

LoweringPasses::~LoweringPasses() = default;

void LoweringPasses::addTo(passes::PassManager& pm) {
  pm.add(lower_, passes::PassSpec::required("the plan builder needs to know what each node runs and reads"));
  pm.add(lowRank_);
  pm.add(fusion_);
  pm.add(storage_, passes::PassSpec::required("the plan builder needs every tensor's layout"));
}

LayoutLowering& LoweringPasses::result() { return state_->out; }

}  // namespace fbl::plan
