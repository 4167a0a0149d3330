// Optimizer update nodes, one per trainable, with PyTorch's semantics:
//   fbl.SGD(p, g[, buf]) -> p'[, buf']        g += wd*p; buf = momentum*buf + g; p -= lr*buf
//   fbl.AdamW(p, g, m, v, step) -> p', m', v' p *= 1 - lr*wd; m, v = EMAs of g, g^2;
//                                             p -= lr * m^ / (sqrt(v^) + eps), ^ = bias-corrected
// State tensors are Initializer values that start at zero (all states of one shape share one
// zero buffer); their updated versions are graph outputs, so a runtime carries them across steps
// exactly as it carries the parameters.
// The training loop (runtime/training_loop.h) adds, each only when asked for:
//  1. gradient accumulation: per trainable a state acc and, in the backward phase,
//     acc' = acc * keep + g * (1/K) (keep: a scalar input, 0 on a window's first micro-batch);
//     the optimizer reads acc';
//  2. clipping, in the optimizer phase: norm = sqrt(sum over trainables of ReduceSumSquare(g)),
//     scale = Min(max_norm / (norm + 1e-6), 1), the 7th input of every fbl.AdamW (which
//     multiplies g by it), so the norm never leaves the device;
//  3. a schedule: the lr becomes a scalar input, AdamW's 6th, written by the runtime per step.
// AdamW with a 6th and 7th input (lr, grad_scale) reads them instead of its lr attribute and 1.
#include <cmath>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "compiler/autodiff/grad_rules.h"
#include "compiler/autodiff/training_graph.h"

namespace fbl::autodiff {

namespace {

Status validate(const OptimizerOptions& o) {
  auto bad = [](float x) { return !std::isfinite(x); };
  if (bad(o.lr) || o.lr <= 0) return makeError("--lr must be a positive number, not {}", o.lr);
  if (bad(o.weightDecay) || o.weightDecay < 0)
    return makeError("weight decay must be >= 0, not {}", o.weightDecay);
  if (o.kind == OptimizerKind::SGD && (bad(o.momentum) || o.momentum < 0 || o.momentum >= 1))
    return makeError("SGD momentum must be in [0, 1), not {}", o.momentum);
  if (o.kind == OptimizerKind::AdamW) {
    if (bad(o.beta1) || bad(o.beta2) || o.beta1 < 0 || o.beta1 >= 1 || o.beta2 < 0 ||
        o.beta2 >= 1)
      return makeError("AdamW betas must be in [0, 1), not ({}, {})", o.beta1, o.beta2);
    if (bad(o.eps) || o.eps <= 0) return makeError("AdamW eps must be positive, not {}", o.eps);
  }
  if (o.gradAccum < 1 || o.gradAccum > (1 << 20))
    return makeError("--grad-accum must be between 1 and 1048576, not {}", o.gradAccum);
  if (bad(o.clipGradNorm) || o.clipGradNorm < 0)
    return makeError("--clip-grad-norm must be a number >= 0 (0: off), not {}", o.clipGradNorm);
  if (!o.lrSchedule.empty() && o.lrSchedule != "constant" && o.lrSchedule != "linear" && o.lrSchedule != "cosine")
    return makeError("--lr-schedule '{}': expected constant, linear or cosine", o.lrSchedule);
  if (o.warmupSteps < 0 || o.totalSteps < 0)
    return makeError("--warmup-steps and --total-steps must be >= 0, not {} and {}", o.warmupSteps, o.totalSteps);
  if (o.lrSchedule.empty() && (o.warmupSteps > 0 || o.totalSteps > 0))
    return makeError("--warmup-steps and --total-steps need --lr-schedule");
  if ((o.lrSchedule == "linear" || o.lrSchedule == "cosine") && o.totalSteps < 1)
    return makeError("--lr-schedule {} needs --total-steps (the optimizer steps over which the lr decays to 0)", o.lrSchedule);
  if (o.kind != OptimizerKind::AdamW && (!o.lrSchedule.empty() || o.clipGradNorm > 0))
    return makeError("--lr-schedule and --clip-grad-norm need --optimizer adamw");
  return Status::success();
}

class StateMaker {
 public:
  explicit StateMaker(ir::Graph& g) : g_(g) {}
  ir::ValueId make(ir::ValueId param, std::string_view suffix) {
    const ir::Value& p = g_.values[param];
    auto key = std::make_pair(static_cast<int>(p.dtype), p.shape);
    auto& zero = zeros_[key];
    if (!zero) zero = std::make_shared<const ir::Tensor>(p.dtype, p.shape);
    ir::Value v;
    v.name = g_.uniqueName(fmt::format("{}.{}", p.name, suffix));
    v.dtype = p.dtype;
    v.shape = p.shape;
    v.shapeKnown = true;
    v.kind = ir::ValueKind::Initializer;
    v.data = zero;
    return g_.addValue(std::move(v));
  }

