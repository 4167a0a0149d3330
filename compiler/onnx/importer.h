// ONNX ModelProto -> ir::Graph, with no rewriting: every node, attribute and initializer as the
// file has it. Validates structure (undefined inputs, cycles, unsupported ops, attributes and
// dtypes, external-data paths) and returns one-line errors that name the file and the node.
#pragma once

#include <map>
#include <string>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::onnx {

struct ImportOptions {
  std::map<std::string, ir::Shape> shapeOverrides;
};

Result<ir::Graph> importModel(const std::string& path, const ImportOptions& opts = {});
// Same, from bytes in memory (the fuzz target); `path` is used in messages and to resolve
// external data.
Result<ir::Graph> importModelFromBytes(const std::string& bytes, const std::string& path,
                                       const ImportOptions& opts = {});

}  // namespace fbl::onnx
