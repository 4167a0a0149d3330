#include "compiler/strategy/strategy.h"

#include <iterator>

namespace fbl::strategy {

const char* strategyName(Strategy s) {
  switch (s) {
    case Strategy::kFBLayout: return "fblayout";
    case Strategy::kReuse: return "reuse";
    case Strategy::kExplicit: return "explicit";
  }
  return "?";
}

std::string strategyNameList() {
  std::string s;
  const size_t n = std::size(kAllStrategies);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) s += i + 1 == n ? " or " : ", ";
    s += strategyName(kAllStrategies[i]);
  }
  return s;
}

Result<Strategy> parseStrategy(const std::string& name) {
  for (Strategy s : kAllStrategies)
    if (name == strategyName(s)) return s;
  return makeError("unknown strategy '{}' ({})", name, strategyNameList());
}

}  // namespace fbl::strategy
