// runMatmulPlan: per pass, explicit's conversions, then the product (and its split-K sum);
// every kernel generated once, then the passes run after one warm-up, event times per kernel.
#include "bench/support/matmul_run.h"

#include <optional>

#include <fmt/format.h>

namespace fbl::bench {

using codegen::RTileKernel;
using layout::Layout;

TilingFor fixedTiling(const codegen::MatmulTiling& tiling, int64_t computeUnits) {
  return [tiling, computeUnits](int64_t m, int64_t n, int64_t k) {
    codegen::MatmulTiling t = tiling;
    if (t.splitK == 0) t.splitK = codegen::chooseSplitK(m, n, k, t, computeUnits);
    return t;
  };
}

Result<MatmulRun> runMatmulPlan(ClSession& s, const MatmulPlan& plan, const TilingFor& tilingFor,
                                MatmulData data, int repeats) {
  std::map<std::string, cl_mem> mem;
  for (const auto& [name, pl] : plan.tensors) {
    FBL_ASSIGN(cl_mem m, s.allocate(pl.layout));
    mem[name] = m;
  }
  FBL_TRY(s.upload(mem.at("A"), plan.tensors.at("A").layout, data.a));
  FBL_TRY(s.upload(mem.at("B"), plan.tensors.at("B").layout, data.b));
  FBL_TRY(s.upload(mem.at("dC"), plan.tensors.at("dC").layout, data.dc));
  // Kernels of every step, generated once.
  struct Step {
    MatmulPass pass;
    std::vector<std::pair<RTileKernel, std::vector<cl_mem>>> conversions;
    RTileKernel product;
    std::vector<cl_mem> args;
    std::optional<RTileKernel> sum;  // split-K
    std::vector<cl_mem> sumArgs;
  };
  std::vector<Step> steps;
  const MatmulShape& sh = plan.shape;
  for (const MatmulStep& st : plan.steps) {
    Step step{st.pass, {}, {}, {}, {}, {}};
    for (const Conversion& c : st.before) {
      FBL_ASSIGN(RTileKernel k, codegen::emitRTileConvert(fmt::format("convert_{}_{}", c.src, c.dst),
                                                          plan.tensors.at(c.src).layout, c.transpose,
                                                          plan.tensors.at(c.dst).layout));
      step.conversions.push_back({std::move(k), {mem.at(c.src), mem.at(c.dst)}});
    }
    int64_t m = sh.m, k = sh.k, n = sh.n;
    if (st.pass == MatmulPass::kGradA) k = sh.n, n = sh.k;          // dA[M,K] = dC[M,N] B^T
    if (st.pass == MatmulPass::kGradB) m = sh.k, k = sh.m;          // dB[K,N] = A^T[K,M] dC
    const codegen::MatmulTiling t = tilingFor(m, n, k);
    const Layout& outLayout = plan.tensors.at(st.out).layout;
    FBL_ASSIGN(step.product,
               codegen::emitRTileMatmul(fmt::format("matmul_{}", matmulPassName(st.pass)), m, k, n,
                                        {plan.tensors.at(st.lhs).layout, st.lhsT},
                                        {plan.tensors.at(st.rhs).layout, st.rhsT}, outLayout, t));
    step.args = {mem.at(st.lhs), mem.at(st.rhs), mem.at(st.out)};
    if (t.splitK > 1) {
      FBL_ASSIGN(cl_mem partial, s.buffer(static_cast<size_t>(t.splitK * m * n)));
      mem[fmt::format("partial_{}", matmulPassName(st.pass))] = partial;
      step.args[2] = partial;
      FBL_ASSIGN(step.sum, codegen::emitRTileSplitKSum(fmt::format("splitk_{}", matmulPassName(st.pass)), m, n,
                                                       t.splitK, outLayout));
      step.sumArgs = {partial, mem.at(st.out)};
    }
    steps.push_back(std::move(step));
  }
  MatmulRun result;
  for (int r = -1; r < repeats; ++r) {  // r = -1: warm-up (kernel builds, first touch)
    std::map<MatmulPass, PassTime> times;
    for (const Step& st : steps) {
      PassTime& t = times[st.pass];
      for (const auto& [k, args] : st.conversions) {
        FBL_ASSIGN(double ms, s.run(k, args));
        t.conversionMs += ms;
      }
      FBL_ASSIGN(double ms, s.run(st.product, st.args));
      t.kernelMs += ms;
      if (st.sum) {
        FBL_ASSIGN(double sumMs, s.run(*st.sum, st.sumArgs));
        t.kernelMs += sumMs;
      }
    }
    if (r >= 0) result.repeats.push_back(times);
  }
  FBL_ASSIGN(data.c, s.download(mem.at("C"), plan.tensors.at("C").layout));
  FBL_ASSIGN(data.da, s.download(mem.at("dA"), plan.tensors.at("dA").layout));
  FBL_ASSIGN(data.db, s.download(mem.at("dB"), plan.tensors.at("dB").layout));
  for (auto& [name, m] : mem) s.release(m);
  result.data = std::move(data);
  return result;
}

}  // namespace fbl::bench
