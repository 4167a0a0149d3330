// LayoutAssignment: what the layout pipeline (layout_pipeline.h) decides for a joint training
// graph, and the last pass of that pipeline. The graph itself is not rewritten: eliminated
// movement ops stay in the IR and codegen skips them, reading through the recorded maps.
//
//   per node   its Table-1 class (FTI-C, FTD-C, FTI-D, FTD-D); for a transformation node
//              whether it is eliminated or explicit, and why
//   per value  linear, or an R-Tile (RTileEntry: the selectRTile choice, Eq. 2 uses, why)
//   per read   (consumer, input slot) fed by a chain of movement ops: the source value, the
//              composed element map (consumer index -> source index, the paper's
//              f3 . f2 . f1), and the decision: a tile map (Eq. 3), an element index map, or an
//              explicit conversion with its reason
//   chains     consecutive FTD-D operators and the R-Tile the greedy search gave them
//   conversions every materialisation still needed (explicit chains, tile mismatches, the
//              anchors of the ablations that lack propagation)
//
// The pass in this file (layout-assignment) is the pipeline's last two phases:
//   1. Assignment: every read still undecided (tile-index-elimination disabled or a
//      non-index-map transform) becomes an explicit conversion; an anchor whose producer does
//      not write its R-Tile (no propagation: global-layout-selection disabled) gets a conversion
//      before its FTD-D consumers; an FTD-D output whose natural tile differs from its R-Tile
//      gets one too.
//   2. Final check (checkAssignment): every input of every live node is readable: a direct read
//      of a value, a read through a decided chain, or a recorded conversion; an R-Tile read
//      through a tile map uses the tile of the source's R-Tile. A violation is an internal
//      error. All of it but "decided" also holds after every earlier layout pass, so the pass
//      manager runs the check between them with the verifier (layout_pipeline.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/layout/index_map.h"
#include "compiler/layout/layout.h"
#include "compiler/layout/rtile.h"
#include "compiler/layout/tile_propagation.h"
#include "compiler/ops/op_traits.h"
#include "compiler/strategy/strategy.h"
#include "compiler/support/result.h"

