// fbl-train's side of datasets: finding and reading --data / --eval-data (the runtime reads
// .safetensors and .npy; TensorProto folders through tensor_proto_io.h), and
// feeding or evaluating samples through a session.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/dataset.h"
#include "runtime/session.h"
#include "runtime/status.h"

namespace fbl::train {

// PATH: FILE.safetensors, FILE.npy, a folder of INPUT.npy, or TensorProtos: a folder holding
// input_K.pb (K the plan input's position) or test_data_set_*/input_K.pb folders, read in name
// order, whose samples are concatenated. Values are checked too (Dataset::checkValues).
Result<rt::Dataset> loadDataset(const std::string& path, const planfile::Plan& plan);

// Writes sample i of every input; errors name the file and sample.
Status feedSample(rt::Session& s, const rt::Dataset& d, int64_t i);

// The mean forward-only loss (Session::evalStep) of `samples`; trains nothing.
Result<double> meanEvalLoss(rt::Session& s, const rt::Dataset& d, const std::vector<int64_t>& samples);

}  // namespace fbl::train
