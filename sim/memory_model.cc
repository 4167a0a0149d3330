#include "sim/memory_model.h"

#include <fstream>
#include <set>

#include "compiler/support/json_fields.h"

namespace fbl::sim {

namespace {

using nlohmann::json;

constexpr int64_t kTexelBytes = 16;  // texture blocks are given in RGBA32F texels

// Keys of the profile's `memory_model` block; each needs a provenance entry.
const std::set<std::string>& blockFields() {
  static const std::set<std::string> f{"texture_l1_ways", "texture_l1_replacement", "buffer_l1",
                                       "l2_line_bytes",   "l2_ways",                "l2_replacement",
                                       "l2_bandwidth_gbps"};
  return f;
}

struct Reader : JsonFieldReader {
  Result<int64_t> integer(const json& obj, const std::string& key, const std::string& path, int64_t min) const {
    FBL_ASSIGN(const json* v, get(obj, key, path));
    if (!v->is_number_integer()) return bad(path, fmt::format("expected an integer, got {}", v->type_name()));
    if (v->get<int64_t>() < min) return bad(path, fmt::format("must be at least {}", min));
    return v->get<int64_t>();
  }
  Result<double> positive(const json& obj, const std::string& key, const std::string& path) const {
    FBL_ASSIGN(const json* v, get(obj, key, path));
    if (!v->is_number()) return bad(path, fmt::format("expected a number, got {} (a pending measurement cannot be simulated)", v->type_name()));
    if (!(v->get<double>() > 0)) return bad(path, "must be positive");
    return v->get<double>();
  }
  Result<Replacement> replacement(const json& obj, const std::string& key, const std::string& path) const {
    FBL_ASSIGN(const json* v, get(obj, key, path));
    if (v->is_string() && *v == "lru") return Replacement::kLru;
    if (v->is_string() && *v == "fifo") return Replacement::kFifo;
    return bad(path, "expected \"lru\" or \"fifo\"");
  }
  Result<CacheGeometry> cache(const json& obj, const std::string& path) const {
    if (!obj.is_object()) return bad(path, "expected an object");
    for (const auto& [k, v] : obj.items())
      if (k != "bytes" && k != "line_bytes" && k != "ways" && k != "replacement")
        return bad(path + "." + k, "unknown field");
    CacheGeometry c;
    FBL_ASSIGN(c.bytes, integer(obj, "bytes", path + ".bytes", 1));
    FBL_ASSIGN(c.lineBytes, integer(obj, "line_bytes", path + ".line_bytes", 1));
    FBL_ASSIGN(int64_t ways, integer(obj, "ways", path + ".ways", 0));
    c.ways = static_cast<int>(ways);
    FBL_ASSIGN(c.replacement, replacement(obj, "replacement", path + ".replacement"));
    return c;
  }
};

// Every capacity must hold a whole number of sets of whole lines, and sets must be a power of
// two (the index is the line number's low bits, as in hardware).
Status checkGeometry(const CacheGeometry& c, const std::string& origin, const std::string& what) {
  auto bad = [&](const std::string& s) { return makeError("{}: {}: {}", origin, what, s); };
  if (c.bytes <= 0 || c.lineBytes <= 0) return bad("capacity and line size must be positive");
  if (c.bytes % c.lineBytes) return bad(fmt::format("{} B is not a whole number of {} B lines", c.bytes, c.lineBytes));
  if (c.ways < 0) return bad("ways must be 0 (fully associative) or more");
  if (c.ways > 0 && c.lines() % c.ways) return bad(fmt::format("{} lines are not a whole number of {}-way sets", c.lines(), c.ways));
  const int64_t s = c.sets();
  if (s & (s - 1)) return bad(fmt::format("{} sets is not a power of two", s));
  return Status::success();
}

Status validate(const MemoryModel& m, const std::string& origin) {
  if (m.waveSize < 1 || m.computeUnits < 1) return makeError("{}: wave size and compute units must be positive", origin);
  if (m.textureBlock.h < 1 || m.textureBlock.w < 1) return makeError("{}: texture block must be positive", origin);
  FBL_TRY(checkGeometry(m.textureL1, origin, "texture L1"));
  if (m.bufferL1) FBL_TRY(checkGeometry(*m.bufferL1, origin, "buffer L1"));
  FBL_TRY(checkGeometry(m.l2, origin, "L2"));
  if (m.textureL1.lineBytes % m.l2.lineBytes)
    return makeError("{}: a texture L1 line ({} B) must be whole L2 lines ({} B)", origin, m.textureL1.lineBytes, m.l2.lineBytes);
  if (m.bufferL1 && m.bufferL1->lineBytes % m.l2.lineBytes)
    return makeError("{}: a buffer L1 line ({} B) must be whole L2 lines ({} B)", origin, m.bufferL1->lineBytes, m.l2.lineBytes);
  if (!(m.dramGBs > 0) || !(m.l2GBs > 0) || !(m.peakGflops > 0))
    return makeError("{}: DRAM and L2 bandwidth and peak FLOP rate must be positive", origin);
  return Status::success();
}

json cacheJson(const CacheGeometry& c) {
  return {{"bytes", c.bytes}, {"line_bytes", c.lineBytes}, {"ways", c.ways}, {"replacement", replacementName(c.replacement)}};
}

}  // namespace

const char* replacementName(Replacement r) { return r == Replacement::kLru ? "lru" : "fifo"; }

int64_t CacheGeometry::sets() const { return ways == 0 || lines() == 0 ? 1 : lines() / ways; }

Result<MemoryModel> memoryModelFromProfileJson(const json& p, const std::string& origin) {
  Reader r{{origin}};
  if (!p.is_object()) return makeError("{}: not a JSON object", origin);
  FBL_ASSIGN(const json* blockPtr, r.get(p, "memory_model", "memory_model"));
  const json& block = *blockPtr;
  if (!block.is_object()) return r.bad("memory_model", "expected an object");
  FBL_ASSIGN(const json* provPtr, r.get(block, "provenance", "memory_model.provenance"));
  if (!provPtr->is_object()) return r.bad("memory_model.provenance", "expected an object");
  for (const auto& [k, v] : block.items())
    if (k != "provenance" && !blockFields().count(k)) return r.bad("memory_model." + k, "unknown field");
  MemoryModel m;
  for (const std::string& f : blockFields()) {
    auto it = provPtr->find(f);
    if (it == provPtr->end() || !it->is_string() || it->get<std::string>().empty())
      return r.bad("memory_model.provenance." + f, "missing (every field says where it comes from)");
    m.provenance[f] = it->get<std::string>();
  }
  if (p.contains("provenance") && p["provenance"].is_object())
    for (const char* f : {"wave_size", "compute_units", "texture_block", "l1_texture_cache_bytes", "l2_cache_bytes",
                          "bandwidth_gbps", "peak_gflops"})
      if (p["provenance"].contains(f) && p["provenance"][f].is_string()) m.provenance[f] = p["provenance"][f];

  m.profile = p.value("name", std::string());
  FBL_ASSIGN(int64_t wave, r.integer(p, "wave_size", "wave_size", 1));
  FBL_ASSIGN(int64_t cus, r.integer(p, "compute_units", "compute_units", 1));
  m.waveSize = static_cast<int>(wave);
  m.computeUnits = static_cast<int>(cus);
  FBL_ASSIGN(const json* tb, r.get(p, "texture_block", "texture_block"));
  if (!tb->is_object()) return r.bad("texture_block", "expected an object");
  FBL_ASSIGN(int64_t bh, r.integer(*tb, "h", "texture_block.h", 1));
  FBL_ASSIGN(int64_t bw, r.integer(*tb, "w", "texture_block.w", 1));
  m.textureBlock = {static_cast<int>(bh), static_cast<int>(bw)};
  FBL_ASSIGN(m.textureL1.bytes, r.integer(p, "l1_texture_cache_bytes", "l1_texture_cache_bytes", 1));
  m.textureL1.lineBytes = bh * bw * kTexelBytes;
  FBL_ASSIGN(int64_t tw, r.integer(block, "texture_l1_ways", "memory_model.texture_l1_ways", 0));
  m.textureL1.ways = static_cast<int>(tw);
  FBL_ASSIGN(m.textureL1.replacement, r.replacement(block, "texture_l1_replacement", "memory_model.texture_l1_replacement"));
  FBL_ASSIGN(const json* bl1, r.get(block, "buffer_l1", "memory_model.buffer_l1"));
  if (!bl1->is_null()) {
    FBL_ASSIGN(CacheGeometry c, r.cache(*bl1, "memory_model.buffer_l1"));
    m.bufferL1 = c;
  }
  FBL_ASSIGN(m.l2.bytes, r.integer(p, "l2_cache_bytes", "l2_cache_bytes", 1));
  FBL_ASSIGN(m.l2.lineBytes, r.integer(block, "l2_line_bytes", "memory_model.l2_line_bytes", 1));
  FBL_ASSIGN(int64_t l2w, r.integer(block, "l2_ways", "memory_model.l2_ways", 0));
  m.l2.ways = static_cast<int>(l2w);
  FBL_ASSIGN(m.l2.replacement, r.replacement(block, "l2_replacement", "memory_model.l2_replacement"));
  FBL_ASSIGN(m.l2GBs, r.positive(block, "l2_bandwidth_gbps", "memory_model.l2_bandwidth_gbps"));
  FBL_ASSIGN(m.dramGBs, r.positive(p, "bandwidth_gbps", "bandwidth_gbps"));
  FBL_ASSIGN(m.peakGflops, r.positive(p, "peak_gflops", "peak_gflops"));
  FBL_TRY(validate(m, origin));
  return m;
}

Result<MemoryModel> loadMemoryModel(const std::string& path) {
  std::ifstream in(path);
  if (!in) return makeError("{}: cannot open the profile", path);
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return makeError("{}: not valid JSON", path);
  if (j.is_object() && !j.contains("memory_model"))
    return makeError("{}: no 'memory_model' block: this profile cannot be simulated (docs/cache.md says what it holds)", path);
  return memoryModelFromProfileJson(j, path);
}

json memoryModelToJson(const MemoryModel& m) {
  json j{{"profile", m.profile},
         {"wave_size", m.waveSize},
         {"compute_units", m.computeUnits},
         {"texture_block", {{"h", m.textureBlock.h}, {"w", m.textureBlock.w}}},
         {"texture_l1", cacheJson(m.textureL1)},
         {"buffer_l1", m.bufferL1 ? cacheJson(*m.bufferL1) : json(nullptr)},
         {"l2", cacheJson(m.l2)},
         {"dram_gbps", m.dramGBs},
         {"l2_gbps", m.l2GBs},
         {"peak_gflops", m.peakGflops},
         {"provenance", m.provenance}};
  return j;
}

Result<MemoryModel> memoryModelFromJson(const json& j, const std::string& origin) {
  Reader r{{origin}};
  if (!j.is_object()) return makeError("{}: not a JSON object", origin);
  MemoryModel m;
  m.profile = j.value("profile", std::string());
  FBL_ASSIGN(int64_t wave, r.integer(j, "wave_size", "wave_size", 1));
  FBL_ASSIGN(int64_t cus, r.integer(j, "compute_units", "compute_units", 1));
  m.waveSize = static_cast<int>(wave);
  m.computeUnits = static_cast<int>(cus);
  FBL_ASSIGN(const json* tb, r.get(j, "texture_block", "texture_block"));
  FBL_ASSIGN(int64_t bh, r.integer(*tb, "h", "texture_block.h", 1));
  FBL_ASSIGN(int64_t bw, r.integer(*tb, "w", "texture_block.w", 1));
  m.textureBlock = {static_cast<int>(bh), static_cast<int>(bw)};
  FBL_ASSIGN(const json* t1, r.get(j, "texture_l1", "texture_l1"));
  FBL_ASSIGN(m.textureL1, r.cache(*t1, "texture_l1"));
  FBL_ASSIGN(const json* b1, r.get(j, "buffer_l1", "buffer_l1"));
  if (!b1->is_null()) {
    FBL_ASSIGN(CacheGeometry c, r.cache(*b1, "buffer_l1"));
    m.bufferL1 = c;
  }
  FBL_ASSIGN(const json* l2, r.get(j, "l2", "l2"));
  FBL_ASSIGN(m.l2, r.cache(*l2, "l2"));
  FBL_ASSIGN(m.dramGBs, r.positive(j, "dram_gbps", "dram_gbps"));
  FBL_ASSIGN(m.l2GBs, r.positive(j, "l2_gbps", "l2_gbps"));
  FBL_ASSIGN(m.peakGflops, r.positive(j, "peak_gflops", "peak_gflops"));
  if (j.contains("provenance") && j["provenance"].is_object())
    for (const auto& [k, v] : j["provenance"].items())
      if (v.is_string()) m.provenance[k] = v.get<std::string>();
  FBL_TRY(validate(m, origin));
  return m;
}

}  // namespace fbl::sim
