// The layout pipeline's decisions in the IR's text form (ir/annotations.h), so a layout or
// lowering test states the graph it starts from and the result it expects as text:
//
//   input %x : f32[64,128] <rtile 32x64 strips cols-along-x anchor written>
//   init %w : f32[128,256] <rtile 16x32 blocks 4x8:1x8 rows-along-x anchor written>
//   %y : f32[64,256] = MatMul(%x, %w) @fwd <FTD-D>
//   bwd %xt : f32[128,64] = Transpose(%x) {perm=[1,0]} @xt <FTI-D eliminated>
//   bwd %dw : f32[128,256] = MatMul(%xt <tile-map 32x64 transposed>, %dy) @dw <FTD-D>
//
// Values (after the type):
//   rtile HxW strips|blocks LHxLW:BHxBW cols-along-x|rows-along-x
//                        an R-Tile of its own: tile_h x tile_w elements, the intra-tile fold
//                        (an LH x LW element block in BH x BW texels) and the inter-tile order
//   rtile of %v          the R-Tile of %v, propagated to this value
//   anchor               read tile by tile by an FTD-D operator
//   written              its producer (or the runtime, at load) writes it in its R-Tile
//   convert "why"        converted after its producer (into its R-Tile, or to its tile)
// Inputs of a node (after the operand), for reads through a chain of movement ops:
//   tile-map HxW [transposed] | index-map | explicit "why"
//   convert ["why"]      materialised before the node (no reason: the read's)
// Nodes (after @name):
//   FTI-C | FTD-C | FTI-D | FTD-D   the Table-1 class
//   eliminated | explicit "why"     a movement op's verdict (layout-assignment)
// Nothing is written for a linear value, an undecided read or an unclassified node.
//
// Reading derives what the text does not carry and checks the rest against the graph:
// classification (classes and reads through chains) is recomputed and must agree with the
// classes the text states; an R-Tile's fold and order must be what its tile gets on the
// profile; a tile map must pass the three checks of tile-index-elimination; the whole must
// pass checkAssignment. Explanations (`why` of values, notes, the greedy chains) are not part
// of the text. Errors are one line, "<source>:<line>: <what>".
#pragma once

#include <string>
#include <string_view>

#include "compiler/ir/graph.h"
#include "compiler/ir/printer.h"
#include "compiler/passes/layout_assignment.h"
#include "compiler/profile/profile.h"
#include "compiler/support/result.h"

namespace fbl::passes {

// printGraph with the assignment's decisions annotated (opts.annotator is set here).
std::string printLayoutGraph(const ir::Graph& g, const LayoutAssignment& a, ir::PrintOptions opts = {});

struct LayoutGraph {
  ir::Graph graph;
  LayoutAssignment assignment;
};

Result<LayoutGraph> parseLayoutGraph(std::string_view text, const profile::HardwareProfile& p,
                                     std::string_view source = "<text>",
                                     strategy::Strategy strategy = strategy::Strategy::kFBLayout);

}  // namespace fbl::passes
