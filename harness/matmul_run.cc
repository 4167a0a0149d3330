// runMatmulPlan: per pass, explicit's conversions, then the product (and its split-K sum);
// every kernel generated once, then the passes run after one warm-up, event times per kernel.
#include "harness/matmul_run.h"

#include <optional>

#include <fmt/format.h>

#include "compiler/codegen/matmul_staging.h"

namespace fbl::harness {

using codegen::RTileKernel;
using layout::Layout;

ScheduleFor fixedTiling(const codegen::MatmulTiling& tiling, int64_t computeUnits) {
  return [tiling, computeUnits](int64_t m, int64_t n, int64_t k) {
    codegen::MatmulSchedule sched;
    sched.main = tiling;
    if (sched.main.splitK == 0) sched.main.splitK = codegen::chooseSplitK(m, n, k, tiling, computeUnits);
    sched.mainCols = n;
    return sched;
  };
}

StagedOperands stagedOperands(const MatmulPlan& plan, const MatmulStep& step, const codegen::MatmulTiling& t) {
  StagedOperands s{productShape(plan.shape, step.pass), {plan.tensors.at(step.lhs).layout, step.lhsT},
                   {plan.tensors.at(step.rhs).layout, step.rhsT}};
  codegen::chooseStaging(s.dims.m, s.dims.k, s.dims.n, s.lhs, s.rhs, t, plan.wave, plan.textureL1s);
  return s;
}

std::pair<layout::StagedOperand, layout::StagedOperand> laneOperands(const StagedOperands& s) {
  const int64_t m = s.dims.m, k = s.dims.k, n = s.dims.n;
  auto lane = [](const codegen::MatmulOperand& op, int64_t rows, int64_t cols) {
    return layout::StagedOperand{codegen::texelMap(op.stored), rows, cols, op.transposed, op.staging};
  };
  return {lane(s.lhs, s.lhs.transposed ? k : m, s.lhs.transposed ? m : k),
          lane(s.rhs, s.rhs.transposed ? n : k, s.rhs.transposed ? k : n)};
}

Result<MatmulRun> runMatmulPlan(ClSession& s, const MatmulPlan& plan, const ScheduleFor& scheduleFor,
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
  struct Part {  // one launch of the schedule, its columns of the output
    RTileKernel product;
    std::vector<cl_mem> args;
    std::optional<RTileKernel> sum;  // split-K
    std::vector<cl_mem> sumArgs;
  };
  struct Step {
    MatmulPass pass;
    std::vector<std::pair<RTileKernel, std::vector<cl_mem>>> conversions;
    std::vector<Part> parts;
  };
  std::vector<Step> steps;
  const MatmulShape& sh = plan.shape;
  for (const MatmulStep& st : plan.steps) {
    Step step{st.pass, {}, {}};
    for (const Conversion& c : st.before) {
      FBL_ASSIGN(RTileKernel k, codegen::emitRTileConvert(fmt::format("convert_{}_{}", c.src, c.dst),
                                                          plan.tensors.at(c.src).layout, c.transpose,
                                                          plan.tensors.at(c.dst).layout));
      step.conversions.push_back({std::move(k), {mem.at(c.src), mem.at(c.dst)}});
    }
    const auto [m, k, n] = productShape(sh, st.pass);
    const codegen::MatmulSchedule sched = scheduleFor(m, n, k);
    const Layout& outLayout = plan.tensors.at(st.out).layout;
    auto addPart = [&](const codegen::MatmulTiling& t, codegen::ColumnRange cols) -> Status {
      const std::string suffix = fmt::format("{}_{}", matmulPassName(st.pass), step.parts.size());
      Part part;
      const StagedOperands ops = stagedOperands(plan, st, t);
      FBL_ASSIGN(part.product,
                 codegen::emitRTileMatmul("matmul_" + suffix, m, k, n, ops.lhs, ops.rhs, outLayout, t, nullptr, cols));
      part.args = {mem.at(st.lhs), mem.at(st.rhs), mem.at(st.out)};
      if (t.splitK > 1) {
        FBL_ASSIGN(cl_mem partial, s.buffer(static_cast<size_t>(t.splitK * m * (cols.end - cols.begin))));
        mem["partial_" + suffix] = partial;
        part.args[2] = partial;
        FBL_ASSIGN(part.sum, codegen::emitRTileSplitKSum("splitk_" + suffix, m, n, t.splitK, outLayout, nullptr,
                                                         codegen::kSplitKSumWorkgroup, cols));
        part.sumArgs = {partial, mem.at(st.out)};
      }
      step.parts.push_back(std::move(part));
      return {};
    };
    FBL_TRY(addPart(sched.main, {0, sched.mainCols}));
    if (sched.mainCols < n) FBL_TRY(addPart(sched.tail, {sched.mainCols, n}));
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
      for (const Part& part : st.parts) {
        FBL_ASSIGN(double ms, s.run(part.product, part.args));
        t.kernelMs += ms;
        if (part.sum) {
          FBL_ASSIGN(double sumMs, s.run(*part.sum, part.sumArgs));
          t.kernelMs += sumMs;
        }
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

}  // namespace fbl::harness
