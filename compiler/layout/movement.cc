#include "compiler/layout/movement.h"

#include <algorithm>

#include "compiler/layout/simplify.h"

namespace fbl::layout {

MovementOp MovementOp::slice(std::vector<int64_t> axes, std::vector<int64_t> starts, std::vector<int64_t> ends,
                             std::vector<int64_t> steps) {
  if (steps.empty()) steps.assign(axes.size(), 1);
  return {Kind::Slice, {}, std::move(axes), std::move(starts), std::move(ends), std::move(steps)};
}

namespace {

std::string joined(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

bool isPermutation(const std::vector<int64_t>& perm, size_t rank) {
  if (perm.size() != rank) return false;
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[p]) return false;
    seen[p] = true;
  }
  return true;
}

// Sorted, in range, distinct.
Result<std::vector<int64_t>> normalizedAxes(const MovementOp& op, size_t rank, const Shape& input) {
  std::vector<int64_t> axes = op.axes;
  std::sort(axes.begin(), axes.end());
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] < 0 || axes[i] >= static_cast<int64_t>(rank) || (i && axes[i] == axes[i - 1]))
      return makeError("{} on {}: bad axes", op.str(), ir::shapeToString(input));
  return axes;
}

}  // namespace

std::string MovementOp::str() const {
  switch (kind) {
    case Kind::Reshape: return "Reshape" + ir::shapeToString(shape);
    case Kind::Permute: return "Permute(" + joined(axes) + ")";
    case Kind::Expand: return "Expand" + ir::shapeToString(shape);
    case Kind::Unsqueeze: return "Unsqueeze(" + joined(axes) + ")";
    case Kind::Squeeze: return "Squeeze(" + joined(axes) + ")";
    case Kind::Slice: {
      std::string s = "Slice(";
      for (size_t i = 0; i < axes.size(); ++i)
        s += (i ? "; " : "") + std::to_string(axes[i]) + ": " + std::to_string(starts[i]) + ".." +
             std::to_string(ends[i]) + (steps[i] != 1 ? " step " + std::to_string(steps[i]) : "");
      return s + ")";
    }
  }
  return "?";
}

std::string chainToString(std::span<const MovementOp> chain) {
  std::string s;
  for (const MovementOp& op : chain) s += (s.empty() ? "" : " . ") + op.str();
  return s.empty() ? "(none)" : s;
}

Result<Shape> outputShape(const Shape& in, const MovementOp& op) {
  const size_t rank = in.size();
  switch (op.kind) {
    case MovementOp::Kind::Reshape:
      for (int64_t d : op.shape)
        if (d < 1) return makeError("{} of {}: dims must be positive", op.str(), ir::shapeToString(in));
      if (ir::numElements(op.shape) != ir::numElements(in))
        return makeError("{} of {}: element counts differ", op.str(), ir::shapeToString(in));
      return op.shape;
    case MovementOp::Kind::Permute: {
      if (!isPermutation(op.axes, rank))
        return makeError("{} of {}: not a permutation of the axes", op.str(), ir::shapeToString(in));
      Shape out;
      for (int64_t p : op.axes) out.push_back(in[p]);
      return out;
    }
    case MovementOp::Kind::Slice: {
      if (op.starts.size() != op.axes.size() || op.ends.size() != op.axes.size() || op.steps.size() != op.axes.size())
        return makeError("{}: axes, starts, ends and steps differ in length", op.str());
      FBL_ASSIGN(auto axes, normalizedAxes(op, rank, in));
      (void)axes;
      Shape out = in;
      for (size_t i = 0; i < op.axes.size(); ++i) {
        const int64_t a = op.axes[i], b = op.starts[i], e = op.ends[i], s = op.steps[i];
        // Clamped as normalizeSlice leaves them: a negative step runs from start down to end + 1.
        if (s == 0 || b < 0 || b > in[a] || e < -1 || e > in[a])
          return makeError("{} of {}: needs 0 <= start <= dim, -1 <= end <= dim and step != 0", op.str(),
                           ir::shapeToString(in));
        const int64_t span = s > 0 ? e - b : b - e;
        // |step| in unsigned arithmetic: -step overflows for INT64_MIN.
        const uint64_t mag = s > 0 ? static_cast<uint64_t>(s) : static_cast<uint64_t>(-(s + 1)) + 1;
        out[a] = span > 0 ? static_cast<int64_t>(static_cast<uint64_t>(span - 1) / mag) + 1 : 0;
        if (out[a] > 0 && b == in[a])
          return makeError("{} of {}: start is past the end of axis {}", op.str(), ir::shapeToString(in), a);
      }
      return out;
    }
    case MovementOp::Kind::Expand: {
      if (op.shape.size() < rank)
        return makeError("{} of {}: cannot drop dims", op.str(), ir::shapeToString(in));
      size_t lead = op.shape.size() - rank;
      Shape out = op.shape;
      for (size_t d = 0; d < rank; ++d) {
        int64_t want = op.shape[lead + d];
        if (in[d] != want && in[d] != 1 && want != 1)
          return makeError("{} of {}: dim {} is neither equal nor 1", op.str(), ir::shapeToString(in), d);
        out[lead + d] = std::max(in[d], want);
      }
      for (int64_t d : out)
        if (d < 0) return makeError("{} of {}: dims must not be negative", op.str(), ir::shapeToString(in));
      return out;
    }
    case MovementOp::Kind::Unsqueeze: {
      FBL_ASSIGN(auto axes, normalizedAxes(op, rank + op.axes.size(), in));
      Shape out;
      size_t next = 0;
      for (size_t d = 0; d < rank + axes.size(); ++d)
        out.push_back(std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(d)) ? 1 : in[next++]);
      return out;
    }
    case MovementOp::Kind::Squeeze: {
      FBL_ASSIGN(auto axes, normalizedAxes(op, rank, in));
      Shape out;
      for (size_t d = 0; d < rank; ++d) {
        bool drop = std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(d));
        if (drop && in[d] != 1)
          return makeError("{} of {}: dim {} is not 1", op.str(), ir::shapeToString(in), d);
        if (!drop) out.push_back(in[d]);
      }
      return out;
    }
  }
  return makeError("unknown movement op");
}

