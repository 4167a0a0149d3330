// runtime/status.h: the error values the runtime and the compiler share.
#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "runtime/status.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

Status refuseOdd(int x) {
  if (x % 2 != 0) return Error{"x " + std::to_string(x) + " is odd"};
  return Status::success();
}

Result<int> half(int x) {
  FBL_TRY(refuseOdd(x));
  return x / 2;
}

Result<int> quarter(int x) {
  FBL_ASSIGN(const int h, half(x));
  FBL_ASSIGN(int q, half(h));
  return q;
}

Result<std::unique_ptr<int>> boxed(int x) {
  if (x < 0) return Error{"negative"};
  return std::make_unique<int>(x);
}

TEST_CASE("Status and Result carry a value or one error, and FBL_TRY passes the first error up", "[runtime][status]") {
  CHECK(Status().ok());
  CHECK(Status::success().ok());
  CHECK_FALSE(Status(Error{"no"}).ok());
  CHECK(Status(Error{"no"}).error().message == "no");

  CHECK(*quarter(12) == 3);
  // The first failing step's error, unchanged.
  CHECK(errorText(quarter(6)) == "x 3 is odd");
  CHECK(errorText(quarter(7)) == "x 7 is odd");
  CHECK(errorText(quarter(8)).empty());

  // Move-only values come out of a Result whole.
  std::unique_ptr<int> p = requireValue(boxed(5));
  CHECK(*p == 5);
  CHECK(errorText(boxed(-1)) == "negative");
  CHECK_OK(refuseOdd(4));
}

}  // namespace
}  // namespace fbl::testing
