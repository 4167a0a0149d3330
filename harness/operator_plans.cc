// The strategies on one MatMul forward/backward:
//  1. fblayout: A, B, dC are each read by two reductions along different axes (A: forward along
//     its rows, dB along its columns; B: forward along columns, dA along rows; dC: dA along rows,
//     dB along columns); selectRTile picks each one's tile from both uses. Gradients take their
//     primal's layout (dA like A, dB like B: the optimizer reads both alike); C, whose consumers
//     this operator does not know, is a plain image.
//  2. reuse: every tensor is a plain image; dA reads B^T and dB reads A^T through it.
//  3. explicit: plain images, plus Transpose conversions into the GEMM-preferred orientation
//     before each backward product (B^T before dA, A^T before dB).
#include "harness/operator_plans.h"

#include "compiler/layout/rtile_wave_cost.h"

#include <fmt/format.h>

namespace fbl::harness {

using layout::Layout;
using layout::ReductionDir;
using layout::ReductionUse;
using strategy::Strategy;

const char* matmulPassName(MatmulPass p) {
  switch (p) {
    case MatmulPass::kForward: return "forward";
    case MatmulPass::kGradA: return "dA";
    case MatmulPass::kGradB: return "dB";
  }
  return "?";
}

MatmulShape productShape(const MatmulShape& s, MatmulPass p) {
  if (p == MatmulPass::kGradA) return {s.m, s.n, s.k};
  if (p == MatmulPass::kGradB) return {s.k, s.m, s.n};
  return s;
}

ir::Shape matmulTensorShape(const MatmulShape& s, const std::string& t) {
  if (t == "A" || t == "dA") return {s.m, s.k};
  if (t == "B" || t == "dB") return {s.k, s.n};
  if (t == "At") return {s.k, s.m};
  if (t == "Bt") return {s.n, s.k};
  return {s.m, s.n};  // C, dC
}

Result<Placement> rtilePlacement(const std::string& tensor, const ir::Shape& shape,
                                 const std::vector<ReductionUse>& uses, const profile::HardwareProfile& p) {
  if (!p.accessTable)
    return makeError("tensor '{}': profile '{}' has no access table (pending measurement); run `fblc profile` "
                     "on the device or pass another profile",
                     tensor, p.name);
  layout::RTileProblem prob{tensor, layout::matrixView(shape), uses};
  auto choice = layout::selectRTile(prob, p);
  if (!choice.ok())
    return Placement{Layout::image(shape), "plain image: " + choice.error().message};
  const layout::TileGeometry& g = choice->layout.tile;
  layout::TileSpec spec = g.intra == layout::IntraMapping::kRowStrips
                              ? layout::TileSpec::rowStrips(g.tileH, g.tileW)
                              : layout::TileSpec::blocks(g.tileH, g.tileW, g.lh, g.lw, g.blockH, g.blockW);
  spec.rowsAlongX = choice->layout.inter == layout::InterOrder::kRowsAlongX;
  FBL_ASSIGN(Layout l, Layout::rtile(shape, spec));
  return Placement{l, fmt::format("R-Tile {} ({}, padding {:.1f}%, score {:.2f})", spec.str(),
                                  layout::interOrderName(choice->layout.inter), choice->paddingRatio * 100,
                                  choice->cost.score)};
}

Result<MatmulPlan> planMatmul(Strategy s, const MatmulShape& shape, const profile::HardwareProfile& p) {
  if (shape.m <= 0 || shape.k <= 0 || shape.n <= 0)
    return makeError("matmul plan: empty shape M={} K={} N={}", shape.m, shape.k, shape.n);
  MatmulPlan plan;
  plan.strategy = s;
  plan.shape = shape;
  auto image = [&](const std::string& t, const std::string& why) {
    plan.tensors.emplace(t, Placement{Layout::image(matmulTensorShape(shape, t)), why});
  };
  MatmulStep fwd{MatmulPass::kForward, {}, "A", "B", "C", false, false};
  MatmulStep da{MatmulPass::kGradA, {}, "dC", "B", "dA", false, true};
  MatmulStep db{MatmulPass::kGradB, {}, "A", "dC", "dB", true, false};
  switch (s) {
    case Strategy::kFBLayout: {
      // Weights: the FLOPs of the two products are equal, so equal weights are Eq. 2's sum.
      const std::map<std::string, std::vector<ReductionUse>> uses = {
          {"A", {{ReductionDir::kAlongRow, 1, "forward"}, {ReductionDir::kAlongColumn, 1, "dB"}}},
          {"B", {{ReductionDir::kAlongColumn, 1, "forward"}, {ReductionDir::kAlongRow, 1, "dA"}}},
          {"dC", {{ReductionDir::kAlongRow, 1, "dA"}, {ReductionDir::kAlongColumn, 1, "dB"}}}};
      for (const auto& [t, u] : uses) {
        FBL_ASSIGN(Placement pl, rtilePlacement(t, matmulTensorShape(shape, t), u, p));
        plan.tensors.emplace(t, pl);
      }
      // dA/dB: their primal's tile on their own (equal) extent.
      plan.tensors.emplace("dA", Placement{plan.tensors.at("A").layout, "A's layout (gradient of A)"});
      plan.tensors.emplace("dB", Placement{plan.tensors.at("B").layout, "B's layout (gradient of B)"});
      image("C", "plain image: the operator's consumers choose");
      break;
    }
    case Strategy::kReuse:
      for (const char* t : {"A", "B", "dC", "C", "dA", "dB"})
        image(t, "forward-preferred image (RGBA along the last axis), kept in backward");
      break;
    case Strategy::kExplicit:
      for (const char* t : {"A", "B", "dC", "C", "dA", "dB"}) image(t, "kernel-preferred image");
      image("Bt", "converted: dA's preferred right operand, B^T packed along K");
      image("At", "converted: dB's preferred left operand, A^T packed along M");
      da.before = {{"B", "Bt", true}};
      da.rhs = "Bt";
      da.rhsT = false;
      db.before = {{"A", "At", true}};
      db.lhs = "At";
      db.lhsT = false;
      break;
  }
  plan.steps = {fwd, da, db};
  if (p.waveFootprint) plan.textureL1s = layout::bracketedTextureL1s(p);
  plan.wave = p.waveSize;
  return plan;
}

}  // namespace fbl::harness
