#include "compiler/profile/kernel_blocks.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace fbl::profile {

using nlohmann::json;

namespace {

bool powerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// rtile_matmul.cl's divisibility rules (emitRTileMatmul checks the same).
bool tilingValid(const MatmulTiling& t) {
  if (t.tm <= 0 || t.tn <= 0 || t.tk <= 0 || t.rm <= 0 || t.rn <= 0) return false;
  if (t.rm % 4 || t.rn % 4 || t.tk % 4 || t.tm % t.rm || t.tn % t.rn) return false;
  const int64_t threads = t.wgX() * t.wgY();
  return (t.tm * t.tk / 4) % threads == 0 && (t.tn * t.tk / 4) % threads == 0 && t.pipeline >= 0 && t.pipeline <= 3;
}

bool hasProvenance(const json& block) {
  return block.contains("provenance") && block["provenance"].is_string() &&
         !block["provenance"].get<std::string>().empty();
}

// `field` (the dotted name errors give) of `o`, where present: a number, an integer at least
// `least`, or a boolean; absent, `into` keeps its default.
Status readNumber(const json& o, const char* key, const std::string& field, double& into, const std::string& path) {
  if (!o.contains(key)) return {};
  if (!o[key].is_number()) return makeError("{}: {} must be a number", path, field);
  into = o[key].get<double>();
  return {};
}
Status readIntAtLeast(const json& o, const char* key, const std::string& field, int64_t least, int64_t& into,
                      const std::string& path) {
  if (!o.contains(key)) return {};
  if (!o[key].is_number_integer() || o[key].get<int64_t>() < least)
    return makeError("{}: {} must be an integer >= {}", path, field, least);
  into = o[key].get<int64_t>();
  return {};
}
Status readBool(const json& o, const char* key, const std::string& field, bool& into, const std::string& path) {
  if (!o.contains(key)) return {};
  if (!o[key].is_boolean()) return makeError("{}: {} must be true or false", path, field);
  into = o[key].get<bool>();
  return {};
}

Status onlyKeys(const json& o, std::initializer_list<const char*> keys, const std::string& where,
                const std::string& path) {
  for (const auto& [k, v] : o.items())
    if (std::none_of(keys.begin(), keys.end(), [&](const char* known) { return k == known; }))
      return makeError("{}: {} has no field '{}'", path, where, k);
  return {};
}

Result<NarrowOptions> parseNarrow(const json& nb, int64_t localMemoryBytes, std::string& provenance,
                                  const std::string& path) {
  if (!nb.is_object()) return makeError("{}: matmul.narrow must be an object", path);
  NarrowOptions o;
  FBL_TRY(readIntAtLeast(nb, "max_side", "matmul.narrow.max_side", 0, o.maxSide, path));
  FBL_TRY(readIntAtLeast(nb, "work_items", "matmul.narrow.work_items", 4, o.workItems, path));
  FBL_TRY(readIntAtLeast(nb, "fill_work_items", "matmul.narrow.fill_work_items", 0, o.fillWorkItems, path));
  FBL_TRY(readBool(nb, "stage_narrow_operand", "matmul.narrow.stage_narrow_operand", o.stageNarrowOperand, path));
  FBL_TRY(readIntAtLeast(nb, "texel_walk_min_side", "matmul.narrow.texel_walk_min_side", 0, o.texelWalkMinSide, path));
  FBL_TRY(readIntAtLeast(nb, "rows_in_group_min_side", "matmul.narrow.rows_in_group_min_side", 0,
                         o.rowsInGroupMinSide, path));
  FBL_TRY(readBool(nb, "k_contiguous_weights", "matmul.narrow.k_contiguous_weights", o.kContiguousWeights, path));
  FBL_TRY(readIntAtLeast(nb, "batch_products", "matmul.narrow.batch_products", 1, o.batchProducts, path));
  FBL_TRY(readIntAtLeast(nb, "chunk_min_k", "matmul.narrow.chunk_min_k", 0, o.chunkMinK, path));
  FBL_TRY(readIntAtLeast(nb, "chunk_rows", "matmul.narrow.chunk_rows", 4, o.chunkRows, path));
  FBL_TRY(readIntAtLeast(nb, "wide_run", "matmul.narrow.wide_run", 0, o.wideRun, path));
  if (nb.contains("provenance") && nb["provenance"].is_string()) provenance = nb["provenance"].get<std::string>();
  const int64_t w = o.workItems;
  if (o.maxSide > 0 && !nb.contains("provenance"))
    return makeError("{}: matmul.narrow.provenance must say where max_side and work_items come from", path);
  if (nb.contains("provenance") && !nb["provenance"].is_string())
    return makeError("{}: matmul.narrow.provenance must be a string", path);
  if (w > 1024 || !powerOfTwo(w))
    return makeError("{}: matmul.narrow: max_side and fill_work_items must be >= 0 and work_items a power of two "
                     "in [4, 1024]", path);
  if (o.wideRun > w)
    return makeError("{}: matmul.narrow.wide_run {} is wider than a work-group (work_items {})", path, o.wideRun, w);
  // The kernel's tree holds four float4 per work-item in local memory.
  if (localMemoryBytes > 0 && w * kNarrowLocalBytesPerWorkItem > localMemoryBytes)
    return makeError("{}: matmul.narrow.work_items {} needs {} bytes of local memory; the device has {}", path, w,
                     w * kNarrowLocalBytesPerWorkItem, localMemoryBytes);
  return o;
}

// The kernels block's integer fields, by JSON name: where each lives in DeviceTuning, and its range.
struct IntField {
  const char* name;
  int64_t lo, hi;
  bool pow2;
  std::function<int64_t&(DeviceTuning&)> at;
};
const std::vector<IntField>& intFields() {
  static const std::vector<IntField> f = {
      {"attention.local_bytes", 1024, int64_t{1} << 30, false, [](DeviceTuning& t) -> int64_t& { return t.attention.localBytes; }},
      {"attention.max_tile", 1, 256, true, [](DeviceTuning& t) -> int64_t& { return t.attention.maxTile; }},
      {"attention.work_items", 1, 1024, true, [](DeviceTuning& t) -> int64_t& { return t.attention.workItems; }},
      {"attention.max_work_items", 1, 1024, true, [](DeviceTuning& t) -> int64_t& { return t.attention.maxWorkItems; }},
      {"attention.max_accumulators", 1, 1024, false,
       [](DeviceTuning& t) -> int64_t& { return t.attention.maxAccumulators; }},
      {"attention.dq_min_whole_tile", 1, 256, true, [](DeviceTuning& t) -> int64_t& { return t.attention.dqMinWholeTile; }},
      {"attention.min_whole_tile", 1, 256, true, [](DeviceTuning& t) -> int64_t& { return t.attention.minWholeTile; }},
      {"attention.min_groups_per_unit", 0, 64, false,
       [](DeviceTuning& t) -> int64_t& { return t.attention.minGroupsPerUnit; }},
      {"reduce_max_workgroup", 1, 1024, false, [](DeviceTuning& t) -> int64_t& { return t.reduceMaxWorkgroup; }},
      {"loss_workgroup", 1, 1024, false, [](DeviceTuning& t) -> int64_t& { return t.lossWorkgroup; }},
      {"splitk_sum_workgroup", 1, 1024, false, [](DeviceTuning& t) -> int64_t& { return t.splitKSumWorkgroup; }},
      {"elementwise_items", 1, 16, false, [](DeviceTuning& t) -> int64_t& { return t.elementwiseItems; }},
  };
  return f;
}

// The JSON object a dotted field name lives in, and its last key.
std::pair<const json*, std::string> locate(const json& block, const std::string& name) {
  const size_t dot = name.find('.');
  if (dot == std::string::npos) return {&block, name};
  const std::string group = name.substr(0, dot);
  if (!block.contains(group)) return {nullptr, ""};
  return {&block[group], name.substr(dot + 1)};
}

}  // namespace

