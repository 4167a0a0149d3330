// fbl_runtime_tests run whole plans on PoCL without LLVM's optimizer. They check what the plans
// compute, and optimizing their plans' kernels made them about 2.3x slower (vit-tiny's strategies
// test, cold cache: 118 s against 51 s).
// The kernel tests in fbl_tests keep PoCL's optimizer, the path closest to a device compiler's.
// Set here, before main, rather than by ctest: a run of the binary by hand builds as CI does, and
// every build in the process (and fbl-train, which tests spawn) sees it. A value already in the
// environment wins (POCL_EXTRA_BUILD_FLAGS= runs them optimized).
#include <cstdlib>

namespace {
const bool kPoclOptimizerOff = [] { return setenv("POCL_EXTRA_BUILD_FLAGS", "-cl-opt-disable", 0) == 0; }();
}  // namespace
