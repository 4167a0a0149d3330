// Layout lowering: turns the layout pipeline's decisions (passes::LayoutAssignment) into what the
// plan builder emits per node, so that the three strategies give three different whole-model
// plans from one joint graph:
//
//   fblayout  A movement op the pipeline folded into a read (tile map or element index map) is
//             not executed and gets no buffer: the consumer kernel reads the chain's source
//             through the composed map (codegen::OperandLayout). Consumers without
//             layout-parameterised kernels, and reads the pipeline left explicit, get one copy
//             kernel that materialises the chain's last value from its source ("conversion"),
//             instead of one kernel per movement op. A chain that is explicit by its shape (a
//             roll inside a longer chain) runs op by op.
//   reuse     One layout per tensor, as MNN keeps it: a MatMul operand that is the transpose of
//             the last two dims of a tensor is read in place by the MatMul's transposed path
//             (strided reads of the forward layout); every other movement op runs as a kernel.
//   explicit  Every movement op of the graph runs as its own kernel before its consumer, as
//             TFLite converts layouts explicitly; kernels read contiguous row-major operands.
//
// The algorithm:
//   1. Candidate reads: per (consumer, input slot), a read through a foldable chain (fblayout:
//      the assignment's tile-map / index-map reads; reuse: last-two-dims transposes into MatMul).
//   2. Consumers that cannot take the read (not codegen::supportsOperandLayouts, or a sign into
//      a MatMul) and fblayout's non-structural explicit reads materialise the chain's last
//      value with one copy kernel from the source.
//   3. Liveness of movement ops, last node to first: a foldable node runs only if a running
//      node reads its output directly, or its output must exist (graph outputs, gradients,
//      values the plan keeps); a running node's plain inputs make their producers run.
//   4. Storage: fblayout stores a value the assignment gives an R-Tile in that R-Tile when its
//      writer and every kernel that reads it take layouts; the writer is its producer kernel, or
//      for weights, trainables and optimizer state (no producer) the runtime, which packs them
//      at load and unpacks them wherever bytes leave the device. The optimizer updates them in
//      their layout. Under image storage (StorageOptions) a value goes to an image2d when its
//      writer writes whole texels (the tiled MatMul, the runtime's pack kernel) and every reader
//      fetches texels (the tiled MatMul): an R-Tile image under fblayout (its tile grid wrapped
//      where it exceeds the device's extent), MNN's plain image under reuse, TFLite's texture
//      under explicit; values updated in place stay in buffers. A narrow weight that a product
//      reduces along its columns is stored transposed (LoweringOptions::narrowWeightSide), its
//      optimizer state with it. Everything else, and every other value the plan reads back,
//      stays row-major in the arena.
//   5. Fusion (fblayout, fusion.h): elementwise nodes run inside neighbouring MatMul kernels;
//      planned between steps 3 and 4, completed after 4.
//   6. Launch kinds: movement ops (FTI-D) run as kernels are "transform", copies "conversion".
// These run as four passes over the joint graph (LoweringPasses, after the layout pipeline's),
// each in a file pair of its own: lower-layouts (steps 1-3, required), low-rank-terms and fusion
// (step 5's plan, fblayout only; --disable-pass low-rank-terms, fusion) and assign-storage
// (step 4, the end of step 5, step 6; required). Each reads what the previous ones decided from
// the LayoutLowering they share.
// Images are their own OpenCL objects beside the arena buffer; the plan builder pools those
// whose lifetimes do not overlap (plan_builder.h).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <memory>

#include "compiler/codegen/operand_layout.h"
#include "compiler/passes/differentiate.h"
#include "compiler/passes/layout_assignment.h"
#include "compiler/passes/pass_manager.h"

