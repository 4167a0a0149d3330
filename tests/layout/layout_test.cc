// Layouts and movement chains against naive references: the moved tensor is materialized with
// explicit loops (no index expressions involved) and every element is compared.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "compiler/layout/layout.h"
#include "compiler/layout/movement.h"
#include "compiler/layout/simplify.h"

using namespace fbl::layout;
using fbl::ir::Shape;

namespace {

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::vector<int64_t> unflatten(int64_t flat, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = flat % s[d];
    flat /= s[d];
  }
  return idx;
}

int64_t flatten(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t f = 0;
  for (size_t d = 0; d < s.size(); ++d) f = f * s[d] + idx[d];
  return f;
}

// A tensor whose elements are producer flat indices, moved op by op with loops.
struct Naive {
  Shape shape;
  std::vector<int64_t> data;
};

Naive iota(const Shape& s) {
  Naive t{s, std::vector<int64_t>(numel(s))};
  for (int64_t i = 0; i < numel(s); ++i) t.data[i] = i;
  return t;
}

Naive naiveApply(const Naive& in, const MovementOp& op, const Shape& outShape) {
  Naive out{outShape, std::vector<int64_t>(numel(outShape))};
  for (int64_t f = 0; f < numel(outShape); ++f) {
    std::vector<int64_t> o = unflatten(f, outShape), i;
    switch (op.kind) {
      case MovementOp::Kind::Reshape:
      case MovementOp::Kind::Unsqueeze:
      case MovementOp::Kind::Squeeze: out.data[f] = in.data[f]; continue;  // same order of elements
      case MovementOp::Kind::Permute:
        i.assign(in.shape.size(), 0);
        for (size_t k = 0; k < op.axes.size(); ++k) i[op.axes[k]] = o[k];
        break;
      case MovementOp::Kind::Slice:
        i = o;
        for (size_t k = 0; k < op.axes.size(); ++k) i[op.axes[k]] = op.starts[k] + o[op.axes[k]] * op.steps[k];
        break;
      case MovementOp::Kind::Expand: {
        size_t lead = outShape.size() - in.shape.size();
        for (size_t d = 0; d < in.shape.size(); ++d) i.push_back(in.shape[d] == 1 ? 0 : o[lead + d]);
        break;
      }
    }
    out.data[f] = in.data[flatten(i, in.shape)];
  }
  return out;
}

// Reference physical placement of every logical element, built by walking tiles, blocks and
// texels with counters rather than from the layout's formulas.
std::map<std::vector<int64_t>, std::vector<int64_t>> naiveTiled(const Shape& shape, const TileSpec& t, bool image) {
  std::map<std::vector<int64_t>, std::vector<int64_t>> where;
  const size_t n = shape.size();
  int64_t rows = n >= 2 ? shape[n - 2] : 1, cols = shape[n - 1];
  int64_t batch = numel(shape) / (rows * cols);
  int64_t tilesR = (rows + t.tileH - 1) / t.tileH, tilesC = (cols + t.tileW - 1) / t.tileW;
  int64_t lh = t.lh ? t.lh : 1, lw = t.lh ? t.lw : t.tileW, bh = t.lh ? t.blockH : 1, bw = t.lh ? t.blockW : t.tileW / 4;
  int64_t rectW = t.tileW / lw * bw, rectH = t.tileH / lh * bh;
  int64_t gridW = t.rowsAlongX ? tilesR : tilesC;
  int64_t bufferTile = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t gy = 0; gy < (t.rowsAlongX ? tilesC : tilesR); ++gy)
      for (int64_t gx = 0; gx < gridW; ++gx, ++bufferTile) {
        int64_t ti = t.rowsAlongX ? gx : gy, tj = t.rowsAlongX ? gy : gx;
        int64_t inTile = 0;
        for (int64_t bi = 0; bi < t.tileH / lh; ++bi)
          for (int64_t bj = 0; bj < t.tileW / lw; ++bj) {
            int64_t texel = 0;
            for (int64_t er = 0; er < lh; ++er)
              for (int64_t ec = 0; ec < lw; ec += 4, ++texel)
                for (int64_t lane = 0; lane < 4; ++lane) {
                  int64_t r = ti * t.tileH + bi * lh + er, c = tj * t.tileW + bj * lw + ec + lane;
                  if (r >= rows || c >= cols) continue;
                  std::vector<int64_t> idx = unflatten(b * rows * cols + r * cols + c, shape);
                  if (image) {
                    int64_t x = gx * rectW + bj * bw + texel % bw, y = (b * (t.rowsAlongX ? tilesC : tilesR) + gy) * rectH + bi * bh + texel / bw;
                    where[idx] = {x, y, lane};
                  } else {
                    (void)inTile;
                    where[idx] = {bufferTile * t.tileH * t.tileW + (r - ti * t.tileH) * t.tileW + (c - tj * t.tileW)};
                  }
                }
          }
      }
  return where;
}

