#include "compiler/ops/pooling.h"

#include <algorithm>

#include <fmt/format.h>

namespace fbl::ops {

std::vector<int64_t> samePads(const std::vector<int64_t>& in, const std::vector<int64_t>& kernel,
                              const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations, bool upper) {
  const size_t k = in.size();
  std::vector<int64_t> pads(2 * k, 0);
  for (size_t i = 0; i < k; ++i) {
    const int64_t out = (in[i] + strides[i] - 1) / strides[i];
    const int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - in[i]);
    pads[i] = upper ? total / 2 : total - total / 2;
    pads[i + k] = total - pads[i];
  }
  return pads;
}

Result<std::vector<PoolAxis>> poolGeometry(const ir::Node& n, const ir::Shape& x) {
  if (x.size() < 3) return makeError("X is {}: expected [N, C, d1, ...]", ir::shapeToString(x));
  const size_t k = x.size() - 2;
  const std::vector<int64_t> kernel = n.attrInts("kernel_shape");
  if (kernel.size() != k)
    return makeError("kernel_shape has {} entries for {} spatial axes", kernel.size(), k);
  auto perAxis = [&](const char* name, int64_t dflt, size_t count) -> Result<std::vector<int64_t>> {
    std::vector<int64_t> v = n.attrInts(name, std::vector<int64_t>(count, dflt));
    if (v.size() != count) return makeError("{} has {} entries, expected {}", name, v.size(), count);
    return v;
  };
  FBL_ASSIGN(std::vector<int64_t> strides, perAxis("strides", 1, k));
  FBL_ASSIGN(std::vector<int64_t> dilations, perAxis("dilations", 1, k));
  FBL_ASSIGN(std::vector<int64_t> pads, perAxis("pads", 0, 2 * k));
  const std::string autoPad = n.attrString("auto_pad", "NOTSET");
  const bool ceil = n.attrInt("ceil_mode", 0) != 0;
  if (n.attrInt("storage_order", 0) != 0) return makeError("storage_order=1 (column-major indices) is not supported");
  std::vector<PoolAxis> axes(k);
  for (size_t i = 0; i < k; ++i) {
    PoolAxis& a = axes[i];
    a.in = x[i + 2], a.kernel = kernel[i], a.stride = strides[i], a.dilation = dilations[i];
    if (a.kernel < 1 || a.stride < 1 || a.dilation < 1)
      return makeError("kernel {}, stride {} and dilation {} of spatial axis {} must be >= 1", a.kernel, a.stride,
                       a.dilation, i);
    const int64_t extent = (a.kernel - 1) * a.dilation + 1;
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      a.out = (a.in + a.stride - 1) / a.stride;
      const int64_t total = std::max<int64_t>(0, (a.out - 1) * a.stride + extent - a.in);
      a.padBegin = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      a.padEnd = total - a.padBegin;
      continue;
    }
    if (autoPad == "NOTSET") a.padBegin = pads[i], a.padEnd = pads[i + k];
    else if (autoPad != "VALID") return makeError("auto_pad '{}' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER", autoPad);
    if (a.padBegin < 0 || a.padEnd < 0) return makeError("pads of spatial axis {} are negative", i);
    if (a.padBegin >= extent || a.padEnd >= extent)
      return makeError("pads {} and {} of spatial axis {} reach a whole window ({}): some window would see only padding",
                       a.padBegin, a.padEnd, i, extent);
    const int64_t room = a.in + a.padBegin + a.padEnd - extent;
    // ceil_mode lets one window start inside the input and run past it (PyTorch and ONNX clip it):
    // a window wider than the whole padded axis covers all of it.
    if (room < 0 && ceil && a.padBegin == 0 && a.dilation == 1) {
      a.out = 1;
      a.wholeAxis = true;
      continue;
    }
    if (room < 0)
      return makeError("spatial axis {} holds {} elements with its padding, fewer than one window ({})", i,
                       a.in + a.padBegin + a.padEnd, extent);
    a.out = (ceil ? (room + a.stride - 1) / a.stride : room / a.stride) + 1;
    if (ceil && (a.out - 1) * a.stride >= a.in + a.padBegin) --a.out;
  }
  return axes;
}

std::vector<double> averagePoolDivisors(const std::vector<PoolAxis>& axes, bool countIncludePad) {
  std::vector<std::vector<double>> perAxis;
  size_t total = 1;
  for (const PoolAxis& a : axes) {
    std::vector<double> d(static_cast<size_t>(a.out));
    for (int64_t o = 0; o < a.out; ++o) {
      int64_t count = 0;
      for (int64_t t = 0; t < a.kernel; ++t) {
        const int64_t at = o * a.stride + t * a.dilation - a.padBegin;  // in input coordinates
        count += countIncludePad ? at < a.in + a.padEnd : at >= 0 && at < a.in;
      }
      d[static_cast<size_t>(o)] = static_cast<double>(count);
    }
    total *= d.size();
    perAxis.push_back(std::move(d));
  }
  std::vector<double> out(total, 1.0);
  for (size_t e = 0; e < total; ++e) {
    size_t rest = e;
    for (size_t i = axes.size(); i-- > 0;) {
      out[e] *= perAxis[i][rest % perAxis[i].size()];
      rest /= perAxis[i].size();
    }
  }
  return out;
}

}  // namespace fbl::ops
