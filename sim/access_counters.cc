#include "sim/access_counters.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace fbl::sim {

namespace {

// One table drives +=, JSON out and JSON in, so a new counter cannot be forgotten in one of them.
std::vector<std::pair<const char*, int64_t AccessCounters::*>> fields() {
  return {{"launches", &AccessCounters::launches},
          {"work_items", &AccessCounters::workItems},
          {"instructions", &AccessCounters::instructions},
          {"flops", &AccessCounters::flops},
          {"loads", &AccessCounters::loads},
          {"stores", &AccessCounters::stores},
          {"load_bytes", &AccessCounters::loadBytes},
          {"store_bytes", &AccessCounters::storeBytes},
          {"image_loads", &AccessCounters::imageLoads},
          {"image_stores", &AccessCounters::imageStores},
          {"wave_instructions", &AccessCounters::waveInstructions},
          {"l1_texture_hits", &AccessCounters::l1TextureHits},
          {"l1_texture_misses", &AccessCounters::l1TextureMisses},
          {"l1_buffer_hits", &AccessCounters::l1BufferHits},
          {"l1_buffer_misses", &AccessCounters::l1BufferMisses},
          {"l2_hits", &AccessCounters::l2Hits},
          {"l2_misses", &AccessCounters::l2Misses},
          {"l2_store_lines", &AccessCounters::l2StoreLines},
          {"dram_read_bytes", &AccessCounters::dramReadBytes},
          {"dram_write_bytes", &AccessCounters::dramWriteBytes}};
}

}  // namespace

AccessCounters& AccessCounters::operator+=(const AccessCounters& o) {
  for (const auto& [name, member] : fields()) this->*member += o.*member;
  return *this;
}

AccessCounters AccessCounters::operator-(const AccessCounters& o) const {
  AccessCounters d = *this;
  for (const auto& [name, member] : fields()) d.*member -= o.*member;
  return d;
}

namespace {

struct Terms {
  double compute, dram, l2;  // seconds
};
Terms terms(const AccessCounters& c, const MemoryModel& m) {
  return {static_cast<double>(c.flops) / (m.peakGflops * 1e9), static_cast<double>(c.dramBytes()) / (m.dramGBs * 1e9),
          static_cast<double>(c.l2Requests() * m.l2.lineBytes) / (m.l2GBs * 1e9)};
}

}  // namespace

double estimatedMs(const AccessCounters& c, const MemoryModel& m) {
  const Terms t = terms(c, m);
  return std::max({t.compute, t.dram, t.l2}) * 1e3;
}

const char* bindingTerm(const AccessCounters& c, const MemoryModel& m) {
  const Terms t = terms(c, m);
  if (t.compute >= t.dram && t.compute >= t.l2) return "compute";
  return t.dram >= t.l2 ? "DRAM" : "L2";
}

nlohmann::json countersToJson(const AccessCounters& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, member] : fields()) j[name] = c.*member;
  j["l1_hits"] = c.l1Hits();
  j["l1_misses"] = c.l1Misses();
  j["dram_bytes"] = c.dramBytes();
  return j;
}

Result<AccessCounters> countersFromJson(const nlohmann::json& j, const std::string& origin) {
  AccessCounters c;
  for (const auto& [name, member] : fields()) {
    auto it = j.find(name);
    if (it == j.end() || !it->is_number_integer())
      return makeError("{}: counter '{}' missing or not an integer", origin, name);
    c.*member = it->get<int64_t>();
  }
  return c;
}

}  // namespace fbl::sim
