#include "compiler/ops/resize_sampling.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace fbl::ops {

namespace {

// The sampling tables hold an entry per output element of an axis: an axis longer than this
// (no image or feature map is) is refused rather than tabulated.
constexpr int64_t kMaxAxis = int64_t{1} << 24;

// The input coordinate output element o maps to (ONNX's coordinate_transformation_mode); `scale`
// is out / in as given, or as the sizes imply.
double sourceCoordinate(const std::string& mode, int64_t o, int64_t in, int64_t out, double scale) {
  if (mode == "align_corners") return out == 1 ? 0.0 : static_cast<double>(o) * static_cast<double>(in - 1) / static_cast<double>(out - 1);
  if (mode == "asymmetric") return static_cast<double>(o) / scale;
  if (mode == "pytorch_half_pixel" && out == 1) return 0.0;
  return (static_cast<double>(o) + 0.5) / scale - 0.5;  // half_pixel, pytorch_half_pixel
}

int64_t nearestIndex(const std::string& mode, double x) {
  if (mode == "floor") return static_cast<int64_t>(std::floor(x));
  if (mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  const double f = std::floor(x);
  if (x - f == 0.5) return static_cast<int64_t>(mode == "round_prefer_ceil" ? f + 1 : f);
  return static_cast<int64_t>(std::round(x));  // round_prefer_floor (the default), round_prefer_ceil
}

Status checkAttributes(const ir::Node& n) {
  const std::string mode = n.attrString("mode", "nearest");
  if (mode != "nearest" && mode != "linear")
    return makeError("mode '{}' is not supported (nearest, linear)", mode);
  const std::string ctm = n.attrString("coordinate_transformation_mode", "half_pixel");
  if (ctm != "half_pixel" && ctm != "pytorch_half_pixel" && ctm != "align_corners" && ctm != "asymmetric")
    return makeError("coordinate_transformation_mode '{}' is not supported (half_pixel, pytorch_half_pixel, "
                     "align_corners, asymmetric)", ctm);
  const std::string nearest = n.attrString("nearest_mode", "round_prefer_floor");
  if (nearest != "round_prefer_floor" && nearest != "round_prefer_ceil" && nearest != "floor" && nearest != "ceil")
    return makeError("nearest_mode '{}' is not one of round_prefer_floor, round_prefer_ceil, floor, ceil", nearest);
  if (n.attrInt("antialias", 0) != 0) return makeError("antialias=1 is not supported");
  const std::string policy = n.attrString("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch") return makeError("keep_aspect_ratio_policy '{}' is not supported (stretch)", policy);
  return Status::success();
}

}  // namespace

Result<ResizeSampling> resizeSampling(const ir::Node& n, const ir::Shape& in, const ir::Tensor* scalesIn,
                                      const ir::Tensor* sizesIn) {
  FBL_TRY(checkAttributes(n));
  const bool byScales = scalesIn != nullptr && scalesIn->numel() > 0;
  const bool bySizes = sizesIn != nullptr && sizesIn->numel() > 0;
  if (byScales == bySizes) return makeError("exactly one of scales and sizes must be given");
  if (byScales && (!ir::isFloat(scalesIn->dtype()) || scalesIn->rank() != 1))
    return makeError("scales must be a 1-D float tensor");
  if (bySizes && (sizesIn->dtype() != ir::DType::I64 || sizesIn->rank() != 1))
    return makeError("sizes must be a 1-D i64 tensor");
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (byScales)
    for (int64_t i = 0; i < scalesIn->numel(); ++i) scales.push_back(scalesIn->at(i));
  if (bySizes) sizes = sizesIn->toInt64s();
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> axes = n.attrInts("axes");
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  std::vector<bool> seen(rank, false);
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return makeError("axis {} is out of range for rank {}", a, rank);
    if (a < 0) a += rank;
    if (seen[a]) return makeError("axis {} is listed twice", a);
    seen[a] = true;
  }
  const size_t given = byScales ? scales.size() : sizes.size();
  if (given != axes.size())
    return makeError("{} has {} entries for {} axes", byScales ? "scales" : "sizes", given, axes.size());
  const std::string mode = n.attrString("mode", "nearest");
  const std::string ctm = n.attrString("coordinate_transformation_mode", "half_pixel");
  const std::string nearest = n.attrString("nearest_mode", "round_prefer_floor");
  ResizeSampling s;
  s.outShape = in;
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t d = axes[k], len = in[d];
    int64_t out = 0;
    double scale = 0;
    if (byScales) {
      scale = scales[k];
      if (!(scale > 0) || !std::isfinite(scale)) return makeError("scale {} must be positive", scale);
      const double o = std::floor(static_cast<double>(len) * scale);
      if (o > static_cast<double>(kMaxAxis)) return makeError("scale {} makes axis {} longer than {}", scale, d, kMaxAxis);
      out = static_cast<int64_t>(o);
    } else {
      out = sizes[k];
      if (out < 0 || out > kMaxAxis) return makeError("size {} of axis {} is outside [0, {}]", out, d, kMaxAxis);
      scale = len > 0 ? static_cast<double>(out) / static_cast<double>(len) : 1.0;
    }
    s.outShape[d] = out;
    if (len == 0 || out == 0) return makeError("axis {} resizes {} elements to {}: nothing to sample", d, len, out);
    ResizeAxis ax;
    ax.axis = d;
    bool identity = out == len;
    for (int64_t o = 0; o < out; ++o) {
      const double x = sourceCoordinate(ctm, o, len, out, scale);
      if (mode == "nearest") {
        ax.index0.push_back(std::clamp<int64_t>(nearestIndex(nearest, x), 0, len - 1));
      } else {
        const double f = std::floor(x);
        ax.index0.push_back(std::clamp<int64_t>(static_cast<int64_t>(f), 0, len - 1));
        ax.index1.push_back(std::clamp<int64_t>(static_cast<int64_t>(f) + 1, 0, len - 1));
        ax.weight1.push_back(static_cast<float>(x - f));
        if (ax.index0.back() == ax.index1.back()) ax.weight1.back() = 0.0f;  // clamped at an edge
        identity = identity && ax.weight1.back() == 0.0f;
      }
      identity = identity && ax.index0.back() == o;
    }
    if (!identity) s.axes.push_back(std::move(ax));
  }
  return s;
}

}  // namespace fbl::ops
