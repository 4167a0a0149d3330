#include "compiler/profile/profile.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "compiler/support/json_fields.h"

namespace fbl::profile {

namespace {

using nlohmann::json;

constexpr const char* kSchema = "fbl-profile/1";

// Every value field of the JSON, in the order they are written. Each needs a provenance entry.
const std::vector<std::string>& valueFields() {
  static const std::vector<std::string> f = {
      "device_class",   "wave_size",     "image2d_max",    "texel_formats",  "l1_texture_cache_bytes",
      "cache_line_bytes", "texture_block", "l2_cache_bytes", "compute_units",
      "bandwidth_gbps", "peak_gflops",   "access_table", "image_storage"};
  return f;
}
const std::set<std::string>& knownKeys() {
  static const std::set<std::string> k = [] {
    std::set<std::string> s(valueFields().begin(), valueFields().end());
    s.insert({"schema", "name", "device", "notes", "provenance", "memory", "compile_defaults", "rtile_cost", "bracket",
              "opencl", "matmul", "kernels"});
    return s;
  }();
  return k;
}

const char* jsonTypeName(const json& v) { return v.type_name(); }

// Small typed readers: each names the file and the field path in its error.
struct Reader : JsonFieldReader {
  Result<int64_t> positiveInt(const json& obj, const std::string& key,
                              const std::string& path) const {
    FBL_ASSIGN(const json* v, get(obj, key, path));
    if (!v->is_number_integer()) return bad(path, fmt::format("expected an integer, got {}", jsonTypeName(*v)));
    int64_t x = v->get<int64_t>();
    if (x <= 0) return bad(path, fmt::format("must be positive, got {}", x));
    return x;
  }
  Result<double> positiveNumber(const json& v, const std::string& path) const {
    if (!v.is_number()) return bad(path, fmt::format("expected a number, got {}", jsonTypeName(v)));
    double x = v.get<double>();
    if (!(x > 0)) return bad(path, fmt::format("must be positive, got {}", x));
    return x;
  }
  Result<std::string> string(const json& obj, const std::string& key, const std::string& path) const {
    FBL_ASSIGN(const json* v, get(obj, key, path));
    if (!v->is_string()) return bad(path, fmt::format("expected a string, got {}", jsonTypeName(*v)));
    return v->get<std::string>();
  }
};

Result<AccessTable> readAccessTable(const Reader& r, const json& j) {
  if (!j.is_object()) return r.bad("access_table", "expected an object or null");
  AccessTable t;
  FBL_ASSIGN(t.unit, r.string(j, "unit", "access_table.unit"));
  FBL_ASSIGN(const json* threads, r.get(j, "threads", "access_table.threads"));
  if (!threads->is_array() || threads->empty())
    return r.bad("access_table.threads", "expected a non-empty array of thread counts");
  for (size_t i = 0; i < threads->size(); ++i) {
    const json& v = (*threads)[i];
    std::string path = fmt::format("access_table.threads[{}]", i);
    if (!v.is_number_integer() || v.get<int64_t>() <= 0)
      return r.bad(path, "expected a positive integer");
    t.threads.push_back(v.get<int>());
  }
  for (AccessPattern p : kAllAccessPatterns) {
    std::string key = accessPatternName(p);
    std::string path = "access_table." + key;
    FBL_ASSIGN(const json* row, r.get(j, key, path));
    if (!row->is_array() || row->size() != t.threads.size())
      return r.bad(path, fmt::format("expected an array of {} numbers (one per thread count)",
                                     t.threads.size()));
    std::vector<double> values;
    for (size_t i = 0; i < row->size(); ++i) {
      FBL_ASSIGN(double x, r.positiveNumber((*row)[i], fmt::format("{}[{}]", path, i)));
      values.push_back(x);
    }
    t.throughput[p] = std::move(values);
  }
  return t;
}

json accessTableToJson(const AccessTable& t) {
  json j = {{"unit", t.unit}, {"threads", t.threads}};
  for (AccessPattern p : kAllAccessPatterns) j[accessPatternName(p)] = t.throughput.at(p);
  return j;
}

Status checkProvenanceText(const std::string& field, const std::string& text,
                           const std::string& origin) {
  for (int k = 0; k <= static_cast<int>(SourceKind::kPending); ++k) {
    std::string kind = sourceKindName(static_cast<SourceKind>(k));
    if (text == kind || text.rfind(kind + ": ", 0) == 0) return Status::success();
  }
  return makeError("{}: field 'provenance.{}': '{}' must start with measured, queried, public, "
                   "derived, estimated or pending measurement",
                   origin, field, text);
}

Result<OpenClOptions> readOpenCl(const Reader& r, const json& cl) {
  OpenClOptions o;
  o.present = true;
  if (!cl.is_object())
    return r.bad("opencl", "expected {\"workgroup_size\", \"buffer_alignment_bytes\", \"build_options\", \"provenance\"}");
  for (const auto& [key, v] : cl.items()) {
    const std::string at = "opencl." + key;
    if (key == "workgroup_size" || key == "buffer_alignment_bytes") {
      FBL_ASSIGN(int64_t x, r.positiveInt(cl, key, at));
      (key == "workgroup_size" ? o.workgroupSize : o.bufferAlignment) = x;
    } else if (key == "build_options" || key == "provenance") {
      FBL_ASSIGN(std::string s, r.string(cl, key, at));
      (key == "build_options" ? o.buildOptions : o.provenance) = s;
    } else {
      return r.bad(at, "is not an opencl field (workgroup_size, buffer_alignment_bytes, build_options, provenance)");
    }
  }
  if (o.workgroupSize > 1024) return r.bad("opencl.workgroup_size", fmt::format("must be at most 1024, got {}", o.workgroupSize));
  if ((o.bufferAlignment & (o.bufferAlignment - 1)) != 0)
    return r.bad("opencl.buffer_alignment_bytes", fmt::format("must be a power of two, got {}", o.bufferAlignment));
  return o;
}

}  // namespace

const char* accessPatternName(AccessPattern p) {
  switch (p) {
    case AccessPattern::kRow: return "row";
    case AccessPattern::kColumn: return "column";
    case AccessPattern::kBlock4: return "block4";
    case AccessPattern::kBlock8: return "block8";
  }
  return "?";
}

const char* deviceClassName(DeviceClass d) { return d == DeviceClass::kCpu ? "cpu" : "gpu"; }

const char* sourceKindName(SourceKind k) {
  switch (k) {
    case SourceKind::kMeasured: return "measured";
    case SourceKind::kQueried: return "queried";
    case SourceKind::kPublic: return "public";
    case SourceKind::kDerived: return "derived";
    case SourceKind::kEstimated: return "estimated";
    case SourceKind::kPending: return "pending measurement";
  }
  return "?";
}

double AccessTable::at(AccessPattern p, int t) const {
  const std::vector<double>& v = throughput.at(p);
  size_t best = 0;
  for (size_t i = 0; i < threads.size(); ++i)
    if (threads[i] <= t && threads[i] >= threads[best]) best = i;
  if (threads[best] > t) {  // every measured count exceeds t: use the smallest
    for (size_t i = 0; i < threads.size(); ++i)
      if (threads[i] < threads[best]) best = i;
  }
  return v[best];
}

namespace {

// The device class's numbers, before the kernels block.
DeviceTuning classTuning(const HardwareProfile& p) {
  DeviceTuning t = defaultTuning(p.deviceClass, p.opencl.workgroupSize);
  if (p.matmul && p.matmul->localMemoryBytes > 0) t.attention.localBytes = p.matmul->localMemoryBytes;
  return t;
}

}  // namespace

DeviceTuning deviceTuning(const HardwareProfile& p) {
  return p.kernels ? p.kernels->over(classTuning(p)) : classTuning(p);
}

Status validateProfile(const HardwareProfile& p, const std::string& origin) {
  auto bad = [&](const std::string& field, const std::string& what) -> Status {
    return JsonFieldReader{origin}.bad(field, what);
  };
  if (p.name.empty()) return bad("name", "missing");
  if (p.waveSize <= 0) return bad("wave_size", "must be positive");
  if (p.image2dMaxWidth <= 0 || p.image2dMaxHeight <= 0) return bad("image2d_max", "must be positive");
  if (p.texelFormats.empty()) return bad("texel_formats", "must list at least one format");
  if (p.l1TextureCacheBytes <= 0) return bad("l1_texture_cache_bytes", "must be positive");
  if (p.cacheLineBytes <= 0) return bad("cache_line_bytes", "must be positive");
  if (p.textureBlock.h <= 0 || p.textureBlock.w <= 0) return bad("texture_block", "must be positive");
  if (p.l2CacheBytes <= 0) return bad("l2_cache_bytes", "must be positive");
  if (p.computeUnits <= 0) return bad("compute_units", "must be positive");
  if (!p.imageStorage.supported && (p.imageStorage.textureCache || p.imageStorage.fromBuffer))
    return bad("image_storage", "a device without image support has no texture cache or images over buffers");
  if (p.accessTable) {
    const AccessTable& t = *p.accessTable;
    if (t.threads.empty()) return bad("access_table.threads", "must not be empty");
    if (!std::is_sorted(t.threads.begin(), t.threads.end()))
      return bad("access_table.threads", "must be in increasing order");
    for (AccessPattern pat : kAllAccessPatterns) {
      auto it = t.throughput.find(pat);
      if (it == t.throughput.end() || it->second.size() != t.threads.size())
        return bad(std::string("access_table.") + accessPatternName(pat),
                   "needs one value per thread count");
    }
  }
  for (const std::string& f : valueFields()) {
    auto it = p.provenance.find(f);
    if (it == p.provenance.end()) return bad("provenance." + f, "missing (say where the number came from)");
    FBL_TRY(checkProvenanceText(f, it->second, origin));
    bool pending = it->second.rfind(sourceKindName(SourceKind::kPending), 0) == 0;
    bool absent = (f == "bandwidth_gbps" && !p.bandwidthGBs) || (f == "peak_gflops" && !p.peakGflops) ||
                  (f == "access_table" && !p.accessTable);
    if (absent && !pending) return bad(f, "is null but its provenance is not 'pending measurement'");
    if (!absent && pending) return bad(f, "has a value but its provenance says 'pending measurement'");
  }
  const MemoryLimits& m = p.memory;
  const std::optional<int64_t>* limits[] = {&m.globalBytes, &m.maxAllocBytes, &m.appBudgetBytes};
  for (size_t i = 0; i < 3; ++i) {
    const std::string f = std::string("memory.") + kMemoryFields[i];
    auto it = p.provenance.find(f);
    if (!m.present) {
      if (it != p.provenance.end()) return bad("provenance." + f, "names no profile field (there is no memory block)");
      continue;
    }
    if (it == p.provenance.end()) return bad("provenance." + f, "missing (say where the number came from)");
    FBL_TRY(checkProvenanceText(f, it->second, origin));
    const bool pending = it->second.rfind(sourceKindName(SourceKind::kPending), 0) == 0;
    if (!*limits[i] && !pending) return bad(f, "is null but its provenance is not 'pending measurement'");
    if (*limits[i] && pending) return bad(f, "has a value but its provenance says 'pending measurement'");
    if (*limits[i] && **limits[i] <= 0) return bad(f, "must be positive");
  }
  if (m.globalBytes && m.maxAllocBytes && *m.maxAllocBytes > *m.globalBytes)
    return bad("memory.max_alloc_bytes", "exceeds memory.global_bytes");
  const CompileDefaults& d = p.compileDefaults;
  if (d.present != (p.provenance.count("compile_defaults") > 0))
    return bad("provenance.compile_defaults", d.present ? "missing (say why these are the device's defaults)"
                                                        : "names no profile field (there is no compile_defaults block)");
  if (d.present) {
    FBL_TRY(checkProvenanceText("compile_defaults", p.provenance.at("compile_defaults"), origin));
    static const std::set<std::string> bases = {"fp32", "fp16", "int8", "int4"};
    if (!d.baseWeights.empty() && !bases.count(d.baseWeights))
      return bad("compile_defaults.base_weights", "'" + d.baseWeights + "' is not fp32, fp16, int8 or int4");
    if (!d.precision.empty() && d.precision != "fp32" && d.precision != "fp16" && d.precision != "bf16")
      return bad("compile_defaults.precision", "'" + d.precision + "' is not fp32, fp16 or bf16");
    if (!d.memoryBudget.empty() && d.memoryBudget != "auto" &&
        (d.memoryBudget.find_first_not_of("0123456789") != std::string::npos || d.memoryBudget.size() > 18 ||
         std::stoll(d.memoryBudget) <= 0))
      return bad("compile_defaults.memory_budget", "'" + d.memoryBudget + "' is not auto or a positive number of bytes");
    if (d.memoryBudget == "auto" && !p.memory.appBudgetBytes)
      return bad("compile_defaults.memory_budget", "is auto but memory.app_budget_bytes is not given");
  }
  const Bracket& b = p.bracket;
  const bool bracketed = !b.l1TextureBytes.empty() || !b.textureBlocks.empty() || !b.l2GBs.empty() ||
                         !b.clusterCacheBytes.empty() || !b.slcBytes.empty();
  if (bracketed != (p.provenance.count("bracket") > 0))
    return bad("provenance.bracket", bracketed ? "missing (say where each end comes from)"
                                               : "names no profile field (there is no bracket block)");
  if (bracketed) FBL_TRY(checkProvenanceText("bracket", p.provenance.at("bracket"), origin));
  if (!b.l1TextureBytes.empty() &&
      std::find(b.l1TextureBytes.begin(), b.l1TextureBytes.end(), p.l1TextureCacheBytes) == b.l1TextureBytes.end())
    return bad("bracket.l1_texture_cache_bytes", "must hold the profile's own l1_texture_cache_bytes");
  if (!b.textureBlocks.empty() && std::none_of(b.textureBlocks.begin(), b.textureBlocks.end(), [&](TextureBlock t) {
        return t.h == p.textureBlock.h && t.w == p.textureBlock.w;
      }))
    return bad("bracket.texture_block", "must hold the profile's own texture_block");
  for (const auto& [name, list] : {std::pair<const char*, const std::vector<int64_t>*>{"cluster_cache_bytes", &b.clusterCacheBytes},
                                   {"slc_bytes", &b.slcBytes}})
    if (!list->empty() && std::find(list->begin(), list->end(), int64_t{0}) == list->end())
      return bad(std::string("bracket.") + name, "must hold 0, the models' value (the level absent)");
  if (!b.l2GBs.empty() && p.extra.contains("memory_model") && p.extra["memory_model"].is_object() &&
      p.extra["memory_model"].contains("l2_bandwidth_gbps") && p.extra["memory_model"]["l2_bandwidth_gbps"].is_number() &&
      std::find(b.l2GBs.begin(), b.l2GBs.end(), p.extra["memory_model"]["l2_bandwidth_gbps"].get<double>()) == b.l2GBs.end())
    return bad("bracket.l2_bandwidth_gbps", "must hold the profile's own memory_model.l2_bandwidth_gbps");
  if (p.waveFootprint.has_value() != (p.provenance.count("rtile_cost") > 0))
    return bad("provenance.rtile_cost", p.waveFootprint ? "missing (say why R-Tiles are scored this way here)"
                                                        : "names no profile field (there is no rtile_cost block)");
  if (p.waveFootprint) {
    FBL_TRY(checkProvenanceText("rtile_cost", p.provenance.at("rtile_cost"), origin));
    const WaveFootprintScoring& w = *p.waveFootprint;
    if (w.tm <= 0 || w.tn <= 0 || w.tk <= 0 || w.tm % 4 || w.tn % 4 || w.tk % 4)
      return bad("rtile_cost.tile", "expected three positive multiples of 4 (TM, TN, TK)");
    if (w.workItems <= 0 || (w.tm * w.tk / 4) % w.workItems || (w.tn * w.tk / 4) % w.workItems)
      return bad("rtile_cost.work_items", "must divide the texels of a TM x TK and a TK x TN tile");
    if (p.l1TextureCacheBytes < int64_t{16} * p.textureBlock.h * p.textureBlock.w)
      return bad("rtile_cost", "needs an L1 texture cache of at least one texture_block");
  }
  for (const auto& [f, text] : p.provenance)
    if (std::find(valueFields().begin(), valueFields().end(), f) == valueFields().end() && f.rfind("memory.", 0) != 0 &&
        f != "compile_defaults" && f != "rtile_cost" && f != "bracket")
      return bad("provenance." + f, "names no profile field");
  return Status::success();
}

Result<HardwareProfile> profileFromJson(const json& j, const std::string& origin) {
  Reader r{{origin}};
  if (!j.is_object()) return makeError("{}: expected a JSON object at the top level", origin);
  FBL_ASSIGN(std::string schema, r.string(j, "schema", "schema"));
  if (schema != kSchema) return r.bad("schema", fmt::format("expected '{}', got '{}'", kSchema, schema));
  HardwareProfile p;
  FBL_ASSIGN(p.name, r.string(j, "name", "name"));
  FBL_ASSIGN(p.device, r.string(j, "device", "device"));
  if (j.contains("notes")) {
    FBL_ASSIGN(p.notes, r.string(j, "notes", "notes"));
  }
  FBL_ASSIGN(std::string deviceClass, r.string(j, "device_class", "device_class"));
  if (deviceClass != "gpu" && deviceClass != "cpu")
    return r.bad("device_class", fmt::format("expected \"gpu\" or \"cpu\" (CL_DEVICE_TYPE), got '{}'", deviceClass));
  p.deviceClass = deviceClass == "cpu" ? DeviceClass::kCpu : DeviceClass::kGpu;
  FBL_ASSIGN(int64_t wave, r.positiveInt(j, "wave_size", "wave_size"));
  p.waveSize = static_cast<int>(wave);
  FBL_ASSIGN(const json* img, r.get(j, "image2d_max", "image2d_max"));
  if (!img->is_object()) return r.bad("image2d_max", "expected {\"width\": W, \"height\": H}");
  FBL_ASSIGN(p.image2dMaxWidth, r.positiveInt(*img, "width", "image2d_max.width"));
  FBL_ASSIGN(p.image2dMaxHeight, r.positiveInt(*img, "height", "image2d_max.height"));
  FBL_ASSIGN(const json* formats, r.get(j, "texel_formats", "texel_formats"));
  if (!formats->is_array()) return r.bad("texel_formats", "expected an array of strings");
  for (size_t i = 0; i < formats->size(); ++i) {
    if (!(*formats)[i].is_string()) return r.bad(fmt::format("texel_formats[{}]", i), "expected a string");
    p.texelFormats.push_back((*formats)[i].get<std::string>());
  }
  FBL_ASSIGN(p.l1TextureCacheBytes, r.positiveInt(j, "l1_texture_cache_bytes", "l1_texture_cache_bytes"));
  FBL_ASSIGN(int64_t line, r.positiveInt(j, "cache_line_bytes", "cache_line_bytes"));
  p.cacheLineBytes = static_cast<int>(line);
  FBL_ASSIGN(const json* block, r.get(j, "texture_block", "texture_block"));
  if (!block->is_object()) return r.bad("texture_block", "expected {\"h\": C_h, \"w\": C_w} in texels");
  FBL_ASSIGN(int64_t bh, r.positiveInt(*block, "h", "texture_block.h"));
  FBL_ASSIGN(int64_t bw, r.positiveInt(*block, "w", "texture_block.w"));
  p.textureBlock = {static_cast<int>(bh), static_cast<int>(bw)};
  FBL_ASSIGN(p.l2CacheBytes, r.positiveInt(j, "l2_cache_bytes", "l2_cache_bytes"));
  FBL_ASSIGN(int64_t cus, r.positiveInt(j, "compute_units", "compute_units"));
  p.computeUnits = static_cast<int>(cus);
  FBL_ASSIGN(const json* images, r.get(j, "image_storage", "image_storage"));
  if (!images->is_object())
    return r.bad("image_storage", "expected {\"supported\", \"texture_cache\", \"from_buffer\", \"pitch_alignment_pixels\"}");
  for (const auto& [key, flag] : {std::pair<const char*, bool*>{"supported", &p.imageStorage.supported},
                                  {"texture_cache", &p.imageStorage.textureCache},
                                  {"from_buffer", &p.imageStorage.fromBuffer}}) {
    FBL_ASSIGN(const json* v, r.get(*images, key, std::string("image_storage.") + key));
    if (!v->is_boolean()) return r.bad(std::string("image_storage.") + key, "expected true or false");
    *flag = v->get<bool>();
  }
  FBL_ASSIGN(const json* pitch, r.get(*images, "pitch_alignment_pixels", "image_storage.pitch_alignment_pixels"));
  if (!pitch->is_number_integer() || pitch->get<int64_t>() < 0)
    return r.bad("image_storage.pitch_alignment_pixels", "expected a non-negative integer (0: unknown)");
  p.imageStorage.pitchAlignmentPixels = pitch->get<int64_t>();
  for (const char* key : {"bandwidth_gbps", "peak_gflops"}) {
    FBL_ASSIGN(const json* v, r.get(j, key, key));
    if (v->is_null()) continue;
    FBL_ASSIGN(double x, r.positiveNumber(*v, key));
    (std::string(key) == "bandwidth_gbps" ? p.bandwidthGBs : p.peakGflops) = x;
  }
  FBL_ASSIGN(const json* table, r.get(j, "access_table", "access_table"));
  if (!table->is_null()) {
    FBL_ASSIGN(AccessTable t, readAccessTable(r, *table));
    p.accessTable = std::move(t);
  }
  if (j.contains("memory")) {
    const json& mem = j.at("memory");
    if (!mem.is_object()) return r.bad("memory", "expected {\"global_bytes\", \"max_alloc_bytes\", \"app_budget_bytes\"}");
    p.memory.present = true;
    std::optional<int64_t>* limits[] = {&p.memory.globalBytes, &p.memory.maxAllocBytes, &p.memory.appBudgetBytes};
    for (size_t i = 0; i < 3; ++i) {
      const std::string path = std::string("memory.") + kMemoryFields[i];
      FBL_ASSIGN(const json* v, r.get(mem, kMemoryFields[i], path));
      if (v->is_null()) continue;
      FBL_ASSIGN(*limits[i], r.positiveInt(mem, kMemoryFields[i], path));
    }
    for (const auto& [key, value] : mem.items())
      if (std::find(std::begin(kMemoryFields), std::end(kMemoryFields), key) == std::end(kMemoryFields))
        return r.bad("memory." + key, "is not a memory field (global_bytes, max_alloc_bytes, app_budget_bytes)");
  }
  if (j.contains("compile_defaults")) {
    const json& d = j.at("compile_defaults");
    if (!d.is_object()) return r.bad("compile_defaults", "expected {\"base_weights\", \"precision\", \"memory_budget\"}");
    p.compileDefaults.present = true;
    for (const auto& [key, value] : d.items()) {
      std::string* field = key == "base_weights" ? &p.compileDefaults.baseWeights
                           : key == "precision"  ? &p.compileDefaults.precision
                           : key == "memory_budget" ? &p.compileDefaults.memoryBudget
                                                    : nullptr;
      if (!field) return r.bad("compile_defaults." + key, "is not a compile default (base_weights, precision, memory_budget)");
      if (!value.is_string()) return r.bad("compile_defaults." + key, "expected a string");
      *field = value.get<std::string>();
    }
  }
  if (j.contains("bracket")) {
    const json& b = j.at("bracket");
    if (!b.is_object())
      return r.bad("bracket", "expected {\"l1_texture_cache_bytes\", \"texture_block\", \"l2_bandwidth_gbps\"} lists");
    for (const auto& [key, v] : b.items()) {
      const std::string at = "bracket." + key;
      if (!v.is_array() || v.empty()) return r.bad(at, "expected a non-empty list of values");
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string item = fmt::format("{}[{}]", at, i);
        if (key == "l1_texture_cache_bytes") {
          if (!v[i].is_number_integer() || v[i].get<int64_t>() <= 0) return r.bad(item, "expected a positive integer");
          p.bracket.l1TextureBytes.push_back(v[i].get<int64_t>());
        } else if (key == "texture_block") {
          if (!v[i].is_object()) return r.bad(item, "expected {\"h\": C_h, \"w\": C_w} in texels");
          FBL_ASSIGN(int64_t h, r.positiveInt(v[i], "h", item + ".h"));
          FBL_ASSIGN(int64_t w, r.positiveInt(v[i], "w", item + ".w"));
          p.bracket.textureBlocks.push_back({static_cast<int>(h), static_cast<int>(w)});
        } else if (key == "l2_bandwidth_gbps") {
          FBL_ASSIGN(double x, r.positiveNumber(v[i], item));
          p.bracket.l2GBs.push_back(x);
        } else if (key == "cluster_cache_bytes" || key == "slc_bytes") {
          if (!v[i].is_number_integer() || v[i].get<int64_t>() < 0) return r.bad(item, "expected bytes, 0 or more");
          (key == "slc_bytes" ? p.bracket.slcBytes : p.bracket.clusterCacheBytes).push_back(v[i].get<int64_t>());
        } else {
          return r.bad(at, "is not a bracketed number (l1_texture_cache_bytes, texture_block, l2_bandwidth_gbps, "
                           "cluster_cache_bytes, slc_bytes)");
        }
      }
    }
  }
  if (j.contains("opencl")) {
    FBL_ASSIGN(p.opencl, readOpenCl(r, j.at("opencl")));
  }
  if (j.contains("rtile_cost")) {
    const json& c = j.at("rtile_cost");
    const char* shape = "expected {\"model\": \"wave-footprint\", \"tile\": [TM, TN, TK], \"work_items\": W}";
    if (!c.is_object()) return r.bad("rtile_cost", shape);
    FBL_ASSIGN(std::string model, r.string(c, "model", "rtile_cost.model"));
    if (model != "wave-footprint")
      return r.bad("rtile_cost.model", "'" + model + "' is not wave-footprint (omit the block for the paper's table)");
    FBL_ASSIGN(const json* tile, r.get(c, "tile", "rtile_cost.tile"));
    if (!tile->is_array() || tile->size() != 3 || !std::all_of(tile->begin(), tile->end(), [](const json& v) {
          return v.is_number_integer();
        }))
      return r.bad("rtile_cost.tile", "expected [TM, TN, TK], three integers");
    WaveFootprintScoring w;
    w.tm = (*tile)[0].get<int64_t>(), w.tn = (*tile)[1].get<int64_t>(), w.tk = (*tile)[2].get<int64_t>();
    FBL_ASSIGN(w.workItems, r.positiveInt(c, "work_items", "rtile_cost.work_items"));
    for (const auto& [key, value] : c.items())
      if (key != "model" && key != "tile" && key != "work_items")
        return r.bad("rtile_cost." + key, "is not an rtile_cost field (model, tile, work_items)");
    p.waveFootprint = w;
  }
  // The kernel generator's blocks: tilings are costed with the facts above, and the kernels
  // block's numbers are checked over the device class's.
  if (j.contains("matmul")) {
    const bool facts = p.computeUnits > 0 && p.peakGflops.value_or(0) > 0 && p.bandwidthGBs.value_or(0) > 0;
    FBL_ASSIGN(p.matmul, parseMatmulBlock(j.at("matmul"), facts, origin));
  }
  if (j.contains("kernels")) {
    FBL_ASSIGN(p.kernels, parseKernelsBlock(j.at("kernels"), classTuning(p), origin));
  }
  FBL_ASSIGN(const json* prov, r.get(j, "provenance", "provenance"));
  if (!prov->is_object()) return r.bad("provenance", "expected an object of field -> source");
  for (const auto& [field, text] : prov->items()) {
    if (!text.is_string()) return r.bad("provenance." + field, "expected a string");
    p.provenance[field] = text.get<std::string>();
  }
  p.extra = extraFields(j);
  FBL_TRY(validateProfile(p, origin));
  return p;
}

