// The environment fbl_runtime_tests, fbl_device_tests and fbl_c_api_asan_tests run whole plans in,
// set here before main rather than by ctest, so that a run of a binary by hand behaves as CI does
// and every build in the process (and the fbl-train runs tests spawn) sees it. A value already in
// the environment wins.
//  - POCL_EXTRA_BUILD_FLAGS=FBL_WHOLE_PLAN_POCL_FLAGS: kernels build without optimisation unless
//    configured otherwise (cmake/runtime_tests.cmake says why); POCL_EXTRA_BUILD_FLAGS= runs them
//    optimized.
//  - FBL_PROGRAM_CACHE=0: no runtime program cache. PoCL caches programs itself, and handing the
//    runtime a binary makes it compile every kernel again, which doubled a cold plan's open and
//    first step. The tests of the cache turn it back on (ScopedEnv, tests/runtime/scoped_env.h).
#include <cstdlib>

namespace {
const bool kEnvironmentSet = [] {
  return setenv("POCL_EXTRA_BUILD_FLAGS", FBL_WHOLE_PLAN_POCL_FLAGS, 0) == 0 && setenv("FBL_PROGRAM_CACHE", "0", 0) == 0;
}();
}  // namespace
