// The IR's text form (docs/ir.md): one line per input, parameter, constant, node and output,
// stable across runs, so that pass tests and golden files are small texts.
//
//   graph "tiny" opset 20
//     input %x : f32[2,3]
//     init %w : f32[3,4]
//     const %perm : i64[2] = [1,0]
//     %y : f32[2,4] = MatMul(%x, %w) @mm
//     bwd %gx = Transpose(%y) {perm=[1,0]} @t
//     output %y
#pragma once

#include <cstdint>
#include <string>

#include "compiler/ir/annotations.h"
#include "compiler/ir/graph.h"

namespace fbl::ir {

struct PrintOptions {
  // Constants (and tensor attributes) with at most this many elements are printed in full;
  // larger ones as a content hash, which the parser refuses. -1: always in full.
  int64_t maxInlineElements = 16;
  // Print initializer data too (same limit); by default only their type is shown.
  bool initializerData = false;
  // Print "@name" after each node.
  bool nodeNames = true;
  // Writes `<...>` after values, inputs and nodes (annotations.h); not owned.
  const Annotator* annotator = nullptr;
};

std::string printGraph(const Graph& g, const PrintOptions& opts = {});
// One node as its line in printGraph (no phase prefix, no indentation).
std::string printNode(const Graph& g, const Node& n, const PrintOptions& opts = {});
// "f32[1,16]", "f32" (shape unknown), "" (nothing known).
std::string printType(const Value& v);
// "%name", quoted ("%\"a b\"") when the name has characters outside [A-Za-z0-9_.-/].
std::string printValueName(std::string_view name);
// A double-quoted string with the escapes the parser reads back (\" \\ \n \t \xHH).
std::string printString(std::string_view s);
// 64-bit FNV-1a of a tensor's dtype, shape and bytes, as 16 hex digits.
std::string tensorHash(const Tensor& t);

}  // namespace fbl::ir
