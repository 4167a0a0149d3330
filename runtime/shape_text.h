// "[2,16,64]": a shape as the runtime's error messages write it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fbl::rt {

inline std::string shapeText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace fbl::rt
