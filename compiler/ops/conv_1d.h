// A 1-D Conv, X [N, C, L] and W [M, C / group, K], is the 2-D Conv of X [N, C, 1, L] and
// W [M, C / group, 1, K]: a kernel of height 1, with stride and dilation 1 and no padding along
// that axis. The shape rule, the reference kernel and decompose-ops (which runs it on the device
// as Unsqueeze, 2-D Conv, Squeeze, whose kernels, layouts and gradients exist) share this mapping,
// so the three cannot disagree on what a 1-D Conv computes.
#pragma once

#include "compiler/ir/graph.h"

namespace fbl::ops {

// Both X and W have rank 3.
bool isConv1d(const ir::Shape& x, const ir::Shape& w);

// `n` with the attributes of the equivalent 2-D Conv: kernel_shape [k] -> [1, k], strides [s] ->
// [1, s], dilations [d] -> [1, d], pads [b, e] -> [0, b, 0, e]; auto_pad and group as they are.
// An attribute of the wrong length is kept as it is, for the 2-D rule to refuse.
ir::Node conv1dAs2d(const ir::Node& n);

}  // namespace fbl::ops
