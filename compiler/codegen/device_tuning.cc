#include "compiler/codegen/device_tuning.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace fbl::codegen {

namespace {

bool powerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// An integer key of `o` in [lo, hi] (and a power of two when asked), or the error naming it.
Status readInt(const nlohmann::json& o, const char* key, const std::string& field, int64_t lo, int64_t hi, bool pow2,
               int64_t& into, const std::string& path) {
  if (!o.contains(key)) return {};
  const nlohmann::json& v = o[key];
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi ||
      (pow2 && !powerOfTwo(v.get<int64_t>())))
    return makeError("{}: kernels.{} must be an integer in [{}, {}]{}", path, field, lo, hi,
                     pow2 ? ", a power of two" : "");
  into = v.get<int64_t>();
  return {};
}

Status onlyKeys(const nlohmann::json& o, std::initializer_list<const char*> keys, const std::string& where,
                const std::string& path) {
  for (const auto& [k, v] : o.items())
    if (std::none_of(keys.begin(), keys.end(), [&](const char* known) { return k == known; }))
      return makeError("{}: {} has no field '{}'", path, where, k);
  return {};
}

}  // namespace

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

Result<DeviceTuning> parseDeviceTuning(const nlohmann::json& b, DeviceTuning t, const std::string& path) {
  if (!b.is_object()) return makeError("{}: \"kernels\" must be an object", path);
  FBL_TRY(onlyKeys(b,
                   {"provenance", "matmul_tile", "matmul_pipeline", "attention", "reduce_max_workgroup",
                    "loss_workgroup", "convert_workgroup", "splitk_sum_workgroup", "elementwise_items"},
                   "kernels", path));
  if (!b.contains("provenance") || !b["provenance"].is_string() || b["provenance"].get<std::string>().empty())
    return makeError("{}: kernels.provenance must say where the numbers come from", path);
  if (b.contains("matmul_tile") || b.contains("matmul_pipeline")) {
    int64_t pipeline = t.matmulTile.pipeline;
    FBL_TRY(readInt(b, "matmul_pipeline", "matmul_pipeline", 0, 3, false, pipeline, path));
    std::string tile = tileString(t.matmulTile);
    if (b.contains("matmul_tile")) {
      if (!b["matmul_tile"].is_string()) return makeError("{}: kernels.matmul_tile must be a string", path);
      tile = b["matmul_tile"].get<std::string>();
    }
    auto parsed = parseTile(tile, pipeline);
    if (!parsed.ok()) return makeError("{}: kernels.matmul_tile: {}", path, parsed.error().message);
    t.matmulTile = *parsed;
    t.matmulTile.splitK = 0;  // chosen per product
  }
  if (b.contains("attention")) {
    const nlohmann::json& a = b["attention"];
    if (!a.is_object()) return makeError("{}: kernels.attention must be an object", path);
    FBL_TRY(onlyKeys(a, {"local_bytes", "max_tile", "work_items", "max_work_items", "max_accumulators",
                         "dq_min_whole_tile", "min_whole_tile", "min_groups_per_unit"},
                     "kernels.attention", path));
    AttentionTuning& at = t.attention;
    FBL_TRY(readInt(a, "local_bytes", "attention.local_bytes", 1024, int64_t{1} << 30, false, at.localBytes, path));
    FBL_TRY(readInt(a, "max_tile", "attention.max_tile", 1, 256, true, at.maxTile, path));
    FBL_TRY(readInt(a, "work_items", "attention.work_items", 1, 1024, true, at.workItems, path));
    FBL_TRY(readInt(a, "max_work_items", "attention.max_work_items", 1, 1024, true, at.maxWorkItems, path));
    FBL_TRY(readInt(a, "max_accumulators", "attention.max_accumulators", 1, 1024, false, at.maxAccumulators, path));
    FBL_TRY(readInt(a, "dq_min_whole_tile", "attention.dq_min_whole_tile", 1, 256, true, at.dqMinWholeTile, path));
    FBL_TRY(readInt(a, "min_whole_tile", "attention.min_whole_tile", 1, 256, true, at.minWholeTile, path));
    FBL_TRY(readInt(a, "min_groups_per_unit", "attention.min_groups_per_unit", 0, 64, false, at.minGroupsPerUnit,
                    path));
    if (at.workItems > at.maxWorkItems)
      return makeError("{}: kernels.attention.work_items must not exceed max_work_items", path);
  }
  FBL_TRY(readInt(b, "reduce_max_workgroup", "reduce_max_workgroup", 1, 1024, false, t.reduceMaxWorkgroup, path));
  FBL_TRY(readInt(b, "loss_workgroup", "loss_workgroup", 1, 1024, false, t.lossWorkgroup, path));
  FBL_TRY(readInt(b, "splitk_sum_workgroup", "splitk_sum_workgroup", 1, 1024, false, t.splitKSumWorkgroup, path));
  FBL_TRY(readInt(b, "elementwise_items", "elementwise_items", 1, 16, false, t.elementwiseItems, path));
  if (b.contains("convert_workgroup")) {
    const nlohmann::json& c = b["convert_workgroup"];
    if (!c.is_array() || c.size() != 2 || !c[0].is_number_integer() || !c[1].is_number_integer() ||
        c[0].get<int64_t>() < 1 || c[1].get<int64_t>() < 1 || c[0].get<int64_t>() * c[1].get<int64_t>() > 1024)
      return makeError("{}: kernels.convert_workgroup must be [x, y], positive integers, x * y <= 1024", path);
    t.convertWorkgroup = {c[0].get<int64_t>(), c[1].get<int64_t>()};
  }
  return t;
}

}  // namespace fbl::codegen