MatmulTiling matmulTiling(DeviceClass d) {
  if (d == DeviceClass::kGpu) return {128, 128, 16, 8, 8, 0, 1};
  return {64, 64, 16, 4, 4, 0, 0};
}

Result<MatmulTiling> parseTile(const std::string& text, int64_t pipeline) {
  MatmulTiling t;
  char tail = 0;
  long long v[5];
  if (std::sscanf(text.c_str(), "%lldx%lldx%lld/%lldx%lld%c", &v[0], &v[1], &v[2], &v[3], &v[4], &tail) != 5)
    return makeError("tile '{}' is not TMxTNxTK/RMxRN", text);
  t.tm = v[0], t.tn = v[1], t.tk = v[2], t.rm = v[3], t.rn = v[4];
  t.pipeline = static_cast<int>(pipeline);
  t.splitK = 1;
  if (!tilingValid(t))
    return makeError("tile '{}' (pipeline {}) breaks rtile_matmul.cl's rules: RM, RN, TK multiples of 4, TM % RM = "
                     "TN % RN = 0, each tile's texels a multiple of the (TM/RM)*(TN/RN) work-items, pipeline 0-3",
                     text, pipeline);
  return t;
}

Result<MatmulTiling> parseTileSpec(const std::string& spec, int64_t defaultPipeline) {
  const size_t colon = spec.find(':');
  if (colon == std::string::npos) return parseTile(spec, defaultPipeline);
  const std::string depth = spec.substr(colon + 1);
  if (depth.size() != 1 || depth[0] < '0' || depth[0] > '9')
    return makeError("tile '{}': the pipeline depth after ':' must be one digit", spec);
  return parseTile(spec.substr(0, colon), depth[0] - '0');
}

