// Shape rules of the elementwise ops: unary math, numpy-broadcasting binary and variadic ops,
// comparisons and logic (bool results), Where, and the type-only ops Cast, CastLike, Identity
// and Dropout. Every rule's output shape is the broadcast of its inputs' shapes.
#include <fmt/format.h>

#include "compiler/ops/onnx_schemas_common.h"

namespace fbl::ops::rules {

namespace {

using ir::DType;

// Sqrt, Exp, Erf, ...: float in, same type out.
Status unaryFloat(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  FBL_TRY(expectFloat(c, 0));
  c.out[0] = c.in[0];
  return Status::success();
}

// Neg, Abs, Relu: any number type (not bool).
Status unaryNumeric(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  if (c.in[0].dtype == DType::Bool)
    return c.fail(fmt::format("input '{}' must be numeric, not bool", inputName(c, 0)));
  c.out[0] = c.in[0];
  return Status::success();
}

Status identity(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  c.out[0] = c.in[0];
  return Status::success();
}

// Add, Sub, Mul, Div, and variadic Max/Min: all inputs of one dtype, broadcast shapes.
Status broadcastSameType(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  std::vector<size_t> all;
  for (size_t i = 0; i < c.in.size(); ++i) {
    if (!hasInput(c, i)) return c.fail(fmt::format("input {} is missing", i));
    FBL_TRY(expectSameDType(c, 0, i));
    all.push_back(i);
  }
  if (c.in[0].dtype == DType::Bool)
    return c.fail(fmt::format("input '{}' must be numeric, not bool", inputName(c, 0)));
  FBL_ASSIGN(ir::Shape s, broadcastInputs(c, all));
  setOut(c, 0, c.in[0].dtype, std::move(s));
  return Status::success();
}

// Pow: the exponent may have another numeric type; the result has the base's.
Status pow(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  for (size_t i : {0, 1})
    if (c.in[i].dtype == DType::Bool)
      return c.fail(fmt::format("input '{}' must be numeric, not bool", inputName(c, i)));
  FBL_ASSIGN(ir::Shape s, broadcastInputs(c, {0, 1}));
  setOut(c, 0, c.in[0].dtype, std::move(s));
  return Status::success();
}

// Equal, Less, ...: same-typed inputs, bool result.
Status compare(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  FBL_TRY(expectSameDType(c, 0, 1));
  FBL_ASSIGN(ir::Shape s, broadcastInputs(c, {0, 1}));
  setOut(c, 0, DType::Bool, std::move(s));
  return Status::success();
}

// And, Or (and Not with one input): bool only.
Status logic(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  std::vector<size_t> all;
  for (size_t i = 0; i < c.in.size(); ++i) {
    FBL_TRY(expectDType(c, i, DType::Bool));
    all.push_back(i);
  }
  FBL_ASSIGN(ir::Shape s, broadcastInputs(c, all));
  setOut(c, 0, DType::Bool, std::move(s));
  return Status::success();
}

Status where(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  FBL_TRY(expectDType(c, 0, DType::Bool));
  FBL_TRY(expectSameDType(c, 1, 2));
  FBL_ASSIGN(ir::Shape s, broadcastInputs(c, {0, 1, 2}));
  setOut(c, 0, c.in[1].dtype, std::move(s));
  return Status::success();
}

// Clip: the bounds, when present, are scalars of the input's dtype (decompose-ops rewrites it
// into Max and Min for the device).
Status clip(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  if (c.in[0].dtype == DType::Bool)
    return c.fail(fmt::format("input '{}' must be numeric, not bool", inputName(c, 0)));
  for (size_t i : {1, 2}) {
    if (!hasInput(c, i)) continue;
    FBL_TRY(expectSameDType(c, 0, i));
    if (ir::numElements(c.in[i].shape) != 1)
      return c.fail(fmt::format("bound '{}' must be a scalar, not {}", inputName(c, i), ir::shapeToString(c.in[i].shape)));
  }
  c.out[0] = c.in[0];
  return Status::success();
}

Status gelu(InferContext& c) {
  std::string approx = c.node.attrString("approximate", "none");
  if (approx != "none" && approx != "tanh")
    return c.fail(fmt::format("approximate='{}' is not one of none, tanh", approx));
  return unaryFloat(c);
}

Status cast(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  if (!c.node.hasAttr("to")) return c.fail("attribute 'to' is missing");
  int64_t code = c.node.attrInt("to", 0);
  auto t = ir::dtypeFromOnnx(static_cast<int32_t>(code));
  if (!t) return c.fail(fmt::format("cast to ONNX dtype {} is not supported", code));
  setOut(c, 0, *t, c.in[0].shape);
  return Status::success();
}

Status castLike(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 1));
  setOut(c, 0, c.in[1].dtype, c.in[0].shape);
  return Status::success();
}

