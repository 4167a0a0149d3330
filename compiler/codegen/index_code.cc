// Offset generation, in three steps:
//  1. drop size-1 dims (they contribute nothing);
//  2. merge dim d into d+1 when every operand has stride[d] == stride[d+1] * shape[d+1];
//  3. peel coordinates from the innermost dim outwards with % and /, summing coordinate *
//     stride per operand; an operand whose strides are the row-major ones of the shape simply
//     gets the linear index.
#include "compiler/codegen/index_code.h"

#include <cmath>

#include <fmt/format.h>

namespace fbl::codegen {

std::vector<int64_t> broadcastStrides(const ir::Shape& in, const ir::Shape& out) {
  std::vector<int64_t> s(out.size(), 0);
  const std::vector<int64_t> inStrides = ir::stridesOf(in);
  const size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    s[lead + d] = (in[d] == 1 && out[lead + d] != 1) ? 0 : inStrides[d];
  return s;
}

std::string floatLiteral(double v) {
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
  std::string s = fmt::format("{:.9g}", static_cast<float>(v));
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s[0] == '-' ? "(" + s + "f)" : s + "f";
}

std::string emitOffsets(const ir::Shape& shape, const std::string& linear,
                        const std::vector<StridedOperand>& operands, const std::string& indent) {
  // 1. keep dims of extent > 1.
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> st(operands.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    dims.push_back(shape[d]);
    for (size_t k = 0; k < operands.size(); ++k) st[k].push_back(operands[k].strides[d]);
  }
  // 2. merge mergeable neighbours, innermost first.
  for (size_t d = dims.size(); d-- > 1;) {
    bool mergeable = true;
    for (size_t k = 0; k < operands.size(); ++k)
      mergeable = mergeable && st[k][d - 1] == st[k][d] * dims[d];
    if (!mergeable) continue;
    dims[d - 1] *= dims[d];
    dims.erase(dims.begin() + static_cast<int64_t>(d));
    for (auto& s : st) {
      s[d - 1] = s[d];
      s.erase(s.begin() + static_cast<int64_t>(d));
    }
  }
  // 3. peel coordinates.
  std::string out;
  auto term = [](const std::string& c, int64_t stride) {
    return stride == 1 ? c : fmt::format("{} * {}u", c, stride);
  };
  std::vector<std::string> coord(dims.size());
  bool allContiguous = true;
  const std::vector<int64_t> rowMajor = ir::stridesOf(dims);
  for (size_t k = 0; k < operands.size(); ++k)
    allContiguous = allContiguous && st[k] == rowMajor;
  if (!allContiguous) {
    if (dims.size() == 1) {
      coord[0] = linear;
    } else if (!dims.empty()) {
      out += fmt::format("{}uint r_ = {};\n", indent, linear);
      for (size_t d = dims.size(); d-- > 0;) {
        coord[d] = fmt::format("c{}_", d);
        if (d == 0)
          out += fmt::format("{}const uint c0_ = r_;\n", indent);
        else
          out += fmt::format("{}const uint c{}_ = r_ % {}u; r_ /= {}u;\n", indent, d, dims[d], dims[d]);
      }
    }
  }
  for (size_t k = 0; k < operands.size(); ++k) {
    std::string e;
    if (st[k] == rowMajor && !dims.empty()) {
      e = linear;
    } else {
      for (size_t d = 0; d < dims.size(); ++d) {
        if (st[k][d] == 0) continue;
        e += (e.empty() ? "" : " + ") + term(coord[d], st[k][d]);
      }
    }
    if (operands[k].base != 0) e += (e.empty() ? "" : " + ") + fmt::format("{}u", operands[k].base);
    if (e.empty()) e = "0u";
    out += fmt::format("{}const uint {} = {};\n", indent, operands[k].var, e);
  }
  return out;
}

}  // namespace fbl::codegen
