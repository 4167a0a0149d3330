// The layout strategies fbl compiles a training graph with (paper §2.3, §5.4), and their names:
// the one definition every tool, pass and benchmark uses.
//
//   fblayout  one layout per tensor that serves the forward and the backward pass: R-Tiles for
//             tensors reductions read along both axes, movement ops folded into their readers'
//             index maps, elementwise work fused into neighbouring kernels.
//   reuse     MNN: every tensor keeps its forward layout; backward kernels read it along the axis
//             it is not packed in (MatMul operands through the transposed path).
//   explicit  TFLite: every kernel reads its preferred layout, so movement ops run as kernels and
//             the backward pass converts reused forward tensors before reading them.
//
// Where each stage implements them: the layout decisions in passes/layout_assignment.h (run by
// passes/layout_pipeline.h), what each strategy executes and stores in plan/layout_lowering.h.
// The same three on a single MatMul or norm, for `fbl-bench matmul` and the kernel tests:
// harness/operator_plans.h.
#pragma once

#include <string>

#include "compiler/support/result.h"

namespace fbl::strategy {

enum class Strategy { kFBLayout, kReuse, kExplicit };
inline constexpr Strategy kAllStrategies[] = {Strategy::kFBLayout, Strategy::kReuse, Strategy::kExplicit};

const char* strategyName(Strategy s);  // "fblayout", "reuse", "explicit"
// Every name, for help texts and errors: "fblayout, reuse or explicit".
std::string strategyNameList();
// An unknown name is an error that lists the known ones.
Result<Strategy> parseStrategy(const std::string& name);

}  // namespace fbl::strategy