 private:
  ir::Graph& g_;
  std::map<std::pair<int, ir::Shape>, std::shared_ptr<const ir::Tensor>> zeros_;
};

}  // namespace

namespace {

ir::ValueId scalarInput(ir::Graph& g, const char* name) {
  ir::ValueId v = g.newValue(name, ir::DType::F32, {}, true);
  g.values[v].kind = ir::ValueKind::Input;
  g.inputs.push_back(v);
  return v;
}

// 1: acc' = acc * keep + g / K per trainable, in the backward phase; the grads become acc'.
std::vector<ir::ValueId> accumulate(TrainingGraph& tg, GradBuilder& b, StateMaker& states, int k,
                                    std::vector<ir::ValueId> grads) {
  ir::Graph& g = tg.graph;
  tg.accumKeep = scalarInput(g, "grad_accum_keep");
  b.setPhase(ir::Phase::Backward);
  for (size_t i = 0; i < tg.trainables.size(); ++i) {
    const TrainableParam& t = tg.trainables[i];
    if (t.grad == ir::kNoValue) continue;
    ir::Node origin;
    origin.name = g.values[t.param].name + ".grad_accum";
    b.setOrigin(origin);
    ir::ValueId acc = states.make(t.param, "grad_accum");
    grads[i] = b.add(b.mul(acc, tg.accumKeep), b.mul(t.grad, b.scalar(1.0 / k, ir::DType::F32)));
    tg.state.push_back(OptimizerState{acc, grads[i], t.param});
    tg.accumulators.push_back(acc);
  }
  b.setPhase(ir::Phase::Optimizer);
  return grads;
}

// 2: min(max_norm / (||grads||_2 + 1e-6), 1), as torch.nn.utils.clip_grad_norm_.
ir::ValueId clipScale(GradBuilder& b, const std::vector<ir::ValueId>& grads, float maxNorm) {
  ir::Node origin;
  origin.name = "clip_grad_norm";
  b.setOrigin(origin);
  ir::ValueId total = ir::kNoValue;
  for (ir::ValueId gr : grads) {
    if (gr == ir::kNoValue) continue;
    ir::ValueId sq = b.emit("ReduceSumSquare", {gr}, ir::DType::F32, {}, {{"keepdims", int64_t{0}}});
    total = total == ir::kNoValue ? sq : b.add(total, sq);
  }
  if (total == ir::kNoValue) return b.scalar(1.0, ir::DType::F32);  // nothing to clip
  ir::ValueId norm = b.emit("Sqrt", {total}, ir::DType::F32, {});
  ir::ValueId coef = b.div(b.scalar(maxNorm, ir::DType::F32), b.add(norm, b.scalar(1e-6, ir::DType::F32)));
  return b.emit("Min", {coef, b.scalar(1.0, ir::DType::F32)}, ir::DType::F32, {});
}

}  // namespace

Result<OptimizerOptions> optimizerOptions(const TrainingFlags& f) {
  OptimizerOptions o;
  if (f.optimizer == "adamw") {
    o.kind = OptimizerKind::AdamW;
  } else if (f.optimizer == "sgd") {
    o.kind = OptimizerKind::SGD;
  } else {
    return makeError("--optimizer must be adamw or sgd, not '{}'", f.optimizer);
  }
  o.lr = f.lr;
  o.momentum = f.momentum;
  o.weightDecay = f.weightDecay;
  o.gradAccum = f.gradAccum;
  o.clipGradNorm = f.clipGradNorm;
  o.lrSchedule = f.lrSchedule;
  o.warmupSteps = f.warmupSteps;
  o.totalSteps = f.totalSteps;
  return o;
}

Status appendOptimizer(TrainingGraph& tg, const OptimizerOptions& o) {
  FBL_TRY(validate(o));
  ir::Graph& g = tg.graph;
  GradBuilder b(g);
  b.setPhase(ir::Phase::Optimizer);
  StateMaker states(g);
  bool adam = o.kind == OptimizerKind::AdamW;
  if (adam) {
    tg.step = g.newValue("step", ir::DType::I64, {}, true);
    g.values[tg.step].kind = ir::ValueKind::Input;
    g.inputs.push_back(tg.step);
  }
  std::vector<ir::ValueId> grads;
  for (const auto& t : tg.trainables) grads.push_back(t.grad);
  if (o.gradAccum > 1) grads = accumulate(tg, b, states, o.gradAccum, grads);
  // AdamW's lr and grad_scale inputs, present together (either alone would need the other's default).
  std::vector<ir::ValueId> loopInputs;
  if (!o.lrSchedule.empty() || o.clipGradNorm > 0) {
    if (!o.lrSchedule.empty()) tg.lr = scalarInput(g, "learning_rate");
    loopInputs = {tg.lr != ir::kNoValue ? tg.lr : b.scalar(o.lr, ir::DType::F32),
                  o.clipGradNorm > 0 ? clipScale(b, grads, o.clipGradNorm) : b.scalar(1.0, ir::DType::F32)};
  }
  std::vector<ir::ValueId> updatedStates;
  for (const OptimizerState& s : tg.state) updatedStates.push_back(s.updated);
  for (size_t i = 0; i < tg.trainables.size(); ++i) {
    TrainableParam& t = tg.trainables[i];
    const ir::Value& p = g.values[t.param];
    std::string pname = p.name;
    GradBuilder::OutType pt{p.dtype, p.shape, pname + ".updated"};
    ir::Node origin;
    origin.name = pname;
    b.setOrigin(origin);
    std::vector<ir::ValueId> stateIn;
    std::vector<ir::ValueId> outs;
    if (adam) {
      stateIn = {states.make(t.param, "adamw_m"), states.make(t.param, "adamw_v")};
      std::vector<ir::ValueId> in{t.param, grads[i], stateIn[0], stateIn[1], tg.step};
      in.insert(in.end(), loopInputs.begin(), loopInputs.end());
      outs = b.emitMulti("fbl.AdamW", in,
                         {pt,
                          {pt.dtype, pt.shape, g.values[stateIn[0]].name + ".updated"},
                          {pt.dtype, pt.shape, g.values[stateIn[1]].name + ".updated"}},
                         {{"lr", o.lr}, {"beta1", o.beta1}, {"beta2", o.beta2},
                          {"epsilon", o.eps}, {"weight_decay", o.weightDecay}});
    } else if (o.momentum > 0) {
      stateIn = {states.make(t.param, "sgd_momentum")};
      outs = b.emitMulti("fbl.SGD", {t.param, grads[i], stateIn[0]},
                         {pt, {pt.dtype, pt.shape, g.values[stateIn[0]].name + ".updated"}},
                         {{"lr", o.lr}, {"momentum", o.momentum}, {"weight_decay", o.weightDecay}});
    } else {
      outs = b.emitMulti("fbl.SGD", {t.param, grads[i]}, {pt},
                         {{"lr", o.lr}, {"momentum", o.momentum}, {"weight_decay", o.weightDecay}});
    }
    t.updated = outs[0];
    g.outputs.push_back(t.updated);
    for (size_t j = 0; j < stateIn.size(); ++j) {
      tg.state.push_back(OptimizerState{stateIn[j], outs[j + 1], t.param});
      updatedStates.push_back(outs[j + 1]);
    }
  }
  g.outputs.insert(g.outputs.end(), updatedStates.begin(), updatedStates.end());
  return Status::success();
}

}  // namespace fbl::autodiff
