// Offset generation (emitOffsets), in three steps:
//  1. drop size-1 dims (they contribute nothing);
//  2. merge dim d into d+1 when every operand has stride[d] == stride[d+1] * shape[d+1];
//  3. peel coordinates from the innermost dim outwards with % and /, summing coordinate *
//     stride per operand; an operand whose strides are the row-major ones of the shape simply
//     gets the linear index.
// Layout offsets (emitLayoutOffsets): affine layouts become strides and take the path above;
// otherwise coordinates are peeled from the innermost dim outwards and every operand's offset is
// layout o broadcast-view, simplified, printed with unsigned arithmetic.
#include "compiler/codegen/index_code.h"

#include <cmath>

#include <fmt/format.h>

#include "compiler/layout/simplify.h"

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

namespace {

// Strides and base of an offset that is a sum of constant multiples of the index variables;
// unsigned offsets need them non-negative.
bool affineStrides(const layout::Expr& e, size_t rank, std::vector<int64_t>& strides, int64_t& base) {
  auto f = layout::affineForm(e, rank);
  if (!f || f->constant < 0) return false;
  for (int64_t s : f->coeffs)
    if (s < 0) return false;
  strides = f->coeffs;
  base = f->constant;
  return true;
}

// The operand's index from the iteration index: right-aligned, 0 on broadcast (size-1) dims.
Result<layout::IndexMap> broadcastView(const ir::Shape& opShape, const std::vector<layout::Expr>& iterVars,
                                       const ir::Shape& iter) {
  if (opShape.size() > iter.size())
    return makeError("operand of shape {} has more dims than the iteration shape {}", ir::shapeToString(opShape),
                     ir::shapeToString(iter));
  const size_t lead = iter.size() - opShape.size();
  std::vector<layout::Expr> outs;
  for (size_t d = 0; d < opShape.size(); ++d) {
    if (opShape[d] == 1) {
      outs.push_back(layout::Expr::constant(0));
    } else if (opShape[d] != iter[lead + d]) {
      return makeError("operand of shape {} does not broadcast to {}", ir::shapeToString(opShape),
                       ir::shapeToString(iter));
    } else {
      outs.push_back(iterVars[lead + d]);
    }
  }
  return layout::IndexMap(iter, std::move(outs), opShape);
}

}  // namespace

Result<std::string> emitLayoutOffsets(const ir::Shape& shape, const std::string& linear,
                                      const std::vector<LayoutOperand>& operands, const std::string& indent) {
  std::vector<StridedOperand> strided;
  for (const LayoutOperand& o : operands) {
    if (o.layout.storage() != layout::Storage::Buffer)
      return makeError("operand '{}' is laid out as {}: only buffer layouts are supported here", o.var,
                       o.layout.str());
    std::vector<int64_t> st;
    int64_t base = 0;
    if (o.sign || !affineStrides(o.layout.map().outputs()[0], o.layout.shape().size(), st, base)) break;
    // Affine: the layout's strides, 0 on broadcast dims.
    const ir::Shape& os = o.layout.shape();
    if (os.size() > shape.size()) break;  // the general path reports it
    const size_t lead = shape.size() - os.size();
    std::vector<int64_t> bs(shape.size(), 0);
    bool fits = true;
    for (size_t d = 0; d < os.size(); ++d) {
      fits = fits && (os[d] == 1 || os[d] == shape[lead + d]);
      bs[lead + d] = os[d] == 1 ? 0 : st[d];
    }
    if (!fits) break;
    strided.push_back({o.var, bs, base});
  }
  if (strided.size() == operands.size()) return emitOffsets(shape, linear, strided, indent);
  // General: peel the coordinates, then one composed expression per operand.
  std::vector<layout::Expr> vars;
  std::string out;
  int last = -1;  // outermost dim of extent > 1
  for (size_t d = 0; d < shape.size(); ++d) {
    vars.push_back(shape[d] == 1 ? layout::Expr::constant(0)
                                 : layout::Expr::var(static_cast<int>(d), shape[d], fmt::format("c{}_", d)));
    if (shape[d] != 1 && last < 0) last = static_cast<int>(d);
  }
  if (last >= 0) {
    out += fmt::format("{}uint r_ = {};\n", indent, linear);
    for (size_t d = shape.size(); d-- > static_cast<size_t>(last);) {
      if (shape[d] == 1) continue;
      if (static_cast<int>(d) == last)
        out += fmt::format("{}const uint c{}_ = r_;\n", indent, d);
      else
        out += fmt::format("{}const uint c{}_ = r_ % {}u; r_ /= {}u;\n", indent, d, shape[d], shape[d]);
    }
  }
  for (const LayoutOperand& o : operands) {
    FBL_ASSIGN(layout::IndexMap view, broadcastView(o.layout.shape(), vars, shape));
    FBL_ASSIGN(layout::Layout seen, o.layout.compose(view));
    FBL_ASSIGN(std::string off, layout::toOpenCL(seen.map().outputs()[0]));
    out += fmt::format("{}const uint {} = {};\n", indent, o.var, off);
    if (o.sign) {
      // sign + 1 is 0 or 2: non-negative, so it prints unsigned.
      const layout::Expr s = layout::simplify(layout::substitute(*o.sign, view.outputs()) + 1);
      FBL_ASSIGN(std::string se, layout::toOpenCL(s));
      out += fmt::format("{}const bool {}_pos = ({}) != 0u;\n", indent, o.var, se);
    }
  }
  return out;
}

}  // namespace fbl::codegen
