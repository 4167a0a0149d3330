// What a weights file or a checkpoint must hold for a plan, checked whole before the runtime
// writes any of it, so a refused file leaves the session as it was. The file's own structure
// (offsets, sizes, dtypes) was checked when it was parsed (runtime/safetensors.h).
#pragma once

#include <cstdint>
#include <string>

#include "runtime/plan_file.h"
#include "runtime/safetensors.h"
#include "runtime/status.h"

namespace fbl::rt {

// Every tensor the plan fills from the weights file (weights, trainables, updated buffers'
// starting values: planfile::Tensor::fromWeights) under its source key, with the plan's dtype and
// shape, then the file's fbl.checksum where it has one (runtime/safetensors.h); a refusal is one
// line naming the file, the tensor and the field. *baseWeights (if given) gets the identity of the
// plan's frozen weights and buffers' starting values in this file: the digest of their tensor digests in name order, which a
// checkpoint trained on them records (kBaseWeightsKey).
Status checkWeights(const planfile::Plan& plan, const safetensors::File& file, const std::string& path,
                    std::string* baseWeights = nullptr);
// Checkpoint metadata: the identity of the frozen weights the trainables were trained on.
inline constexpr const char* kBaseWeightsKey = "fbl.base_weights";
// An fbl checkpoint of this plan: format metadata, a step that is a non-negative integer, every
// trainable and optimizer state by name with the plan's dtype and shape, its fbl.checksum where
// it has one, and, where both are known, trained on `baseWeights` (the identity checkWeights gave the
// session's weights): another model's checkpoint with the same trainable names is refused.
// *step gets the step.
Status checkCheckpoint(const planfile::Plan& plan, const safetensors::File& file, const std::string& path,
                       int64_t* step, const std::string& baseWeights = "");

// The training loop's position in a checkpoint (runtime/training_loop.h): metadata
// `grad_accum_position` (micro-batches accumulated, < the plan's grad_accum) and `learning_rate`
// (the schedule's base lr, fbl_set_learning_rate's). A key the file lacks keeps the plan's start:
// 0 and the compiled lr.
Status checkLoopState(const planfile::Plan& plan, const safetensors::File& file, const std::string& path,
                      int32_t* accumulated, double* baseLr);

}  // namespace fbl::rt