template <typename F>
void forAll(const Shape& s, F&& f) {
  for (int64_t i = 0; i < numel(s); ++i) f(unflatten(i, s));
}

Layout must(fbl::Result<Layout> r) {
  if (!r.ok()) FAIL(r.error().message);
  return std::move(r).value();
}

// Injective and inside the physical box.
void requireInjective(const Layout& l) {
  std::set<std::vector<int64_t>> seen;
  forAll(l.shape(), [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> p = l.locate(idx);
    for (size_t k = 0; k < p.size(); ++k) REQUIRE((p[k] >= 0 && p[k] < l.physicalShape()[k]));
    REQUIRE(seen.insert(p).second);
  });
}

struct TiledCase {
  Shape shape;
  TileSpec spec;
};

const std::vector<TiledCase>& tiledCases() {
  static const std::vector<TiledCase> cases = {
      {{64, 128}, TileSpec::rowStrips(32, 64)},
      {{2, 40, 72}, TileSpec::rowStrips(16, 32)},  // padding on both tiled dims
      {{48, 64}, TileSpec::blocks(16, 32, 4, 8, 2, 4)},
      {{3, 32, 64}, TileSpec::blocks(32, 32, 8, 16, 4, 8)},
      {{40, 24}, TileSpec{8, 8, 2, 8, 1, 4, true}},
      {{36}, TileSpec::rowStrips(1, 16)},
      {{2, 3, 20, 12}, TileSpec{8, 4, 0, 0, 0, 0, true}},
  };
  return cases;
}

}  // namespace

TEST_CASE("constructors match the documented examples", "[layout]") {
  CHECK(Layout::rowMajor({2, 3}).str() == "[2,3] -> buffer[6]: i0 * 3 + i1");
  CHECK(must(Layout::permuted({2, 3}, {1, 0})).str() == "[2,3] -> buffer[6]: i1 * 2 + i0");
  CHECK(Layout::image({4, 8}).str() == "[4,8] -> image 2x4: x = i1 / 4, y = i0, lane = i1 % 4");
  CHECK(must(Layout::rtile({64, 128}, TileSpec::rowStrips(32, 64))).str() ==
        "[64,128] -> image 32x64: x = i1 / 4, y = i0, lane = i1 % 4");
  TileSpec rows = TileSpec::rowStrips(32, 64);
  rows.rowsAlongX = true;
  CHECK(must(Layout::rtile({64, 128}, rows)).str() ==
        "[64,128] -> image 32x64: x = i0 / 32 * 16 + i1 / 4 % 16, y = i1 / 64 * 32 + i0 % 32, lane = i1 % 4");
  CHECK_FALSE(Layout::rtile({8, 8}, TileSpec::rowStrips(4, 6)).ok());
  CHECK_FALSE(Layout::rtile({8, 8}, TileSpec::blocks(4, 8, 4, 8, 3, 3)).ok());
  CHECK_FALSE(Layout::permuted({2, 3}, {0, 0}).ok());
  // Empty tensors build (nothing to locate) instead of dividing by zero.
  CHECK(Layout::rowMajor({0, 4}).bufferSize() == 0);
  CHECK(Layout::image({3, 0}).imageWidth() == 0);
  CHECK(must(Layout::rtile({0, 8}, TileSpec::rowStrips(4, 4))).imageHeight() == 0);
}

TEST_CASE("R-Tile layouts match a naive tile walk element by element", "[layout]") {
  for (const TiledCase& c : tiledCases()) {
    for (Storage st : {Storage::Image2D, Storage::Buffer}) {
      Layout l = must(Layout::rtile(c.shape, c.spec, st));
      INFO(l.str());
      auto ref = naiveTiled(c.shape, c.spec, st == Storage::Image2D);
      REQUIRE(static_cast<int64_t>(ref.size()) == numel(c.shape));
      forAll(c.shape, [&](const std::vector<int64_t>& idx) { REQUIRE(l.locate(idx) == ref.at(idx)); });
      requireInjective(l);
    }
  }
}

