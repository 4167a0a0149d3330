#include "compiler/strategy/strategy.h"

namespace fbl::strategy {

const char* strategyName(Strategy s) {
  switch (s) {
    case Strategy::kFBLayout: return "fblayout";
    case Strategy::kReuse: return "reuse";
    case Strategy::kExplicit: return "explicit";
  }
  return "?";
}

Result<Strategy> parseStrategy(const std::string& name) {
  for (Strategy s : kAllStrategies)
    if (name == strategyName(s)) return s;
  return makeError("unknown strategy '{}' (fblayout, reuse or explicit)", name);
}

}  // namespace fbl::strategy