std::string tileString(const MatmulTiling& t) {
  return fmt::format("{}x{}x{}/{}x{}", t.tm, t.tn, t.tk, t.rm, t.rn);
}

Result<MatmulBlock> parseMatmulBlock(const json& b, bool facts, const std::string& path) {
  if (!b.is_object()) return makeError("{}: \"matmul\" must be an object", path);
  MatmulBlock m;
  FBL_TRY(onlyKeys(b,
                   {"provenance", "tilings", "launch_us", "local_memory_bytes", "max_split", "occupancy_exponent",
                    "tile_load_gbps", "narrow"},
                   "matmul", path));
  if (!hasProvenance(b)) return makeError("{}: matmul.provenance must say where the efficiencies come from", path);
  m.provenance = b["provenance"].get<std::string>();
  FBL_TRY(readNumber(b, "launch_us", "matmul.launch_us", m.launchUs, path));
  FBL_TRY(readIntAtLeast(b, "local_memory_bytes", "matmul.local_memory_bytes", 0, m.localMemoryBytes, path));
  FBL_TRY(readIntAtLeast(b, "max_split", "matmul.max_split", 1, m.maxSplit, path));
  FBL_TRY(readNumber(b, "occupancy_exponent", "matmul.occupancy_exponent", m.occupancyExponent, path));
  FBL_TRY(readNumber(b, "tile_load_gbps", "matmul.tile_load_gbps", m.tileLoadGbps, path));
  if (m.launchUs < 0 || m.occupancyExponent < 0 || m.occupancyExponent > 1 || m.tileLoadGbps < 0)
    return makeError("{}: matmul.launch_us and local_memory_bytes must be >= 0, max_split >= 1, tile_load_gbps >= 0, "
                     "occupancy_exponent in [0, 1]", path);
  if (b.contains("narrow")) {
    FBL_ASSIGN(m.narrow, parseNarrow(b["narrow"], m.localMemoryBytes, m.narrowProvenance, path));
  }
  const json list = b.contains("tilings") ? b["tilings"] : json::array();
  if (!list.is_array()) return makeError("{}: matmul.tilings must be an array", path);
  for (size_t i = 0; i < list.size(); ++i) {
    const json& e = list[i];
    if (!e.is_object() || !e.contains("tile") || !e["tile"].is_string())
      return makeError("{}: matmul.tilings[{}] needs a \"tile\" string", path, i);
    const std::string where = fmt::format("matmul.tilings[{}]", i);
    FBL_TRY(onlyKeys(e, {"tile", "pipeline", "efficiency", "groups_per_unit"}, where, path));
    int64_t pipeline = 0;
    FBL_TRY(readIntAtLeast(e, "pipeline", where + ".pipeline", 0, pipeline, path));
    auto t = parseTile(e["tile"].get<std::string>(), pipeline);
    if (!t.ok()) return makeError("{}: {}: {}", path, where, t.error().message);
    MatmulCandidate c;
    c.tiling = *t;
    c.efficiency = 0;
    FBL_TRY(readNumber(e, "efficiency", where + ".efficiency", c.efficiency, path));
    FBL_TRY(readIntAtLeast(e, "groups_per_unit", where + ".groups_per_unit", 1, c.groupsPerUnit, path));
    if (c.efficiency <= 0 || c.efficiency > 1)
      return makeError("{}: {} ({}): efficiency must be in (0, 1], groups_per_unit >= 1", path, where,
                       e["tile"].get<std::string>());
    m.candidates.push_back(c);
  }
  if (!m.candidates.empty() && !facts)
    return makeError("{}: matmul.tilings need the profile's compute_units, peak_gflops and bandwidth_gbps", path);
  return m;
}

