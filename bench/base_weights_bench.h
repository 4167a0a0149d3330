// `fbl-bench base-weights`: how far the frozen base's encodings (compiler/quant/base_weights.h)
// move a weight matrix, per encoding and group size, against the bytes they take: the figures
// docs/precision.md chooses the default group by.
#pragma once

#include <cstdint>
#include <string>

namespace fbl::bench {

struct BaseWeightsBenchOptions {
  int64_t rows = 2048, cols = 2048;  // one weight matrix [in x out]
  uint64_t seed = 0;
  std::string json;  // JSON report path ("-": stdout)
};

int runBaseWeightsBench(const BaseWeightsBenchOptions& o);

}  // namespace fbl::bench
