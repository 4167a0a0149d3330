// The readable text form of a plan (tests/golden/*.plan.txt): every tensor with its role,
// dtype, shape, layout and arena slot, every launch, and the OpenCL program. A change to any
// generated kernel or to the memory plan shows up as a diff.
#pragma once

#include <string>

#include "runtime/plan_file.h"

namespace fbl::plan {

std::string printPlan(const planfile::Plan& p);

// `fblc print-plan PLAN.fbp`: the text form of a plan file, after the runtime's own checks
// (runtime/plan_check.h), so that a file the runtime refuses is refused here, in its words.
// Returns the exit code (0, or 1 with the line on stderr).
int runPrintPlan(const std::string& path);

}  // namespace fbl::plan
