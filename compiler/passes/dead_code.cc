// dead-code:
//   1. Mark the graph outputs and updated buffers (Graph::stateUpdates) needed.
//   2. Walk the nodes in reverse topological order: a live node none of whose outputs is
//      needed dies; a node that stays marks all its inputs needed. One walk suffices because
//      every consumer comes after its producer.
//   3. Compact the node list (dead nodes from earlier passes go too).
#include "compiler/passes/dead_code.h"

namespace fbl::passes {

Result<bool> DeadCode::run(ir::Graph& g) {
  removed_ = 0;
  std::vector<bool> needed(g.values.size(), false);
  for (ir::ValueId v : g.outputs) needed[v] = true;
  for (const ir::StateUpdate& u : g.stateUpdates) needed[u.updated] = true;
  bool hadDead = false;
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
    ir::Node& n = *it;
    if (n.dead) {
      hadDead = true;
      continue;
    }
    bool used = false;
    for (ir::ValueId o : n.outputs) used = used || (o != ir::kNoValue && needed[o]);
    if (!used) {
      n.dead = true;
      ++removed_;
      continue;
    }
    for (ir::ValueId v : n.inputs)
      if (v != ir::kNoValue) needed[v] = true;
  }
  if (removed_ > 0 || hadDead) g.compact();
  return removed_ > 0;
}

}  // namespace fbl::passes
