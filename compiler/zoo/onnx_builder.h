// A small builder of ONNX training-forward graphs (::onnx::ModelProto, opset 20) for `fblc zoo`.
//
// It writes what a real export carries after fbl's folding would leave behind, with the same op
// vocabulary: Constant nodes for shape vectors and tables, initializers named like PyTorch
// parameters under the exporter's `m.` prefix, one scalar `loss` output. Weights come in two
// kinds: External (full-size models: every initializer is an external-data entry pointing at
// "<model>.data", a file that is never written, exactly like the corpus llama-full, so a 1B
// model file stays small) and Random (--tiny: values inside the file from a fixed seed).
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include <onnx/onnx_pb.h>

#include "compiler/ir/tensor.h"
#include "compiler/support/result.h"

namespace fbl::zoo {

enum class Weights { External, Random };

// How a parameter is initialised when its values are written (Random weights only).
struct Init {
  enum Kind { Normal, Ones, Zeros } kind = Normal;
  float std = 0.02f;
  static Init normal(float s = 0.02f) { return {Normal, s}; }
  static Init ones() { return {Ones, 0}; }
  static Init zeros() { return {Zeros, 0}; }
};

using AttrVal = std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>>;
struct Attr {
  std::string name;
  AttrVal value;
};

class OnnxBuilder {
 public:
  OnnxBuilder(std::string graphName, Weights weights, uint64_t seed);

  // Graph inputs and outputs; elemType is an ::onnx::TensorProto_DataType.
  std::string input(const std::string& name, int elemType, const ir::Shape& shape);
  void output(const std::string& name, int elemType, const ir::Shape& shape);

  // A float parameter named `name` (callers add the exporter's prefix).
  std::string param(const std::string& name, const ir::Shape& shape, Init init = Init::normal());

  // Constant nodes; equal constants are emitted once and shared.
  std::string constI64(const std::vector<int64_t>& values);  // 1-D
  std::string scalarI64(int64_t v);                           // rank 0
  std::string scalarF32(float v);                             // rank 0
  std::string constF32(const ir::Shape& shape, const std::vector<float>& values);
  // ConstantOfShape(shape) filled with `value`: large constant tensors stay small in the file.
  std::string fill(const std::vector<int64_t>& shape, float value, const std::string& hint);

  // One node with one output (named after `hint`, made unique); returns the output name.
  std::string op(const std::string& type, const std::vector<std::string>& inputs,
                 const std::vector<Attr>& attrs = {}, const std::string& hint = "");

  // Metadata (onnx metadata_props), e.g. fbl.trainable: the glob of the trainable parameters.
  void setMetadata(const std::string& key, const std::string& value);

  int64_t parameterElements() const { return paramElements_; }
  int64_t nodeCount() const { return model_.graph().node_size(); }
  const ::onnx::ModelProto& model() const { return model_; }

  // Writes the model; External weights point at "<file name of path>.data".
  Status write(const std::string& path);
  std::string serialize(const std::string& path);

 private:
  std::string unique(const std::string& hint);
  std::string constTensor(const ::onnx::TensorProto& t, const std::string& hint);

  ::onnx::ModelProto model_;
  ::onnx::GraphProto* graph_;
  Weights weights_;
  std::mt19937_64 rng_;
  std::map<std::string, int> names_;
  std::map<std::string, std::string> constCache_;  // serialized tensor -> output name
  int64_t paramElements_ = 0;
  int64_t externalOffset_ = 0;
};

}  // namespace fbl::zoo
