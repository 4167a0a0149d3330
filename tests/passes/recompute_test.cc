// The recompute pass (compiler/passes/recompute.h) on the tiny Llama's joint graph: with no
// segments asked for it only counts the candidates and leaves the graph as it was; with all of
// them it clones each segment's forward nodes into the backward pass, and the graph still
// verifies. The algorithm's own checks (gradients unchanged) are tests/autodiff's.
#include <catch2/catch.hpp>

#include "compiler/ir/printer.h"
#include "compiler/passes/recompute.h"
#include "compiler/passes/verify.h"
#include "tests/passes/test_graphs.h"

namespace fbl::passes {

TEST_CASE("recompute pass: none counts the candidates, all recomputes every one", "[passes][recompute]") {
  const autodiff::TrainingGraph tg = fbl::testing::jointGraph("llama-tiny");
  ir::Graph g = tg.graph;
  const std::string before = ir::printGraph(g);
  ChunkLoss chunks;  // not run: no loss in chunks

  Recompute none(chunks);
  auto changed = none.run(g);
  REQUIRE(changed.ok());
  CHECK_FALSE(*changed);
  CHECK(none.summary.candidates > 0);
  CHECK(none.summary.segments == 0);
  CHECK(ir::printGraph(g) == before);

  Recompute all(chunks);
  all.count = -1;
  changed = all.run(g);
  REQUIRE(changed.ok());
  CHECK(*changed);
  CHECK(all.summary.segments == none.summary.candidates);
  CHECK(all.summary.clonedNodes > 0);
  CHECK(all.summary.savedBytes > 0);
  CHECK(g.nodes.size() == tg.graph.nodes.size() + static_cast<size_t>(all.summary.clonedNodes));
  Status ok = verifyGraph(g);
  INFO((ok.ok() ? "" : ok.error().message));
  CHECK(ok.ok());
}

}  // namespace fbl::passes
