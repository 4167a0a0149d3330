#include "runtime/dataset.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "runtime/input_check.h"
#include "runtime/npy.h"
#include "runtime/safetensors.h"
#include "runtime/shape_text.h"

namespace fbl::rt {

namespace {

std::string inputList(const planfile::Plan& plan) {
  std::string s;
  for (int32_t t : plan.inputs) s += (s.empty() ? "'" : ", '") + plan.tensors[t].name + "'";
  return s;
}

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The file name of an input in a dataset folder: its name with path separators made '_'.
std::string npyFileName(std::string input) {
  for (char& c : input)
    if (c == '/' || c == '\\') c = '_';
  return input + ".npy";
}

// How many samples of `sample` shape a tensor of `shape` holds (the two forms in dataset.h);
// -1 when neither fits.
int64_t samplesIn(const std::vector<int64_t>& shape, const std::vector<int64_t>& sample) {
  if (shape.size() == sample.size() + 1 && std::equal(sample.begin(), sample.end(), shape.begin() + 1)) return shape[0];
  if (!sample.empty() && shape.size() == sample.size() && sample[0] > 0 &&
      std::equal(sample.begin() + 1, sample.end(), shape.begin() + 1) && shape[0] % sample[0] == 0)
    return shape[0] / sample[0];
  return -1;
}

// "i64[N,1,16] or i64[N*1,16]": the shapes a file may give an input of plan tensor `t`.
std::string sampleForms(const planfile::Tensor& t) {
  std::string samples = t.dtype + "[N", rows = t.dtype + "[N*";
  for (size_t i = 0; i < t.shape.size(); ++i) {
    samples += "," + std::to_string(t.shape[i]);
    rows += (i ? "," : "") + std::to_string(t.shape[i]);
  }
  return samples + "]" + (t.shape.empty() ? "" : " or " + rows + "]");
}

Status readSafetensors(const std::string& path, const planfile::Plan& plan, std::vector<DatasetTensor>* out) {
  FBL_ASSIGN(safetensors::File f, safetensors::read(path, "a dataset file"));
  for (auto& [name, entry] : f.tensors) {
    DatasetTensor t;
    t.input = name;
    t.dtype = entry.dtype;  // safetensors spells fbl's dtypes in capitals: "I64", "BF16", "BOOL"
    std::transform(t.dtype.begin(), t.dtype.end(), t.dtype.begin(), [](unsigned char c) { return std::tolower(c); });
    t.shape = entry.shape;
    t.data = std::move(entry.data);
    t.file = path;
    out->push_back(std::move(t));
  }
  for (int32_t i : plan.inputs)
    if (!f.tensors.count(plan.tensors[i].name))
      return Error{"'" + path + "' has no tensor '" + plan.tensors[i].name + "' for the plan's input of that name (the plan's inputs: " +
                   inputList(plan) + ")"};
  return Status::success();
}

Status readNpy(const std::string& path, const std::string& input, std::vector<DatasetTensor>* out) {
  FBL_ASSIGN(npy::Array a, npy::read(path));
  out->push_back(DatasetTensor{input, a.dtype, a.shape, std::move(a.data), path});
  return Status::success();
}

}  // namespace

Result<Dataset> Dataset::read(const std::string& path, const planfile::Plan& plan) {
  std::vector<DatasetTensor> tensors;
  if (endsWith(path, ".safetensors")) {
    FBL_TRY(readSafetensors(path, plan, &tensors));
  } else if (endsWith(path, ".npy")) {
    if (plan.inputs.size() != 1)
      return Error{"'" + path + "': one .npy feeds a plan of one input, and this plan has " + std::to_string(plan.inputs.size()) +
                   " (" + inputList(plan) + "): give a folder of INPUT.npy or a .safetensors file"};
    FBL_TRY(readNpy(path, plan.tensors[plan.inputs[0]].name, &tensors));
  } else {
    for (int32_t i : plan.inputs) {
      const std::string file = path + "/" + npyFileName(plan.tensors[i].name);
      const Status found = readNpy(file, plan.tensors[i].name, &tensors);
      if (found.ok()) continue;
      if (found.error().message.rfind("cannot open", 0) != 0) return found.error();
      return Error{"dataset '" + path + "' has no readable '" + npyFileName(plan.tensors[i].name) +
                   "' for the plan's input '" + plan.tensors[i].name +
                   "' (a dataset is FILE.safetensors, FILE.npy or a folder of INPUT.npy)"};
    }
  }
  return fromTensors(std::move(tensors), plan);
}

Result<Dataset> Dataset::fromTensors(std::vector<DatasetTensor> tensors, const planfile::Plan& plan) {
  Dataset d;
  for (const DatasetTensor& t : tensors) {
    const bool known =
        std::any_of(plan.inputs.begin(), plan.inputs.end(), [&](int32_t i) { return plan.tensors[i].name == t.input; });
    if (!known)
      return Error{"'" + t.file + "': tensor '" + t.input + "' is no input of the plan (its inputs: " + inputList(plan) + ")"};
  }
  std::string firstWhere;  // the first input's tensor, for an N mismatch
  for (int32_t id : plan.inputs) {
    const planfile::Tensor& pt = plan.tensors[id];
    Input in;
    in.name = pt.name;
    in.dtype = pt.dtype;
    in.tensor = id;
    in.sampleShape = pt.shape;
    in.sampleBytes = static_cast<size_t>(planfile::logicalBytes(pt));
    int64_t n = 0;
    for (DatasetTensor& t : tensors) {
      if (t.input != pt.name) continue;
      const std::string who = "'" + t.file + "': tensor '" + t.input + "'";
      const int64_t k = samplesIn(t.shape, pt.shape);
      if (t.dtype != pt.dtype || k < 0)
        return Error{who + " is " + t.dtype + shapeText(t.shape) + " but a sample of the plan's input is " + pt.dtype + shapeText(pt.shape) +
                     ": give " + sampleForms(pt)};
      if (t.data.size() != static_cast<size_t>(k) * in.sampleBytes)
        return Error{who + " has " + std::to_string(t.data.size()) + " bytes, not the " +
                     std::to_string(k * static_cast<int64_t>(in.sampleBytes)) + " of its shape"};
      in.files.emplace_back(n, t.file);
      in.data.insert(in.data.end(), t.data.begin(), t.data.end());
      std::vector<unsigned char>().swap(t.data);  // hand the memory back as we go: datasets can be large
      n += k;
    }
    if (in.files.empty()) return Error{"the dataset has no tensor for the plan's input '" + pt.name + "'"};
    const std::string where = "'" + in.files.front().second + "': tensor '" + pt.name + "'";
    if (d.inputs_.empty()) {
      d.samples_ = n;
      firstWhere = where;
    } else if (n != d.samples_) {
      return Error{where + " holds " + std::to_string(n) + " samples but " + firstWhere + " holds " + std::to_string(d.samples_)};
    }
    d.inputs_.push_back(std::move(in));
  }
  if (d.inputs_.empty()) return Error{"the plan has no inputs to train on"};
  if (d.samples_ == 0) return Error{firstWhere + " holds no samples"};
  return d;
}

std::string Dataset::where(size_t k, int64_t i) const {
  const auto& files = inputs_[k].files;
  auto it = std::upper_bound(files.begin(), files.end(), i, [](int64_t v, const auto& f) { return v < f.first; });
  return (it == files.begin() ? files.front() : *(it - 1)).second + ": sample " + std::to_string(i);
}

uint64_t Dataset::fingerprint() const {
  uint64_t h = planfile::fnv1a64(&samples_, sizeof samples_);
  for (const Input& in : inputs_) h = planfile::fnv1a64(in.data.data(), in.data.size(), h);
  return h;
}

Status Dataset::checkValues(const planfile::Plan& plan) const {
  for (int64_t i = 0; i < samples_; ++i)
    for (size_t k = 0; k < inputs_.size(); ++k) {
      const Input& in = inputs_[k];
      if (Status e = checkInput(plan, in.tensor, in.dtype, in.sampleShape, sample(k, i), in.sampleBytes); !e.ok())
        return Error{where(k, i) + ": " + e.error().message};
    }
  return Status::success();
}

}  // namespace fbl::rt
