// The 16-bit float conversions (compiler/support/float16.h) the reference executor and the
// quantizer use: round to nearest even, ties included, subnormals, overflow and NaN, checked on
// bit patterns worked out by hand.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <limits>

#include "compiler/support/float16.h"

namespace fbl {
namespace {

TEST_CASE("fp16 rounds to nearest even, through subnormals, to infinity past 65504", "[support][float16]") {
  CHECK(toHalf(1.0f) == 0x3c00);
  CHECK(toHalf(-2.0f) == 0xc000);
  CHECK(toHalf(1.0f + 1.0f / 2048) == 0x3c00);      // a tie: down to even
  CHECK(toHalf(1.0f + 3.0f / 2048) == 0x3c02);      // a tie: up to even
  CHECK(toHalf(1.0f + 1.0f / 2048 + 1.0f / 65536) == 0x3c01);  // above the tie
  CHECK(toHalf(65504.0f) == 0x7bff);
  CHECK(toHalf(65519.0f) == 0x7bff);                // below the halfway point to 65536
  CHECK(toHalf(65520.0f) == 0x7c00);                // the halfway point rounds to infinity
  CHECK(toHalf(std::ldexp(1.0f, -24)) == 0x0001);   // the smallest subnormal
  CHECK(toHalf(std::ldexp(1.0f, -25)) == 0x0000);   // half of it: a tie, to even zero
  CHECK(toHalf(std::ldexp(3.0f, -25)) == 0x0002);   // 1.5 of it: a tie, to even 2
  CHECK(toHalf(std::ldexp(1.0f, -14)) == 0x0400);   // the smallest normal
  CHECK(toHalf(-0.0f) == 0x8000);
  CHECK(toHalf(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK((toHalf(std::nanf("")) & 0x7c00) == 0x7c00);
  CHECK((toHalf(std::nanf("")) & 0x03ff) != 0);
  for (uint16_t h : {0x0001, 0x03ff, 0x0400, 0x3c00, 0x7bff, 0x8001, 0xfbff}) CHECK(toHalf(fromHalf(h)) == h);
  CHECK(fromHalf(0x0001) == std::ldexp(1.0f, -24));
  CHECK(fromHalf(0x7bff) == 65504.0f);
}

TEST_CASE("bf16 rounds to nearest even and keeps f32's range", "[support][float16]") {
  CHECK(toBfloat16(1.0f) == 0x3f80);
  CHECK(toBfloat16(std::bit_cast<float>(0x3f808000u)) == 0x3f80);  // a tie: down to even
  CHECK(toBfloat16(std::bit_cast<float>(0x3f818000u)) == 0x3f82);  // a tie: up to even
  CHECK(toBfloat16(std::bit_cast<float>(0x3f808001u)) == 0x3f81);  // above the tie
  CHECK(toBfloat16(std::bit_cast<float>(0x7f7fffffu)) == 0x7f80);  // f32's largest rounds up to infinity
  CHECK(toBfloat16(1e38f) == 0x7e96);
  CHECK(fromBfloat16(0x7e96) == std::bit_cast<float>(0x7e960000u));
  CHECK(toBfloat16(std::bit_cast<float>(0x7f800001u)) == 0x7fc0);  // a NaN whose payload is in the dropped bits stays NaN
  CHECK(toBfloat16(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(fromBfloat16(0x3f80) == 1.0f);
}

}  // namespace
}  // namespace fbl
