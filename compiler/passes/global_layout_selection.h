// global-layout-selection (paper Sec. 4.4; Table 2's propagation and greedy cells).
//
// Phase A, propagation (Table 2 rows/columns FTI-C, FTD-C against FTD-D: "FTD-D dominates"):
//   1. An anchor's producer writes the anchor's R-Tile directly (an FTI-C/FTD-C or FTD-D node,
//      or an explicit transformation kernel); initializers are packed into it once at load.
//   2. An FTD-D product whose operands are both R-Tile and whose output is not an anchor stores
//      its output in its natural tile (rows tile of the left operand x columns tile of the
//      right), when that tile fits the output (C1 ISA lanes, C3 padding).
//   3. In topological order, an FTI-C/FTD-C node whose output is still linear takes the R-Tile
//      of a same-shaped direct input (Table 2's "Fusion"/"FTD-C" cells: flexible operators
//      adapt), so elementwise regions stay in one layout, backward and optimizer included.
//      Reads from a source that only now has an R-Tile become tile maps where the checks pass.
// Phase B, consecutive FTD-D operators (Table 2's yellow cell, Sec. 4.4.2):
//   4. Link product A -> product B when B's operand comes from A's output through at most
//      kMaxLinkHops flexible or movement nodes, each with one activation input and each value
//      read once in that phase (Q*K^T -> scale/mask/Softmax -> P*V, the LoRA pair x*A*B,
//      up-projection -> gating -> down-projection). Connected links form an FTD-D chain.
//   5. Per chain: candidate tiles = each operand tensor's surviving R-Tiles, tensors ranked by
//      size (larger tensors dominate cost), their own Eq. 2 choice first. For each candidate T
//      applied uniformly (a tensor for which T is not a survivor, or under which one of its tile
//      reads would fail the three checks, keeps its own), cost = sum of modeled compute
//      (tensorCost) + a conversion (conversionCost) at every link whose producer's natural
//      output tile differs from the consumer's operand tile. Keep the cheapest; apply it when
//      it beats every tensor keeping its own choice, and re-decide the reads of changed tensors.
#pragma once

#include <string_view>

#include "compiler/ir/graph.h"
#include "compiler/passes/layout_assignment.h"
#include "compiler/profile/profile.h"
#include "compiler/support/result.h"

namespace fbl::passes {

inline constexpr int kMaxLinkHops = 8;
// Candidates tried per chain: enough for every distinct tile of a transformer's chain (they
// overlap, Sec. 4.4.2) while bounding the search.
inline constexpr int kMaxChainCandidates = 24;
// A conversion reads and writes the tensor once each.
inline constexpr double kConversionPasses = 2.0;

// Modeled time to stream a tensor once per consuming reduction with tile `t`, in
// column-major-byte units: sum over uses of share(use) * bytes / (throughput * MemEfficiency),
// with share = the use's weight over all weights (Eq. 2's terms, read as time).
double tensorCost(const layout::RTileChoice& choiceWithTile, const std::vector<layout::ReductionUse>& uses,
                  const profile::HardwareProfile& p);
// Modeled time of one explicit conversion of `bytes`: kConversionPasses row-major streams.
double conversionCost(int64_t bytes, const profile::HardwareProfile& p);

class GlobalLayoutSelection {
 public:
  GlobalLayoutSelection(LayoutAssignment& a, const profile::HardwareProfile& p) : a_(a), profile_(p) {}
  static constexpr std::string_view name() { return "global-layout-selection"; }
  Result<bool> run(ir::Graph& g);
  std::string dump(const ir::Graph& g) const;

 private:
  void propagate(const ir::Graph& g);
  void searchChains(const ir::Graph& g);

  LayoutAssignment& a_;
  const profile::HardwareProfile& profile_;
};

}  // namespace fbl::passes
