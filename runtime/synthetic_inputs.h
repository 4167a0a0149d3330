// Synthetic training batches, so that a model trains without a data set (fbl-train without
// --data, fbl-bench, the zoo tests). One generator for every caller, from the inputs' dtype,
// shape and integer bounds alone, so a plan (fbl-train) and a graph (compiler/zoo/
// synthetic_inputs.h) give the same bytes:
//   1. one std::mt19937_64 per batch, seeded seed * 0x9E3779B97F4A7C15 + step;
//   2. the inputs in order, each element in row-major order:
//      f32 standard-normal (std::normal_distribution<float>); i64 and i32 uniform in [0, bound)
//      (std::uniform_int_distribution<int64_t>); bool 0 or 1 (std::uniform_int_distribution<int>);
//   3. an integer input's bound is the smallest positive upper bound of its consumers (the rows
//      of the table it indexes, the classes it labels: a plan's input_checks, a graph's
//      analysis::inputBounds), or kDefaultIntegerBound when none bounds it (a diffusion timestep).
// Header-only (C++17, the standard library and plan_file.h), like plan_file.h: libfbl_runtime
// does not carry it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/plan_file.h"
#include "runtime/status.h"

namespace fbl::rt {

inline constexpr int64_t kDefaultIntegerBound = 1000;

// Step 3: the exclusive upper bound of synthetic integers, from the `hi` of every bound of the input.
inline int64_t syntheticBound(const std::vector<int64_t>& upperBounds) {
  int64_t bound = -1;
  for (int64_t hi : upperBounds)
    if (hi > 0) bound = bound < 0 ? hi : std::min(bound, hi);
  return bound > 0 ? bound : kDefaultIntegerBound;
}

struct SyntheticInput {
  std::string name, dtype;  // dtype: "f32", "i64", "i32" or "bool"
  std::vector<int64_t> shape;
  int64_t bound = kDefaultIntegerBound;  // integers: [0, bound)
};

// A plan's inputs in order, integer bounds from its input_checks.
inline std::vector<SyntheticInput> syntheticInputs(const planfile::Plan& plan) {
  std::vector<SyntheticInput> out;
  for (int32_t in : plan.inputs) {
    std::vector<int64_t> his;
    for (const planfile::InputCheck& c : plan.inputChecks)
      if (c.input == in) his.push_back(c.hi);
    const planfile::Tensor& t = plan.tensors[in];
    out.push_back({t.name, t.dtype, t.shape, syntheticBound(his)});
  }
  return out;
}

// Batch `step` for `seed`: each input's row-major bytes, in order; else a line naming the input.
inline Result<std::vector<std::vector<unsigned char>>> syntheticBatch(const std::vector<SyntheticInput>& inputs,
                                                                      uint64_t seed, int64_t step) {
  std::vector<std::vector<unsigned char>> out;
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(step));
  for (const SyntheticInput& in : inputs) {
    int64_t n = 1;
    for (int64_t d : in.shape) n *= d;
    std::vector<unsigned char> bytes(static_cast<size_t>(n * planfile::elementSize(in.dtype)));
    unsigned char* p = bytes.data();
    if (in.dtype == "f32") {
      std::normal_distribution<float> normal(0.0f, 1.0f);
      for (int64_t i = 0; i < n; ++i) {
        const float v = normal(rng);
        std::memcpy(p + i * 4, &v, 4);
      }
    } else if (in.dtype == "i64" || in.dtype == "i32") {
      if (in.bound < 1) return Error{"input '" + in.name + "': no integers below " + std::to_string(in.bound)};
      std::uniform_int_distribution<int64_t> pick(0, in.bound - 1);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = pick(rng);
        if (in.dtype == "i64") {
          std::memcpy(p + i * 8, &v, 8);
        } else {
          const auto w = static_cast<int32_t>(v);
          std::memcpy(p + i * 4, &w, 4);
        }
      }
    } else if (in.dtype == "bool") {
      std::uniform_int_distribution<int> pick(0, 1);
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(pick(rng));
    } else {
      return Error{"input '" + in.name + "': no synthetic data for dtype " + in.dtype};
    }
    out.push_back(std::move(bytes));
  }
  return out;
}

}  // namespace fbl::rt
