#include "runtime/tools/train_data.h"

#include <algorithm>
#include <filesystem>
#include <numeric>

#include <fmt/format.h>

#include "runtime/tools/tensor_proto_io.h"

namespace fbl::train {

namespace {

namespace fs = std::filesystem;

// DIR/input_K.pb for every plan input K.
Status readTensorProtos(const fs::path& dir, const planfile::Plan& plan, std::vector<rt::DatasetTensor>* out) {
  for (size_t k = 0; k < plan.inputs.size(); ++k) {
    const fs::path p = dir / fmt::format("input_{}.pb", k);
    FBL_ASSIGN(ProtoTensor t, readTensorProto(p.string()));
    out->push_back(rt::DatasetTensor{plan.tensors[plan.inputs[k]].name, std::move(t.dtype), std::move(t.shape),
                                     std::move(t.bytes), p.string()});
  }
  return Status::success();
}

// The TensorProto folders of PATH in name order; none when PATH is not in that form.
Result<std::vector<fs::path>> tensorProtoFolders(const fs::path& path) {
  if (!fs::is_directory(path)) return std::vector<fs::path>{};
  if (fs::exists(path / "input_0.pb")) return std::vector<fs::path>{path};
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(path, ec))
    if (e.is_directory() && fs::exists(e.path() / "input_0.pb")) dirs.push_back(e.path());
  if (ec) return Error{fmt::format("'{}': {}", path.string(), ec.message())};
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

bool hasNpy(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".npy") return true;
  return false;
}

}  // namespace

Result<rt::Dataset> loadDataset(const std::string& path, const planfile::Plan& plan) {
  if (!fs::exists(path)) return Error{fmt::format("dataset '{}' does not exist", path)};
  std::vector<fs::path> folders;
  if (!plan.inputs.empty()) {
    FBL_ASSIGN(folders, tensorProtoFolders(path));
  }
  rt::Dataset out;
  if (folders.empty()) {
    if (fs::is_directory(path) && !hasNpy(path))
      return Error{fmt::format("dataset '{}' holds no input_0.pb, test_data_set_*/input_0.pb or INPUT.npy", path)};
    FBL_ASSIGN(out, rt::Dataset::read(path, plan));
  } else {
    std::vector<rt::DatasetTensor> tensors;
    for (const fs::path& d : folders) FBL_TRY(readTensorProtos(d, plan, &tensors));
    FBL_ASSIGN(out, rt::Dataset::fromTensors(std::move(tensors), plan));
  }
  FBL_TRY(out.checkValues(plan));
  return out;
}

Status feedSample(rt::Session& s, const rt::Dataset& d, int64_t i) {
  for (size_t k = 0; k < d.inputCount(); ++k)
    if (Status e = s.writeInput(d.inputName(k), d.dtype(k), d.sampleShape(k), d.sample(k, i), d.sampleBytes(k)); !e.ok())
      return Error{d.where(k, i) + ": " + e.error().message};
  return Status::success();
}

Result<double> meanEvalLoss(rt::Session& s, const rt::Dataset& d, const std::vector<int64_t>& samples) {
  double sum = 0.0;
  for (int64_t i : samples) {
    float loss = 0.0f;
    FBL_TRY(feedSample(s, d, i));
    FBL_TRY(s.evalStep(&loss));
    sum += loss;
  }
  return samples.empty() ? 0.0 : sum / static_cast<double>(samples.size());
}

}  // namespace fbl::train