json matmulBlockToJson(const MatmulBlock& m) {
  const MatmulBlock d;
  json b = {{"provenance", m.provenance}};
  if (!m.candidates.empty()) {
    b["tilings"] = json::array();
    for (const MatmulCandidate& c : m.candidates)
      b["tilings"].push_back({{"tile", tileString(c.tiling)},
                              {"pipeline", c.tiling.pipeline},
                              {"efficiency", c.efficiency},
                              {"groups_per_unit", c.groupsPerUnit}});
  }
  if (m.launchUs != d.launchUs) b["launch_us"] = m.launchUs;
  if (m.localMemoryBytes != d.localMemoryBytes) b["local_memory_bytes"] = m.localMemoryBytes;
  if (m.maxSplit != d.maxSplit) b["max_split"] = m.maxSplit;
  if (m.occupancyExponent != d.occupancyExponent) b["occupancy_exponent"] = m.occupancyExponent;
  if (m.tileLoadGbps != d.tileLoadGbps) b["tile_load_gbps"] = m.tileLoadGbps;
  const NarrowOptions& o = m.narrow;
  const NarrowOptions none;
  json n = json::object();
  if (o.maxSide != none.maxSide) n["max_side"] = o.maxSide;
  if (o.workItems != none.workItems) n["work_items"] = o.workItems;
  if (o.fillWorkItems != none.fillWorkItems) n["fill_work_items"] = o.fillWorkItems;
  if (o.stageNarrowOperand != none.stageNarrowOperand) n["stage_narrow_operand"] = o.stageNarrowOperand;
  if (o.texelWalkMinSide != none.texelWalkMinSide) n["texel_walk_min_side"] = o.texelWalkMinSide;
  if (o.rowsInGroupMinSide != none.rowsInGroupMinSide) n["rows_in_group_min_side"] = o.rowsInGroupMinSide;
  if (o.kContiguousWeights != none.kContiguousWeights) n["k_contiguous_weights"] = o.kContiguousWeights;
  if (o.batchProducts != none.batchProducts) n["batch_products"] = o.batchProducts;
  if (o.chunkMinK != none.chunkMinK) n["chunk_min_k"] = o.chunkMinK;
  if (o.chunkRows != none.chunkRows) n["chunk_rows"] = o.chunkRows;
  if (o.wideRun != none.wideRun) n["wide_run"] = o.wideRun;
  if (!m.narrowProvenance.empty()) n["provenance"] = m.narrowProvenance;
  if (!n.empty()) b["narrow"] = n;
  return b;
}

DeviceTuning defaultTuning(DeviceClass d, int64_t workgroup) {
  DeviceTuning t;
  t.matmulTile = matmulTiling(d);
  if (d == DeviceClass::kGpu) {
    // MatMul tiles as matmulTiling(kGpu) says why; attention within a 16 KB budget (what every
    // OpenCL GPU offers) in groups of 128; reductions as trees up to the 1-D work-group; 256
    // lanes per loss row whatever the 1-D work-group (rows are few and a vocabulary long).
    t.attention.localBytes = 16 * 1024;
    t.attention.workItems = 128;
    t.reduceMaxWorkgroup = workgroup;
    t.lossWorkgroup = 256;
    // elementwiseItems stays 1: how many loads a GPU needs in flight is measured per device,
    // and its profile says so (nvidia-h200.json).
  } else {
    // PoCL: a work-group is a loop nest on one core (MatMul tiles: matmulTiling(kCpu));
    // attention in groups of 64 within 32 KB, no reduction trees (PoCL's barrier handling multiplied the tiny CNN step
    // test's kernel builds about 4x).
    t.attention.localBytes = 32 * 1024;
    t.attention.workItems = 64;
    t.reduceMaxWorkgroup = 1;
    t.lossWorkgroup = std::min<int64_t>(workgroup, 256);
  }
  return t;
}

