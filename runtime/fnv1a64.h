// FNV-1a 64: the one hash of fbl's files and caches (the plan's trailing checksum, the
// safetensors `fbl.checksum`, the program cache's and the dataset's keys). Not cryptographic: it
// catches corruption, not tampering (docs/security.md).
#pragma once

#include <cstddef>
#include <cstdint>

namespace fbl {

inline constexpr uint64_t kFnv1a64Basis = 1469598103934665603ull;  // the offset basis: a hash of nothing

inline uint64_t fnv1a64(const void* data, size_t n, uint64_t h = kFnv1a64Basis) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace fbl
