// What the runtime checks of an input before it reaches the device, so that a bad batch is one
// line and no launch ever sees it (docs/runtime.md, "Inputs"):
//  1. the dtype and shape the host says it hands (typed writes), or the byte count (raw writes),
//     against the plan tensor;
//  2. every element of an integer input against every Plan::inputChecks entry of that input: a
//     Gather's indices in [-n, n) (an embedding's in [0, n)), a loss's labels in [0, C) or its
//     ignore_index;
//  3. every element of a float input (f32, f64, f16, bf16) for NaN and infinity.
// The first element at fault is named by its flat position and its coordinates, with the value
// and the bound it breaks:
//   input 'input_0' position 17 ([1, 1]): index 50000 is outside [-256, 256)
//   (the table 'model.embed_tokens.weight' of node 'node_embedding') (and 2 more positions)
// OpenCL-free, so that it is tested without a device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/plan_file.h"
#include "runtime/status.h"

namespace fbl::rt {

// The integer dtypes whose elements are read against Plan::inputChecks (i64, i32, i8, u8); the
// loader refuses a check on an input of another dtype, which no write would meet (plan_check.h).
bool checkedIntegerType(const std::string& dtype);

// The host's row-major bytes for plan tensor `t`, of `bytes` bytes: success when they may be written;
// tensors that are not inputs are checked for their byte count only.
Status checkInput(const planfile::Plan& plan, int32_t t, const void* data, size_t bytes);

// A typed write: `dtype` and `shape` must be the plan tensor's, then as checkInput.
Status checkInput(const planfile::Plan& plan, int32_t t, const std::string& dtype,
                  const std::vector<int64_t>& shape, const void* data, size_t bytes);

}  // namespace fbl::rt
