#include "bench/oclgrind_device.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace fbl::bench {

namespace fs = std::filesystem;

Result<OclgrindDevice> OclgrindDevice::useOclgrind() {
  const char* pluginEnv = std::getenv("FBL_CACHE_SIM_PLUGIN");
  const std::string plugin = pluginEnv ? pluginEnv : FBL_CACHE_SIM_PLUGIN;
  if (!fs::exists(FBL_OCLGRIND_ICD))
    return makeError("Oclgrind's ICD library {} is missing: install oclgrind (scripts/dev.sh does)", FBL_OCLGRIND_ICD);
  if (!fs::exists(plugin)) return makeError("the cache-simulator plugin {} is missing: build fbl_cache_sim", plugin);
  OclgrindDevice d;
  d.dir_ = (fs::temp_directory_path() / fmt::format("fbl-cache-{}", ::getpid())).string();
  std::error_code ec;
  fs::create_directories(d.dir_ + "/vendors", ec);
  if (ec) return makeError("cannot create {}: {}", d.dir_, ec.message());
  {
    std::ofstream icd(d.dir_ + "/vendors/oclgrind.icd");
    icd << FBL_OCLGRIND_ICD << "\n";
    if (!icd) return makeError("cannot write {}/vendors/oclgrind.icd", d.dir_);
  }
  d.records_ = d.dir_ + "/launches.jsonl";
  d.model_ = d.dir_ + "/model.json";
  fs::remove(d.records_, ec);
  setenv("OCL_ICD_VENDORS", (d.dir_ + "/vendors").c_str(), 1);
  setenv("OCLGRIND_PLUGINS", plugin.c_str(), 1);
  setenv("FBL_CACHE_SIM_OUT", d.records_.c_str(), 1);
  setenv("FBL_CACHE_SIM_MODEL", d.model_.c_str(), 1);
  // Oclgrind 21.10 cannot run llvm.experimental.noalias.scope.decl, which its Clang emits at -Oz
  // when it inlines a helper with `restrict` parameters (fbl's layout accessors): creating such
  // a kernel fails with CL_INVALID_KERNEL_NAME (-46). Without `restrict` the kernels are the same
  // code minus the aliasing promise (which may let a compiler keep a few more loads in registers).
  const char* opts = std::getenv("OCLGRIND_BUILD_OPTIONS");
  setenv("OCLGRIND_BUILD_OPTIONS", (std::string(opts ? opts : "") + " -Drestrict=").c_str(), 1);
  return d;
}

Status OclgrindDevice::setModels(const std::vector<sim::MemoryModel>& models) {
  nlohmann::json list = nlohmann::json::array();
  for (const sim::MemoryModel& m : models) list.push_back(sim::memoryModelToJson(m));
  models_ = models.size();
  std::ofstream out(model_);
  out << list.dump() << "\n";
  if (!out) return makeError("cannot write {}", model_);
  return Status::success();
}

Result<std::vector<LaunchRecord>> OclgrindDevice::take() {
  std::vector<LaunchRecord> out;
  std::ifstream in(records_, std::ios::binary);
  if (!in) return out;  // nothing launched yet
  in.seekg(static_cast<std::streamoff>(consumed_));
  std::string line;
  while (std::getline(in, line)) {
    consumed_ += line.size() + 1;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) return makeError("{}: a launch record is not JSON", records_);
    if (j.contains("error")) return makeError("cache simulator: {}", j["error"].get<std::string>());
    if (!j.contains("models") || !j["models"].is_array() || j["models"].size() != models_)
      return makeError("{}: a launch record without one counter set per model", records_);
    LaunchRecord r{j.value("kernel", std::string()), {}};
    for (const nlohmann::json& m : j["models"]) {
      FBL_ASSIGN(sim::AccessCounters c, sim::countersFromJson(m, records_));
      r.counters.push_back(c);
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace fbl::bench
