// The scan and the N-dimensional index ops, one template each, row-major operands:
//  - CumSum: cumsum.cl, one work-item per line along the (constant) axis, summed in order;
//  - ArgMax, ArgMin: arg_extremum.cl, one work-item per line along the axis, scanned in order;
//  - TopK: top_k.cl, one work-item per line, K scans each picking the next in rank order;
//  - GatherND: gather_nd.cl, one work-item per output element;
//  - ScatterND: scatter_nd.cl, one work-item per output element that applies every update naming
//    its slice in tuple order (deterministic, no atomics);
//  - ScatterElements: scatter_elements.cl, the same with one index per update position.
// Index tuples are read at run time; a negative index wraps once, and one still outside its
// dimension reads nothing (GatherND writes 0, ScatterND skips the tuple), so no input makes a
// read or write outside a tensor.
#include <fmt/format.h>

#include "compiler/codegen/emit_util.h"

namespace fbl::codegen {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// The OpenCL type a running sum of `t` accumulates in.
std::string_view accType(ir::DType t) {
  if (t == ir::DType::F64) return "double";
  if (ir::isFloat(t)) return "float";
  return t == ir::DType::I64 ? "long" : "int";
}

// A shape seen as lines along `axis`: `count` lines (the outer x inner positions around it) of
// `dim` elements, consecutive elements `inner` apart.
struct AxisLines {
  int64_t count = 1, inner = 1, dim = 1;
};
AxisLines linesAlong(const ir::Shape& s, int64_t axis) {
  AxisLines l;
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= s[d];
  for (size_t d = axis + 1; d < s.size(); ++d) l.inner *= s[d];
  l.count = outer * l.inner;
  l.dim = s.empty() ? 1 : s[axis];
  return l;
}

Result<NodeCode> cumSum(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const ir::Value& x = g.values[n.inputs[0]];
  const auto axisV = constInts(g, n.inputs[1]);
  if (!axisV || axisV->size() != 1) return makeError("{}: the axis must be a compile-time constant", ir::describeNode(g, n));
  if (x.dtype != ir::DType::F32 && x.dtype != ir::DType::I64 && x.dtype != ir::DType::I32)
    return makeError("{}: CumSum runs on f32, i64 and i32, not {}", ir::describeNode(g, n), ir::dtypeName(x.dtype));
  const AxisLines l = linesAlong(x.shape, normAxis((*axisV)[0], x.shape.size()));
  NodeCode c;
  c.launches.push_back(launch("cumsum",
                              {{"T", std::string(clType(x.dtype))}, {"ACC", std::string(accType(x.dtype))},
                               {"LINES", str(l.count)}, {"INNER", str(std::max<int64_t>(l.inner, 1))},
                               {"DIM", str(l.dim)}, {"REVERSE", n.attrInt("reverse", 0) ? "1" : "0"},
                               {"EXCLUSIVE", n.attrInt("exclusive", 0) ? "1" : "0"}},
                              "cumsum", {val(n.inputs[0]), val(n.outputs[0])}, grid1(l.count, t), {t.workgroup}));
  return c;
}

Result<NodeCode> argExtremum(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const ir::Value& x = g.values[n.inputs[0]];
  if (x.dtype != ir::DType::F32 && x.dtype != ir::DType::I64 && x.dtype != ir::DType::I32)
    return makeError("{}: {} runs on f32, i64 and i32, not {}", ir::describeNode(g, n), n.op, ir::dtypeName(x.dtype));
  if (x.shape.empty()) return makeError("{}: the input is a scalar", ir::describeNode(g, n));
  const AxisLines l = linesAlong(x.shape, normAxis(n.attrInt("axis", 0), x.shape.size()));
  NodeCode c;
  c.launches.push_back(launch("arg_extremum",
                              {{"T", std::string(clType(x.dtype))}, {"LINES", str(l.count)},
                               {"INNER", str(std::max<int64_t>(l.inner, 1))}, {"DIM", str(l.dim)},
                               {"CMP", n.op == "ArgMax" ? ">" : "<"},
                               {"LAST", n.attrInt("select_last_index", 0) ? "1" : "0"}},
                              "arg_extremum", {val(n.inputs[0]), val(n.outputs[0])}, grid1(l.count, t), {t.workgroup}));
  return c;
}

Result<NodeCode> topK(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const ir::Value& x = g.values[n.inputs[0]];
  if (x.dtype != ir::DType::F32 && x.dtype != ir::DType::I64 && x.dtype != ir::DType::I32)
    return makeError("{}: TopK runs on f32, i64 and i32, not {}", ir::describeNode(g, n), ir::dtypeName(x.dtype));
  if (n.outputs.size() != 2 || n.outputs[0] == ir::kNoValue || n.outputs[1] == ir::kNoValue)
    return makeError("{}: TopK runs with both outputs, Values and Indices, in use", ir::describeNode(g, n));
  const int64_t axis = normAxis(n.attrInt("axis", -1), x.shape.size());
  const AxisLines l = linesAlong(x.shape, axis);
  const int64_t k = g.values[n.outputs[0]].shape[axis];
  NodeCode c;
  c.launches.push_back(launch("top_k",
                              {{"T", std::string(clType(x.dtype))}, {"LINES", str(l.count)},
                               {"INNER", str(std::max<int64_t>(l.inner, 1))}, {"DIM", str(l.dim)}, {"K", str(k)},
                               {"LARGEST", n.attrInt("largest", 1) ? "1" : "0"}},
                              "top_k", {val(n.inputs[0]), val(n.outputs[0]), val(n.outputs[1])}, grid1(l.count, t),
                              {t.workgroup}));
  return c;
}

Result<NodeCode> gatherND(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const ir::Value& data = g.values[n.inputs[0]];
  const ir::Value& idx = g.values[n.inputs[1]];
  const ir::Value& out = g.values[n.outputs[0]];
  const int64_t b = n.attrInt("batch_dims", 0), m = idx.shape.back();
  const auto strides = ir::stridesOf(data.shape);
  int64_t tuples = 1, slice = 1;
  for (size_t d = b; d + 1 < idx.shape.size(); ++d) tuples *= idx.shape[d];
  for (size_t d = b + m; d < data.shape.size(); ++d) slice *= data.shape[d];
  std::string index;
  for (int64_t k = 0; k < m; ++k) {
    const int64_t dim = data.shape[b + k];
    index += fmt::format(
        "  long t{0} = idx[bt * {1}u + {0}u];\n  if (t{0} < 0) t{0} += {2};\n"
        "  if (t{0} < 0 || t{0} >= {2}) {{ out[i] = ({3})0; return; }}\n  off += (ulong)t{0} * {4}u;\n",
        k, m, dim, clType(data.dtype), strides[b + k]);
  }
  const int64_t count = ir::numElements(out.shape);
  NodeCode c;
  c.launches.push_back(launch("gather_nd",
                              {{"T", std::string(clType(data.dtype))}, {"N", str(count)}, {"SLICE", str(slice)},
                               {"TUPLES", str(tuples)}, {"BATCH_STRIDE", str(b > 0 ? strides[b - 1] : 0)},
                               {"INDEX", index}},
                              "gathernd", {val(n.inputs[0]), val(n.inputs[1]), val(n.outputs[0])}, grid1(count, t),
                              {t.workgroup}));
  return c;
}

// The update rule of the scatters: `v` the element so far, `u` the update.
std::string combineOf(const ir::Node& n) {
  const std::string red = n.attrString("reduction", "none");
  return red == "add" ? "v + u" : red == "mul" ? "v * u" : red == "max" ? "(u > v ? u : v)"
         : red == "min" ? "(u < v ? u : v)" : "u";
}

Result<NodeCode> scatterND(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const ir::Value& data = g.values[n.inputs[0]];
  const ir::Value& idx = g.values[n.inputs[1]];
  const int64_t m = idx.shape.back();
  int64_t tuples = 1, slice = 1;
  for (size_t d = 0; d + 1 < idx.shape.size(); ++d) tuples *= idx.shape[d];
  for (size_t d = m; d < data.shape.size(); ++d) slice *= data.shape[d];
  std::string tuple;
  for (int64_t k = 0; k < m; ++k)
    tuple += fmt::format(
        "    long t{0} = idx[t * {1}u + {0}u];\n    if (t{0} < 0) t{0} += {2};\n"
        "    ok = ok && t{0} >= 0 && t{0} < {2};\n    pos = pos * {2} + t{0};\n",
        k, m, data.shape[k]);
  const std::string combine = combineOf(n);
  const int64_t count = ir::numElements(data.shape);
  NodeCode c;
  c.launches.push_back(launch("scatter_nd",
                              {{"T", std::string(clType(data.dtype))}, {"N", str(count)}, {"SLICE", str(slice)},
                               {"TUPLES", str(tuples)}, {"TUPLE", tuple}, {"COMBINE", combine}},
                              "scatternd", {val(n.inputs[0]), val(n.inputs[1]), val(n.inputs[2]), val(n.outputs[0])},
                              grid1(count, t), {t.workgroup}));
  return c;
}

Result<NodeCode> scatterElements(const ir::Graph& g, const ir::Node& n, const Target& t) {
  const ir::Value& data = g.values[n.inputs[0]];
  const ir::Value& idx = g.values[n.inputs[1]];
  const int64_t rank = static_cast<int64_t>(data.shape.size());
  const int64_t axis = normAxis(n.attrInt("axis", 0), rank);
  const auto strides = ir::stridesOf(data.shape);
  std::string offset;
  for (int64_t d = rank - 1; d >= 0; --d) {
    if (d != axis) offset += fmt::format("    off += (q % {}u) * {}u;\n", idx.shape[d], strides[d]);
    if (d > 0) offset += fmt::format("    q /= {}u;\n", idx.shape[d]);
  }
  const int64_t count = ir::numElements(data.shape);
  NodeCode c;
  c.launches.push_back(launch("scatter_elements",
                              {{"T", std::string(clType(data.dtype))}, {"TI", std::string(clType(idx.dtype))},
                               {"N", str(count)}, {"DIM", str(data.shape[axis])}, {"AXIS_STRIDE", str(strides[axis])},
                               {"POSITIONS", str(ir::numElements(idx.shape))}, {"OFFSET", offset},
                               {"COMBINE", combineOf(n)}},
                              "scatterelements",
                              {val(n.inputs[0]), val(n.inputs[1]), val(n.inputs[2]), val(n.outputs[0])},
                              grid1(count, t), {t.workgroup}));
  return c;
}

}  // namespace

std::vector<EmitterEntry> indexEmitters() {
  return {{"CumSum", cumSum},         {"ArgMax", argExtremum},       {"ArgMin", argExtremum},       {"TopK", topK},
          {"GatherND", gatherND},     {"ScatterND", scatterND},      {"ScatterElements", scatterElements}};
}

}  // namespace fbl::codegen
