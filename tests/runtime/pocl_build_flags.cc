// fbl_runtime_tests run whole plans on PoCL without LLVM's optimizer. They check what the plans
// compute; optimizing each plan's 100-300 kernels was about 60% of their time (2.3x on 2 cores).
// The kernel tests in fbl_tests keep PoCL's optimizer, the path closest to a device compiler's.
// Set before main, so that every build in the process (and fbl-train, which tests spawn) sees
// it; a value already in the environment wins (POCL_EXTRA_BUILD_FLAGS= runs them optimized).
#include <cstdlib>

namespace {
const bool kPoclOptimizerOff = [] { return setenv("POCL_EXTRA_BUILD_FLAGS", "-cl-opt-disable", 0) == 0; }();
}  // namespace
