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
std::string readTensorProtos(const fs::path& dir, const planfile::Plan& plan, std::vector<rt::DatasetTensor>* out) {
  for (size_t k = 0; k < plan.inputs.size(); ++k) {
    const fs::path p = dir / fmt::format("input_{}.pb", k);
    ProtoTensor t;
    if (auto e = readTensorProto(p.string(), &t); !e.empty()) return e;
    out->push_back(rt::DatasetTensor{plan.tensors[plan.inputs[k]].name, std::move(t.dtype), std::move(t.shape),
                                     std::move(t.bytes), p.string()});
  }
  return "";
}

// The TensorProto folders of PATH in name order; none when PATH is not in that form.
std::vector<fs::path> tensorProtoFolders(const fs::path& path, std::string* err) {
  if (!fs::is_directory(path)) return {};
  if (fs::exists(path / "input_0.pb")) return {path};
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(path, ec))
    if (e.is_directory() && fs::exists(e.path() / "input_0.pb")) dirs.push_back(e.path());
  if (ec) *err = fmt::format("'{}': {}", path.string(), ec.message());
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

std::string loadDataset(const std::string& path, const planfile::Plan& plan, rt::Dataset* out) {
  if (!fs::exists(path)) return fmt::format("dataset '{}' does not exist", path);
  std::string err;
  const std::vector<fs::path> folders = plan.inputs.empty() ? std::vector<fs::path>{} : tensorProtoFolders(path, &err);
  if (!err.empty()) return err;
  if (folders.empty()) {
    if (fs::is_directory(path) && !hasNpy(path))
      return fmt::format("dataset '{}' holds no input_0.pb, test_data_set_*/input_0.pb or INPUT.npy", path);
    if (auto e = rt::Dataset::read(path, plan, out); !e.empty()) return e;
  } else {
    std::vector<rt::DatasetTensor> tensors;
    for (const fs::path& d : folders)
      if (auto e = readTensorProtos(d, plan, &tensors); !e.empty()) return e;
    if (auto e = rt::Dataset::fromTensors(std::move(tensors), plan, out); !e.empty()) return e;
  }
  return out->checkValues(plan);
}

std::string feedSample(rt::Session& s, const rt::Dataset& d, int64_t i) {
  for (size_t k = 0; k < d.inputCount(); ++k)
    if (auto e = s.writeInput(d.inputName(k), d.dtype(k), d.sampleShape(k), d.sample(k, i), d.sampleBytes(k)); !e.empty())
      return d.where(k, i) + ": " + e;
  return "";
}

std::string meanEvalLoss(rt::Session& s, const rt::Dataset& d, const std::vector<int64_t>& samples, double* mean) {
  double sum = 0.0;
  for (int64_t i : samples) {
    float loss = 0.0f;
    if (auto e = feedSample(s, d, i); !e.empty()) return e;
    if (auto e = s.evalStep(&loss); !e.empty()) return e;
    sum += loss;
  }
  *mean = samples.empty() ? 0.0 : sum / static_cast<double>(samples.size());
  return "";
}

}  // namespace fbl::train
