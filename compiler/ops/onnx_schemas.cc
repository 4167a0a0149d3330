// ops::onnxSchemas(): the ONNX part of the schema table, assembled from the per-family files,
// and the helpers their shape rules share.
#include <fmt/format.h>

#include "compiler/ops/broadcast.h"
#include "compiler/ops/onnx_schemas_common.h"
#include "compiler/ops/schema_tables.h"

namespace fbl::ops {

std::vector<OpSchema> onnxSchemas() {
  std::vector<OpSchema> all;
  for (auto* family : {&rules::elementwiseSchemas, &rules::shapeSchemas, &rules::nnSchemas})
    for (auto& s : family()) all.push_back(std::move(s));
  return all;
}

namespace rules {

bool hasInput(const InferContext& c, size_t i) {
  return i < c.node.inputs.size() && c.node.inputs[i] != ir::kNoValue;
}

std::string inputName(const InferContext& c, size_t i) {
  return hasInput(c, i) ? c.graph.values[c.node.inputs[i]].name : std::string("<absent>");
}

int64_t rankOf(const InferContext& c, size_t i) {
  return static_cast<int64_t>(c.in[i].shape.size());
}

Status expectOutputs(const InferContext& c, size_t lo, size_t hi) {
  size_t n = c.node.outputs.size();
  if (n >= lo && n <= hi) return Status::success();
  return c.fail(fmt::format("has {} outputs but {} produces {}", n, c.node.op,
                            lo == hi ? fmt::format("{}", lo) : fmt::format("{} to {}", lo, hi)));
}

Result<int64_t> normalizeAxis(const InferContext& c, int64_t axis, int64_t rank,
                              std::string_view what) {
  if (axis < -rank || axis >= rank)
    return c.fail(fmt::format("{} {} is out of range for rank {}", what, axis, rank));
  return axis < 0 ? axis + rank : axis;
}

Result<std::vector<int64_t>> constInts(const InferContext& c, size_t i, std::string_view what) {
  if (!hasInput(c, i)) return c.fail(fmt::format("input {} ({}) is missing", i, what));
  const ir::Tensor* t = c.constIn[i];
  if (t == nullptr)
    return c.fail(fmt::format("input {} '{}' ({}) must be a compile-time constant, but it "
                              "depends on run-time values",
                              i, inputName(c, i), what));
  if (t->dtype() != ir::DType::I64 && t->dtype() != ir::DType::I32)
    return c.fail(fmt::format("input {} '{}' ({}) must be i64 or i32, not {}", i,
                              inputName(c, i), what, ir::dtypeName(t->dtype())));
  return t->toInt64s();
}

Result<double> constScalar(const InferContext& c, size_t i, std::string_view what) {
  if (!hasInput(c, i)) return c.fail(fmt::format("input {} ({}) is missing", i, what));
  const ir::Tensor* t = c.constIn[i];
  if (t == nullptr)
    return c.fail(fmt::format("input {} '{}' ({}) must be a compile-time constant, but it "
                              "depends on run-time values",
                              i, inputName(c, i), what));
  if (t->numel() != 1)
    return c.fail(fmt::format("input {} '{}' ({}) must hold one element, not {}", i,
                              inputName(c, i), what, ir::shapeToString(t->shape())));
  return t->at(0);
}

Status expectFloat(const InferContext& c, size_t i) {
  if (ir::isFloat(c.in[i].dtype)) return Status::success();
  return c.fail(fmt::format("input {} '{}' must be a float tensor, not {}", i, inputName(c, i),
                            ir::dtypeName(c.in[i].dtype)));
}

Status expectDType(const InferContext& c, size_t i, ir::DType t) {
  if (c.in[i].dtype == t) return Status::success();
  return c.fail(fmt::format("input {} '{}' must be {}, not {}", i, inputName(c, i),
                            ir::dtypeName(t), ir::dtypeName(c.in[i].dtype)));
}

Status expectIndex(const InferContext& c, size_t i) {
  if (c.in[i].dtype == ir::DType::I64 || c.in[i].dtype == ir::DType::I32)
    return Status::success();
  return c.fail(fmt::format("input {} '{}' must be i64 or i32 indices, not {}", i,
                            inputName(c, i), ir::dtypeName(c.in[i].dtype)));
}

Status expectSameDType(const InferContext& c, size_t i, size_t j) {
  if (c.in[i].dtype == c.in[j].dtype) return Status::success();
  return c.fail(fmt::format("inputs '{}' ({}) and '{}' ({}) must have the same dtype",
                            inputName(c, i), ir::dtypeName(c.in[i].dtype), inputName(c, j),
                            ir::dtypeName(c.in[j].dtype)));
}

Result<ir::Shape> broadcastInputs(const InferContext& c, const std::vector<size_t>& which) {
  ir::Shape acc;
  for (size_t i : which) {
    if (!hasInput(c, i)) continue;
    auto next = broadcastShapes(acc, c.in[i].shape);
    if (!next) {
      std::vector<std::string> shapes;
      for (size_t j : which)
        if (hasInput(c, j))
          shapes.push_back(fmt::format("'{}' {}", inputName(c, j),
                                       ir::shapeToString(c.in[j].shape)));
      return c.fail(fmt::format("input shapes do not broadcast: {}", fmt::join(shapes, ", ")));
    }
    acc = std::move(*next);
  }
  return acc;
}

void setOut(InferContext& c, size_t i, ir::DType t, ir::Shape s) {
  c.out[i] = TensorType{t, std::move(s)};
}

}  // namespace rules
}  // namespace fbl::ops
