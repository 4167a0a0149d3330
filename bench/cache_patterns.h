// `fbl-bench cache patterns`: the paper's Figure 4 on the simulator. One work-group of T threads
// (1, 2, 4 ... 64); thread t walks its own band of an RGBA-float image2d, 64 texels wide and
// `rows` tall, in one of four orders: row-major (y outer, x inner), column-major (x outer),
// block-4 and block-8 (4 or 8 texels of a row, then the next row, down the band; then the next
// 4 or 8 columns). Every texel is read once, so only spatial locality separates the patterns.
// Each configuration reads a fresh image: no configuration finds another's lines in L2.
// Throughput = bytes read / estimated time; `relative` divides it by column-major's at the
// same thread count, as the paper's Figure 4 and the profiles' access tables do.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/cache_bench.h"
#include "bench/cache_report.h"
#include "bench/oclgrind_device.h"

namespace fbl::bench {

inline constexpr int kPatternBandTexels = 64;

// With several profiles, `relative_throughput` in the report is keyed by profile first.
Status simulatePatterns(const CacheBenchOptions& o, OclgrindDevice& device, ProfileRuns* all, nlohmann::json* report);
// Relative throughput against the thread count, one line per pattern.
std::string patternsSvg(const std::string& title, const std::vector<SimulatedRun>& runs);

}  // namespace fbl::bench
