// A scratch directory per test process, for the tests that need only the runtime. It is removed
// when the process exits, so a suite run leaves nothing behind in /tmp; FBL_KEEP_TEST_FILES=1
// keeps it, to look at what a failing test wrote. entriesIn counts what a test left in a directory.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <string>

namespace fbl::testing {

inline std::string tempDir() {
  struct Scratch {
    std::string path = "/tmp/fbl-runtime-test-" + std::to_string(::getpid());
    ~Scratch() {
      if (!std::getenv("FBL_KEEP_TEST_FILES")) std::system(("rm -rf " + path).c_str());
    }
  };
  static const Scratch scratch;
  ::mkdir(scratch.path.c_str(), 0755);  // again each time (EEXIST then): a test may have removed it
  return scratch.path;
}

// How many entries the directory `dir` holds; 0 when there is none.
inline std::ptrdiff_t entriesIn(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::is_directory(dir, ec) ? std::distance(std::filesystem::directory_iterator(dir), {}) : 0;
}

}  // namespace fbl::testing
