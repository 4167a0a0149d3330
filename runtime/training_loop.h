// The training loop around one step: gradient accumulation over micro-batches,
// clipping by global norm and the learning-rate schedule. Header-only: the compiler's reference
// trainer and the runtime run the same loop from the same plan fields (docs/plan-format.md,
// `training_loop`), so the schedule is written once, here.
//
// Semantics, PyTorch's:
//  1. a step of a plan with grad_accum K is one micro-batch: it runs forward and backward and adds
//     grad/K to the accumulated gradient (acc = acc * keep + grad / K, keep = 0 on a window's first
//     micro-batch, so no reset launch is needed); only the K-th micro-batch runs the optimizer;
//  2. clipping scales the gradient the optimizer reads by min(1, max_norm / (norm + 1e-6)), the
//     norm taken over every trainable's gradient on the device (torch.nn.utils.clip_grad_norm_);
//  3. the optimizer step n (1-based) uses lr = base_lr * factor(n - 1), factor as transformers'
//     get_{constant,linear,cosine}_schedule_with_warmup (a LambdaLR starts at epoch 0).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace fbl::planfile {

struct TrainingLoop {
  int32_t gradAccum = 1;     // micro-batches per optimizer step
  double clipGradNorm = 0;   // 0: no clipping
  std::string schedule;      // "": the lr is a literal in the kernels; "constant", "linear", "cosine"
  double lr = 0;             // the schedule's base learning rate (as compiled)
  int64_t warmupSteps = 0;
  int64_t totalSteps = 0;    // linear and cosine reach 0 here
  int32_t lrTensor = -1;     // f32 scalar (role step) the runtime writes before the optimizer phase
  int32_t accumKeep = -1;    // f32 scalar (role step): 0 on a window's first micro-batch, else 1
  std::vector<int32_t> accumulators;  // state tensors holding the gradient accumulated so far

  bool enabled() const { return gradAccum > 1 || clipGradNorm > 0 || !schedule.empty(); }
};

inline bool knownSchedule(const std::string& s) { return s == "constant" || s == "linear" || s == "cosine"; }

// transformers' lr_lambda at scheduler step `s` (0 for the first optimizer step).
inline double scheduleFactor(const std::string& kind, int64_t warmup, int64_t total, int64_t s) {
  if (s < warmup) return static_cast<double>(s) / static_cast<double>(std::max<int64_t>(1, warmup));
  if (kind == "constant") return 1.0;
  const double after = static_cast<double>(s - warmup), span = static_cast<double>(std::max<int64_t>(1, total - warmup));
  if (kind == "linear") return std::max(0.0, static_cast<double>(total - s) / span);
  // cosine, num_cycles 0.5: half a cosine from 1 down to 0.
  const double kPi = 3.14159265358979323846;
  return std::max(0.0, 0.5 * (1.0 + std::cos(kPi * 0.5 * 2.0 * (after / span))));
}

// The learning rate of optimizer step `step` (1-based) for a base rate `baseLr`.
inline double scheduledLr(const TrainingLoop& loop, double baseLr, int64_t step) {
  return baseLr * scheduleFactor(loop.schedule, loop.warmupSteps, loop.totalSteps, step - 1);
}

}  // namespace fbl::planfile
