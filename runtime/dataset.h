// A training dataset for a plan: N samples, each one batch of every plan input (one step's
// inputs). Read from one file or folder, checked whole before the first step (docs/runtime.md,
// "Datasets"):
//   FILE.safetensors  one tensor per plan input, named after it;
//   FILE.npy          the plan's only input;
//   DIR               DIR/<input>.npy for every plan input ('/' in a name written '_').
// A tensor for a plan input of dtype D and shape S = [s0, s1, ...] is D and either
//   [N, s0, s1, ...]  N samples, each of shape S, or
//   [N*s0, s1, ...]   rows that consecutive groups of s0 make into N samples (a file of token
//                     sequences for a plan of batch s0).
// Every input's N must be the same. Sample i of input k is the i-th run of S's bytes of its
// tensor, row-major. Errors are one line naming the file, the tensor and, for values, the sample.
// OpenCL-free and filesystem-free (the runtime's own check of an input's values is reused), so
// that an app reads its datasets with it and the tests need no device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/plan_file.h"
#include "runtime/status.h"

namespace fbl::rt {

// One plan input's samples as read from a file, before the dataset checks them.
struct DatasetTensor {
  std::string input;  // the plan input it feeds
  std::string dtype;  // fbl spelling: "i64", "f32", ...
  std::vector<int64_t> shape;
  std::vector<unsigned char> data;
  std::string file;   // where it came from, for messages
};

class Dataset {
 public:
  // PATH as in the header comment.
  static Result<Dataset> read(const std::string& path, const planfile::Plan& plan);
  // Tensors already in memory (fbl-train's TensorProto folders): one or more per plan input, in
  // order; several tensors of one input are concatenated along the samples.
  static Result<Dataset> fromTensors(std::vector<DatasetTensor> tensors, const planfile::Plan& plan);

  int64_t size() const { return samples_; }
  size_t inputCount() const { return inputs_.size(); }
  const std::string& inputName(size_t k) const { return inputs_[k].name; }
  const std::string& dtype(size_t k) const { return inputs_[k].dtype; }
  const std::vector<int64_t>& sampleShape(size_t k) const { return inputs_[k].sampleShape; }
  size_t sampleBytes(size_t k) const { return inputs_[k].sampleBytes; }
  const unsigned char* sample(size_t k, int64_t i) const {
    return inputs_[k].data.data() + static_cast<size_t>(i) * inputs_[k].sampleBytes;
  }
  // "FILE: sample I" for messages about sample i of input k.
  std::string where(size_t k, int64_t i) const;
  // FNV-1a of N and every byte: a resumed run checks it trains on the data it started with.
  uint64_t fingerprint() const;
  // Every sample's values through the runtime's input check (runtime/input_check.h): token ids
  // within the table, labels within the classes, floats finite; else the first fault's line,
  // "FILE: sample I: input 'x' position ...".
  Status checkValues(const planfile::Plan& plan) const;

 private:
  struct Input {
    std::string name, dtype;
    int32_t tensor = -1;  // the plan tensor
    std::vector<int64_t> sampleShape;
    size_t sampleBytes = 0;
    std::vector<unsigned char> data;
    std::vector<std::pair<int64_t, std::string>> files;  // (first sample, file), ascending
  };
  std::vector<Input> inputs_;
  int64_t samples_ = 0;
};

}  // namespace fbl::rt