Result<IndexMap> movementMap(const Shape& in, const MovementOp& op) {
  FBL_ASSIGN(Shape out, outputShape(in, op));
  std::vector<Expr> o = IndexMap::vars(out);
  std::vector<Expr> r(in.size());
  switch (op.kind) {
    case MovementOp::Kind::Reshape: {
      // What a straightforward code generator writes: flatten, then one div and one mod per
      // input dim (none where the stride is 1 or the dim is outermost).
      Expr flat;
      std::vector<int64_t> os = ir::stridesOf(out), is = ir::stridesOf(in);
      for (size_t d = 0; d < out.size(); ++d) flat = flat + o[d] * os[d];
      for (size_t d = 0; d < in.size(); ++d) {
        Expr x = floorDiv(flat, is[d]);
        r[d] = d == 0 ? x : floorMod(x, in[d]);
      }
      break;
    }
    case MovementOp::Kind::Permute:
      for (size_t k = 0; k < op.axes.size(); ++k) r[op.axes[k]] = o[k];
      break;
    case MovementOp::Kind::Slice:
      r = o;
      for (size_t i = 0; i < op.axes.size(); ++i)
        r[op.axes[i]] = o[op.axes[i]] * op.steps[i] + op.starts[i];
      break;
    case MovementOp::Kind::Expand: {
      size_t lead = out.size() - in.size();
      for (size_t d = 0; d < in.size(); ++d) r[d] = in[d] == 1 ? Expr::constant(0) : o[lead + d];
      break;
    }
    case MovementOp::Kind::Unsqueeze: {
      std::vector<int64_t> axes = op.axes;
      std::sort(axes.begin(), axes.end());
      size_t next = 0;
      for (size_t d = 0; d < out.size(); ++d)
        if (!std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(d))) r[next++] = o[d];
      break;
    }
    case MovementOp::Kind::Squeeze: {
      std::vector<int64_t> axes = op.axes;
      std::sort(axes.begin(), axes.end());
      size_t next = 0;
      for (size_t d = 0; d < in.size(); ++d)
        r[d] = std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(d)) ? Expr::constant(0) : o[next++];
      break;
    }
  }
  return IndexMap(out, std::move(r), in);
}

Result<IndexMap> chainMap(const Shape& input, std::span<const MovementOp> chain) {
  IndexMap m = IndexMap::identity(input);
  for (const MovementOp& op : chain) {
    FBL_ASSIGN(IndexMap step, movementMap(m.domain(), op));
    FBL_ASSIGN(m, compose(m, step));
  }
  return m;
}

Result<StridedView> stridedView(const Shape& input, std::span<const MovementOp> chain) {
  FBL_ASSIGN(IndexMap m, chainMap(input, chain));
  const std::vector<int64_t> strides = ir::stridesOf(input);
  Expr flat;
  for (size_t d = 0; d < input.size(); ++d) flat = flat + m.outputs()[d] * strides[d];
  // Single ops other than Reshape are affine as built; a Reshape needs its div/mod simplified.
  auto f = affineForm(flat, m.domain().size());
  if (!f) f = affineForm(simplify(flat), m.domain().size());
  if (!f)
    return makeError("{} of {}: the offset {} has no stride per dim", chainToString(chain), ir::shapeToString(input),
                     simplify(flat).str());
  return StridedView{f->constant, std::move(f->coeffs)};
}

Result<StridedView> stridedView(const Shape& input, const MovementOp& op) {
  return stridedView(input, std::span<const MovementOp>(&op, 1));
}

