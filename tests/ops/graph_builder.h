// Builds small graphs by hand for op, pass, kernel and gradient tests: inputs, initializers
// (given, random, or without contents), constants and nodes. Node i of op OP is named "OP_i" and
// its outputs "OP_i_0", "OP_i_1", ...
//
// A plain builder leaves node outputs untyped, for the passes under test to infer; a builder
// from GraphBuilder::inferring() infers each node with its schema as it is added (and REQUIREs
// that to succeed), so later nodes and weightedSumLoss can use the shapes.
#pragma once

#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/ops/op_schema.h"

namespace fbl::testing {

class GraphBuilder {
 public:
  explicit GraphBuilder(int64_t opset = 20) {
    g.name = "test.onnx";
    g.sourcePath = "test.onnx";
    g.opset = opset;
  }
  // Random contents (randomParam, randomTensor, weightedSumLoss) are drawn from `seed`.
  static GraphBuilder inferring(uint32_t seed = 1) {
    GraphBuilder b;
    b.infer_ = true;
    b.rng_.seed(seed);
    return b;
  }

  ir::ValueId input(const std::string& name, ir::DType t, ir::Shape s) {
    ir::ValueId v = g.addValue(typed(name, t, std::move(s), ir::ValueKind::Input));
    g.inputs.push_back(v);
    return v;
  }
  // An initializer with contents; `param` one without (external data); `randomParam` a float
  // one with uniform random contents in [lo, hi).
  ir::ValueId init(const std::string& name, ir::Tensor t) {
    ir::Value v = typed(name, t.dtype(), t.shape(), ir::ValueKind::Initializer);
    v.data = std::make_shared<const ir::Tensor>(std::move(t));
    return g.addValue(std::move(v));
  }
  ir::ValueId param(const std::string& name, ir::DType t, ir::Shape s) {
    return g.addValue(typed(name, t, std::move(s), ir::ValueKind::Initializer));
  }
  ir::ValueId randomParam(const std::string& name, const ir::Shape& shape, float lo = -1, float hi = 1) {
    return init(name, randomTensor(shape, lo, hi));
  }
  ir::ValueId constant(const std::string& name, ir::Tensor t) { return g.newConstant(name, t); }
  ir::ValueId constant(ir::Tensor t) { return constant("c", std::move(t)); }
  template <typename T>
  ir::ValueId ints(const std::string& name, std::vector<T> v) {
    return constant(name, ir::Tensor::fromVector<T>({static_cast<int64_t>(v.size())}, v));
  }
  ir::ValueId ints(const std::vector<int64_t>& v) { return ints("c", v); }
  ir::ValueId scalar(float v) { return constant(ir::Tensor::scalar<float>(v)); }

  // A node with `outputs` fresh outputs; returns them.
  std::vector<ir::ValueId> node(const std::string& op, std::vector<ir::ValueId> inputs,
                                std::map<std::string, ir::AttrValue> attrs = {},
                                int outputs = 1) {
    ir::Node n;
    n.op = op;
    n.name = op + "_" + std::to_string(g.nodes.size());
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    for (int i = 0; i < outputs; ++i)
      n.outputs.push_back(g.newValue(n.name + "_" + std::to_string(i)));
    std::vector<ir::ValueId> outs = n.outputs;
    const ir::NodeId id = g.addNode(std::move(n));
    if (infer_) {
      Status st = ops::inferNode(g, g.nodes[id]);
      INFO(op << ": " << (st.ok() ? "" : st.error().message));
      REQUIRE(st.ok());
    }
    return outs;
  }
  ir::ValueId op(const std::string& op, std::vector<ir::ValueId> inputs,
                 std::map<std::string, ir::AttrValue> attrs = {}) {
    return node(op, std::move(inputs), std::move(attrs))[0];
  }
  void output(ir::ValueId v) { g.outputs.push_back(v); }

  // loss = sum(y * R) for a random R, the graph's only output: every element of y gets a
  // distinct gradient. Needs y's shape (an inferring builder).
  ir::ValueId weightedSumLoss(ir::ValueId y) {
    ir::ValueId r = constant(randomTensor(g.values[y].shape, -1, 1));
    ir::ValueId loss = op("ReduceSum", {op("Mul", {y, r})}, {{"keepdims", int64_t(0)}});
    g.outputs = {loss};
    return loss;
  }

  ir::Tensor randomTensor(const ir::Shape& shape, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    ir::Tensor t(ir::DType::F32, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng_);
    return t;
  }
  std::mt19937& rng() { return rng_; }

  size_t count(const std::string& op) const {
    size_t c = 0;
    for (const auto& n : g.nodes) c += !n.dead && n.op == op ? 1 : 0;
    return c;
  }

  ir::Graph g;

 private:
  static ir::Value typed(const std::string& name, ir::DType t, ir::Shape s, ir::ValueKind k) {
    ir::Value v;
    v.name = name;
    v.dtype = t;
    v.shape = std::move(s);
    v.shapeKnown = true;
    v.kind = k;
    return v;
  }

  bool infer_ = false;
  std::mt19937 rng_{1};
};

}  // namespace fbl::testing
