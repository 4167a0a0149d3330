// fbl's own backward and optimizer ops (domain-less names prefixed "fbl."): schemas and
// reference kernels. Filled in by the autodiff work.
#include "compiler/ops/schema_tables.h"
#include "compiler/ref/kernel_tables.h"

namespace fbl::ops {
std::vector<OpSchema> trainingSchemas() { return {}; }
}  // namespace fbl::ops

namespace fbl::ref {
std::vector<KernelEntry> trainingKernels() { return {}; }
}  // namespace fbl::ref
