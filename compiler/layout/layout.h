// Layout: where every element of a tensor lives. An immutable value: a logical shape, a
// storage kind, and an IndexMap (index_map.h) from the logical index to the physical location
//
//   Buffer:  (offset)         offset into a linear buffer of bufferSize() elements
//   Image2D: (x, y, lane)     texel (x, y) of an RGBA image, lane 0..3 inside the texel
//
// Worked examples (i0, i1 are the logical indices; printed by str()):
//
//   rowMajor([2, 3])                    buffer[6]  offset = i0 * 3 + i1
//   permuted([2, 3], {1, 0})            buffer[6]  offset = i1 * 2 + i0   (stored transposed)
//   image([4, 8])                       image 2x4  x = i1 / 4, y = i0, lane = i1 % 4
//   rtile([64, 128], 32 x 64 tiles, row strips)    image 32x64
//       x = i1 / 4, y = i0      (row strips tile a plain image: tiles add no arithmetic)
//   rtile([64, 128], 32 x 64, kRowsAlongX)          image 32x64
//       x = i0 / 32 * 16 + i1 / 4 % 16, y = i1 / 64 * 32 + i0 % 32, lane = i1 % 4
//
// R-Tile (paper Sec. 4.2): the last two dims are a [rows x cols] matrix (earlier dims are a
// batch of matrices stacked vertically), padded up to whole tile_h x tile_w tiles. Inside a
// tile, an lh x lw element block is folded row-major into a blockH x blockW texel block (RGBA
// lane = 4 consecutive elements along cols); row strips are the case lh = 1, lw = tile_w. Tiles
// go row-major on a grid, tile columns along x (or tile rows along x, for reductions that walk
// rows). This mirrors rtile.h's RTileLayout::map so R-Tile choices can become Layouts.
//
// Movement ops return the layout the consumer sees: compose(producer, view) substitutes the
// view's index map, so `layout.reshape(s).transpose(p)` is the consumer's read map, simplified.
// Equality is structural on the simplified maps (equal maps may print differently only when the
// simplifier misses an identity; tests compare element by element as well).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "compiler/layout/index_map.h"
#include "compiler/layout/movement.h"

namespace fbl::layout {

enum class Storage { Buffer, Image2D };

// How a buffer's bytes hold its float elements. Plain: one f32 each. A frozen weight may be
// stored narrower (`fblc compile --base-weights`, compiler/quant/base_weights.h): fp16, or
// signed 8- or 4-bit integers times an fp16 scale per `group` consecutive elements along `axis`
// of the stored [rows x cols] matrix, the scales after the integers (planfile::encodedBytes).
// Readers dequantize in registers; the offsets a layout's map gives count elements, not bytes.
struct Encoding {
  int bits = 32;       // 32 plain f32, 16 fp16, 8 or 4 integers with scales
  int64_t group = 0;   // elements per scale (8 and 4 bits)
  int axis = 1;        // the matrix axis a group runs along
  int64_t rows = 0, cols = 0;
  bool plain() const { return bits == 32; }
  bool scaled() const { return bits == 8 || bits == 4; }
  std::string str() const;  // "f32", "fp16", "int4 g32 along cols"
  friend bool operator==(const Encoding& a, const Encoding& b) {
    return a.bits == b.bits && a.group == b.group && a.axis == b.axis && a.rows == b.rows && a.cols == b.cols;
  }
};

constexpr int64_t kLanes = 4;  // RGBA

struct TileSpec {
  int64_t tileH = 0, tileW = 0;  // elements; tileW a multiple of 4 for images
  // Intra-tile fold: an lh x lw element block into a blockH x blockW texel block
  // (lh * lw == 4 * blockH * blockW). 0 means row strips (lh = 1, lw = tileW).
  int64_t lh = 0, lw = 0, blockH = 0, blockW = 0;
  bool rowsAlongX = false;  // inter-tile: tile rows along x instead of tile columns

