// An environment variable set for one scope and restored after it, for the tests of behaviour the
// test binaries' environment switches off (tests/runtime/whole_plan_environment.cc).
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace fbl::testing {

class ScopedEnv {
 public:
  // `value` nullptr: unset within the scope.
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_.c_str(), old_->c_str(), 1);
    else unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace fbl::testing
