// The op vocabulary: one OpSchema per supported op, with its arity, its attributes and its
// shape/dtype inference rule. Shape rules may read the compile-time contents of inputs (the
// target of a Reshape, the indices of a Slice), which constant folding provides.
//
// The reference kernels are a second table (compiler/ref/kernels.h) and the gradient rules a
// third (compiler/autodiff/grad_rules.h), all keyed by op name.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::ops {

struct TensorType {
  ir::DType dtype = ir::DType::Undefined;
  ir::Shape shape;
};

struct InferContext {
  const ir::Graph& graph;
  const ir::Node& node;
  std::vector<TensorType> in;              // dtype Undefined for an omitted optional input
  std::vector<const ir::Tensor*> constIn;  // compile-time contents, nullptr when unknown
  std::vector<TensorType> out;             // the rule fills these, one per node output

  // An error naming the node: "model.onnx: node 'x' (Reshape): <msg>".
  Error fail(std::string_view msg) const;
};

using InferFn = Status (*)(InferContext&);

struct OpSchema {
  std::string_view op;
  int minInputs;
  int maxInputs;
  std::vector<std::string_view> attrs;  // every attribute the op may carry
  InferFn infer;
};

// nullptr when the op is not supported.
const OpSchema* findSchema(std::string_view op);
std::vector<std::string_view> supportedOps();

// Checks arity and attribute names of a node against its schema: the error names the op, the
// node, the opset and what to do.
Status validateNode(const ir::Graph& g, const ir::Node& n);

// Runs the node's rule on the graph's current value types and writes the results back into the
// output values (dtype, shape, shapeKnown).
Status inferNode(ir::Graph& g, const ir::Node& n);

}  // namespace fbl::ops