namespace fbl::passes {

// The paper's Table 1 (ops/op_traits.h). kNone: dead nodes (not classified).
using ops::OpClass;
using ops::opClassName;

struct RTileEntry {
  ir::ValueId value = ir::kNoValue;
  layout::RTileChoice choice;
  std::vector<layout::ReductionUse> uses;  // Eq. 2's consuming reductions (through views too)
  std::string note;  // "selected", "reconfigured for ...", "greedy chain #3", "natural output"
  layout::TileSpec spec() const;  // as a layout::TileSpec
  layout::TileConfig tile() const { return {choice.layout.tile.tileH, choice.layout.tile.tileW}; }
};

struct ValueLayout {
  enum class Kind : uint8_t { kLinear, kRTile };
  Kind kind = Kind::kLinear;
  int rtile = -1;            // index into LayoutAssignment::rtiles
  bool anchor = false;       // an operand of an FTD-D operator with an R-Tile of its own
  bool writtenTiled = false; // its producer writes the R-Tile directly (propagated, or FTD-D)
  std::string why;           // one line
};

// A consumer input fed by movement ops. `chain` lists them from the source side.
struct ReadThrough {
  enum class Decision : uint8_t { kUndecided, kTileMap, kIndexMap, kExplicit };
  ir::NodeId consumer = ir::kNoNode;
  int slot = 0;
  ir::ValueId source = ir::kNoValue;
  std::vector<ir::NodeId> chain;
  std::vector<ir::NodeId> absorbed;  // elementwise nodes folded into the read (Neg of a roll)
  layout::IndexMap view;             // consumer input index -> source index, simplified
  std::optional<layout::Expr> sign;  // elementwise +-1 factor over the consumer index (roll)
  std::string chainText;             // the composed movement ops, for reports
  Decision decision = Decision::kUndecided;
  bool tileReader = false;           // the consumer reads this operand tile by tile (FTD-D)
  bool transposedRead = false;       // a MatMul reads the operand's transpose's tiles
  layout::TileConfig tile;           // kTileMap
  layout::IndexMap tileMap;          // kTileMap: consumer tile grid -> source tile grid
  std::string reason;                // kExplicit: why; otherwise the check that passed
  bool structural = false;           // explicit by the chain's shape, whatever the tiles
};
const char* readDecisionName(ReadThrough::Decision d);

struct TransformStatus {
  bool isTransform = false;  // an FTI-D node
  bool folded = false;       // part of read chains (a folded movement op or a node absorbed by a roll)
  bool eliminated = false;
  bool tileMapped = false;   // eliminated, and every read through it is a tile map
  std::string reason;        // explicit: why; eliminated: "tile map" / "index map"
};

struct FtdChain {
  std::vector<ir::NodeId> ops;       // FTD-D nodes, topological order
  std::vector<ir::ValueId> tensors;  // the R-Tile operands they read
  std::optional<layout::TileConfig> chosen;  // empty: each tensor keeps its own Eq. 2 choice
  double costBefore = 0, costAfter = 0;      // modeled (global_layout_selection.h)
  std::vector<std::string> log;
};

struct Conversion {
  ir::NodeId consumer = ir::kNoNode;
  int slot = 0;
  ir::ValueId from = ir::kNoValue;
  std::string reason;
};

struct TransformSummary {
  int64_t total = 0, eliminated = 0, explicitCount = 0;
  int64_t tileMapped = 0;  // eliminated nodes all of whose reads are tile maps
  int64_t conversions = 0;
  double eliminatedShare() const { return total ? double(eliminated) / double(total) : 1.0; }
};

// What each strategy (compiler/strategy/strategy.h) decides here. fblayout: the full pipeline.
// reuse: one linear layout per tensor, reused by the backward pass (strided reads where the
// reduction direction differs), movement ops run as kernels. explicit: linear layouts plus an
// explicit conversion before every backward reduction that walks a reused forward tensor along
// the other direction, movement ops run as kernels.
struct LayoutAssignment {
  strategy::Strategy strategy = strategy::Strategy::kFBLayout;
  std::string profile;
  std::vector<OpClass> nodeClass;         // by NodeId
  std::vector<ValueLayout> values;        // by ValueId
  std::vector<RTileEntry> rtiles;
  std::vector<ReadThrough> reads;
  std::vector<TransformStatus> transforms;  // by NodeId
  std::vector<FtdChain> chains;
  std::vector<Conversion> conversions;
  std::vector<std::string> notes;           // pipeline-level remarks (disabled passes, ...)

  void reset(const ir::Graph& g);
  const ReadThrough* readAt(ir::NodeId consumer, int slot) const;
  ReadThrough* readAt(ir::NodeId consumer, int slot);
  void indexReads();  // after `reads` changes
  const RTileEntry* rtileOf(ir::ValueId v) const;
  // The physical layout a value is stored in (an R-Tile image, or a row-major buffer).
  Result<layout::Layout> layoutOf(const ir::Graph& g, ir::ValueId v) const;
  TransformSummary summary() const;

 private:
  std::unordered_map<int64_t, int> readIndex_;
};

// Reads of a consumer that go tile by tile (FTD-D operands): MatMul/Gemm inputs 0 and 1.
bool isTileReader(const ir::Node& n, int slot);
// Data inputs (not shape or parameter operands such as Reshape's target shape).
bool isDataInput(const ir::Node& n, int slot);

// By node, the indices of the reads (LayoutAssignment::reads) whose chains run through it.
std::vector<std::vector<int>> readsThroughNodes(const ir::Graph& g, const LayoutAssignment& a);
// Phase 4's verdict on a folded movement op, from the reads through it (readsThroughNodes):
// eliminated unless one of them is explicit, tile-mapped when every one is a tile map, and why.
void settleFolded(const ir::Graph& g, const LayoutAssignment& a, const std::vector<int>& reads, TransformStatus& t);

// Phase 5 above; `final` false: between layout passes, where reads may still be undecided.
Status checkAssignment(const ir::Graph& g, const LayoutAssignment& a, bool final);

// layout-assignment: phases 4 and 5 above.
class LayoutAssignmentPass {
 public:
  explicit LayoutAssignmentPass(LayoutAssignment& a) : a_(a) {}
  static constexpr std::string_view name() { return "layout-assignment"; }
  Result<bool> run(ir::Graph& g);
  std::string dump(const ir::Graph& g) const;

 private:
  LayoutAssignment& a_;
};

}  // namespace fbl::passes
