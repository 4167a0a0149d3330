// Sequence ops rewritten into tensor ops before import (the IR has no sequence values). PyTorch's
// exporter emits them for torch.split / chunk / unbind and list indexing with optimize=False
// (GPT-2's and Phi-3's fused qkv); the rewrite:
//  1. SplitToSequence(x, split?){axis, keepdims} records a split of x: parts of the sizes of a
//     constant 1-D split, of a constant scalar split's size (the last part what remains), or of
//     size 1 (no split; keepdims=0 then squeezes the axis out). SequenceConstruct(t...) records
//     its tensors. Both nodes go.
//  2. SequenceAt(seq, p), p a constant: Slice(x, [start], [end], [axis]) of part p (then
//     Squeeze for a squeezing split), or Identity(t_p) of a construct. The part count of a scalar
//     split depends on x's shape, unknown here, so a negative p is refused there.
//  3. ConcatFromSequence(seq){axis, new_axis}: of a construct, Concat (of Unsqueezes when
//     new_axis=1); of a split, joined back along the axis it was cut on, Identity(x); otherwise,
//     with the part count known, each part as in 2 and then the Concat.
//  4. SequenceLength(seq) with the part count known: a Constant.
//  5. Any other reader of a sequence, or a sequence the graph outputs, is an error naming the node.
// A rewritten node keeps its name, its output and the proto's unknown fields (the exporter's
// metadata); the constants it needs are new Constant nodes named after it.
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

#include "compiler/support/result.h"

namespace fbl::onnx {

// Rewrites `g` in place; `file` names the model in errors.
Status rewriteSequenceOps(::onnx::GraphProto* g, const std::string& file);

}  // namespace fbl::onnx
