// The text and JSON forms of a LayoutAssignment: the dumps of the layout passes
// (--dump-after), `fblc inspect`, `fblc explain` and the compile report's `transforms`.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "compiler/ir/graph.h"
#include "compiler/passes/layout_assignment.h"

namespace fbl::passes {

// formatClassification: counts per class and phase, then per op type.
// formatTransforms: totals, then (perNode) one line per transformation node.
std::string formatClassification(const ir::Graph& g, const LayoutAssignment& a);
std::string formatTransforms(const ir::Graph& g, const LayoutAssignment& a, bool perNode);
std::string formatAssignment(const ir::Graph& g, const LayoutAssignment& a);
nlohmann::json classificationToJson(const ir::Graph& g, const LayoutAssignment& a);
// The compile report's `transforms`: total, eliminated, explicit (each with its reason).
nlohmann::json transformsToJson(const ir::Graph& g, const LayoutAssignment& a);
nlohmann::json assignmentToJson(const ir::Graph& g, const LayoutAssignment& a);

}  // namespace fbl::passes
