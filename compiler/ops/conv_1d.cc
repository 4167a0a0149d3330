#include "compiler/ops/conv_1d.h"

namespace fbl::ops {

bool isConv1d(const ir::Shape& x, const ir::Shape& w) { return x.size() == 3 && w.size() == 3; }

ir::Node conv1dAs2d(const ir::Node& n) {
  ir::Node out = n;
  auto widen = [&](const char* name, int64_t outer) {
    if (!n.hasAttr(name)) return;
    const std::vector<int64_t> v = n.attrInts(name);
    if (v.size() == 1) out.attrs[name] = std::vector<int64_t>{outer, v[0]};
  };
  widen("kernel_shape", 1);
  widen("strides", 1);
  widen("dilations", 1);
  if (n.hasAttr("pads")) {
    const std::vector<int64_t> p = n.attrInts("pads");
    if (p.size() == 2) out.attrs["pads"] = std::vector<int64_t>{0, p[0], 0, p[1]};
  }
  return out;
}

}  // namespace fbl::ops
