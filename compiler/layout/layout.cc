#include "compiler/layout/layout.h"

#include <algorithm>

#include "compiler/layout/simplify.h"
#include "compiler/support/int_math.h"

namespace fbl::layout {

namespace {

// Row-major flattening of vars [from, to) of a shape.
Expr flatten(const std::vector<Expr>& v, const Shape& s, size_t from, size_t to) {
  Expr f;
  int64_t stride = 1;
  for (size_t d = to; d-- > from;) {
    f = f + v[d] * stride;
    stride *= s[d];
  }
  return f;
}

// Product of dims [from, to); division by a dim would fail on empty tensors.
int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t d = from; d < to; ++d) p *= s[d];
  return p;
}

}  // namespace

std::string TileSpec::str() const {
  std::string s = std::to_string(tileH) + "x" + std::to_string(tileW);
  if (lh == 0) s += " strips";
  else s += " blocks " + std::to_string(lh) + "x" + std::to_string(lw) + "->" + std::to_string(blockH) + "x" +
            std::to_string(blockW);
  return s + (rowsAlongX ? " rows-along-x" : "");
}

Layout Layout::rowMajor(const Shape& shape) {
  std::vector<Expr> v = IndexMap::vars(shape);
  return Layout(Storage::Buffer, IndexMap(shape, {flatten(v, shape, 0, shape.size())}, {ir::numElements(shape)}));
}

std::string Encoding::str() const {
  if (bits == 32) return "f32";
  if (bits == 16) return "fp16";
  return "int" + std::to_string(bits) + " g" + std::to_string(group) + (axis == 0 ? " along rows" : " along cols");
}

Result<Layout> Layout::encodedMatrix(const Encoding& e) {
  const bool bitsOk = e.bits == 16 || e.scaled();
  if (!bitsOk || e.rows < 1 || e.cols < 1 || (e.axis != 0 && e.axis != 1) ||
      (e.scaled() && (e.group < 1 || (e.axis == 0 ? e.rows : e.cols) % e.group != 0)))
    return makeError("layout: encoding {} does not fit a {}x{} matrix", e.str(), e.rows, e.cols);
  Layout l = rowMajor({e.rows, e.cols});
  l.encoding_ = e;
  return l;
}

Result<Layout> Layout::permuted(const Shape& shape, const std::vector<int64_t>& perm) {
  FBL_ASSIGN(Shape phys, outputShape(shape, MovementOp::permute(perm)));
  std::vector<Expr> v = IndexMap::vars(shape), pv;
  for (int64_t p : perm) pv.push_back(v[p]);
  return Layout(Storage::Buffer, IndexMap(shape, {flatten(pv, phys, 0, phys.size())}, {ir::numElements(shape)}));
}

Layout Layout::image(const Shape& shape) {
  FBL_ASSERT(!shape.empty());
  std::vector<Expr> v = IndexMap::vars(shape);
  const size_t n = shape.size();
  Expr c = v[n - 1];
  Expr y = flatten(v, shape, 0, n - 1);
  int64_t height = product(shape, 0, n - 1);
  return Layout(Storage::Image2D, IndexMap(shape, {floorDiv(c, kLanes), y, floorMod(c, kLanes)},
                                           {ceilDiv(shape[n - 1], kLanes), height, kLanes}));
}

Layout Layout::texture(const Shape& shape) {
  FBL_ASSERT(!shape.empty());
  std::vector<Expr> v = IndexMap::vars(shape);
  const size_t n = shape.size();
  const Expr c = v[n - 1];
  const Expr w = n >= 2 ? v[n - 2] : Expr::constant(0);
  const Expr h = n >= 3 ? v[n - 3] : Expr::constant(0);
  const int64_t C = shape[n - 1], W = n >= 2 ? shape[n - 2] : 1, H = n >= 3 ? shape[n - 3] : 1;
  const int64_t B = n >= 4 ? product(shape, 0, n - 3) : 1;
  const Expr b = n >= 4 ? flatten(v, shape, 0, n - 3) : Expr::constant(0);
  const int64_t slices = ceilDiv(C, kLanes);
  return Layout(Storage::Image2D,
                IndexMap(shape, {w * B + b, h * slices + floorDiv(c, kLanes), floorMod(c, kLanes)},
                         {W * B, H * slices, kLanes})
                    .simplified());
}