// ---- ONNX nodes as movement ops -------------------------------------------------------------

Result<SliceParams> normalizeSlice(const Shape& in, const std::vector<int64_t>& starts,
                                   const std::vector<int64_t>& ends, const std::vector<int64_t>& axes,
                                   const std::vector<int64_t>& steps) {
  size_t n = starts.size();
  if (ends.size() != n || (!axes.empty() && axes.size() != n) || (!steps.empty() && steps.size() != n))
    return makeError("Slice starts, ends, axes and steps differ in length");
  int64_t rank = static_cast<int64_t>(in.size());
  SliceParams p;
  std::vector<bool> seen(in.size(), false);
  for (size_t i = 0; i < n; ++i) {
    int64_t axis = axes.empty() ? static_cast<int64_t>(i) : axes[i];
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank || seen[axis])
      return makeError("Slice axis {} is out of range or repeated", axes.empty() ? static_cast<int64_t>(i) : axes[i]);
    seen[axis] = true;
    int64_t step = steps.empty() ? 1 : steps[i];
    if (step == 0) return makeError("Slice step is 0");
    int64_t dim = in[axis], start = starts[i], end = ends[i];
    // Wrap negatives first, then clamp: positive steps walk [0, dim), negative ones [-1, dim-1].
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    int64_t count;
    if (dim == 0) {
      start = end = count = 0;
    } else if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      count = end > start ? (end - start - 1) / step + 1 : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      // -(step + 1) + 1 in unsigned arithmetic: -step overflows for INT64_MIN.
      uint64_t stride = static_cast<uint64_t>(-(step + 1)) + 1;
      count = start > end ? static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) / stride) + 1 : 0;
    }
    p.axes.push_back(axis);
    p.starts.push_back(start);
    p.ends.push_back(end);
    p.steps.push_back(step);
    p.counts.push_back(count);
  }
  return p;
}

Result<MovementOp> onnxMovementOp(const ir::Node& n, const Shape& in, const IntOperand& ints, const Shape* out) {
  const int64_t rank = static_cast<int64_t>(in.size());
  if (n.op == "Reshape" || n.op == "Flatten" || n.op == "Squeeze" || n.op == "Unsqueeze") {
    if (out == nullptr) return makeError("{} needs its inferred output shape", n.op);
    return MovementOp::reshape(*out);
  }
  if (n.op == "Transpose") {
    std::vector<int64_t> perm = n.attrInts("perm");
    if (perm.empty())
      for (int64_t d = rank - 1; d >= 0; --d) perm.push_back(d);
    for (int64_t& p : perm)
      if (p < 0) p += rank;
    return MovementOp::permute(std::move(perm));
  }
  if (n.op == "Expand") {
    if (out != nullptr) return MovementOp::expand(*out);
    FBL_ASSIGN(auto target, ints(1));
    if (!target) return makeError("Expand has no shape input");
    // Two-way (numpy) broadcast: a 1 in either shape takes the other's dim.
    const size_t r = std::max(in.size(), target->size());
    Shape to(r);
    for (size_t d = 0; d < r; ++d) {
      const int64_t a = d + in.size() >= r ? in[d + in.size() - r] : 1;
      const int64_t b = d + target->size() >= r ? (*target)[d + target->size() - r] : 1;
      if (a != b && a != 1 && b != 1)
        return makeError("cannot expand {} to {}", ir::shapeToString(in), ir::shapeToString(*target));
      to[d] = a == 1 ? b : a;
    }
    return MovementOp::expand(std::move(to));
  }
  if (n.op == "Slice") {
    std::vector<std::vector<int64_t>> args(4);
    if (n.inputs.size() == 1) {  // opset < 10: attributes
      args = {n.attrInts("starts"), n.attrInts("ends"), n.attrInts("axes"), {}};
    } else {
      for (size_t i = 1; i <= 4; ++i) {
        FBL_ASSIGN(auto v, ints(i));
        if (v) {
          args[i - 1] = std::move(*v);
        } else if (i <= 2) {  // starts and ends are required from opset 10 on
          return makeError("Slice has no {} (input {})", i == 1 ? "starts" : "ends", i);
        }
      }
    }
    FBL_ASSIGN(SliceParams p, normalizeSlice(in, args[0], args[1], args[2], args[3]));
    for (size_t i = 0; i < p.axes.size(); ++i)
      if (p.counts[i] <= 1) {
        // Which step picks at most one element does not matter; 1 keeps strides from overflowing.
        p.steps[i] = 1;
        p.ends[i] = p.starts[i] + p.counts[i];
      }
    return MovementOp::slice(p.axes, p.starts, p.ends, p.steps);
  }
  return makeError("not one index map of its input ({} writes or joins data)", n.op);
}

}  // namespace fbl::layout
