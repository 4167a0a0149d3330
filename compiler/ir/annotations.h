// Annotations: what a later layer writes into the IR's text form beside a value, a node or one
// input of a node, as `<...>` (the layout pipeline's decisions: passes/layout_text.h). The IR
// does not read them: the printer writes what an Annotator returns, and the parser hands back
// the text it found with its line, for the layer that owns the words to read.
//
//   input %x : f32[64,128] <rtile 32x64 strips cols-along-x anchor written>
//   bwd %dw : f32[128,256] = MatMul(%xt <tile-map 32x64 transposed>, %dy) @dw <FTD-D>
//
// An annotation runs to its matching '>' ('<' and '>' nest; quoted strings may hold either).
#pragma once

#include <map>
#include <string>
#include <utility>

#include "compiler/ir/graph.h"

namespace fbl::ir {

// What to write after a value's type, after an input of a node, and after a node's name. An
// empty string writes nothing.
class Annotator {
 public:
  virtual ~Annotator() = default;
  virtual std::string value(const Graph& g, ValueId v) const = 0;
  virtual std::string input(const Graph& g, NodeId n, int slot) const = 0;
  virtual std::string node(const Graph& g, NodeId n) const = 0;
};

struct Annotation {
  std::string text;  // between the brackets, trimmed
  int line = 0;      // of the text the graph was parsed from
};

// What parseGraph found, keyed as the Annotator is asked.
struct ParsedAnnotations {
  std::map<ValueId, Annotation> values;
  std::map<std::pair<NodeId, int>, Annotation> inputs;
  std::map<NodeId, Annotation> nodes;
  bool empty() const { return values.empty() && inputs.empty() && nodes.empty(); }
};

}  // namespace fbl::ir