  static TileSpec rowStrips(int64_t h, int64_t w) { return {h, w, 0, 0, 0, 0, false}; }
  static TileSpec blocks(int64_t h, int64_t w, int64_t lh, int64_t lw, int64_t bh, int64_t bw) {
    return {h, w, lh, lw, bh, bw, false};
  }
  std::string str() const;  // "32x64 strips", "32x64 blocks 8x16->2x16"
};

// How a W x H texel grid that exceeds the device's image extent still fits it: cut into bands
// of `band` rows laid side by side along x (alongX), or of `band` columns stacked down y: as few
// bands as the extent allows, of equal length. Bands are multiples of the alignment (an R-Tile's
// tile rectangle), so no tile straddles two bands.
struct ImageWrap {
  bool alongX = true;
  int64_t band = 0;
  int64_t width = 0, height = 0;  // the wrapped image
};
// nullopt when W x H fits as it is or cannot be made to fit.
std::optional<ImageWrap> imageWrap(int64_t w, int64_t h, int64_t alignW, int64_t alignH, int64_t maxW, int64_t maxH);
bool fitsImage(int64_t w, int64_t h, int64_t alignW, int64_t alignH, int64_t maxW, int64_t maxH);

class Layout {
 public:
  static Layout rowMajor(const Shape& shape);
  // Stored as the tensor permuted by perm, row-major: physical dim k is logical dim perm[k].
  static Result<Layout> permuted(const Shape& shape, const std::vector<int64_t>& perm);
  // A plain RGBA image: x = last dim / 4, y = all other dims flattened, lane = last dim % 4.
  static Layout image(const Shape& shape);
  // TFLite's GPU delegate TEXTURE_2D over [..., H, W, C] (the dims before H flattened into B):
  // x = w * B + b, y = h * ceil(C / 4) + c / 4, lane = c % 4. A matrix [W, C] is H = B = 1.
  static Layout texture(const Shape& shape);
  // R-Tile on an image (storage Image2D) or tile-major in a buffer (storage Buffer: tiles in
  // the same grid order, each tile's elements row-major).
  static Result<Layout> rtile(const Shape& shape, const TileSpec& spec, Storage storage = Storage::Image2D);

  // An Image2D layout on an image of at most maxW x maxH texels (imageWrap): itself when it
  // fits, else its texel grid cut into bands that sit side by side; an error when no wrap fits.
  Result<Layout> fitImage(int64_t maxW, int64_t maxH, int64_t alignW, int64_t alignH) const;

  Storage storage() const { return storage_; }
  // A row-major buffer of a matrix whose bytes hold `e` (e.rows x e.cols is the shape); every
  // layout composed from it keeps the encoding.
  static Result<Layout> encodedMatrix(const Encoding& e);
  const Encoding& encoding() const { return encoding_; }
  const Shape& shape() const { return map_.domain(); }
  const IndexMap& map() const { return map_; }
  // Physical extents: Buffer {elements}; Image2D {width, height, 4}.
  const Shape& physicalShape() const { return map_.codomain(); }
  int64_t bufferSize() const;   // Buffer
  int64_t imageWidth() const;   // Image2D
  int64_t imageHeight() const;  // Image2D

  std::vector<int64_t> locate(std::span<const int64_t> index) const { return map_.apply(index); }

  // The consumer's view through a movement map from its index to this layout's logical index.
  Result<Layout> compose(const IndexMap& view) const;
  Result<Layout> apply(const MovementOp& op) const;
  Result<Layout> apply(std::span<const MovementOp> chain) const;
  Result<Layout> reshape(const Shape& s) const { return apply(MovementOp::reshape(s)); }
  Result<Layout> transpose(const std::vector<int64_t>& perm) const { return apply(MovementOp::permute(perm)); }
  // The last two dims swapped (a matrix read transposed); an error below rank 2.
  Result<Layout> transposeLastTwo() const;

  // Physical location -> logical index, where the map is a bijection onto its image.
  Result<IndexMap> inverse() const { return map_.inverse(); }

  friend bool operator==(const Layout& a, const Layout& b) {
    return a.storage_ == b.storage_ && a.map_ == b.map_ && a.encoding_ == b.encoding_;
  }
  std::string str() const;

 private:
  Layout(Storage s, IndexMap m, Encoding e = {}) : storage_(s), map_(std::move(m)), encoding_(e) {}
  Storage storage_ = Storage::Buffer;
  IndexMap map_;
  Encoding encoding_;
};

}  // namespace fbl::layout
