// What the layout passes and codegen ask of an op besides its shape rule, in one table keyed by
// op name: its class in the paper's Table 1, and whether it is a view (its output aliases its
// input's bytes). Every op with a schema has a row (tests/ops/op_traits_test.cc). The other
// per-op tables: the schema (op_schema.h), the reference kernel (ref/kernels.h), the gradient
// rule (autodiff/grad_rules.h), the reduction axis (reduction_axis.h).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace fbl::ops {

// The paper's Table 1 (classify-operators, passes/classify_operators.h):
//   FTI-C  no forward tensor in its gradient, same access both ways (Add, Sub, Neg, optimizer
//          updates)
//   FTD-C  gradient reads forward tensors, same access (activations, Softmax, Mul, Div, ...)
//   FTI-D  transformations (Transpose, Reshape, Unsqueeze, Expand, Slice, Concat, ...)
//   FTD-D  reductions whose backward reduces along another axis (MatMul, Gemm, Conv, norms,
//          ReduceMean, ...)
// kNone: an op the table does not class (pools, ArgMax, Resize, ...: the layout passes treat it
// as FTD-C, reading its inputs as stored), and a dead node.
enum class OpClass : uint8_t { kNone, kFtiC, kFtdC, kFtiD, kFtdD };
const char* opClassName(OpClass c);  // "FTI-C", "FTD-C", "FTI-D", "FTD-D", "-"

struct OpTraits {
  std::string_view op;
  OpClass layoutClass = OpClass::kNone;
  bool view = false;  // the plan builder aliases its output to its input's bytes: no kernel
};

// nullptr for an op without a row (one no schema defines).
const OpTraits* findTraits(std::string_view op);
OpClass opClass(std::string_view op);  // kNone without a row
bool isView(std::string_view op);
bool isProduct(std::string_view op);  // MatMul or Gemm: the products the tiled kernels run
std::vector<OpTraits> allTraits();  // sorted by op

}  // namespace fbl::ops
