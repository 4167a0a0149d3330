// Builds the joint training graph: forward, reverse-mode backward, optimizer.
//
// 1. Copy the forward graph; find the scalar loss and the trainable initializers.
// 2. Forward sweep: mark every float value that depends on a trainable ("active"), except through
//    piecewise-constant ops (Sign, Ceil, Floor, Round). Only active values get gradients, so
//    frozen weights and index/mask chains are never differentiated.
// 3. Seed d loss = 1 and walk the forward nodes in reverse topological order. A node with a
//    gradient on some output and an active input calls its GradRule, which returns the
//    gradient of each active input; contributions to one value are summed with Add.
// 4. Drop backward nodes whose results nothing reads (rules may build an operand that a later
//    rewrite made unnecessary), then mark every forward tensor a backward node reads
//    (Value::reusedByBackward: the reuse edges the layout compiler must keep alive).
// 5. Append the updated buffers (ir::Graph::stateUpdates) to the state, then the optimizer's
//    update nodes, and make the updated parameters and state outputs.
// Every step is one pass over nodes or values: linear in the graph's size.
#include <fmt/format.h>

#include "compiler/autodiff/grad_rules.h"
#include "compiler/autodiff/training_graph.h"

namespace fbl::autodiff {

namespace {

std::string fileOf(const ir::Graph& g) { return g.sourcePath.empty() ? g.name : g.sourcePath; }

// Piecewise-constant ops: their gradient is zero almost everywhere (PyTorch's is zero), so their
// outputs carry none.
bool isPiecewiseConstant(std::string_view op) {
  return op == "Sign" || op == "Ceil" || op == "Floor" || op == "Round";
}

std::vector<uint8_t> activeValues(const ir::Graph& g, const std::vector<ir::ValueId>& params) {
  std::vector<uint8_t> active(g.values.size(), 0);
  for (ir::ValueId p : params) active[p] = 1;
  for (const auto& n : g.nodes) {
    if (n.dead || isPiecewiseConstant(n.op)) continue;
    bool any = false;
    for (ir::ValueId v : n.inputs) any = any || (v != ir::kNoValue && active[v]);
    if (!any) continue;
    for (ir::ValueId o : n.outputs)
      if (o != ir::kNoValue && ir::isFloat(g.values[o].dtype)) active[o] = 1;
  }
  return active;
}

// Step 3. Returns d loss / d value for every forward value that has one.
Result<std::vector<ir::ValueId>> differentiate(ir::Graph& g, ir::ValueId loss,
                                               const std::vector<uint8_t>& active) {
  const size_t forwardValues = g.values.size();
  const auto forwardNodes = static_cast<ir::NodeId>(g.nodes.size());
  std::vector<ir::ValueId> grad(forwardValues, ir::kNoValue);
  ir::Tensor one(g.values[loss].dtype, g.values[loss].shape);
  one.set(0, 1.0);
  grad[loss] = g.newConstant("loss_grad_seed", std::move(one));
  GradBuilder b(g);
  for (ir::NodeId i = forwardNodes - 1; i >= 0; --i) {
    if (g.nodes[i].dead) continue;
    std::vector<ir::ValueId> dy;
    bool hasGrad = false, wantsAny = false;
    for (ir::ValueId o : g.nodes[i].outputs) {
      dy.push_back(o == ir::kNoValue ? ir::kNoValue : grad[o]);
      hasGrad = hasGrad || dy.back() != ir::kNoValue;
    }
    std::vector<bool> wants;
    for (ir::ValueId v : g.nodes[i].inputs) {
      wants.push_back(v != ir::kNoValue && active[v]);
      wantsAny = wantsAny || wants.back();
    }
    if (!hasGrad || !wantsAny) continue;
    GradContext ctx{b, g.nodes[i], std::move(dy), std::move(wants)};
    const GradRule* rule = findGradRule(ctx.fwd.op);
    if (rule == nullptr)
      return ctx.fail(fmt::format("no gradient rule for {}, and it lies between a trainable "
                                  "parameter and the loss", ctx.fwd.op));
    b.setOrigin(ctx.fwd);
    FBL_ASSIGN(std::vector<ir::ValueId> dx, rule->fn(ctx));
    for (size_t k = 0; k < ctx.wants.size(); ++k) {
      if (!ctx.wants[k]) continue;
      ir::ValueId in = ctx.in(k);
      if (k >= dx.size() || dx[k] == ir::kNoValue || g.values[dx[k]].shape != g.values[in].shape)
        return ctx.fail(fmt::format("internal error: the gradient rule gave no gradient of "
                                    "shape {} for input '{}'",
                                    ir::shapeToString(g.values[in].shape), g.values[in].name));
      grad[in] = grad[in] == ir::kNoValue ? dx[k] : b.add(grad[in], dx[k]);
    }
  }
  return grad;
}

// Step 4, first half: reverse sweep with use counts; `keep` values are roots.
void removeUnusedBackward(ir::Graph& g, ir::NodeId firstBackward,
                          const std::vector<ir::ValueId>& keep) {
  std::vector<int32_t> uses(g.values.size(), 0);
  for (const auto& n : g.nodes)
    for (ir::ValueId v : n.inputs)
      if (v != ir::kNoValue) ++uses[v];
  for (ir::ValueId v : keep) ++uses[v];
  for (ir::ValueId v : g.outputs) ++uses[v];
  bool removed = false;
  for (auto i = static_cast<ir::NodeId>(g.nodes.size()) - 1; i >= firstBackward; --i) {
    ir::Node& n = g.nodes[i];
    bool used = false;
    for (ir::ValueId o : n.outputs) used = used || (o != ir::kNoValue && uses[o] > 0);
    if (used) continue;
    n.dead = removed = true;
    for (ir::ValueId v : n.inputs)
      if (v != ir::kNoValue) --uses[v];
  }
  if (removed) g.compact();
}

void markReuse(ir::Graph& g, size_t forwardValues) {
  for (const auto& n : g.nodes) {
    if (n.phase != ir::Phase::Backward) continue;
    for (ir::ValueId v : n.inputs)
      if (v != ir::kNoValue && static_cast<size_t>(v) < forwardValues &&
          g.values[v].kind != ir::ValueKind::Constant)
        g.values[v].reusedByBackward = true;
  }
}

Status checkStaticShapes(const ir::Graph& g, const std::vector<uint8_t>& active) {
  for (const auto& v : g.values)
    if (!v.shapeKnown && active[&v - g.values.data()])
      return makeError("{}: tensor '{}' has no static shape; the training graph needs every "
                       "shape on the path from the trainables to the loss (try --shape)",
                       fileOf(g), v.name);
  return Status::success();
}

}  // namespace

Result<TrainingGraph> buildTrainingGraph(const ir::Graph& forward, const TrainingOptions& opts) {
  TrainingGraph tg;
  tg.graph = forward;
  ir::Graph& g = tg.graph;
  g.compact();
  for (auto& v : g.values) v.reusedByBackward = false;
  FBL_ASSIGN(tg.loss, findLoss(g));
  FBL_ASSIGN(std::vector<ir::ValueId> params, selectTrainables(g, opts.trainableGlobs));
  for (ir::ValueId p : params)
    for (const ir::StateUpdate& u : g.stateUpdates)
      if (u.state == p)
        return makeError("{}: '{}' is a buffer the forward pass updates (BatchNorm's running statistics), not a "
                         "parameter; narrow --trainable", fileOf(g), g.values[p].name);
  std::vector<uint8_t> active = activeValues(g, params);
  if (!active[tg.loss])
    return makeError("{}: none of the {} trainable parameters (--trainable '{}') affects the loss",
                     fileOf(g), params.size(), fmt::join(opts.trainableGlobs, "', '"));
  FBL_TRY(checkStaticShapes(g, active));

  const size_t forwardValues = g.values.size();
  const auto forwardNodes = static_cast<ir::NodeId>(g.nodes.size());
  FBL_ASSIGN(std::vector<ir::ValueId> grad, differentiate(g, tg.loss, active));
  for (ir::ValueId p : params) {
    if (grad[p] == ir::kNoValue)
      return makeError("{}: trainable '{}' does not affect the loss; narrow --trainable",
                       fileOf(g), g.values[p].name);
    tg.trainables.push_back(TrainableParam{p, grad[p], ir::kNoValue});
  }
  std::vector<ir::ValueId> keep;
  for (const auto& t : tg.trainables) keep.push_back(t.grad);
  removeUnusedBackward(g, forwardNodes, keep);
  markReuse(g, forwardValues);
  for (const ir::StateUpdate& u : g.stateUpdates) {
    tg.state.push_back(OptimizerState{u.state, u.updated, ir::kNoValue});
    tg.buffers.push_back(u.state);
  }
  FBL_TRY(appendOptimizer(tg, opts.optimizer));
  return tg;
}

}  // namespace fbl::autodiff
