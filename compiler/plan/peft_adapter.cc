#include "compiler/plan/peft_adapter.h"

#include <set>

namespace fbl::plan {

std::string peftAdapterKey(std::string name) {
  if (name.rfind("m.", 0) == 0) name = name.substr(2);
  for (const char* part : {".lora_A.default.", ".lora_B.default."}) {
    const size_t p = name.find(part);
    if (p != std::string::npos) name.replace(p, std::string(part).size(), std::string(part).substr(0, 8));
  }
  return name;
}

nlohmann::json peftAdapterConfig(const ir::Graph& g, const std::vector<autodiff::TrainableParam>& trainables,
                                 double loraAlpha) {
  std::set<std::string> modules;
  int64_t r = 0;
  for (const auto& t : trainables) {
    const ir::Value& v = g.values[t.param];
    const size_t p = v.name.find(".lora_A.");
    if (p == std::string::npos) continue;
    const std::string prefix = v.name.substr(0, p);
    modules.insert(prefix.substr(prefix.rfind('.') + 1));
    if (!v.shape.empty()) r = v.shape[0];
  }
  if (modules.empty()) return nlohmann::json::object();
  return {{"peft_type", "LORA"},     {"r", r},
          {"lora_alpha", loraAlpha}, {"target_modules", std::vector<std::string>(modules.begin(), modules.end())},
          {"lora_dropout", 0.0},     {"bias", "none"},
          {"fan_in_fan_out", false}, {"inference_mode", true},
          {"base_model_name_or_path", nullptr}};
}

}  // namespace fbl::plan