Result<KernelsBlock> parseKernelsBlock(const json& b, const DeviceTuning& base, const std::string& path) {
  if (!b.is_object()) return makeError("{}: \"kernels\" must be an object", path);
  FBL_TRY(onlyKeys(b,
                   {"provenance", "matmul_tile", "matmul_pipeline", "attention", "reduce_max_workgroup",
                    "loss_workgroup", "convert_workgroup", "splitk_sum_workgroup", "elementwise_items"},
                   "kernels", path));
  if (!hasProvenance(b)) return makeError("{}: kernels.provenance must say where the numbers come from", path);
  KernelsBlock k;
  k.provenance = b["provenance"].get<std::string>();
  k.values = base;
  if (b.contains("attention")) {
    if (!b["attention"].is_object()) return makeError("{}: kernels.attention must be an object", path);
    FBL_TRY(onlyKeys(b["attention"],
                     {"local_bytes", "max_tile", "work_items", "max_work_items", "max_accumulators",
                      "dq_min_whole_tile", "min_whole_tile", "min_groups_per_unit"},
                     "kernels.attention", path));
  }
  if (b.contains("matmul_tile") || b.contains("matmul_pipeline")) {
    int64_t pipeline = base.matmulTile.pipeline;
    if (b.contains("matmul_pipeline")) {
      const json& v = b["matmul_pipeline"];
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 3)
        return makeError("{}: kernels.matmul_pipeline must be an integer in [0, 3]", path);
      pipeline = v.get<int64_t>();
      k.set.insert("matmul_pipeline");
    }
    std::string tile = tileString(base.matmulTile);
    if (b.contains("matmul_tile")) {
      if (!b["matmul_tile"].is_string()) return makeError("{}: kernels.matmul_tile must be a string", path);
      tile = b["matmul_tile"].get<std::string>();
      k.set.insert("matmul_tile");
    }
    auto parsed = parseTile(tile, pipeline);
    if (!parsed.ok()) return makeError("{}: kernels.matmul_tile: {}", path, parsed.error().message);
    k.values.matmulTile = *parsed;
    k.values.matmulTile.splitK = 0;  // chosen per product
  }
  for (const IntField& f : intFields()) {
    auto [object, key] = locate(b, f.name);
    if (!object || !object->contains(key)) continue;
    const json& v = (*object)[key];
    if (!v.is_number_integer() || v.get<int64_t>() < f.lo || v.get<int64_t>() > f.hi ||
        (f.pow2 && !powerOfTwo(v.get<int64_t>())))
      return makeError("{}: kernels.{} must be an integer in [{}, {}]{}", path, f.name, f.lo, f.hi,
                       f.pow2 ? ", a power of two" : "");
    f.at(k.values) = v.get<int64_t>();
    k.set.insert(f.name);
  }
  if (b.contains("convert_workgroup")) {
    const json& c = b["convert_workgroup"];
    if (!c.is_array() || c.size() != 2 || !c[0].is_number_integer() || !c[1].is_number_integer() ||
        c[0].get<int64_t>() < 1 || c[1].get<int64_t>() < 1 || c[0].get<int64_t>() * c[1].get<int64_t>() > 1024)
      return makeError("{}: kernels.convert_workgroup must be [x, y], positive integers, x * y <= 1024", path);
    k.values.convertWorkgroup = {c[0].get<int64_t>(), c[1].get<int64_t>()};
    k.set.insert("convert_workgroup");
  }
  if (k.values.attention.workItems > k.values.attention.maxWorkItems)
    return makeError("{}: kernels.attention.work_items must not exceed max_work_items", path);
  return k;
}

DeviceTuning KernelsBlock::over(DeviceTuning base) const {
  if (set.count("matmul_tile") || set.count("matmul_pipeline")) base.matmulTile = values.matmulTile;
  DeviceTuning mine = values;  // IntField::at takes a mutable tuning
  for (const IntField& f : intFields())
    if (set.count(f.name)) f.at(base) = f.at(mine);
  if (set.count("convert_workgroup")) base.convertWorkgroup = values.convertWorkgroup;
  return base;
}

json kernelsBlockToJson(const KernelsBlock& k) {
  json b = {{"provenance", k.provenance}};
  if (k.set.count("matmul_tile")) b["matmul_tile"] = tileString(k.values.matmulTile);
  if (k.set.count("matmul_pipeline")) b["matmul_pipeline"] = k.values.matmulTile.pipeline;
  DeviceTuning values = k.values;
  for (const IntField& f : intFields()) {
    if (!k.set.count(f.name)) continue;
    const std::string name = f.name;
    const size_t dot = name.find('.');
    if (dot == std::string::npos)
      b[name] = f.at(values);
    else
      b[name.substr(0, dot)][name.substr(dot + 1)] = f.at(values);
  }
  if (k.set.count("convert_workgroup")) b["convert_workgroup"] = {k.values.convertWorkgroup[0], k.values.convertWorkgroup[1]};
  return b;
}

}  // namespace fbl::profile
