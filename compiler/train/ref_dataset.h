// run-ref's datasets: the forms fbl-train reads (runtime/dataset.h), visited in its order, so
// that the reference executor is the reference for an fbl-train run on the same data and seed.
//   FILE.safetensors, FILE.npy, a folder of INPUT.npy: read by rt::Dataset, N samples;
//   a folder of input_K.pb (K-th file, K-th input): one sample, or N with a leading N;
//   a folder of test_data_set_*/input_K.pb folders: their samples concatenated in name order.
// Values are checked as the runtime checks a plan's inputs (token ids within their table,
// labels within the classes).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "compiler/ir/graph.h"
#include "compiler/ir/tensor.h"
#include "compiler/support/result.h"
#include "runtime/dataset.h"
#include "runtime/sample_order.h"

namespace fbl::train {

class RefDataset {
 public:
  static Result<RefDataset> load(const ir::Graph& g, const std::string& path, std::optional<uint64_t> seed);

  int64_t size() const { return data_.size(); }
  // The inputs of micro-batch `position` (0-based over the run): fbl-train's sample at that
  // position, shuffled per epoch by the seed (runtime/sample_order.h) or in file order.
  std::map<ir::ValueId, ir::Tensor> batchAt(int64_t position);

 private:
  RefDataset(const ir::Graph& g, rt::Dataset data, std::optional<uint64_t> seed);
  const ir::Graph* g_;
  rt::Dataset data_;
  rt::SampleOrder order_;
};

}  // namespace fbl::train
