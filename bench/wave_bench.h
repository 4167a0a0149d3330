// `fbl-bench waves`: the paper's Figure-16 operator at any size on the phone profiles, from the
// lane model of the MatMul's staging (compiler/layout/wave_footprint.h) instead of Oclgrind, so
// full size takes seconds. Each strategy's plans are made for the profile as it stands (R-Tiles
// and staging orders chosen across its bracket, as the compiler chooses them), then costed on
// every combination of the profile's bracketed unknowns (`bracket`: texture-L1 size, line shape,
// L2 bandwidth), as hardware the compiler could not see:
//
//   per pass  time = max(executed FLOPs / peak, DRAM bytes / DRAM bandwidth,
//                        L2 request bytes / L2 bandwidth)
//             executed FLOPs   2 x M x N x K, M and N padded to the tile (the kernel computes them)
//             DRAM bytes       each operand and the output once, a right operand larger than L2
//                              once per row panel of M (it cannot stay in L2 between panels)
//             L2 request bytes texture-L1 misses x line bytes (the lane model; sampled groups
//                              scaled to all) + the output's bytes (stores go to L2)
//   explicit  adds its conversions, each reading and writing its tensor once (DRAM and L2)
//
// tests/sim/wave_footprint_sim_test.cc checks the misses against the simulator.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fbl::bench {

struct WaveBenchOptions {
  std::vector<std::string> profiles;    // each needs a memory_model block
  std::vector<std::string> strategies;  // empty: all three
  int64_t scale = 1;                    // divides M=512, K=2048, N=8192
  int64_t groups = 32;                  // work-groups sampled per product (0: all)
  std::string json;                     // write the report here
};

int runWaveBench(const WaveBenchOptions& o);

}  // namespace fbl::bench
