// verify: the IR invariants every pass relies on, checked between passes by the pass manager.
//
//   1. Ids: every node input and output is kNoValue or a value of the graph; every graph input
//      and output is a value.
//   2. Topological order and SSA: walking the live nodes in order, each input is defined before
//      it is read (a graph input, initializer or constant, or an earlier live node's output),
//      each value is produced by one node, and Value::producer names that node.
//   3. Shapes: every value a live node reads or writes has a static shape (shapeKnown).
//   4. Schemas: every live node's op is known and its arity and attributes fit its schema.
//   5. Graph outputs are defined.
// The first violation is returned as one line naming the node and the value.
#pragma once

#include <string_view>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::passes {

struct VerifyOptions {
  bool requireShapes = true;
  bool checkSchemas = true;
};

Status verifyGraph(const ir::Graph& g, const VerifyOptions& opts = {});

class Verify {
 public:
  explicit Verify(VerifyOptions opts = {}) : opts_(opts) {}
  static constexpr std::string_view name() { return "verify"; }
  // Never changes the graph.
  Result<bool> run(ir::Graph& g);

 private:
  VerifyOptions opts_;
};

}  // namespace fbl::passes
