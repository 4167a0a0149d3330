// fbl_runtime_tests and fbl_device_tests build their plans' kernels with FBL_WHOLE_PLAN_POCL_FLAGS (CMakeLists.txt says
// why: -cl-opt-disable unless configured otherwise). Set here, before main, rather than by ctest:
// a run of the binary by hand builds as CI does, and every build in the process (and fbl-train,
// which tests spawn) sees it. A value already in the environment wins (POCL_EXTRA_BUILD_FLAGS=
// runs them optimized).
#include <cstdlib>

namespace {
const bool kPoclBuildFlagsSet = [] { return setenv("POCL_EXTRA_BUILD_FLAGS", FBL_WHOLE_PLAN_POCL_FLAGS, 0) == 0; }();
}  // namespace
