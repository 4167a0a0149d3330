// The op-traits table (compiler/ops/op_traits.h) against the other per-op tables: every op with
// a schema has a traits row and a reference kernel, and every row names an op with a schema, so
// adding an op without classing it fails here.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "compiler/ops/op_schema.h"
#include "compiler/ops/op_traits.h"
#include "compiler/ref/kernels.h"

namespace fbl::ops {

TEST_CASE("every op with a schema has a traits row and a reference kernel, and no row more", "[ops]") {
  const std::vector<std::string_view> ops = supportedOps();
  for (std::string_view op : ops) {
    CAPTURE(std::string(op));
    CHECK(findTraits(op) != nullptr);
    CHECK(ref::findKernel(op) != nullptr);
  }
  const std::vector<OpTraits> rows = allTraits();
  CHECK(rows.size() == ops.size());
  for (const OpTraits& r : rows) {
    CAPTURE(std::string(r.op));
    CHECK(findSchema(r.op) != nullptr);
  }
  CHECK(std::adjacent_find(rows.begin(), rows.end(), [](const OpTraits& a, const OpTraits& b) {
          return a.op == b.op;
        }) == rows.end());
}

TEST_CASE("views alias their input: shape-only ops and identities", "[ops]") {
  for (const OpTraits& r : allTraits()) {
    CAPTURE(std::string(r.op));
    if (!r.view) continue;
    // A view moves no element: a transformation that keeps the order, or an identity at run time.
    CHECK((r.layoutClass == OpClass::kFtiD || r.op == "Identity" || r.op == "Dropout"));
  }
  CHECK(isView("Reshape"));
  CHECK_FALSE(isView("Transpose"));  // moves elements: a kernel, or a read through a map
  CHECK_FALSE(isView("NoSuchOp"));
  CHECK(opClass("NoSuchOp") == OpClass::kNone);
  CHECK(opClass("MatMul") == OpClass::kFtdD);
}

}  // namespace fbl::ops
