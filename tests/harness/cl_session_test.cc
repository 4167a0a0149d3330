// harness::ClSession's timing on PoCL: runQueued runs every launch it queues, in order, and refuses
// a batch too small to time (fbl-bench matmul --sweep's `queued` column rests on it).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "harness/cl_session.h"

using fbl::harness::ClSession;
using fbl::codegen::RTileKernel;

TEST_CASE("cl session: queued launches all run, in order, and are timed per launch", "[bench]") {
  auto opened = ClSession::open();
  REQUIRE(opened.ok());
  ClSession& s = **opened;
  RTileKernel k;
  k.name = "double_plus_one";
  // Not commutative across launches: x -> 2x + 1, so five launches give 31 only if each ran once.
  k.source = "__kernel void double_plus_one(__global float* x) { const uint i = get_global_id(0); "
             "x[i] = 2.0f * x[i] + 1.0f; }";
  k.args = {"x"};
  k.global = {64, 1, 1};
  k.local = {16, 1, 1};
  const std::vector<float> zeros(64, 0.0f);
  auto buf = s.buffer(64, zeros.data());
  REQUIRE(buf.ok());
  auto ran = s.run(k, {*buf});  // x: 0 -> 1
  REQUIRE(ran.ok());
  auto queued = s.runQueued(k, {*buf}, 4);  // 1 -> 3 -> 7 -> 15 -> 31
  REQUIRE(queued.ok());
  CHECK(*queued > 0.0);
  CHECK(std::isfinite(*queued));
  auto got = s.readBuffer(*buf, 64);
  REQUIRE(got.ok());
  for (float v : *got) CHECK(v == 31.0f);

  auto one = s.runQueued(k, {*buf}, 1);
  REQUIRE_FALSE(one.ok());
  CHECK_THAT(one.error().message, Catch::Contains("at least 2"));
  auto unbound = s.runQueued(k, {}, 4);
  REQUIRE_FALSE(unbound.ok());
  CHECK_THAT(unbound.error().message, Catch::Contains("1 expected"));
}
