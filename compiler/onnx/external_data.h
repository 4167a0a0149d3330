// Initializer bytes kept outside the .onnx file (ONNX "external data": keys location, offset,
// length). Import records where the bytes are and validates the path, then importModel reads
// every initializer whose file exists (loadAvailableExternalData): the one loader every command
// goes through. A model whose data file is absent (llama-full ships without its weights) still
// imports with every name and shape; what needs the bytes says which file is missing
// (requireInitializerData).
#pragma once

#include <string>
#include <string_view>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::onnx {

// The whole file as bytes: "X: no such file" / "X: cannot read (reason)" on failure.
Result<std::string> readWholeFile(const std::string& path);

// Validates `location` (from tensor `tensor` of the model at `modelPath`) and returns the path
// to open. Refused: an empty or absolute location, one whose `..` leaves the model's folder,
// and one that resolves (through symlinks) outside that folder. The file need not exist.
Result<std::string> resolveExternalPath(const std::string& modelPath, std::string_view location,
                                        std::string_view tensor);

// Reads the external bytes of initializer `v` (which must have `external` set), checking the
// path again and offset/length against the file's size and the tensor's shape.
Result<ir::Tensor> loadExternalTensor(const ir::Graph& g, ir::ValueId v);

// Loads every external initializer whose data file exists (their `data` is set, `external`
// kept for reference); initializers whose file is absent are left as they are.
Status loadAvailableExternalData(ir::Graph& g);

// Every initializer a live node reads has its bytes; else the loader's reason for the first that
// has none ("external data file 'D/model.onnx.data' is missing").
Status requireInitializerData(const ir::Graph& g);

}  // namespace fbl::onnx