json profileToJson(const HardwareProfile& p) {
  json j = json::object();
  j["schema"] = kSchema;
  j["name"] = p.name;
  j["device"] = p.device;
  j["notes"] = p.notes;
  j["device_class"] = deviceClassName(p.deviceClass);
  j["wave_size"] = p.waveSize;
  j["image2d_max"] = {{"width", p.image2dMaxWidth}, {"height", p.image2dMaxHeight}};
  j["texel_formats"] = p.texelFormats;
  j["l1_texture_cache_bytes"] = p.l1TextureCacheBytes;
  j["cache_line_bytes"] = p.cacheLineBytes;
  j["texture_block"] = {{"h", p.textureBlock.h}, {"w", p.textureBlock.w}};
  j["l2_cache_bytes"] = p.l2CacheBytes;
  j["compute_units"] = p.computeUnits;
  j["image_storage"] = {{"supported", p.imageStorage.supported},
                        {"texture_cache", p.imageStorage.textureCache},
                        {"from_buffer", p.imageStorage.fromBuffer},
                        {"pitch_alignment_pixels", p.imageStorage.pitchAlignmentPixels}};
  j["bandwidth_gbps"] = p.bandwidthGBs ? json(*p.bandwidthGBs) : json(nullptr);
  j["peak_gflops"] = p.peakGflops ? json(*p.peakGflops) : json(nullptr);
  j["access_table"] = p.accessTable ? accessTableToJson(*p.accessTable) : json(nullptr);
  if (p.memory.present) {
    auto opt = [](const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); };
    j["memory"] = {{"global_bytes", opt(p.memory.globalBytes)},
                   {"max_alloc_bytes", opt(p.memory.maxAllocBytes)},
                   {"app_budget_bytes", opt(p.memory.appBudgetBytes)}};
  }
  if (p.compileDefaults.present) {
    j["compile_defaults"] = json::object();
    if (!p.compileDefaults.baseWeights.empty()) j["compile_defaults"]["base_weights"] = p.compileDefaults.baseWeights;
    if (!p.compileDefaults.precision.empty()) j["compile_defaults"]["precision"] = p.compileDefaults.precision;
    if (!p.compileDefaults.memoryBudget.empty()) j["compile_defaults"]["memory_budget"] = p.compileDefaults.memoryBudget;
  }
  if (!p.bracket.l1TextureBytes.empty()) j["bracket"]["l1_texture_cache_bytes"] = p.bracket.l1TextureBytes;
  for (const TextureBlock& t : p.bracket.textureBlocks) j["bracket"]["texture_block"].push_back({{"h", t.h}, {"w", t.w}});
  if (!p.bracket.l2GBs.empty()) j["bracket"]["l2_bandwidth_gbps"] = p.bracket.l2GBs;
  if (!p.bracket.clusterCacheBytes.empty()) j["bracket"]["cluster_cache_bytes"] = p.bracket.clusterCacheBytes;
  if (!p.bracket.slcBytes.empty()) j["bracket"]["slc_bytes"] = p.bracket.slcBytes;
  if (p.waveFootprint) {
    const WaveFootprintScoring& w = *p.waveFootprint;
    j["rtile_cost"] = {{"model", "wave-footprint"}, {"tile", {w.tm, w.tn, w.tk}}, {"work_items", w.workItems}};
  }
  if (p.opencl.present) {
    const OpenClOptions& o = p.opencl;
    j["opencl"] = {{"workgroup_size", o.workgroupSize}, {"buffer_alignment_bytes", o.bufferAlignment}};
    if (!o.buildOptions.empty()) j["opencl"]["build_options"] = o.buildOptions;
    if (!o.provenance.empty()) j["opencl"]["provenance"] = o.provenance;
  }
  if (p.matmul) j["matmul"] = matmulBlockToJson(*p.matmul);
  if (p.kernels) j["kernels"] = kernelsBlockToJson(*p.kernels);
  j["provenance"] = p.provenance;
  for (const auto& [key, value] : p.extra.items()) j[key] = value;
  return j;
}

json extraFields(const json& j) {
  json out = json::object();
  if (!j.is_object()) return out;
  for (const auto& [key, value] : j.items())
    if (!knownKeys().count(key)) out[key] = value;
  return out;
}

Result<HardwareProfile> loadProfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return makeError("{}: cannot open the profile", path);
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return makeError("{}: not valid JSON", path);
  return profileFromJson(j, path);
}

Status saveProfile(const HardwareProfile& p, const std::string& path) {
  FBL_TRY(validateProfile(p, path));
  std::ofstream out(path);
  if (!out) return makeError("{}: cannot write the profile", path);
  out << profileToJson(p).dump(2) << "\n";
  if (!out) return makeError("{}: write failed", path);
  return Status::success();
}

}  // namespace fbl::profile
