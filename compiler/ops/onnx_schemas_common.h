// What the ONNX schema files (one per op family) share: their lists, and the small checks every
// shape rule makes. Errors come from InferContext::fail, so they name the node.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "compiler/ops/op_schema.h"

namespace fbl::ops::rules {

inline constexpr int kVariadic = -1;  // OpSchema::maxInputs for "any number"

std::vector<OpSchema> elementwiseSchemas();  // onnx_schemas_elementwise.cc
std::vector<OpSchema> shapeSchemas();        // onnx_schemas_shape.cc
std::vector<OpSchema> nnSchemas();           // onnx_schemas_nn.cc

bool hasInput(const InferContext& c, size_t i);
std::string inputName(const InferContext& c, size_t i);
int64_t rankOf(const InferContext& c, size_t i);

// The node must have between lo and hi outputs (an omitted optional output still counts).
Status expectOutputs(const InferContext& c, size_t lo, size_t hi);
// `axis` in [-rank, rank), made non-negative.
Result<int64_t> normalizeAxis(const InferContext& c, int64_t axis, int64_t rank,
                              std::string_view what = "axis");
// The contents of input i as int64s; an error when they are not known at compile time.
Result<std::vector<int64_t>> constInts(const InferContext& c, size_t i, std::string_view what);
// The one element of scalar-like (one-element) input i, as a double.
Result<double> constScalar(const InferContext& c, size_t i, std::string_view what);

// dtype checks on input i.
Status expectFloat(const InferContext& c, size_t i);
Status expectDType(const InferContext& c, size_t i, ir::DType t);
Status expectIndex(const InferContext& c, size_t i);  // i32 or i64
Status expectSameDType(const InferContext& c, size_t i, size_t j);

// The numpy broadcast of the given inputs' shapes (omitted inputs skipped).
Result<ir::Shape> broadcastInputs(const InferContext& c, const std::vector<size_t>& which);

void setOut(InferContext& c, size_t i, ir::DType t, ir::Shape s);

}  // namespace fbl::ops::rules