TEST_CASE("algebraic laws of layouts", "[layout]") {
  std::vector<Layout> layouts = {Layout::rowMajor({4, 6, 8}), must(Layout::permuted({4, 6, 8}, {2, 0, 1})),
                                 Layout::image({3, 5, 16})};
  for (const TiledCase& c : tiledCases()) {
    layouts.push_back(must(Layout::rtile(c.shape, c.spec)));
    layouts.push_back(must(Layout::rtile(c.shape, c.spec, Storage::Buffer)));
  }
  for (const Layout& l : layouts) {
    INFO(l.str());
    const Shape& s = l.shape();
    // Composing with the identity view changes nothing.
    CHECK(must(l.compose(IndexMap::identity(s))) == l);
    // inverse . layout = identity on the logical domain.
    auto inv = l.inverse();
    if (!inv.ok()) FAIL(inv.error().message);
    forAll(s, [&](const std::vector<int64_t>& idx) { REQUIRE(inv->apply(l.locate(idx)) == idx); });
    // Transposing twice by inverse permutations is the identity (structurally).
    std::vector<int64_t> perm(s.size()), back(s.size());
    for (size_t k = 0; k < s.size(); ++k) perm[k] = static_cast<int64_t>(s.size() - 1 - k);
    for (size_t k = 0; k < s.size(); ++k) back[perm[k]] = static_cast<int64_t>(k);
    CHECK(must(must(l.transpose(perm)).transpose(back)) == l);
    // Reshape round trips: flatten and back, and split the last dim and merge it again.
    CHECK(must(must(l.reshape({numel(s)})).reshape(s)) == l);
    if (s.back() % 2 == 0) {
      Shape split = s;
      split.back() /= 2;
      split.push_back(2);
      Layout viewed = must(l.reshape(split));
      CHECK(must(viewed.reshape(s)) == l);
      // Views that stay bijections keep an inverse.
      Layout moved = must(viewed.transpose([&] {
        std::vector<int64_t> p(split.size());
        for (size_t k = 0; k < p.size(); ++k) p[k] = static_cast<int64_t>((k + 1) % p.size());
        return p;
      }()));
      auto movedInv = moved.inverse();
      if (!movedInv.ok()) FAIL(movedInv.error().message);
      forAll(moved.shape(), [&](const std::vector<int64_t>& idx) { REQUIRE(movedInv->apply(moved.locate(idx)) == idx); });
    }
  }
}

TEST_CASE("inverse of the row-major layout is the unflattening", "[layout]") {
  auto inv = Layout::rowMajor({4, 6, 8}).inverse();
  REQUIRE(inv.ok());
  CHECK(inv->str() == "[192] -> [4,6,8]: (i0 / 48, i0 / 8 % 6, i0 % 8)");
  // Broadcasts and non-digit maps have no inverse.
  CHECK_FALSE(must(Layout::rowMajor({1, 8}).apply(MovementOp::expand({4, 8}))).inverse().ok());
}

namespace {

// A random factorization of n into `rank` dims.
Shape randomShapeOf(int64_t n, std::mt19937& rng) {
  std::vector<int64_t> primes;
  for (int64_t p = 2; n > 1; ++p)
    while (n % p == 0) primes.push_back(p), n /= p;
  size_t rank = 1 + rng() % 4;
  Shape s(rank, 1);
  for (int64_t p : primes) s[rng() % rank] *= p;
  if (rng() % 4 == 0) s.insert(s.begin() + rng() % (s.size() + 1), 1);
  return s;
}

MovementOp randomOp(const Shape& s, std::mt19937& rng) {
  for (;;) {
    switch (rng() % 6) {
      case 0: return MovementOp::reshape(randomShapeOf(numel(s), rng));
      case 1: {
        std::vector<int64_t> perm(s.size());
        for (size_t k = 0; k < s.size(); ++k) perm[k] = static_cast<int64_t>(k);
        std::shuffle(perm.begin(), perm.end(), rng);
        return MovementOp::permute(perm);
      }
      case 2: {
        int64_t a = rng() % s.size();
        if (s[a] < 2) break;
        int64_t start = rng() % (s[a] - 1), end = start + 1 + rng() % (s[a] - start);
        return MovementOp::slice({a}, {start}, {end}, {1 + static_cast<int64_t>(rng() % 3)});
      }
      case 3: {
        Shape t = s;
        bool any = false;
        for (int64_t& d : t)
          if (d == 1 && rng() % 2) d = 2 + rng() % 3, any = true;
        if (!any || numel(t) > 4096) break;
        return MovementOp::expand(t);
      }
      case 4:
        if (s.size() >= 5) break;
        return MovementOp::unsqueeze({static_cast<int64_t>(rng() % (s.size() + 1))});
      case 5: {
        for (size_t d = 0; d < s.size(); ++d)
          if (s[d] == 1 && s.size() > 1) return MovementOp::squeeze({static_cast<int64_t>(d)});
        break;
      }
    }
  }
}

}  // namespace

