// Errors are values, in the runtime and the compiler alike: a Status is success or one Error, a
// Result<T> a T or one Error. An Error is one line of text that names the file, tensor, node,
// kernel or argument at fault. C++17 and the standard library only: the runtime builds for
// Android as it is, and the compiler's compiler/support/result.h adds formatting on top.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace fbl {

struct Error {
  std::string message;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error e) : v_(std::move(e)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : err_(std::move(e)), failed_(true) {}
  static Status success() { return Status(); }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return err_; }

 private:
  Error err_;
  bool failed_ = false;
};

}  // namespace fbl

// Propagates an error out of the current function.
#define FBL_TRY(expr)                                          \
  do {                                                         \
    auto fbl_try_result_ = (expr);                             \
    if (!fbl_try_result_.ok()) return fbl_try_result_.error(); \
  } while (0)

#define FBL_CONCAT_INNER(a, b) a##b
#define FBL_CONCAT(a, b) FBL_CONCAT_INNER(a, b)
// auto x = FBL_TRY_ASSIGN(...) is not portable; use: FBL_ASSIGN(auto x, expr);
#define FBL_ASSIGN(decl, expr) FBL_ASSIGN_IMPL(FBL_CONCAT(fbl_assign_, __LINE__), decl, expr)
#define FBL_ASSIGN_IMPL(tmp, decl, expr) \
  auto tmp = (expr);                     \
  if (!tmp.ok()) return tmp.error();     \
  decl = std::move(tmp).value()
