#include "compiler/zoo/onnx_builder.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

namespace fbl::zoo {

namespace {

void setShape(::onnx::ValueInfoProto* vi, int elemType, const ir::Shape& shape) {
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elemType);
  auto* sp = tt->mutable_shape();
  for (int64_t d : shape) sp->add_dim()->set_dim_value(d);
}

void setAttr(::onnx::AttributeProto* a, const Attr& attr) {
  a->set_name(attr.name);
  std::visit(
      [a](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          a->set_type(::onnx::AttributeProto::INT);
          a->set_i(v);
        } else if constexpr (std::is_same_v<T, float>) {
          a->set_type(::onnx::AttributeProto::FLOAT);
          a->set_f(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          a->set_type(::onnx::AttributeProto::STRING);
          a->set_s(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          a->set_type(::onnx::AttributeProto::INTS);
          for (int64_t x : v) a->add_ints(x);
        } else {
          a->set_type(::onnx::AttributeProto::FLOATS);
          for (float x : v) a->add_floats(x);
        }
      },
      attr.value);
}

}  // namespace

OnnxBuilder::OnnxBuilder(std::string graphName, Weights weights, uint64_t seed)
    : weights_(weights), rng_(seed) {
  model_.set_ir_version(10);
  model_.set_producer_name("fblc zoo");
  auto* opset = model_.add_opset_import();
  opset->set_domain("");
  opset->set_version(20);
  graph_ = model_.mutable_graph();
  graph_->set_name(std::move(graphName));
}

std::string OnnxBuilder::unique(const std::string& hint) {
  std::string base = hint.empty() ? "val" : hint;
  int n = names_[base]++;
  return n == 0 ? base : fmt::format("{}_{}", base, n);
}

std::string OnnxBuilder::input(const std::string& name, int elemType, const ir::Shape& shape) {
  setShape(graph_->add_input(), elemType, shape);
  graph_->mutable_input(graph_->input_size() - 1)->set_name(name);
  names_[name]++;
  return name;
}

void OnnxBuilder::output(const std::string& name, int elemType, const ir::Shape& shape) {
  auto* vi = graph_->add_output();
  vi->set_name(name);
  setShape(vi, elemType, shape);
}

std::string OnnxBuilder::param(const std::string& name, const ir::Shape& shape, Init init) {
  auto* t = graph_->add_initializer();
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : shape) t->add_dims(d);
  int64_t n = ir::numElements(shape);
  paramElements_ += n;
  names_[name]++;
  if (weights_ == Weights::External) {
    // The location is set in serialize(), when the model's file name is known.
    t->set_data_location(::onnx::TensorProto::EXTERNAL);
    auto* off = t->add_external_data();
    off->set_key("offset");
    off->set_value(std::to_string(externalOffset_));
    auto* len = t->add_external_data();
    len->set_key("length");
    len->set_value(std::to_string(n * 4));
    externalOffset_ += n * 4;
    return name;
  }
  std::normal_distribution<float> normal(0.0f, init.std);
  std::string bytes(static_cast<size_t>(n) * 4, '\0');
  auto* f = reinterpret_cast<float*>(bytes.data());
  for (int64_t i = 0; i < n; ++i)
    f[i] = init.kind == Init::Normal ? normal(rng_) : init.kind == Init::Ones ? 1.0f : 0.0f;
  t->set_raw_data(std::move(bytes));
  return name;
}

std::string OnnxBuilder::constTensor(const ::onnx::TensorProto& t, const std::string& hint) {
  std::string key = t.SerializeAsString();
  if (auto it = constCache_.find(key); it != constCache_.end()) return it->second;
  std::string out = unique(hint);
  auto* node = graph_->add_node();
  node->set_op_type("Constant");
  node->set_name("node_" + out);
  node->add_output(out);
  auto* a = node->add_attribute();
  a->set_name("value");
  a->set_type(::onnx::AttributeProto::TENSOR);
  *a->mutable_t() = t;
  constCache_[key] = out;
  return out;
}

std::string OnnxBuilder::constI64(const std::vector<int64_t>& values) {
  ::onnx::TensorProto t;
  t.set_data_type(::onnx::TensorProto::INT64);
  t.add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t.add_int64_data(v);
  return constTensor(t, "const");
}

std::string OnnxBuilder::scalarI64(int64_t v) {
  ::onnx::TensorProto t;
  t.set_data_type(::onnx::TensorProto::INT64);
  t.add_int64_data(v);
  return constTensor(t, "const");
}

std::string OnnxBuilder::scalarF32(float v) {
  ::onnx::TensorProto t;
  t.set_data_type(::onnx::TensorProto::FLOAT);
  t.add_float_data(v);
  return constTensor(t, "const");
}

std::string OnnxBuilder::constF32(const ir::Shape& shape, const std::vector<float>& values) {
  ::onnx::TensorProto t;
  t.set_data_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : shape) t.add_dims(d);
  t.set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
  return constTensor(t, "table");
}

std::string OnnxBuilder::fill(const std::vector<int64_t>& shape, float value,
                              const std::string& hint) {
  std::string out = op("ConstantOfShape", {constI64(shape)}, {}, hint);
  auto* a = graph_->mutable_node(graph_->node_size() - 1)->add_attribute();
  a->set_name("value");
  a->set_type(::onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(::onnx::TensorProto::FLOAT);
  a->mutable_t()->add_dims(1);
  a->mutable_t()->add_float_data(value);
  return out;
}

std::string OnnxBuilder::op(const std::string& type, const std::vector<std::string>& inputs,
                            const std::vector<Attr>& attrs, const std::string& hint) {
  std::string out = unique(hint.empty() ? type : hint);
  auto* node = graph_->add_node();
  node->set_op_type(type);
  node->set_name("node_" + out);
  for (const auto& in : inputs) node->add_input(in);
  node->add_output(out);
  for (const auto& a : attrs) setAttr(node->add_attribute(), a);
  return out;
}

void OnnxBuilder::setMetadata(const std::string& key, const std::string& value) {
  auto* p = model_.add_metadata_props();
  p->set_key(key);
  p->set_value(value);
}

std::string OnnxBuilder::serialize(const std::string& path) {
  std::string location = std::filesystem::path(path).filename().string() + ".data";
  for (auto& t : *graph_->mutable_initializer()) {
    if (t.data_location() != ::onnx::TensorProto::EXTERNAL) continue;
    bool has = false;
    for (auto& kv : *t.mutable_external_data())
      if (kv.key() == "location") kv.set_value(location), has = true;
    if (!has) {
      auto* kv = t.add_external_data();
      kv->set_key("location");
      kv->set_value(location);
    }
  }
  return model_.SerializeAsString();
}

Status OnnxBuilder::write(const std::string& path) {
  std::string bytes = serialize(path);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return makeError("{}: cannot open for writing", path);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) return makeError("{}: write failed", path);
  return {};
}

}  // namespace fbl::zoo
