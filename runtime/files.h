// Whole-file reads and path checks that never throw. libstdc++'s std::ifstream opens a directory
// and then throws from its first read (basic_filebuf::underflow: "Is a directory"), so every file
// the runtime reads goes through readWholeFile, which refuses a directory by name first and reads
// with stdio. Header-only: runtime/safetensors.h, which the compiler shares, uses it. POSIX stat
// only (no std::filesystem, docs/android.md).
#pragma once

#include <sys/stat.h>

#include <cstdio>
#include <memory>
#include <string>

#include "runtime/status.h"

namespace fbl::rt {

// Success unless `path` exists and is a directory; then the line refusing it as `what`
// ("a plan file"). A path that does not exist is left to the open that follows.
inline Status directoryRefused(const std::string& path, const char* what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Error{"'" + path + "' is a directory, not " + what};
  return Status::success();
}

// Success when `path` is an existing directory, else the line saying what it is instead.
inline Status directoryRequired(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Error{"directory '" + path + "' does not exist"};
  if (!S_ISDIR(st.st_mode)) return Error{"'" + path + "' is not a directory"};
  return Status::success();
}

// The bytes of the file `path` (`what` names it in messages), else one line: "cannot open
// 'PATH'" (dataset.cc tells a missing file by that prefix), a directory refused, or a failed read.
inline Result<std::string> readWholeFile(const std::string& path, const char* what) {
  FBL_TRY(directoryRefused(path, what));
  // Closed however this returns: a huge file may end in bad_alloc from append.
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return Error{"cannot open '" + path + "'"};
  std::string out;
  char chunk[1 << 16];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, f.get())) > 0) out.append(chunk, n);
  if (std::ferror(f.get())) return Error{"cannot read '" + path + "'"};
  return out;
}

}  // namespace fbl::rt