// Dropout at inference is the identity; its optional mask output is bool of the same shape.
Status dropout(InferContext& c) {
  FBL_TRY(expectOutputs(c, 1, 2));
  if (hasInput(c, 1)) {
    FBL_TRY(expectFloat(c, 1));
    if (!c.in[1].shape.empty()) return c.fail("the ratio input must be a scalar");
  }
  if (hasInput(c, 2)) {
    FBL_TRY(expectDType(c, 2, DType::Bool));
    if (!c.in[2].shape.empty()) return c.fail("the training_mode input must be a scalar");
  }
  c.out[0] = c.in[0];
  if (c.out.size() > 1) setOut(c, 1, DType::Bool, c.in[0].shape);
  return Status::success();
}

// Mod: integers take the divisor's sign (fmod=0, Python's %) or the dividend's (fmod=1, C's %);
// floats only the latter, as ONNX requires.
Status mod(InferContext& c) {
  FBL_TRY(broadcastSameType(c));
  const int64_t fmod = c.node.attrInt("fmod", 0);
  if (fmod != 0 && fmod != 1) return c.fail(fmt::format("fmod must be 0 or 1, not {}", fmod));
  if (ir::isFloat(c.in[0].dtype) && fmod != 1) return c.fail("Mod of floats needs fmod=1");
  return Status::success();
}

}  // namespace

std::vector<OpSchema> elementwiseSchemas() {
  std::vector<OpSchema> s = {
      {"Identity", 1, 1, {}, identity},
      {"Cast", 1, 1, {"to", "saturate"}, cast},
      {"CastLike", 2, 2, {"saturate"}, castLike},
      {"Dropout", 1, 3, {"seed"}, dropout},
      {"Add", 2, 2, {}, broadcastSameType},
      {"Sub", 2, 2, {}, broadcastSameType},
      {"Mul", 2, 2, {}, broadcastSameType},
      {"Div", 2, 2, {}, broadcastSameType},
      {"Max", 1, kVariadic, {}, broadcastSameType},
      {"Min", 1, kVariadic, {}, broadcastSameType},
      {"Clip", 1, 3, {}, clip},
      {"Pow", 2, 2, {}, pow},
      {"Mod", 2, 2, {"fmod"}, mod},
      {"Equal", 2, 2, {}, compare},
      {"Less", 2, 2, {}, compare},
      {"LessOrEqual", 2, 2, {}, compare},
      {"Greater", 2, 2, {}, compare},
      {"GreaterOrEqual", 2, 2, {}, compare},
      {"Not", 1, 1, {}, logic},
      {"And", 2, 2, {}, logic},
      {"Or", 2, 2, {}, logic},
      {"Where", 3, 3, {}, where},
      {"Neg", 1, 1, {}, unaryNumeric},
      {"Abs", 1, 1, {}, unaryNumeric},
      {"Sign", 1, 1, {}, unaryNumeric},
      {"Relu", 1, 1, {}, unaryNumeric},
      {"Gelu", 1, 1, {"approximate"}, gelu},
  };
  for (std::string_view op : {"Sqrt", "Reciprocal", "Exp", "Log", "Erf", "Sigmoid", "Tanh",
                              "Cos", "Sin", "Ceil", "Floor", "Round"})
    s.push_back({op, 1, 1, {}, unaryFloat});
  return s;
}

}  // namespace fbl::ops::rules
