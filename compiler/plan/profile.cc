#include "compiler/plan/profile.h"

#include <fstream>

#include <nlohmann/json.hpp>

namespace fbl::plan {

Result<Profile> loadProfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return makeError("{}: cannot open profile", path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return makeError("{}: profile is not a JSON object", path);
  Profile p;
  p.name = j.value("name", std::string());
  if (p.name.empty()) return makeError("{}: profile has no \"name\"", path);
  p.computeUnits = j.value("compute_units", int64_t{0});
  const std::string device = j.value("device", std::string());
  p.cpu = device.rfind("pthread", 0) == 0 || device.rfind("cpu", 0) == 0;
  const nlohmann::json& cl = j.value("opencl", nlohmann::json::object());
  p.workgroupSize = cl.value("workgroup_size", p.workgroupSize);
  p.bufferAlignment = cl.value("buffer_alignment_bytes", p.bufferAlignment);
  if (cl.contains("build_options") && !cl["build_options"].is_string())
    return makeError("{}: opencl.build_options must be a string", path);
  p.buildOptions = cl.value("build_options", std::string());
  if (p.workgroupSize <= 0 || p.workgroupSize > 1024)
    return makeError("{}: opencl.workgroup_size must be in [1, 1024]", path);
  if (p.bufferAlignment <= 0 || (p.bufferAlignment & (p.bufferAlignment - 1)) != 0)
    return makeError("{}: opencl.buffer_alignment_bytes must be a power of two", path);
  FBL_ASSIGN(p.matmul, codegen::parseMatmulCostModel(j, path));
  return p;
}

}  // namespace fbl::plan
