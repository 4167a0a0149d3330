// `fbl-bench transforms`: the paper's Figure 17, the layout-transformation time of multi-head
// attention per layout strategy. For each [seq, heads, hidden] it builds the zoo's one-block
// attention training graph (zoo `llama-attention`), compiles it per strategy and trains a few
// steps with launch profiling; it reports the device time of the transform and conversion
// launches (forward and backward apart), how many there are, and the whole step's device and
// wall time, so that transformations a strategy removes show as fewer launches and less time,
// and any cost moved into the consumer kernels shows in the totals.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fbl::bench {

struct AttentionConfig {
  int64_t seq = 512, heads = 32, hidden = 2048;
};

struct TransformsBenchOptions {
  std::vector<AttentionConfig> configs;  // empty: Figure 17's (512,32,2048), (512,16,1024), (512,8,1024)
  std::string profile;                   // empty: the committed profile of the device
  std::vector<std::string> strategies;   // all | fblayout | reuse | explicit; empty: all
  int steps = 3;                         // the first is timed apart, the others averaged
  int device = -1;
  uint64_t seed = 0;
  std::string json;                      // JSON report path ("-": stdout)
};

int runTransformsBench(const TransformsBenchOptions& o);

}  // namespace fbl::bench
