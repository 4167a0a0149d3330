#include <catch2/catch.hpp>

#include "compiler/support/glob.h"

TEST_CASE("globMatch follows shell star and question-mark rules", "[support]") {
  using fbl::globMatch;
  CHECK(globMatch("*lora_*", "m.layers.0.q_proj.lora_A.default.weight"));
  CHECK_FALSE(globMatch("*lora_*", "m.layers.0.q_proj.base_layer.weight"));
  CHECK(globMatch("*", ""));
  CHECK(globMatch("a?c", "abc"));
  CHECK_FALSE(globMatch("a?c", "ac"));
  CHECK(globMatch("*.weight", "x.weight"));
  CHECK_FALSE(globMatch("*.weight", "x.weight.bias"));
  CHECK(globMatch("a*b*c", "a_b_b_c"));
  CHECK_FALSE(globMatch("a*b*c", "a_b_b_d"));
}
