// ONNX Resize as separable sampling, one resized axis at a time: output element o of an axis
// reads input element index0[o] (nearest), or index0[o] and index1[o] weighted 1 - weight1[o] and
// weight1[o] (linear). The reference kernel (ref/kernels_shape.cc) and decompose-ops (Gathers,
// Muls and an Add per axis) both sample through it, so they agree by construction; the tests
// check it against ONNX's reference implementation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::ops {

struct ResizeAxis {
  int64_t axis = 0;
  std::vector<int64_t> index0, index1;  // per output element; index1 empty for nearest
  std::vector<float> weight1;           // linear: the weight of index1 (index0 gets 1 - it)
};

struct ResizeSampling {
  ir::Shape outShape;
  std::vector<ResizeAxis> axes;  // only the axes whose sampling is not the identity
};

// The sampling of node `n` (a Resize) for input shape `in`, given its constant scales (float) or
// sizes (integer) inputs; null or empty is absent, and exactly one must be present. Supported: mode nearest and linear, coordinate
// transformation half_pixel, pytorch_half_pixel, align_corners and asymmetric, every
// nearest_mode, antialias 0, keep_aspect_ratio_policy stretch; a resized axis of at most 2^24
// elements. An error is one line without the node's name (the callers add it).
Result<ResizeSampling> resizeSampling(const ir::Node& n, const ir::Shape& in, const ir::Tensor* scales,
                                      const ir::Tensor* sizes);

}  // namespace fbl::ops
