// `fbl-bench matmul --sweep`: every candidate tiling of the profile's "matmul" block (and every
// --tile given) on the products a LoRA step runs: Figure 16's forward and both backward products,
// the lm_head's forward and input gradient, the rank-r LoRA products at the attention's width
// (2048) and the MLP's narrow ones at its width (8192, 16 MB each). Per product and
// candidate it times split-K 1 and the cost model's split for that candidate, and prints the
// measured time beside the model's estimate, the efficiency the measurement implies (what the
// profile's "efficiency" should say), and whether the model's overall choice was the fastest
// measured. Products the profile sends to the narrow kernel (matmul.narrow) are also timed there,
// at the profile's settings and around them, beside their floor on this device: one launch that
// streams the same bytes, and an empty launch. Operands are row-major buffers or plain images
// (--storage); results are checked on sampled entries against a double-precision host sum.
#pragma once

#include <string>
#include <vector>

namespace fbl::bench {

struct MatmulSweepOptions {
  int device = -1;
  std::string profile;               // default: by device
  std::vector<std::string> tiles;    // extra candidates "TMxTNxTK/RMxRN[:pipeline]"
  std::string storage = "buffer";    // "buffer" or "image"
  int rank = 8;                      // LoRA rank of the narrow products
  int runs = 5;
  std::string only;                  // products whose name contains this (default: all)
  int scale = 1;                     // divide every extent but the rank (CPU devices)
  std::string json;                  // write the JSON report here
};

int runMatmulSweep(const MatmulSweepOptions& o);

}  // namespace fbl::bench
