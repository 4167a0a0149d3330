// A scratch directory per test process, for the tests that need only the runtime.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace fbl::testing {

inline std::string tempDir() {
  std::string d = "/tmp/fbl-runtime-test-" + std::to_string(::getpid());
  std::system(("mkdir -p " + d).c_str());
  return d;
}

}  // namespace fbl::testing
