// `fbl-bench cache`: what a phone's caches would see of fbl's work, simulated on Oclgrind
// (sim/, docs/cache.md). Forms:
//   cache MODEL.onnx|PLAN.fbp --profile P   every launch of one training step, per strategy
//   cache matmul [--scale S]                the Figure-16 MatMul, forward and backward
//   cache transforms                        the Figure-17 attention block, layout launches apart
//   cache patterns                          the Figure-4 access patterns, 1 to 64 threads
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fbl::bench {

struct CacheBenchOptions {
  std::string form;                     // "model", "matmul", "transforms", "patterns"
  std::string input;                    // model form: MODEL.onnx or PLAN.fbp
  // The phone profiles whose memory models are simulated; profiles whose work is identical
  // (the same plan) share one Oclgrind execution.
  std::vector<std::string> profiles;
  std::vector<std::string> strategies;  // all | fblayout | reuse | explicit; empty: all
  std::string storage = "auto";         // MODEL form: driver::CompileArgs::storage (buffer | image | auto)
  int64_t scale = 4;                    // matmul: divides Figure 16's M, K, N
  int64_t seq = 32, heads = 4, hidden = 128;  // transforms
  int rows = 512;                       // patterns: rows of each thread's band (fblc profile's)
  std::vector<int> threads;             // patterns: thread counts; empty: 1, 2, 4 ... 64
  uint64_t seed = 0;
  std::string json, svg;                // output paths ("-": stdout for JSON)
  bool launches = false;                // the JSON lists every launch
  // Each profile also at every other combination of its `bracket` (texture-L1 size and line
  // shape, L2 bandwidth), on the plans made for the profile as it stands.
  bool bracket = false;
};

int runCacheBench(const CacheBenchOptions& o);

}  // namespace fbl::bench
