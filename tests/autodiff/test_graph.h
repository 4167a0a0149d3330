// Small forward graphs built by hand for the autodiff tests, with random parameters, and the
// numeric helpers the gradient checks share.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/ops/op_schema.h"

namespace fbl::testing {

class TestGraph {
 public:
  explicit TestGraph(uint32_t seed = 1) : rng_(seed) { g.name = "test"; }

  // A float initializer with uniform random contents in [lo, hi).
  ir::ValueId param(const std::string& name, const ir::Shape& shape, float lo = -1, float hi = 1) {
    return initializer(name, random(shape, lo, hi));
  }
  ir::ValueId initializer(const std::string& name, ir::Tensor t) {
    ir::ValueId v = g.newConstant(name, std::move(t));
    g.values[v].kind = ir::ValueKind::Initializer;
    return v;
  }
  ir::ValueId constant(ir::Tensor t) { return g.newConstant("c", std::move(t)); }
  ir::ValueId ints(const std::vector<int64_t>& v) {
    return constant(ir::Tensor::fromVector<int64_t>({static_cast<int64_t>(v.size())}, v));
  }
  ir::ValueId scalar(float v) { return constant(ir::Tensor::scalar<float>(v)); }
  ir::ValueId input(const std::string& name, ir::DType dt, const ir::Shape& shape) {
    ir::ValueId v = g.newValue(name, dt, shape, true);
    g.values[v].kind = ir::ValueKind::Input;
    g.inputs.push_back(v);
    return v;
  }

  // Appends a node and infers its outputs with the op's schema.
  std::vector<ir::ValueId> nodeN(const std::string& op, std::vector<ir::ValueId> inputs,
                                 size_t outputs, std::map<std::string, ir::AttrValue> attrs = {}) {
    ir::Node n;
    n.op = op;
    n.name = op + "_" + std::to_string(g.nodes.size());
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    for (size_t i = 0; i < outputs; ++i) n.outputs.push_back(g.newValue(n.name + "_out"));
    ir::NodeId id = g.addNode(n);
    Status st = ops::inferNode(g, g.nodes[id]);
    INFO(op << ": " << (st.ok() ? "" : st.error().message));
    REQUIRE(st.ok());
    return g.nodes[id].outputs;
  }
  ir::ValueId node(const std::string& op, std::vector<ir::ValueId> inputs,
                   std::map<std::string, ir::AttrValue> attrs = {}) {
    return nodeN(op, std::move(inputs), 1, std::move(attrs))[0];
  }

  // loss = sum(y * R) for a random R: every element of y gets a distinct gradient.
  ir::ValueId weightedSumLoss(ir::ValueId y) {
    ir::ValueId r = constant(random(g.values[y].shape, -1, 1));
    ir::ValueId prod = node("Mul", {y, r});
    ir::ValueId loss = node("ReduceSum", {prod}, {{"keepdims", int64_t(0)}});
    setLoss(loss);
    return loss;
  }
  void setLoss(ir::ValueId loss) { g.outputs = {loss}; }

  ir::Tensor random(const ir::Shape& shape, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    ir::Tensor t(ir::DType::F32, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng_);
    return t;
  }
  std::mt19937& rng() { return rng_; }

  ir::Graph g;

 private:
  std::mt19937 rng_;
};

inline double maxAbs(const ir::Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::abs(t.at(i)));
  return m;
}

inline double maxAbsDiff(const ir::Tensor& a, const ir::Tensor& b) {
  REQUIRE(a.numel() == b.numel());
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(a.at(i) - b.at(i)));
  return m;
}

}  // namespace fbl::testing
