// One MatMul strategy plan (operator_plans.h) executed on a ClSession: forward, dA and dB, each
// with the conversions before it, timed per pass. `fbl-bench matmul` measures with it and the
// MatMul kernel tests check its outputs against the reference.
#pragma once

#include <functional>
#include <map>
#include <vector>

#include "compiler/codegen/rtile_kernels.h"
#include "compiler/layout/wave_footprint.h"
#include "harness/cl_session.h"
#include "harness/operator_plans.h"

namespace fbl::harness {

struct MatmulData {
  std::vector<float> a, b, dc;  // inputs, row-major [M x K], [K x N], [M x N]
  std::vector<float> c, da, db; // outputs
};

// Device times of one execution of a plan, per pass: the product and the conversions before it.
struct PassTime {
  double kernelMs = 0, conversionMs = 0;
  double totalMs() const { return kernelMs + conversionMs; }
};

struct MatmulRun {
  MatmulData data;                              // inputs and the outputs of the last repeat
  std::vector<std::map<MatmulPass, PassTime>> repeats;
};

// A pass's operands as its product reads them with tiling `t`: staged as a compiled plan's are
// (codegen/matmul_staging.h), for the profile's texture L1s the plan carries.
struct StagedOperands {
  MatmulShape dims;  // productShape of the pass
  codegen::MatmulOperand lhs, rhs;
};
StagedOperands stagedOperands(const MatmulPlan& plan, const MatmulStep& step, const codegen::MatmulTiling& t);
// Those operands as the lane model reads them (layout/wave_footprint.h).
std::pair<layout::StagedOperand, layout::StagedOperand> laneOperands(const StagedOperands& s);

// The launches of one [m x k] x [k x n] product (codegen::chooseMatmulSchedule), splitK resolved.
using ScheduleFor = std::function<codegen::MatmulSchedule(int64_t m, int64_t n, int64_t k)>;
// One tiling for every product, one launch each; splitK 0: chosen per product for this device
// (chooseSplitK).
ScheduleFor fixedTiling(const codegen::MatmulTiling& tiling, int64_t computeUnits);

// Uploads A, B, dC into the plan's layouts, runs forward, dA and dB `repeats` times (after one
// warm-up that also builds the kernels), and downloads C, dA, dB. Each product runs as
// `scheduleFor` says; its split-K sums count as product time.
Result<MatmulRun> runMatmulPlan(ClSession& s, const MatmulPlan& plan, const ScheduleFor& scheduleFor, MatmulData data,
                                int repeats);

}  // namespace fbl::harness
