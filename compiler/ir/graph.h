// The compiler's IR: a dataflow graph of ONNX-style nodes over SSA values.
//
// Values and nodes live in two vectors and refer to each other by index, so a graph copies
// cheaply and passes can append without invalidating ids. Removing a node marks it dead;
// Graph::compact() drops dead nodes (value ids never change). After import, `nodes` is in
// topological order and every pass keeps it so.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "compiler/ir/dtype.h"
#include "compiler/ir/tensor.h"

namespace fbl::ir {

using ValueId = int32_t;
using NodeId = int32_t;
inline constexpr ValueId kNoValue = -1;
inline constexpr NodeId kNoNode = -1;

enum class ValueKind : uint8_t {
  Input,         // a graph input fed at run time (token ids, labels, images)
  Initializer,   // a named parameter (weights, LoRA adapters); data may be external
  Constant,      // a value known at compile time (Constant nodes, folded results)
  Intermediate,  // produced by a node
};

// Where an initializer's bytes live when the ONNX file keeps them outside the model.
struct ExternalData {
  std::string location;  // relative to the model's folder, validated on import
  int64_t offset = 0;
  int64_t length = -1;   // -1: to the end of the file
};

struct Value {
  std::string name;
  DType dtype = DType::Undefined;
  Shape shape;
  bool shapeKnown = false;  // false until shape inference succeeds (or a symbolic input dim)
  ValueKind kind = ValueKind::Intermediate;
  std::shared_ptr<const Tensor> data;    // Initializer/Constant contents when in memory
  std::optional<ExternalData> external;  // Initializer contents kept on disk
  NodeId producer = kNoNode;
  bool reusedByBackward = false;  // forward tensor read again by the backward pass (reuse edge)
};

// Which part of the joint training graph a node belongs to.
enum class Phase : uint8_t { Forward, Backward, Optimizer };

using AttrValue = std::variant<int64_t, float, std::string, std::vector<int64_t>,
                               std::vector<float>, std::vector<std::string>, Tensor>;

struct Node {
  std::string op;      // ONNX op type, or an fbl-internal op (documented in docs/ir.md)
  std::string name;    // unique within the graph; used in every diagnostic
  std::vector<ValueId> inputs;   // kNoValue for an omitted optional input
  std::vector<ValueId> outputs;  // kNoValue for an omitted optional output
  std::map<std::string, AttrValue> attrs;
  Phase phase = Phase::Forward;
  bool dead = false;

  bool hasAttr(std::string_view k) const { return attrs.find(std::string(k)) != attrs.end(); }
  int64_t attrInt(std::string_view k, int64_t dflt) const;
  float attrFloat(std::string_view k, float dflt) const;
  std::string attrString(std::string_view k, std::string_view dflt) const;
  std::vector<int64_t> attrInts(std::string_view k, std::vector<int64_t> dflt = {}) const;
  std::vector<float> attrFloats(std::string_view k, std::vector<float> dflt = {}) const;
  const Tensor* attrTensor(std::string_view k) const;
  // Input i, or kNoValue when absent.
  ValueId input(size_t i) const { return i < inputs.size() ? inputs[i] : kNoValue; }
};

// An initializer the forward pass updates, as PyTorch updates a module's buffers in train mode
// (BatchNorm's running mean and variance): the value it holds after the step. A training plan
// carries it across steps as optimizer state; nothing differentiates it.
struct StateUpdate {
  ValueId state = kNoValue;
  ValueId updated = kNoValue;
};

struct Graph {
  std::string name;
  std::string sourcePath;  // the file it was imported from, for diagnostics
  int64_t opset = 0;
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<ValueId> inputs;   // run-time inputs only (not initializers)
  std::vector<ValueId> outputs;
  // PyTorch parameters that the exporter's node metadata names but that the graph holds under
  // no name: folded into constants or dropped (onnx/export_names.h). A selection of what peft
  // trains must not silently leave them out.
  std::vector<std::string> foldedParameters;
  // Updated buffers; their values stay live as graph outputs do.
  std::vector<StateUpdate> stateUpdates;

  ValueId addValue(Value v);
  // Appends a node, sets the producer of its outputs and returns its id.
  NodeId addNode(Node n);
  // A new intermediate value with a unique name derived from `hint`.
  ValueId newValue(std::string_view hint, DType dtype = DType::Undefined, Shape shape = {},
                   bool shapeKnown = false);
  // A new constant value holding `t`.
  ValueId newConstant(std::string_view hint, Tensor t);
  ValueId findValue(std::string_view name) const;  // kNoValue if none
  std::string uniqueName(std::string_view hint);

  // Node ids of the live consumers of every value (dead nodes skipped).
  std::vector<std::vector<NodeId>> consumers() const;
  // Drops dead nodes; values keep their ids; producers are renumbered.
  void compact();
  // Values reachable from live nodes or graph inputs/outputs.
  std::vector<bool> liveValues() const;
  size_t liveNodeCount() const;

 private:
  std::map<std::string, ValueId, std::less<>> byName_;
  int64_t nameCounter_ = 0;
};

// A one-line location for diagnostics: "model.onnx: node 'MatMul_3' (MatMul)".
std::string describeNode(const Graph& g, const Node& n);

}  // namespace fbl::ir
