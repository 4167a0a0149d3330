// The training flag the dynamo exporter drops. A BatchNorm of a model exported in train mode
// computes with the batch's statistics in PyTorch, but its ONNX BatchNormalization carries no
// `training_mode` attribute, which ONNX reads as inference mode (the running statistics). The
// node's `pkg.torch.onnx.fx_node` metadata still names the ATen call, with its `training`
// argument (the sixth of every batch-norm overload):
//   %_native_batch_norm_legit_functional : ... (args = (%x, %p_bn_weight, %p_bn_bias,
//       %b_bn_running_mean, %b_bn_running_var, True, 0.1, 1e-05), ...)
// restoreBatchNormTraining sets training_mode=1 on every BatchNormalization whose call trained,
// so fbl trains what PyTorch computed the loss of. An eval-mode export
// (`_native_batch_norm_legit_no_training`), or a node without metadata, keeps the file's mode.
// A training call that the exporter's optimizer folded into a Conv (optimize=True does, with the
// running statistics) cannot be trained as PyTorch did: an error naming the node.
#pragma once

#include <string_view>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/onnx/export_names.h"
#include "compiler/support/result.h"

namespace fbl::onnx {

// Whether the fx call ran a batch norm with batch statistics; false for anything else.
bool fxBatchNormTrains(std::string_view fxNode);

// `origins[i]` belongs to g.nodes[i]. Returns how many nodes were switched to training mode.
Result<int> restoreBatchNormTraining(ir::Graph& g, const std::vector<NodeOrigin>& origins);

// The running statistics a train-mode BatchNormalization updates are its module's buffers, but
// the exporter's optimizer merges equal initializers: every freshly initialised BatchNorm then
// reads one shared zero mean and one unit variance. From the node's metadata (its module's name
// scope, checked against the buffer names its fx call passes), each such node gets an
// initializer of its own, named as PyTorch names the buffer ("<module>.running_mean"), holding
// the same starting values. A module called twice keeps one buffer, updated twice. Returns how
// many inputs were given their own buffer.
int separateBatchNormBuffers(ir::Graph& g, const std::vector<NodeOrigin>& origins);

}  // namespace fbl::onnx
