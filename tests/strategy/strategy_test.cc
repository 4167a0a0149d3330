// The strategy names: every strategy's name parses back to it, and an unknown name is an error
// that lists them all (the CLI help texts and bench errors print the same list).
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "compiler/strategy/strategy.h"

using namespace fbl;

TEST_CASE("strategy names parse back to their strategy", "[strategy]") {
  std::set<std::string> names;
  for (strategy::Strategy s : strategy::kAllStrategies) {
    const std::string name = strategy::strategyName(s);
    names.insert(name);
    auto parsed = strategy::parseStrategy(name);
    REQUIRE(parsed.ok());
    CHECK(*parsed == s);
    CHECK(strategy::strategyNameList().find(name) != std::string::npos);
  }
  CHECK(names.size() == std::size(strategy::kAllStrategies));  // distinct
}

TEST_CASE("an unknown strategy name is an error listing the known ones", "[strategy]") {
  for (const char* bad : {"fast", "", "FBLayout"}) {
    auto r = strategy::parseStrategy(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find(strategy::strategyNameList()) != std::string::npos);
  }
  CHECK(strategy::strategyNameList() == "fblayout, reuse or explicit");
}
