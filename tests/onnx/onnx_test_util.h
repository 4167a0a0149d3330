// Small helpers for the [onnx] tests: hand-built ModelProtos and temporary folders.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fbl::testing {

// A fresh folder under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fbl_onnx_XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    path_ = p ? p : tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void writeFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

inline void setTensorType(::onnx::ValueInfoProto* vi, int elemType,
                          const std::vector<int64_t>& dims) {
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elemType);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

inline ::onnx::ValueInfoProto* addInput(::onnx::GraphProto* g, const std::string& name,
                                        int elemType, const std::vector<int64_t>& dims) {
  auto* vi = g->add_input();
  vi->set_name(name);
  setTensorType(vi, elemType, dims);
  return vi;
}

inline ::onnx::TensorProto* addF32Initializer(::onnx::GraphProto* g, const std::string& name,
                                              const std::vector<int64_t>& dims,
                                              const std::vector<float>& values) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()),
                              values.size() * sizeof(float)));
  return t;
}

inline ::onnx::NodeProto* addNode(::onnx::GraphProto* g, const std::string& op,
                                  const std::string& name, const std::vector<std::string>& ins,
                                  const std::vector<std::string>& outs) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& i : ins) n->add_input(i);
  for (const auto& o : outs) n->add_output(o);
  return n;
}

// A Constant node `name` holding int64 `v` (a scalar when `scalar`, else 1-D).
inline void addInt64Constant(::onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& v,
                             bool scalar = false) {
  auto* a = addNode(g, "Constant", name, {}, {name})->add_attribute();
  a->set_name("value");
  a->set_type(::onnx::AttributeProto::TENSOR);
  auto* t = a->mutable_t();
  t->set_data_type(::onnx::TensorProto::INT64);
  if (!scalar) t->add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) t->add_int64_data(x);
}

inline void addIntAttr(::onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}

// An empty IR-9, opset-20 model whose graph is called `graphName`.
inline ::onnx::ModelProto opset20Model(const std::string& graphName) {
  ::onnx::ModelProto m;
  m.set_ir_version(9);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(20);
  m.mutable_graph()->set_name(graphName);
  return m;
}

// x f32[2,3] -> MatMul(x, w f32[3,4]) -> y -> Relu -> z (the graph output), opset 20.
inline ::onnx::ModelProto tinyModel() {
  ::onnx::ModelProto m = opset20Model("tiny");
  auto* g = m.mutable_graph();
  addInput(g, "x", ::onnx::TensorProto::FLOAT, {2, 3});
  std::vector<float> w(12);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.5f;
  addF32Initializer(g, "w", {3, 4}, w);
  addNode(g, "MatMul", "mm", {"x", "w"}, {"y"});
  addNode(g, "Relu", "relu", {"y"}, {"z"});
  g->add_output()->set_name("z");
  return m;
}

inline std::string bytesOf(const ::onnx::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

}  // namespace fbl::testing
