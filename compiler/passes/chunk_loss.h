// chunk-loss and schedule-loss-chunks: a language model's head and cross-entropy run a chunk of
// rows at a time, and each chunk's gradient is taken as soon as its loss is, so the
// [tokens x vocab] logits and their gradient never exist whole (Liger's fused linear + loss, in
// the graph). Under --strategy fblayout only (the baselines keep the whole logits);
// --loss-chunk-rows sets the chunk, --disable-pass turns either half off.
//
// chunk-loss, on the forward graph before autodiff:
//   1. Match each SoftmaxCrossEntropyLoss (mean or sum, no weights, no log_prob output) whose
//      scores [N, V] come from MatMul(h, W) through Reshapes of the leading axes and elementwise
//      ops with no other operand or a frozen one that is a scalar (Gemma's softcap c * tanh(x / c))
//      or a [V] vector (an MLM head's bias), each value read once. W must not depend on a trainable (the head is frozen under LoRA), so the chunks
//      need no weight gradient, and the logits must not be a graph output (--outputs keeps them).
//   2. With N > rows: h becomes [N, D] and is Split into chunks of `rows` rows (the last shorter),
//      and so are the labels. Each chunk runs the product, the elementwise chain and a
//      SoftmaxCrossEntropyLoss with reduction "sum"; the sums are added. "mean" divides by the
//      count of labels not equal to ignore_index (N without one), as ONNX and PyTorch do.
//   3. The new nodes take the old loss node's place in the topological order, and the loss keeps
//      its value, so the graph's output is unchanged.
// The chunks compute the same values as the whole; only the order of the loss's sum differs.
//
// schedule-loss-chunks, on the joint graph after autodiff and recompute:
//   4. A backward node that reads a chunk's vocabulary-wide value (its logits, scores, or a
//      gradient of one of them) moves to right after its inputs are computed, with the backward
//      nodes it needs (the loss gradient's scale, seed / count). So each chunk's gradient of the
//      hidden state, dL/dh_c = dL/dlogits_c W^T ([rows, D]), is taken in the forward pass right
//      after the chunk's loss, and the chunk's logits and their gradient die there.
//   5. The moved nodes run in the forward phase (an evaluation step computes them too: one more
//      head product per chunk); the rest of the backward reads dL/dh_c.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/support/result.h"

namespace fbl::passes {

// A chunk's logits of at most this many bytes when --loss-chunk-rows is auto: the rows that fit,
// in whole multiples of kLossChunkRowMultiple (a tiled product's row tile divides it).
inline constexpr int64_t kLossChunkBytes = int64_t{32} << 20;
inline constexpr int64_t kLossChunkRowMultiple = 64;

// --loss-chunk-rows: "auto" (-1), "0" (off), or a positive row count; an error for anything else.
Result<int64_t> parseLossChunkRows(const std::string& text);

class ChunkLoss {
 public:
  static constexpr std::string_view name() { return "chunk-loss"; }
  Result<bool> run(ir::Graph& g);

  int64_t rows = -1;                        // per chunk; -1: auto (kLossChunkBytes), 0: off
  std::vector<std::string> trainableGlobs;  // a head that depends on a trainable is left whole

  struct Chunked {
    std::string loss;         // the loss node's name
    int64_t rows = 0, chunks = 0, tokens = 0, vocab = 0;
    std::vector<ir::ValueId> wide;  // every chunk's values of the logits' shape
  };
  const std::vector<Chunked>& chunked() const { return chunked_; }
  // A later rewrite computes part of wide value `of` as `part` (split-rows' head products): the
  // part is one of that chunk's wide values too.
  void addWide(ir::ValueId of, ir::ValueId part);
  std::string summary() const;  // "1 loss in 8 chunks of 64 rows (512 x 128256 logits)"

 private:
  std::vector<Chunked> chunked_;
};

class ScheduleLossChunks {
 public:
  explicit ScheduleLossChunks(const ChunkLoss& chunks) : chunks_(chunks) {}
  static constexpr std::string_view name() { return "schedule-loss-chunks"; }
  Result<bool> run(ir::Graph& g);

  int64_t moved() const { return moved_; }  // backward nodes now in the forward phase

 private:
  const ChunkLoss& chunks_;
  int64_t moved_ = 0;
};

}  // namespace fbl::passes
