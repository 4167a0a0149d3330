// The runtime's opt-in launch profiling (OpenOptions::profileLaunches) on PoCL: one device time
// per launch of a training step or of runPhases, each positive, in enqueue order; none when
// profiling is off. The plan is written by hand so that the test needs only the runtime.
#include <set>

#include <catch2/catch.hpp>

#include "runtime/plan_file.h"
#include "runtime/safetensors.h"
#include "runtime/session.h"

#include "tests/runtime/temp_dir.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

// A plan written by hand (no compiler): x[n] and a scalar loss; forward fills x and sets the
// loss, backward scales x, the optimizer adds 1 to it. Five launches over three phases.
planfile::Plan handPlan() {
  planfile::Plan p;
  p.model = "profiling";
  p.profile = "pocl-cpu";
  const int64_t n = 4096;
  // Row-major f32 buffers; every other field keeps its default.
  auto buffer = [&p](const char* name, std::vector<int64_t> shape, int64_t offset, int64_t bytes) {
    planfile::Tensor t;
    t.name = name;
    t.dtype = "f32";
    t.shape = std::move(shape);
    t.offset = offset;
    t.bytes = bytes;
    p.tensors.push_back(std::move(t));
  };
  buffer("x", {n}, 0, n * 4);
  buffer("loss", {}, n * 4, 4);
  p.arenaBytes = n * 4 + 256;
  p.loss = 1;
  p.program = R"(
__kernel void k0_fill(__global char* arena, ulong x) {
  __global float* v = (__global float*)(arena + x);
  v[get_global_id(0)] = (float)get_global_id(0);
}
__kernel void k1_loss(__global char* arena, ulong loss) { *(__global float*)(arena + loss) = 1.0f; }
__kernel void k2_scale(__global char* arena, ulong x) {
  __global float* v = (__global float*)(arena + x);
  v[get_global_id(0)] *= 0.5f;
}
__kernel void k3_step(__global char* arena, ulong x) {
  __global float* v = (__global float*)(arena + x);
  v[get_global_id(0)] += 1.0f;
}
)";
  p.kernelNames = {"k0_fill", "k1_loss", "k2_scale", "k3_step"};
  p.launches = {{"forward", 0, {0}, {n}, {}, "fill", "compute", {}, {}},
                {"forward", 1, {1}, {1}, {}, "loss", "compute", {}, {}},
                {"backward", 2, {0}, {n}, {}, "scale", "transform", {}, {}},
                {"backward", 2, {0}, {n}, {}, "scale2", "conversion", {}, {}},
                {"optimizer", 3, {0}, {n}, {}, "step", "compute", {}, {}}};
  return p;
}

std::unique_ptr<rt::Session> openHandPlan(bool profile) {
  const std::string path = tempDir() + "/profiling.fbp";
  REQUIRE_OK(safetensors::writeFileAtomic(path, planfile::serialize(handPlan())));
  rt::OpenOptions o;
  o.profileLaunches = profile;
  auto s = fbl::testing::requireValue(rt::Session::open(path, o));
  return s;
}

// Every launch of `phases`, once, in plan order, each with a positive device time.
void checkTimes(const rt::Session& s, const std::set<std::string>& phases) {
  const planfile::Plan& p = s.plan();
  std::vector<int32_t> expected;
  for (size_t i = 0; i < p.launches.size(); ++i)
    if (phases.count(p.launches[i].phase)) expected.push_back(static_cast<int32_t>(i));
  const std::vector<rt::LaunchTime>& times = s.launchTimes();
  REQUIRE(times.size() == expected.size());
  for (size_t k = 0; k < times.size(); ++k) {
    INFO("launch " << times[k].launch << " (" << p.launches[times[k].launch].node << ")");
    CHECK(times[k].launch == expected[k]);
    CHECK(times[k].seconds > 0.0);
  }
}

TEST_CASE("profiled sessions time every launch of a step and of runPhases", "[runtime][profiling]") {
  auto session = openHandPlan(/*profile=*/true);
  rt::Session& s = *session;
  float loss = 0;
  REQUIRE_OK(s.trainStep(&loss));
  CHECK(loss == 1.0f);
  checkTimes(s, {"forward", "backward", "optimizer"});
  REQUIRE_OK(s.runPhases({"forward"}));
  checkTimes(s, {"forward"});
  REQUIRE_OK(s.runPhases({"backward", "optimizer"}));
  checkTimes(s, {"backward", "optimizer"});
}

TEST_CASE("unprofiled sessions keep no launch times", "[runtime][profiling]") {
  auto s = openHandPlan(/*profile=*/false);
  float loss = 0;
  REQUIRE_OK(s->trainStep(&loss));
  CHECK(loss == 1.0f);
  CHECK(s->launchTimes().empty());
  REQUIRE_OK(s->runPhases({"forward"}));
  CHECK(s->launchTimes().empty());
}

}  // namespace
}  // namespace fbl::testing
