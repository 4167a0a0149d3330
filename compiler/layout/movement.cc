#include "compiler/layout/movement.h"

#include <algorithm>

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
        int64_t a = op.axes[i], b = op.starts[i], e = op.ends[i], s = op.steps[i];
        if (s < 1 || b < 0 || e > in[a] || b >= e)
          return makeError("{} of {}: needs 0 <= start < end <= dim and step > 0", op.str(), ir::shapeToString(in));
        out[a] = (e - b + s - 1) / s;
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
        if (d < 1) return makeError("{} of {}: dims must be positive", op.str(), ir::shapeToString(in));
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

}  // namespace fbl::layout
