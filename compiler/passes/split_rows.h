// split-rows: a frozen matrix larger than the device's largest allocation (Gemma2's 256000 x 2304
// embedding, 2.36 GB in fp32, against an Adreno's 1 GiB) becomes row blocks, each an initializer
// of its own that fits, so that the memory plan can place it (plan/memory_planner.h: no tensor
// straddles a pool). On the forward graph, after chunk-loss and before autodiff, under every
// strategy; it changes nothing unless the profile gives max_alloc_bytes and a matrix exceeds it.
//
//   1. A candidate is a float initializer [R, C] that does not depend on a trainable, whose
//      stored bytes (at the --base-weights encoding it would get) exceed the limit, and whose
//      every reader is a Gather along its rows (an embedding) or a Transpose [1, 0] that only
//      MatMul B operands read (a language model's head, tied or not). Otherwise it is left whole,
//      and the plan's limit check names it.
//   2. It becomes blocks W_k of at most `rows` rows ("NAME.rows.A-B"), their data the rows of
//      the original (in memory, or the same external file at the rows' offset). The weights file
//      holds the blocks; collectWeights slices them (Compiled::rowBlocks, the plan's explain).
//   3. A head product x W^T becomes Concat_k(x W_k^T) along its last axis; a chunked loss
//      (chunk_loss.h) counts each part as one of its chunk's wide values.
//   4. An embedding Gather(W, ids) becomes the sum over blocks of Where(A <= ids < B,
//      Gather(W_k, Where(A <= ids < B, ids - A, 0)), 0): each id reads its row from its block.
//      The ids no longer reach a Gather of the whole table, so the bound the runtime checks them
//      against ([0, R)) is kept here (lostBounds) and added to the plan's input checks.
// Every value keeps its id and meaning; only how the matrix is stored changes. The result is the
// same values, added with zeros.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/analysis/input_bounds.h"
#include "compiler/ir/graph.h"
#include "compiler/passes/chunk_loss.h"
#include "compiler/quant/base_weights.h"
#include "compiler/support/result.h"

namespace fbl::passes {

class SplitRows {
 public:
  explicit SplitRows(ChunkLoss& chunks) : chunks_(chunks) {}
  static constexpr std::string_view name() { return "split-rows"; }
  Result<bool> run(ir::Graph& g);

  int64_t maxBytes = 0;                     // the profile's max_alloc_bytes; 0: no limit
  quant::BaseWeights base;                  // --base-weights: the bytes a matrix will take
  std::vector<std::string> trainableGlobs;  // a trainable is never split

  struct Block {
    std::string name, of;  // the block, and the initializer it is rows of
    int64_t row = 0, rows = 0;
  };
  const std::vector<Block>& blocks() const { return blocks_; }
  // Input bounds the rewritten Gathers no longer show, by graph input.
  const std::map<ir::ValueId, std::vector<analysis::InputBound>>& lostBounds() const { return lost_; }
  std::string summary() const;  // "1 matrix in 3 row blocks (m.embed: 111000 rows each)"

 private:
  ChunkLoss& chunks_;
  std::vector<Block> blocks_;
  std::map<ir::ValueId, std::vector<analysis::InputBound>> lost_;
  std::vector<std::string> split_;  // per matrix: "NAME: K blocks of N rows"
};

}  // namespace fbl::passes
