// verify: the checks are listed in verify.h (steps 1-5).
#include "compiler/passes/verify.h"

#include <vector>

#include "compiler/ops/op_schema.h"

namespace fbl::passes {

Status verifyGraph(const ir::Graph& g, const VerifyOptions& opts) {
  const auto nv = static_cast<ir::ValueId>(g.values.size());
  auto inRange = [&](ir::ValueId v) { return v == ir::kNoValue || (v >= 0 && v < nv); };
  auto where = [&](const ir::Node& n) { return ir::describeNode(g, n); };
  // Step 1.
  for (ir::ValueId v : g.inputs)
    if (v < 0 || v >= nv) return makeError("verify: graph input id {} is not a value", v);
  for (ir::ValueId v : g.outputs)
    if (v < 0 || v >= nv) return makeError("verify: graph output id {} is not a value", v);
  std::vector<bool> defined(g.values.size(), false);
  for (ir::ValueId v = 0; v < nv; ++v)
    defined[v] = g.values[v].kind != ir::ValueKind::Intermediate || g.values[v].data != nullptr;
  for (ir::ValueId v : g.inputs) defined[v] = true;
  // Steps 2-4.
  for (ir::NodeId id = 0; id < static_cast<ir::NodeId>(g.nodes.size()); ++id) {
    const ir::Node& n = g.nodes[id];
    if (n.dead) continue;
    for (ir::ValueId v : n.inputs) {
      if (!inRange(v)) return makeError("verify: {}: input id {} is not a value", where(n), v);
      if (v == ir::kNoValue) continue;
      if (!defined[v])
        return makeError("verify: {}: reads {} before it is defined (topological order)", where(n), g.values[v].name);
      if (opts.requireShapes && !g.values[v].shapeKnown)
        return makeError("verify: {}: input {} has no static shape", where(n), g.values[v].name);
    }
    for (ir::ValueId v : n.outputs) {
      if (!inRange(v)) return makeError("verify: {}: output id {} is not a value", where(n), v);
      if (v == ir::kNoValue) continue;
      if (defined[v]) return makeError("verify: {}: {} is defined twice", where(n), g.values[v].name);
      if (g.values[v].producer != id)
        return makeError("verify: {}: {} names another producer", where(n), g.values[v].name);
      if (opts.requireShapes && !g.values[v].shapeKnown)
        return makeError("verify: {}: output {} has no static shape", where(n), g.values[v].name);
      defined[v] = true;
    }
    if (opts.checkSchemas) {
      if (ops::findSchema(n.op) == nullptr) return makeError("verify: {}: unknown op {}", where(n), n.op);
      FBL_TRY(ops::validateNode(g, n));
    }
  }
  // Step 5.
  for (ir::ValueId v : g.outputs)
    if (!defined[v]) return makeError("verify: graph output {} is never defined", g.values[v].name);
  return Status::success();
}

Result<bool> Verify::run(ir::Graph& g) {
  FBL_TRY(verifyGraph(g, opts_));
  return false;
}

}  // namespace fbl::passes
