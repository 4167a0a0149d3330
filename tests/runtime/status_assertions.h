// Catch assertions over runtime/status.h: a failed Status or Result prints its error, where
// REQUIRE(s.ok()) would print only "false".
#pragma once

#include <string>
#include <utility>

#include <catch2/catch.hpp>

#include "runtime/status.h"

namespace fbl::testing {

// "" for success, else the error's line: for CHECK_THAT(errorText(...), Contains(...)).
template <class R>
std::string errorText(const R& result) {
  return result.ok() ? std::string() : result.error().message;
}

// The value of a Result that must hold one.
template <class T>
T requireValue(Result<T> result) {
  INFO(errorText(result));
  REQUIRE(result.ok());
  return std::move(result).value();
}

}  // namespace fbl::testing

#define FBL_STATUS_ASSERT(macro, expr)                          \
  do {                                                          \
    const auto& fbl_status_ = (expr);                           \
    INFO(#expr << ": " << ::fbl::testing::errorText(fbl_status_)); \
    macro(fbl_status_.ok());                                    \
  } while (0)
#define REQUIRE_OK(expr) FBL_STATUS_ASSERT(REQUIRE, expr)
#define CHECK_OK(expr) FBL_STATUS_ASSERT(CHECK, expr)