TEST_CASE("random movement chains match naive materialization element by element", "[layout]") {
  std::mt19937 rng(6);
  const int64_t sizes[] = {24, 48, 60, 64, 96, 120, 128, 144, 256, 384};
  int chains = 0, divmodRaw = 0, divmodSimplified = 0;
  SimplifyStats stats;
  while (chains < 240) {
    Shape producer = randomShapeOf(sizes[rng() % std::size(sizes)], rng);
    std::vector<MovementOp> chain;
    Shape cur = producer;
    Naive ref = iota(producer);
    size_t len = 1 + rng() % 6;
    for (size_t k = 0; k < len; ++k) {
      MovementOp op = randomOp(cur, rng);
      auto next = outputShape(cur, op);
      REQUIRE(next.ok());
      ref = naiveApply(ref, op, *next);
      chain.push_back(op);
      cur = *next;
    }
    INFO(fbl::ir::shapeToString(producer) << " " << chainToString(chain));
    auto raw = chainMap(producer, chain);
    REQUIRE(raw.ok());
    IndexMap simple = raw->simplified();
    for (const Expr& e : raw->outputs()) simplify(e, &stats);
    divmodRaw += raw->countDivMod();
    divmodSimplified += simple.countDivMod();
    CHECK(simple.countDivMod() <= raw->countDivMod());
    // The composed view, raw and simplified, against the materialized tensor.
    forAll(cur, [&](const std::vector<int64_t>& o) {
      int64_t want = ref.data[flatten(o, cur)];
      REQUIRE(flatten(raw->apply(o), producer) == want);
      REQUIRE(flatten(simple.apply(o), producer) == want);
    });
    // Every kind of producer layout read through the chain.
    std::vector<Layout> layouts = {Layout::rowMajor(producer), Layout::image(producer)};
    if (producer.size() >= 2) {
      std::vector<int64_t> perm(producer.size());
      for (size_t k = 0; k < perm.size(); ++k) perm[k] = static_cast<int64_t>(k);
      std::shuffle(perm.begin(), perm.end(), rng);
      layouts.push_back(must(Layout::permuted(producer, perm)));
      layouts.push_back(must(Layout::rtile(producer, TileSpec::rowStrips(2, 4))));
      layouts.push_back(must(Layout::rtile(producer, TileSpec::blocks(4, 8, 2, 8, 1, 4))));
    }
    for (const Layout& l : layouts) {
      Layout consumer = must(l.apply(chain));
      INFO(consumer.str());
      forAll(cur, [&](const std::vector<int64_t>& o) {
        REQUIRE(consumer.locate(o) == l.locate(unflatten(ref.data[flatten(o, cur)], producer)));
      });
    }
    ++chains;
  }
  CHECK(stats.budgetExhausted == 0);
  CHECK(divmodSimplified < divmodRaw);
  WARN("random chains: " << chains << ", div/mod raw " << divmodRaw << " -> simplified " << divmodSimplified);
}

