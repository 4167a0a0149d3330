// Builds small graphs by hand for op and pass tests: inputs, initializers, constants and nodes,
// each output named "<node>_<i>".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"

namespace fbl::testing {

class GraphBuilder {
 public:
  explicit GraphBuilder(int64_t opset = 20) {
    g.name = "test.onnx";
    g.sourcePath = "test.onnx";
    g.opset = opset;
  }

  ir::ValueId input(const std::string& name, ir::DType t, ir::Shape s) {
    ir::ValueId v = g.addValue(typed(name, t, std::move(s), ir::ValueKind::Input));
    g.inputs.push_back(v);
    return v;
  }
  // An initializer with contents; `param` one without (external data).
  ir::ValueId init(const std::string& name, ir::Tensor t) {
    ir::Value v = typed(name, t.dtype(), t.shape(), ir::ValueKind::Initializer);
    v.data = std::make_shared<const ir::Tensor>(std::move(t));
    return g.addValue(std::move(v));
  }
  ir::ValueId param(const std::string& name, ir::DType t, ir::Shape s) {
    return g.addValue(typed(name, t, std::move(s), ir::ValueKind::Initializer));
  }
  ir::ValueId constant(const std::string& name, ir::Tensor t) { return g.newConstant(name, t); }
  template <typename T>
  ir::ValueId ints(const std::string& name, std::vector<T> v) {
    return constant(name, ir::Tensor::fromVector<T>({static_cast<int64_t>(v.size())}, v));
  }

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
    g.addNode(std::move(n));
    return outs;
  }
  ir::ValueId op(const std::string& op, std::vector<ir::ValueId> inputs,
                 std::map<std::string, ir::AttrValue> attrs = {}) {
    return node(op, std::move(inputs), std::move(attrs))[0];
  }
  void output(ir::ValueId v) { g.outputs.push_back(v); }

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
};

}  // namespace fbl::testing
