#include "compiler/train/ref_dataset.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "compiler/analysis/input_bounds.h"
#include "compiler/onnx/tensor_proto.h"

namespace fbl::train {

namespace fs = std::filesystem;

namespace {

// The graph's inputs as the plan builder lists them (tensor names, dtypes, shapes and the value
// checks), which is all rt::Dataset reads of a plan.
Result<planfile::Plan> inputsAsPlan(const ir::Graph& g) {
  planfile::Plan p;
  for (ir::ValueId v : g.inputs) {
    const ir::Value& x = g.values[v];
    if (!x.shapeKnown) return makeError("input '{}' has no static shape: give it with --shape", x.name);
    planfile::Tensor t;
    t.name = x.name;
    t.dtype = std::string(ir::dtypeName(x.dtype));
    t.shape = x.shape;
    t.role = planfile::Role::Input;
    t.bytes = ir::numElements(x.shape) * static_cast<int64_t>(ir::dtypeSize(x.dtype));
    p.inputs.push_back(static_cast<int32_t>(p.tensors.size()));
    p.tensors.push_back(std::move(t));
    for (planfile::InputCheck& c : analysis::inputChecks(g, v, p.inputs.back())) p.inputChecks.push_back(std::move(c));
  }
  return p;
}

// A TensorProto folder: input_K.pb feeds the graph's K-th input, as fbl-train reads it
// (runtime/tools/train_data.h); rt::Dataset checks dtypes and shapes.
Status appendTensorProtos(const ir::Graph& g, const fs::path& dir, std::vector<rt::DatasetTensor>* out) {
  for (size_t k = 0; k < g.inputs.size(); ++k) {
    const std::string path = (dir / fmt::format("input_{}.pb", k)).string();
    FBL_ASSIGN(onnx::NamedTensor t, onnx::readTensorProtoFile(path));
    rt::DatasetTensor d;
    d.input = g.values[g.inputs[k]].name;
    d.dtype = std::string(ir::dtypeName(t.tensor.dtype()));
    d.shape = t.tensor.shape();
    const auto* bytes = reinterpret_cast<const unsigned char*>(t.tensor.raw());
    d.data.assign(bytes, bytes + t.tensor.nbytes());
    d.file = path;
    out->push_back(std::move(d));
  }
  return Status::success();
}

}  // namespace

RefDataset::RefDataset(const ir::Graph& g, rt::Dataset data, std::optional<uint64_t> seed)
    : g_(&g), data_(std::move(data)), order_(data_.size(), 0, seed) {}

Result<RefDataset> RefDataset::load(const ir::Graph& g, const std::string& path, std::optional<uint64_t> seed) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return makeError("--data '{}' does not exist", path);
  FBL_ASSIGN(planfile::Plan plan, inputsAsPlan(g));
  std::vector<fs::path> folders;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(fs::path(path) / "input_0.pb", ec)) folders.push_back(path);
    else
      for (const auto& e : fs::directory_iterator(path, ec))
        if (e.is_directory() && fs::exists(e.path() / "input_0.pb")) folders.push_back(e.path());
    std::sort(folders.begin(), folders.end());
  }
  std::vector<rt::DatasetTensor> tensors;
  for (const fs::path& d : folders) FBL_TRY(appendTensorProtos(g, d, &tensors));
  Result<rt::Dataset> data =
      folders.empty() ? rt::Dataset::read(path, plan) : rt::Dataset::fromTensors(std::move(tensors), plan);
  if (!data.ok()) return makeError("--data: {}", data.error().message);
  if (Status e = data->checkValues(plan); !e.ok()) return makeError("--data: {}", e.error().message);
  return RefDataset(g, std::move(data).value(), seed);
}

std::map<ir::ValueId, ir::Tensor> RefDataset::batchAt(int64_t position) {
  const int64_t sample = order_.sampleAt(position);
  std::map<ir::ValueId, ir::Tensor> feeds;
  for (size_t k = 0; k < data_.inputCount(); ++k) {
    const ir::ValueId v = g_->inputs[k];
    ir::Tensor t(g_->values[v].dtype, g_->values[v].shape);
    std::memcpy(t.raw(), data_.sample(k, sample), data_.sampleBytes(k));
    feeds.emplace(v, std::move(t));
  }
  return feeds;
}

}  // namespace fbl::train