TEST_CASE("strided views of movement chains match naive materialization", "[layout]") {
  // The offset + strides the reference executor and the strided copies read, against loops.
  std::mt19937 rng(61);
  const int64_t sizes[] = {24, 48, 60, 64, 96, 120};
  int affine = 0, notAffine = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Shape producer = randomShapeOf(sizes[rng() % std::size(sizes)], rng);
    std::vector<MovementOp> chain;
    Shape cur = producer;
    Naive ref = iota(producer);
    bool reshapes = false;
    for (size_t k = 0, len = 1 + rng() % 4; k < len; ++k) {
      MovementOp op = randomOp(cur, rng);
      if (op.kind == MovementOp::Kind::Slice && rng() % 2) {
        // Walk the same axis backwards from its last element (ONNX negative steps).
        const int64_t a = op.axes[0], step = -op.steps[0];
        op = MovementOp::slice({a}, {cur[a] - 1}, {rng() % 2 ? -1 : cur[a] / 3}, {step});
      }
      reshapes = reshapes || op.kind == MovementOp::Kind::Reshape;
      auto next = outputShape(cur, op);
      REQUIRE(next.ok());
      ref = naiveApply(ref, op, *next);
      chain.push_back(op);
      cur = *next;
    }
    INFO(fbl::ir::shapeToString(producer) << " " << chainToString(chain));
    auto v = stridedView(producer, chain);
    // Only a Reshape can leave a chain without one stride per dim.
    if (!reshapes) REQUIRE(v.ok());
    if (!v.ok()) {
      ++notAffine;
      continue;
    }
    ++affine;
    REQUIRE(v->strides.size() == cur.size());
    forAll(cur, [&](const std::vector<int64_t>& o) {
      int64_t at = v->offset;
      for (size_t d = 0; d < o.size(); ++d) at += o[d] * v->strides[d];
      REQUIRE(at == ref.data[flatten(o, cur)]);
    });
  }
  CHECK(affine > 100);
  CHECK(notAffine > 0);
}

TEST_CASE("Slice ops: clamped ONNX ranges, negative steps and empty results", "[layout]") {
  // Against the spec's clamping written as a loop over candidate indices.
  std::mt19937 rng(62);
  for (int trial = 0; trial < 500; ++trial) {
    const int64_t dim = rng() % 7, start = static_cast<int64_t>(rng() % 19) - 9,
                  end = static_cast<int64_t>(rng() % 19) - 9;
    int64_t step = static_cast<int64_t>(rng() % 9) - 4;
    if (step == 0) step = trial % 2 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
    INFO("dim " << dim << " " << start << ".." << end << " step " << step);
    std::vector<int64_t> want;
    const int64_t b = start < 0 ? start + dim : start, e = end < 0 ? end + dim : end;
    if (step > 0)
      for (int64_t i = std::max<int64_t>(b, 0); i < std::min(e, dim); i = i > dim - step ? dim : i + step)
        want.push_back(i);
    else if (dim > 0)
      for (int64_t i = std::clamp<int64_t>(b, 0, dim - 1); i > std::max<int64_t>(e, -1); i += step)  // i >= 0: no overflow
        want.push_back(i);
    fbl::ir::Node n;
    n.op = "Slice";
    n.inputs = {0, 1, 2, 3, 4};
    const std::vector<std::vector<int64_t>> operands = {{}, {start}, {end}, {0}, {step}};
    auto op = onnxMovementOp(n, {dim}, [&](size_t slot) -> fbl::Result<std::optional<std::vector<int64_t>>> {
      return std::optional(operands[slot]);
    });
    REQUIRE(op.ok());
    auto out = outputShape({dim}, *op);
    REQUIRE(out.ok());
    REQUIRE((*out)[0] == static_cast<int64_t>(want.size()));
    auto v = stridedView({dim}, *op);
    REQUIRE(v.ok());
    for (size_t i = 0; i < want.size(); ++i) REQUIRE(v->offset + static_cast<int64_t>(i) * v->strides[0] == want[i]);
  }
  // Opset 10+: starts and ends are required inputs; axes and steps are optional.
  fbl::ir::Node n;
  n.op = "Slice";
  n.inputs = {0, 1, 2};
  for (size_t missing : {size_t{1}, size_t{2}}) {
    auto op = onnxMovementOp(n, {5}, [&](size_t slot) -> fbl::Result<std::optional<std::vector<int64_t>>> {
      if (slot == missing || slot > 2) return std::optional<std::vector<int64_t>>();
      return std::optional(std::vector<int64_t>{1});
    });
    REQUIRE_FALSE(op.ok());
    CHECK(op.error().message.find(missing == 1 ? "no starts (input 1)" : "no ends (input 2)") != std::string::npos);
  }
}