namespace fbl::plan {

struct NodeLowering {
  bool skip = false;                 // folded into its readers: no launch, no buffer
  codegen::NodeLayouts layouts;      // how the node's kernel reads its inputs
  // Values materialised (row-major) right before this node by one copy kernel each.
  std::vector<std::pair<ir::ValueId, codegen::OperandLayout>> materialise;
  std::string kind = "compute";      // "transform": a movement op run as a kernel
  // Fusion (fusion.h): `fused` nodes run inside a MatMul's kernel; the last node of an epilogue
  // emits that MatMul's kernel in its place (`runs`), and the MatMul itself is `deferred` to it.
  bool fused = false;
  bool deferred = false;
  ir::NodeId runs = ir::kNoNode;
};

struct LoweringCounts {
  int64_t readsThrough = 0;     // operands read through a composed map by their consumer kernel
  int64_t transposedReads = 0;  // of which MatMul operands read through the transposed path
  int64_t materialised = 0;     // chains materialised by one copy kernel
  int64_t skippedNodes = 0;     // movement ops that emit nothing
  int64_t movementKernels = 0;  // movement ops run as kernels (views alias their input: not counted)
  int64_t rtileValues = 0;      // values stored as R-Tiles
  int64_t rtileDemoted = 0;     // R-Tile values kept row-major (a reader or writer without layouts)
  int64_t imageValues = 0;      // values stored in image2d objects
  int64_t packedValues = 0;     // host values (weights, trainables, state) stored in another layout
  int64_t fusedNodes = 0;       // elementwise nodes run inside a MatMul's kernel
  int64_t fusedMatmuls = 0;     // MatMuls running fused steps
  int64_t fusedElementwise = 0; // elementwise and reduction kernels computing fused producers
  int64_t lowRankTerms = 0;     // narrow-K products (LoRA's t B, dt A) added inside another product's kernel
};

// Where tensors may live besides the arena buffer (step 4).
struct StorageOptions {
  // Put tensors in image2d objects where their writer and every reader take images: R-Tile
  // images under fblayout, MNN's plain images under reuse (Layout::image), TFLite's TEXTURE_2D
  // under explicit (Layout::texture). Off: every tensor lives in the arena buffer.
  bool images = false;
  int64_t maxImageWidth = 16384, maxImageHeight = 16384;  // texels; larger grids wrap (imageWrap)
  // An image is one allocation: one larger than the device allocates at once stays in a
  // buffer, which the arena's pools hold. 0: no limit.
  int64_t maxImageBytes = 0;
  int64_t blockW = 1, blockH = 1;  // the texture cache block: bands of wrapped plain images align to it
};

struct LoweringOptions {
  StorageOptions storage;
  // What the host fills, reads and writes encoded, and what the optimizer updates in place
  // (passes::Differentiate fills it).
  passes::HostInterface host;
  // fblayout: a host-written matrix kept linear (no R-Tile), at most this many columns wide and
  // longer than wide, that a MatMul reduces along its columns (the narrow operand of a narrow
  // product stored along K: lora_B in dy B) is stored transposed, so the product walks its rows
  // as x A^T walks lora_A; its optimizer state is stored like it. 0: never
  // (codegen::NarrowOptions::kContiguousWeights gives the profile's max_side).
  int64_t narrowWeightSide = 0;
};

struct LayoutLowering {
  strategy::Strategy strategy = strategy::Strategy::kFBLayout;
  std::vector<NodeLowering> nodes;  // by NodeId
  std::map<ir::ValueId, layout::Layout> storage;  // values not stored row-major
  std::map<ir::ValueId, std::string> storageNote;  // "rtile 16x64 strips", "image", "texture" for reports
  // Values whose strategy layout (an R-Tile, or an image of a baseline) was not used, and why.
  std::map<ir::ValueId, std::string> storageWhy;
  std::vector<bool> inKernelOnly;  // by value: lives only inside a fused kernel, never stored
  LoweringCounts counts;

  // What a pass leaves the next (lower-layouts writes the first three):
  std::vector<bool> keep;  // by value: must exist in memory (read back, graph outputs)
  // fblayout's reads through a map, by (consumer, slot): consumer index -> source index.
  std::map<std::pair<ir::NodeId, int>, layout::IndexMap> views;
  // Each materialised value's view of its copy's source (composed again if the source is tiled).
  std::map<ir::ValueId, layout::IndexMap> materialiseViews;
  bool fusionPlanned = false;  // fusion ran: assign-storage finishes its plan (else withdraws low-rank terms)
};

// One read of a value: input `slot` of `node` (or of the kernel a fused node runs in), as stored
// or through an OperandLayout (`through`); slot -1: the source of a copy materialised before
// `node`.
struct ValueRead {
  ir::NodeId node = ir::kNoNode;
  int slot = -1;
  bool through = false;
};

// By value, its reads by every node that is not skipped, fused nodes included.
std::vector<std::vector<ValueRead>> valueReads(const ir::Graph& g, const LayoutLowering& l);

class LowerLayoutsPass;
class LowRankTermsPass;
class FusionPass;
class AssignStoragePass;

// The four passes on the graph the assignment was made for, in order, sharing one
// LayoutLowering: lower-layouts (lower_layouts.h), low-rank-terms (low_rank_terms.h), fusion
// (fusion.h) and assign-storage (assign_storage.h). `mustExist` (values the plan reads back or
// keeps: gradients, updated parameters; graph outputs are added) and `options` are read when the
// passes run, so a caller may fill them in between; all three outlive the manager.
class LoweringPasses {
 public:
  LoweringPasses(const passes::LayoutAssignment& a, const std::vector<ir::ValueId>& mustExist,
                 const LoweringOptions& options);
  ~LoweringPasses();
  void addTo(passes::PassManager& pm);
  // Under reuse and explicit, low-rank-terms and fusion (what fblayout adds) are disabled.
  void disableForStrategy(passes::PassOptions& po) const;
  LayoutLowering& result();  // after assign-storage ran

 private:
  const passes::LayoutAssignment& assignment_;
  std::unique_ptr<LayoutLowering> out_;
  std::unique_ptr<LowerLayoutsPass> lower_;
  std::unique_ptr<LowRankTermsPass> lowRank_;
  std::unique_ptr<FusionPass> fusion_;
  std::unique_ptr<AssignStoragePass> storage_;
};

}  // namespace fbl::plan
