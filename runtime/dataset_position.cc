#include "runtime/dataset_position.h"

#include <nlohmann/json.hpp>

#include "runtime/files.h"
#include "runtime/safetensors.h"

namespace fbl::rt {

namespace {

constexpr const char* kFormat = "fbl-dataset-position-1";

// 64-bit values as decimal strings: JSON readers elsewhere (an app's, Python's) keep 53 bits.
std::string u64Text(uint64_t v) { return std::to_string(v); }

bool parseU64(const nlohmann::json& j, uint64_t* out) {
  if (!j.is_string()) return false;
  const std::string s = j.get<std::string>();
  if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  try {
    *out = std::stoull(s);
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

}  // namespace

std::string datasetPositionPath(const std::string& checkpoint) { return checkpoint + ".data.json"; }

Status writeDatasetPosition(const std::string& path, const DatasetPosition& p) {
  nlohmann::json j = {{"format", kFormat},
                      {"step", p.step},
                      {"epoch", p.epoch},
                      {"position", p.position},
                      {"seed", p.seed ? nlohmann::json(u64Text(*p.seed)) : nlohmann::json(nullptr)},
                      {"samples", p.samples},
                      {"held_out", p.heldOut},
                      {"train_samples", p.trainSamples},
                      {"samples_per_step", p.samplesPerStep},
                      {"fingerprint", u64Text(p.fingerprint)}};
  return safetensors::writeFileAtomic(path, j.dump(1) + "\n");
}

Result<DatasetPosition> readDatasetPosition(const std::string& path) {
  FBL_ASSIGN(const std::string text, readWholeFile(path, "a dataset position file"));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  const std::string where = "dataset position '" + path + "'";
  if (j.is_discarded() || !j.is_object() || !j.contains("format") || j["format"] != kFormat)
    return Error{where + " is not an fbl dataset position (JSON with format " + kFormat + ")"};
  DatasetPosition p;
  const std::pair<const char*, int64_t*> ints[] = {{"step", &p.step},       {"epoch", &p.epoch},
                                                   {"position", &p.position}, {"samples", &p.samples},
                                                   {"held_out", &p.heldOut}, {"train_samples", &p.trainSamples},
                                                   {"samples_per_step", &p.samplesPerStep}};
  for (const auto& [key, field] : ints) {
    if (!j.contains(key) || !j[key].is_number_unsigned() || j[key].get<uint64_t>() > (uint64_t{1} << 62))
      return Error{where + ": '" + key + "' is not a non-negative integer"};
    *field = j[key].get<int64_t>();
  }
  if (!j.contains("fingerprint") || !parseU64(j["fingerprint"], &p.fingerprint))
    return Error{where + ": 'fingerprint' is not a decimal string"};
  if (!j.contains("seed")) return Error{where + ": 'seed' is missing"};
  if (!j["seed"].is_null()) {
    uint64_t s = 0;
    if (!parseU64(j["seed"], &s)) return Error{where + ": 'seed' is neither null nor a decimal string"};
    p.seed = s;
  }
  return p;
}

Status checkSameData(const DatasetPosition& saved, const DatasetPosition& now, const std::string& path) {
  const std::string was = "the checkpoint's dataset position '" + path + "' ";
  auto seedText = [](const std::optional<uint64_t>& s) { return s ? "--seed " + std::to_string(*s) : std::string("no --seed"); };
  if (saved.seed != now.seed) return Error{was + "has " + seedText(saved.seed) + ", this run " + seedText(now.seed)};
  if (saved.samples != now.samples || saved.fingerprint != now.fingerprint)
    return Error{was + "was written for another dataset (" + std::to_string(saved.samples) + " samples, fingerprint " +
                 u64Text(saved.fingerprint) + "; this one: " + std::to_string(now.samples) + ", " + u64Text(now.fingerprint) + ")"};
  if (saved.heldOut != now.heldOut || saved.trainSamples != now.trainSamples)
    return Error{was + "holds out " + std::to_string(saved.heldOut) + " samples, this run " + std::to_string(now.heldOut)};
  if (saved.samplesPerStep != now.samplesPerStep)
    return Error{was + "takes " + std::to_string(saved.samplesPerStep) + " samples a step, this run " + std::to_string(now.samplesPerStep)};
  return Status::success();
}

}  // namespace fbl::rt