// Where every element of `l` lands, as (x, y, lane) triples; fails on a collision or an address
// outside the image.
static std::vector<std::array<int64_t, 3>> texelsOf(const Layout& l) {
  std::vector<std::array<int64_t, 3>> at;
  std::set<std::array<int64_t, 3>> seen;
  for (int64_t f = 0; f < numel(l.shape()); ++f) {
    const std::vector<int64_t> p = l.locate(unflatten(f, l.shape()));
    REQUIRE(p.size() == 3);
    REQUIRE((p[0] >= 0 && p[0] < l.imageWidth() && p[1] >= 0 && p[1] < l.imageHeight() && p[2] >= 0 && p[2] < 4));
    REQUIRE(seen.insert({p[0], p[1], p[2]}).second);
    at.push_back({p[0], p[1], p[2]});
  }
  return at;
}

TEST_CASE("TFLite textures: x walks width and batch, y height and channel slices", "[layout]") {
  // [B=2, H=3, W=5, C=6]: 2 slices of 4 channels.
  const Layout t = Layout::texture({2, 3, 5, 6});
  CHECK(t.imageWidth() == 10);
  CHECK(t.imageHeight() == 6);
  const auto at = texelsOf(t);
  for (int64_t f = 0; f < numel(t.shape()); ++f) {
    const std::vector<int64_t> i = unflatten(f, t.shape());
    const std::array<int64_t, 3> want{i[2] * 2 + i[0], i[1] * 2 + i[3] / 4, i[3] % 4};
    CHECK(at[f] == want);
  }
  // A matrix [W, C]: one image row per 4 columns, one texel column per row.
  const Layout m = Layout::texture({7, 9});
  CHECK((m.imageWidth() == 7 && m.imageHeight() == 3));
  CHECK(texelsOf(m)[9 + 5] == std::array<int64_t, 3>{1, 1, 1});
}

TEST_CASE("an image past the device's extent wraps into bands and keeps every element", "[layout]") {
  // Tall: 2 x 8 tiles of [64 x 32] row strips stacked 16 tile rows high, limit 40 texels.
  auto tall = Layout::rtile({256, 64}, TileSpec::rowStrips(16, 32));
  REQUIRE(tall.ok());
  REQUIRE((tall->imageWidth() == 16 && tall->imageHeight() == 256));
  CHECK_FALSE(tall->fitImage(40, 40, 8, 16).ok());  // 16 texels x 7 bands of 48 > 40 wide
  auto wrapped = tall->fitImage(64, 100, 8, 16);
  REQUIRE(wrapped.ok());
  // Bands of 96 rows (the most whole 16-row tiles under 100), three side by side.
  CHECK((wrapped->imageWidth() == 48 && wrapped->imageHeight() == 96));
  const auto before = texelsOf(*tall), after = texelsOf(*wrapped);
  for (size_t f = 0; f < before.size(); ++f) {
    const std::array<int64_t, 3> want{before[f][0] + before[f][1] / 96 * 16, before[f][1] % 96, before[f][2]};
    REQUIRE(after[f] == want);
  }
  // Wide: a plain image of a [3 x 400] tensor (100 texels wide) under a 32-wide limit.
  auto wide = Layout::image({3, 400}).fitImage(32, 64, 8, 1);
  REQUIRE(wide.ok());
  CHECK((wide->imageWidth() == 32 && wide->imageHeight() == 12));
  texelsOf(*wide);
  // Bands of equal length, not as long as the limit: 36 texels under a 32 limit are two bands of
  // 18, not 32 and 4, so the image is no larger than it must be.
  auto even = Layout::image({2, 144}).fitImage(32, 64, 2, 1);
  REQUIRE(even.ok());
  CHECK((even->imageWidth() == 18 && even->imageHeight() == 4));
  texelsOf(*even);
  // An image that fits is left as it is.
  const auto same = Layout::image({3, 400}).fitImage(128, 4, 1, 1);
  REQUIRE(same.ok());
  CHECK(same.value() == Layout::image({3, 400}));
  CHECK(imageWrap(100, 3, 8, 1, 128, 4) == std::nullopt);
  CHECK(fitsImage(100, 3, 8, 1, 32, 64));
  CHECK_FALSE(fitsImage(100, 3, 8, 1, 32, 8));
}
