// The readable text form of a plan (tests/golden/*.plan.txt): every tensor with its role,
// dtype, shape, layout and arena slot, every launch, and the OpenCL program. A change to any
// generated kernel or to the memory plan shows up as a diff.
#pragma once

#include <string>

#include "runtime/plan_file.h"

namespace fbl::plan {

std::string printPlan(const planfile::Plan& p);

}  // namespace fbl::plan