std::optional<ImageWrap> imageWrap(int64_t w, int64_t h, int64_t alignW, int64_t alignH, int64_t maxW, int64_t maxH) {
  if (w <= maxW && h <= maxH) return std::nullopt;
  auto tryWrap = [&](bool alongX) -> std::optional<ImageWrap> {
    // Cut the long side into as few bands as the limit allows, each of equal aligned rows
    // (columns): bands as long as the limit would leave the last one mostly empty (Gemma2's
    // [2304, 9216] weights 18432 texels long in two bands of 16384 were 1.78x their bytes).
    const int64_t along = alongX ? h : w, across = alongX ? w : h;
    const int64_t limitAlong = alongX ? maxH : maxW, limitAcross = alongX ? maxW : maxH;
    const int64_t align = std::max<int64_t>(1, alongX ? alignH : alignW);
    const int64_t longest = limitAlong / align * align;
    if (longest <= 0) return std::nullopt;
    const int64_t bands = ceilDiv(along, longest);
    const int64_t band = ceilDiv(ceilDiv(along, bands), align) * align;
    if (across * bands > limitAcross) return std::nullopt;
    ImageWrap wr{alongX, band, alongX ? w * bands : band, alongX ? band : h * bands};
    return wr;
  };
  if (h > maxH) return tryWrap(true);
  return tryWrap(false);
}

bool fitsImage(int64_t w, int64_t h, int64_t alignW, int64_t alignH, int64_t maxW, int64_t maxH) {
  return (w <= maxW && h <= maxH) || imageWrap(w, h, alignW, alignH, maxW, maxH).has_value();
}

Result<Layout> Layout::fitImage(int64_t maxW, int64_t maxH, int64_t alignW, int64_t alignH) const {
  if (storage_ != Storage::Image2D) return makeError("layout {}: only images have an extent to fit", str());
  const int64_t w = imageWidth(), h = imageHeight();
  if (w <= maxW && h <= maxH) return *this;
  const std::optional<ImageWrap> wr = imageWrap(w, h, alignW, alignH, maxW, maxH);
  if (!wr)
    return makeError("image {}x{} of {} does not fit {}x{}, wrapped or not", w, h, ir::shapeToString(shape()), maxW,
                     maxH);
  const auto& o = map_.outputs();
  std::vector<Expr> out;
  if (wr->alongX) out = {o[0] + floorDiv(o[1], wr->band) * w, floorMod(o[1], wr->band), o[2]};
  else out = {floorMod(o[0], wr->band), o[1] + floorDiv(o[0], wr->band) * h, o[2]};
  return Layout(Storage::Image2D, IndexMap(shape(), std::move(out), {wr->width, wr->height, kLanes}).simplified());
}

