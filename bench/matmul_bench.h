// `fbl-bench matmul`: the paper's Figure-16 operator (forward C = A*B with M=512, K=2048, N=8192;
// backward dA = dC*B^T and dB = A^T*dC on the same A and B) under each layout strategy, forward
// and backward apart, in one run: device ms (OpenCL events), GFLOP/s and modelled bytes read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fbl::bench {

struct MatmulBenchOptions {
  int64_t m = 512, k = 2048, n = 8192;
  int64_t scale = 0;                    // divides M, K and N; 0: 4 on a CPU device, 1 on a GPU
  std::vector<std::string> strategies;  // empty: all three
  int runs = 5;
  int device = -1;                      // OpenCL device index; -1: first GPU, else first device
  std::string profile;                  // texture block and cache line for the traffic model
  std::string rtileProfile;             // R-Tile selection (default: profile)
  std::vector<std::string> tiles;       // "TMxTNxTK/RMxRN[:pipeline]" (the first); empty: the profile's cost model
  bool json = false;
  bool singleLaunch = false;  // chooseMatmulTiling per product, no tail launch (for comparison)
};

// Prints the table (or JSON); returns the process exit code.
int runMatmulBench(const MatmulBenchOptions& o);

}  // namespace fbl::bench
