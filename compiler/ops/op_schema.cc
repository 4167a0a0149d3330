// The schema table (ONNX ops and fbl's training ops), node validation and the driver that runs
// a node's shape rule against the graph's current value types.
#include "compiler/ops/op_schema.h"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "compiler/ops/schema_tables.h"

namespace fbl::ops {

namespace {

struct Table {
  std::vector<OpSchema> schemas;
  std::unordered_map<std::string_view, size_t> byOp;
};

const Table& table() {
  static const Table t = [] {
    Table t;
    for (auto& s : onnxSchemas()) t.schemas.push_back(std::move(s));
    for (auto& s : trainingSchemas()) t.schemas.push_back(std::move(s));
    for (size_t i = 0; i < t.schemas.size(); ++i) {
      bool fresh = t.byOp.emplace(t.schemas[i].op, i).second;
      FBL_ASSERT(fresh && "two schemas for one op");
    }
    return t;
  }();
  return t;
}

// Shapes a rule may produce: dimensions >= 0 and at most 2^48 elements, so that element and
// byte counts never overflow downstream (an absurd shape in a hostile file is an error, not a
// wrap-around).
constexpr int64_t kMaxElements = int64_t{1} << 48;

bool shapeInRange(const ir::Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) return false;
    if (d == 0) return true;
    if (n > kMaxElements / d) return false;
    n *= d;
  }
  return true;
}

std::string arityText(int lo, int hi) {
  if (hi < 0) return fmt::format("at least {}", lo);
  if (lo == hi) return fmt::format("{}", lo);
  return fmt::format("{} to {}", lo, hi);
}

}  // namespace

Error InferContext::fail(std::string_view msg) const {
  return Error{fmt::format("{}: {}", ir::describeNode(graph, node), msg)};
}

const OpSchema* findSchema(std::string_view op) {
  const Table& t = table();
  auto it = t.byOp.find(op);
  return it == t.byOp.end() ? nullptr : &t.schemas[it->second];
}

std::vector<std::string_view> supportedOps() {
  std::vector<std::string_view> ops;
  for (const auto& s : table().schemas) ops.push_back(s.op);
  std::sort(ops.begin(), ops.end());
  return ops;
}

Status validateNode(const ir::Graph& g, const ir::Node& n) {
  const OpSchema* s = findSchema(n.op);
  std::string where = ir::describeNode(g, n);
  if (s == nullptr)
    return makeError(
        "{}: op {} is not supported at opset {}; supported ops are listed in docs/ops.md "
        "(run `fblc inspect --ops`)",
        where, n.op, g.opset);
  int count = static_cast<int>(n.inputs.size());
  if (count < s->minInputs || (s->maxInputs >= 0 && count > s->maxInputs))
    return makeError("{}: has {} inputs but {} takes {} at opset {}; the node does not follow "
                     "the ONNX spec (re-export the model)",
                     where, count, n.op, arityText(s->minInputs, s->maxInputs), g.opset);
  for (int i = 0; i < s->minInputs; ++i)
    if (n.inputs[i] == ir::kNoValue)
      return makeError("{}: required input {} is missing (re-export the model)", where, i);
  for (const auto& [name, value] : n.attrs) {
    if (std::find(s->attrs.begin(), s->attrs.end(), name) != s->attrs.end()) continue;
    return makeError("{}: attribute '{}' is not supported by {} at opset {} (supported: {}); see "
                     "docs/ops.md",
                     where, name, n.op, g.opset,
                     s->attrs.empty() ? std::string("none") : fmt::format("{}", fmt::join(s->attrs, ", ")));
  }
  return Status::success();
}

Status inferNode(ir::Graph& g, const ir::Node& n) {
  // Rules index their inputs freely, so the arity check is not optional.
  FBL_TRY(validateNode(g, n));
  const OpSchema* s = findSchema(n.op);
  InferContext ctx{g, n, {}, {}, {}};
  ctx.in.resize(n.inputs.size());
  ctx.constIn.resize(n.inputs.size(), nullptr);
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    ir::ValueId id = n.inputs[i];
    if (id == ir::kNoValue) continue;
    const ir::Value& v = g.values[id];
    if (!v.shapeKnown || v.dtype == ir::DType::Undefined)
      return ctx.fail(fmt::format("input {} '{}' has no static shape or dtype", i, v.name));
    ctx.in[i] = TensorType{v.dtype, v.shape};
    // A rule may read any known contents (a Reshape target stored as an initializer counts):
    // reading is not folding, which decides separately what becomes a constant.
    ctx.constIn[i] = v.data.get();
  }
  if (s->infer == nullptr) return ctx.fail("the op has no shape rule yet");
  ctx.out.resize(n.outputs.size());
  FBL_TRY(s->infer(ctx));
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    ir::ValueId id = n.outputs[i];
    if (id == ir::kNoValue) continue;
    FBL_ASSERT(ctx.out[i].dtype != ir::DType::Undefined && "a shape rule left an output untyped");
    if (!shapeInRange(ctx.out[i].shape))
      return ctx.fail(fmt::format("output '{}' would have shape {}, which is out of range",
                                  g.values[id].name, ir::shapeToString(ctx.out[i].shape)));
    ir::Value& v = g.values[id];
    v.dtype = ctx.out[i].dtype;
    v.shape = std::move(ctx.out[i].shape);
    v.shapeKnown = true;
  }
  return Status::success();
}

}  // namespace fbl::ops