Result<Layout> Layout::rtile(const Shape& shape, const TileSpec& spec, Storage storage) {
  if (shape.empty()) return makeError("R-Tile {}: a scalar has no tiles", spec.str());
  const bool image = storage == Storage::Image2D;
  int64_t lh = spec.lh ? spec.lh : 1, lw = spec.lh ? spec.lw : spec.tileW;
  int64_t bh = spec.lh ? spec.blockH : 1, bw = spec.lh ? spec.blockW : spec.tileW / kLanes;
  if (spec.tileH < 1 || spec.tileW < 1 || (image && spec.tileW % kLanes != 0))
    return makeError("R-Tile {} on {}: tile_w must be a positive multiple of 4", spec.str(), ir::shapeToString(shape));
  if (image && (lw % kLanes != 0 || lh < 1 || spec.tileH % lh != 0 || spec.tileW % lw != 0 ||
                lh * lw != kLanes * bh * bw))
    return makeError("R-Tile {} on {}: the lh x lw block must divide the tile and fill blockH x blockW texels",
                     spec.str(), ir::shapeToString(shape));
  const size_t n = shape.size();
  std::vector<Expr> v = IndexMap::vars(shape);
  Expr r = n >= 2 ? v[n - 2] : Expr::constant(0);
  Expr c = v[n - 1];
  Expr b = n >= 2 ? flatten(v, shape, 0, n - 2) : Expr::constant(0);
  int64_t rows = n >= 2 ? shape[n - 2] : 1, cols = shape[n - 1];
  int64_t batch = n >= 2 ? product(shape, 0, n - 2) : 1;
  int64_t tilesR = ceilDiv(rows, spec.tileH), tilesC = ceilDiv(cols, spec.tileW);
  Expr ti = floorDiv(r, spec.tileH), tj = floorDiv(c, spec.tileW);
  Expr ir = floorMod(r, spec.tileH), ic = floorMod(c, spec.tileW);
  Expr gx = spec.rowsAlongX ? ti : tj, gy = spec.rowsAlongX ? b * tilesC + tj : b * tilesR + ti;
  int64_t gridW = spec.rowsAlongX ? tilesR : tilesC, gridH = batch * (spec.rowsAlongX ? tilesC : tilesR);
  std::vector<Expr> out;
  Shape phys;
  if (image) {
    Expr bi = floorDiv(ir, lh), bj = floorDiv(ic, lw);
    Expr linear = floorMod(ir, lh) * (lw / kLanes) + floorDiv(floorMod(ic, lw), kLanes);
    Expr lx = bj * bw + floorMod(linear, bw), ly = bi * bh + floorDiv(linear, bw);
    int64_t rectW = (spec.tileW / lw) * bw, rectH = (spec.tileH / lh) * bh;
    out = {gx * rectW + lx, gy * rectH + ly, floorMod(c, kLanes)};
    phys = {gridW * rectW, gridH * rectH, kLanes};
  } else {
    Expr tile = gy * gridW + gx;
    out = {tile * (spec.tileH * spec.tileW) + ir * spec.tileW + ic};
    phys = {gridW * gridH * spec.tileH * spec.tileW};
  }
  return Layout(storage, IndexMap(shape, std::move(out), std::move(phys)).simplified());
}

int64_t Layout::bufferSize() const { FBL_ASSERT(storage_ == Storage::Buffer); return physicalShape()[0]; }
int64_t Layout::imageWidth() const { FBL_ASSERT(storage_ == Storage::Image2D); return physicalShape()[0]; }
int64_t Layout::imageHeight() const { FBL_ASSERT(storage_ == Storage::Image2D); return physicalShape()[1]; }

Result<Layout> Layout::compose(const IndexMap& view) const {
  FBL_ASSIGN(IndexMap m, layout::compose(map_, view));
  return Layout(storage_, m.simplified(), encoding_);
}

Result<Layout> Layout::transposeLastTwo() const {
  const size_t rank = shape().size();
  if (rank < 2) return makeError("layout {}: transposing the last two dims needs rank 2 or more", str());
  std::vector<int64_t> perm(rank);
  for (size_t d = 0; d < rank; ++d) perm[d] = static_cast<int64_t>(d);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return transpose(perm);
}

Result<Layout> Layout::apply(const MovementOp& op) const {
  FBL_ASSIGN(IndexMap view, movementMap(shape(), op));
  return compose(view);
}

Result<Layout> Layout::apply(std::span<const MovementOp> chain) const {
  FBL_ASSIGN(IndexMap view, chainMap(shape(), chain));
  return compose(view);
}

std::string Layout::str() const {
  const auto& o = map_.outputs();
  std::string head = ir::shapeToString(shape()) + " -> ";
  if (storage_ == Storage::Buffer)
    return head + "buffer[" + std::to_string(bufferSize()) + (encoding_.plain() ? "" : " " + encoding_.str()) +
           "]: " + o[0].str();
  return head + "image " + std::to_string(imageWidth()) + "x" + std::to_string(imageHeight()) + ": x = " +
         o[0].str() + ", y = " + o[1].str() + ", lane = " + o[2].str();
}

}  // namespace fbl::layout
