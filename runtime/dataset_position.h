// Where a dataset run stands, written beside its checkpoint (CHECKPOINT.data.json) so that a
// resumed run goes on with the sample an uninterrupted run would have taken next.
//
// The position is a pure function of the step: training position p = step x samples_per_step
// is sample SampleOrder::sampleAt(p), in epoch p / train_samples. The file therefore records
// what that function depends on (seed, the held-out count, the dataset's size and fingerprint),
// which a resumed run must share, and the step, epoch and position it was written at, for
// people and as a cross-check. It is written atomically before each checkpoint: a kill between
// the two leaves a file one interval ahead of the checkpoint, whose step then differs from the
// checkpoint's; the run resumes at the checkpoint's step all the same (docs/runtime.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "runtime/status.h"

namespace fbl::rt {

struct DatasetPosition {
  int64_t step = 0;
  int64_t epoch = 0;     // 0-based
  int64_t position = 0;  // within the epoch
  std::optional<uint64_t> seed;  // none: file order
  int64_t samples = 0;           // the dataset's N
  int64_t heldOut = 0;
  int64_t trainSamples = 0;
  int64_t samplesPerStep = 1;
  uint64_t fingerprint = 0;      // Dataset::fingerprint
};

// CHECKPOINT.data.json
std::string datasetPositionPath(const std::string& checkpoint);
Status writeDatasetPosition(const std::string& path, const DatasetPosition& p);
// The position, else one line naming the file and the field at fault.
Result<DatasetPosition> readDatasetPosition(const std::string& path);
// `saved` and `now` describe the same data and order (everything but step, epoch and position);
// else one line naming what changed.
Status checkSameData(const DatasetPosition& saved, const DatasetPosition& now, const std::string& path);

}  // namespace fbl::rt
