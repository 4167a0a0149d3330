// ONNX ModelProto -> ir::Graph: every node, attribute and initializer as the file has it, except
// that sequence ops become tensor ops (sequence_ops.h) and weights the exporter's optimizer
// renamed get their PyTorch names and orientation back (export_names.h), and a BatchNorm
// exported in train mode gets the training flag the exporter dropped (export_training_mode.h).
// Validates structure (undefined inputs, cycles, unsupported ops, attributes and
// dtypes, external-data paths) and returns one-line errors that name the file and the node.
#pragma once

#include <map>
#include <string>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::onnx {

struct ImportOptions {
  std::map<std::string, ir::Shape> shapeOverrides;
  // importModel: read every external initializer whose data file exists
  // (external_data.h, loadAvailableExternalData), the one place any command reads external
  // data. So every command sees one graph: folding reads foldable initializers kept outside the
  // file as it reads inline ones, and the reference executor and the weight writer find every
  // weight in memory. An absent data file leaves its initializers shaped but empty (llama-full).
  bool loadExternalData = true;
  // Give weights the exporter's optimizer renamed their PyTorch names back from the node
  // metadata (export_names.h). Off: every initializer as the file names it.
  bool recoverExportNames = true;
};

Result<ir::Graph> importModel(const std::string& path, const ImportOptions& opts = {});
// Same, from bytes in memory (the fuzz target); `path` is used in messages and to resolve
// external data, which is recorded but not read.
Result<ir::Graph> importModelFromBytes(const std::string& bytes, const std::string& path,
                                       const ImportOptions& opts = {});

}  // namespace fbl::onnx
