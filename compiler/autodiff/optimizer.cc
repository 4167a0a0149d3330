// Optimizer update nodes, one per trainable, with PyTorch's semantics:
//   fbl.SGD(p, g[, buf]) -> p'[, buf']        g += wd*p; buf = momentum*buf + g; p -= lr*buf
//   fbl.AdamW(p, g, m, v, step) -> p', m', v' p *= 1 - lr*wd; m, v = EMAs of g, g^2;
//                                             p -= lr * m^ / (sqrt(v^) + eps), ^ = bias-corrected
// State tensors are Initializer values that start at zero (all states of one shape share one
// zero buffer); their updated versions are graph outputs, so a runtime carries them across steps
// exactly as it carries the parameters.
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
  std::vector<ir::ValueId> updatedStates;
  for (auto& t : tg.trainables) {
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
      outs = b.emitMulti("fbl.AdamW", {t.param, t.grad, stateIn[0], stateIn[1], tg.step},
                         {pt,
                          {pt.dtype, pt.shape, g.values[stateIn[0]].name + ".updated"},
                          {pt.dtype, pt.shape, g.values[stateIn[1]].name + ".updated"}},
                         {{"lr", o.lr}, {"beta1", o.beta1}, {"beta2", o.beta2},
                          {"epsilon", o.eps}, {"weight_decay", o.weightDecay}});
    } else if (o.momentum > 0) {
      stateIn = {states.make(t.param, "sgd_momentum")};
      outs = b.emitMulti("fbl.SGD", {t.param, t.grad, stateIn[0]},
                         {pt, {pt.dtype, pt.shape, g.values[stateIn[0]].name + ".updated"}},
                         {{"lr", o.lr}, {"momentum", o.momentum}, {"weight_decay", o.weightDecay}});
    } else {
      outs = b.emitMulti("fbl.SGD", {t.param, t.grad}, {pt},
                         {{"lr", o.lr}, {"momentum", o.momentum}, {"weight_decay", o.weightDecay}});
    }
    t.updated = outs[0];
    g.outputs.push_back(t.updated);
    for (size_t i = 0; i < stateIn.size(); ++i) {
      tg.state.push_back(OptimizerState{stateIn[i], outs[i + 1], t.param});
      updatedStates.push_back(outs[i + 1]);
    }
  }
  g.outputs.insert(g.outputs.end(), updatedStates.begin(), updatedStates.end());
  return Status::success();
}

}  // namespace fbl::autodiff
