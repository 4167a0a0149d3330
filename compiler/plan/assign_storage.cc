// assign-storage: the algorithm is step 4 of layout_lowering.h (and the ends of steps 5 and 6).
#include "compiler/plan/assign_storage.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "compiler/codegen/emit_util.h"
#include "compiler/ops/op_traits.h"
#include "compiler/ops/reduction_axis.h"
#include "compiler/passes/assign_rtile.h"
#include "compiler/plan/fusion.h"
#include "compiler/plan/lowering_printer.h"

namespace fbl::plan {

namespace {

using codegen::OperandLayout;
using ir::NodeId;
using ir::ValueId;
using strategy::Strategy;

// Step 4 and the ends of steps 5 and 6 on one graph.
class StorageLowering {
 public:
  StorageLowering(const ir::Graph& g, const passes::LayoutAssignment& a) : g_(g), a_(a) {}

  // Step 4, the end of step 5, step 6.
  Status run(LayoutLowering& out, const LoweringOptions& options) {
    if (!out.fusionPlanned) withdrawLowRankTerms(g_, out);
    FBL_TRY(chooseStorage(out, options));
    if (out.fusionPlanned) FBL_TRY(finishFusion(g_, out));
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
        if (!ops::isView(n.op)) ++out.counts.movementKernels;
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

  // Step 4.
  Status chooseStorage(LayoutLowering& out, const LoweringOptions& options) {
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
      FBL_ASSIGN(std::optional<StorageChoice> choice, chooseFor(v, out, reads[v], host, updatedInPlace, options));
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
                                                 const std::vector<bool>& host, const std::vector<bool>& updatedInPlace,
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
      transpose = entry == nullptr && host[v] && narrowWeightReadAlongK(v, reads, out, options.narrowWeightSide);
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
    if (out.keep[v] && !hostWritten) return demote("read back by the runtime");
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
  bool narrowWeightReadAlongK(ValueId v, const std::vector<ValueRead>& reads, const LayoutLowering& out,
                              int64_t side) const {
    const ir::Value& val = g_.values[v];
    if (side <= 0 || producer(v) != ir::kNoNode || val.dtype != ir::DType::F32 || val.shape.size() != 2) return false;
    if (val.shape[1] > side || val.shape[0] <= val.shape[1]) return false;
    for (const ValueRead& r : reads) {
      const ir::Node& n = g_.nodes[r.node];
      if (r.slot < 0 || r.slot > 1 || !ops::isProduct(n.op)) continue;
      const std::optional<int64_t> axis = ops::reductionAxis(g_, n, r.slot);
      if (!axis) continue;
      const int64_t dim = r.through ? passes::landingDim(out.views.at({r.node, r.slot}), *axis) : *axis;
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
        auto composed = image.compose(out.views.at({r.node, r.slot}));
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
          FBL_ASSIGN(from.layout, l.compose(out.materialiseViews.at(mv)));
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
      FBL_ASSIGN(in->layout, l.compose(out.views.at({r.node, r.slot})));
    }
    out.storage.emplace(v, l);
    out.storageNote[v] = choice.note;
    if (choice.note.rfind("rtile", 0) == 0) ++out.counts.rtileValues;
    if (l.storage() == layout::Storage::Image2D) ++out.counts.imageValues;
    return Status::success();
  }

  const ir::Graph& g_;
  const passes::LayoutAssignment& a_;
};

}  // namespace

Result<bool> AssignStoragePass::run(ir::Graph& g) {
  FBL_TRY(StorageLowering(g, a_).run(out_, options_));
  return false;
}

std::string AssignStoragePass::dump(const ir::Graph& g) const { return formatStorage(g, out_); }

}  // namespace fbl::plan
