// rtile_softmax.cl, rtile_norm.cl and rtile_norm_cols.cl on PoCL against naive loops, for every
// layout of x/dy/out (row-major and R-Tile buffers, plain image, R-Tile strips and blocks), on an
// odd shape (padded rows, columns and texels) and a tile-multiple shape. The column reduction of
// the norms' backward runs on the stored layouts (fblayout, reuse) and on transposed copies (what
// explicit converts to), which must give the same sums.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <random>

#include "bench/support/cl_session.h"
#include "bench/support/operator_plans.h"
#include "compiler/codegen/rtile_kernels.h"
#include "compiler/profile/profile.h"

using fbl::codegen::ReduceOp;
using fbl::codegen::ReduceOperands;
using fbl::layout::Layout;
using fbl::layout::TileSpec;
using fbl::bench::ClSession;

namespace {

std::vector<float> randomVec(int64_t n, unsigned seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

template <typename T>
T must(fbl::Result<T> r) {
  if (!r.ok()) FAIL(r.error().message);
  return std::move(r).value();
}

void requireClose(const std::vector<float>& got, const std::vector<double>& want, double tol, const std::string& what) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tol * (1.0 + std::fabs(want[i])))) {
      if (!bad) first = i;
      ++bad;
    }
  INFO(what << ": " << bad << " of " << got.size() << " wrong, first at " << first << " (got "
            << (bad ? got[first] : 0) << ", want " << (bad ? want[first] : 0) << ")");
  REQUIRE(bad == 0);
}

using MakeLayout = std::function<Layout(const fbl::ir::Shape&)>;

std::vector<std::pair<std::string, MakeLayout>> layouts() {
  auto rt = [](TileSpec spec, fbl::layout::Storage st) -> MakeLayout {
    return [spec, st](const fbl::ir::Shape& s) { return must(Layout::rtile(s, spec, st)); };
  };
  return {{"row-major buffer", [](const fbl::ir::Shape& s) { return Layout::rowMajor(s); }},
          {"R-Tile buffer", rt(TileSpec::rowStrips(8, 16), fbl::layout::Storage::Buffer)},
          {"plain image", [](const fbl::ir::Shape& s) { return Layout::image(s); }},
          {"R-Tile strips", rt(TileSpec::rowStrips(8, 16), fbl::layout::Storage::Image2D)},
          {"R-Tile blocks", rt(TileSpec::blocks(16, 32, 8, 16, 4, 8), fbl::layout::Storage::Image2D)}};
}

// Naive references over row-major [rows x cols].
struct Ref {
  std::vector<double> y, mean, inv, dx, dscale, dbias;
};

Ref normRef(const std::vector<float>& x, const std::vector<float>& dy, const std::vector<float>& scale,
            const std::vector<float>& bias, int64_t rows, int64_t cols, bool rms, double eps) {
  Ref r;
  r.y.resize(x.size());
  r.dx.resize(x.size());
  r.dscale.assign(cols, 0.0);
  r.dbias.assign(cols, 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    double mu = 0, var = 0;
    if (!rms) {
      for (int64_t j = 0; j < cols; ++j) mu += x[i * cols + j];
      mu /= cols;
    }
    for (int64_t j = 0; j < cols; ++j) var += (x[i * cols + j] - mu) * (x[i * cols + j] - mu);
    const double inv = 1.0 / std::sqrt(var / cols + eps);
    r.mean.push_back(mu);
    r.inv.push_back(inv);
    double mg = 0, mgx = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const double xh = (x[i * cols + j] - mu) * inv, g = dy[i * cols + j] * scale[j];
      r.y[i * cols + j] = xh * scale[j] + (rms ? 0.0 : bias[j]);
      mg += g;
      mgx += g * xh;
      r.dscale[j] += dy[i * cols + j] * xh;
      r.dbias[j] += dy[i * cols + j];
    }
    mg = rms ? 0.0 : mg / cols;
    mgx /= cols;
    for (int64_t j = 0; j < cols; ++j) {
      const double xh = (x[i * cols + j] - mu) * inv, g = dy[i * cols + j] * scale[j];
      r.dx[i * cols + j] = inv * (g - mg - xh * mgx);
    }
  }
  return r;
}

std::vector<float> transpose(const std::vector<float>& v, int64_t rows, int64_t cols) {
  std::vector<float> t(v.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = v[i * cols + j];
  return t;
}

struct Fixture {
  std::unique_ptr<ClSession> s;
  Fixture() {
    setenv("POCL_CACHE_DIR", FBL_SOURCE_DIR "/build-pocl-cache", 0);
    auto r = ClSession::open();
    if (!r.ok()) FAIL(r.error().message);
    s = std::move(*r);
  }
  cl_mem upload(const Layout& l, const std::vector<float>& v) {
    auto m = s->allocate(l);
    REQUIRE(m.ok());
    REQUIRE(s->upload(*m, l, v).ok());
    return *m;
  }
  cl_mem buf(const std::vector<float>& v) {
    auto m = s->buffer(v.size(), v.data());
    REQUIRE(m.ok());
    return *m;
  }
  void run(const fbl::codegen::RTileKernel& k, const std::vector<cl_mem>& args) {
    auto t = s->run(k, args);
    if (!t.ok()) FAIL(t.error().message);
  }
};

struct Dims { int64_t rows, cols; };
constexpr Dims kShapes[] = {{7, 37}, {32, 64}};

}  // namespace

TEST_CASE("rtile softmax: forward and backward over every layout", "[rtile_kernels]") {
  Fixture f;
  for (Dims d : kShapes)
    for (const auto& [name, make] : layouts()) {
      INFO(name << " " << d.rows << "x" << d.cols);
      Layout l = make({d.rows, d.cols});
      auto x = randomVec(d.rows * d.cols, 1), dy = randomVec(d.rows * d.cols, 2);
      std::vector<double> y(x.size()), dx(x.size());
      for (int64_t i = 0; i < d.rows; ++i) {
        double mx = -1e30, sum = 0, yd = 0;
        for (int64_t j = 0; j < d.cols; ++j) mx = std::max(mx, double(x[i * d.cols + j]));
        for (int64_t j = 0; j < d.cols; ++j) sum += std::exp(x[i * d.cols + j] - mx);
        for (int64_t j = 0; j < d.cols; ++j) y[i * d.cols + j] = std::exp(x[i * d.cols + j] - mx) / sum;
        // The backward reads the float y the forward stored; the reference uses the exact y.
        for (int64_t j = 0; j < d.cols; ++j) yd += y[i * d.cols + j] * dy[i * d.cols + j];
        for (int64_t j = 0; j < d.cols; ++j) dx[i * d.cols + j] = y[i * d.cols + j] * (dy[i * d.cols + j] - yd);
      }
      cl_mem xm = f.upload(l, x), dym = f.upload(l, dy);
      cl_mem ym = must(f.s->allocate(l)), dxm = must(f.s->allocate(l));
      auto fwd = fbl::codegen::emitRTileReduce("sm", ReduceOp::kSoftmaxFwd, d.rows, d.cols, {l, l, l}, 16);
      auto bwd = fbl::codegen::emitRTileReduce("smg", ReduceOp::kSoftmaxBwd, d.rows, d.cols, {l, l, l}, 16);
      REQUIRE((fwd.ok() && bwd.ok()));
      f.run(*fwd, {xm, ym});
      f.run(*bwd, {ym, dym, dxm});
      requireClose(must(f.s->download(ym, l)), y, 1e-5, "softmax y");
      requireClose(must(f.s->download(dxm, l)), dx, 1e-5, "softmax dx");
    }
}

TEST_CASE("rtile norms: LayerNorm and RMSNorm forward, backward rows and columns", "[rtile_kernels]") {
  Fixture f;
  const double eps = 1e-5;
  for (bool rms : {false, true})
    for (Dims d : kShapes)
      for (const auto& [name, make] : layouts()) {
        INFO((rms ? "RMSNorm " : "LayerNorm ") << name << " " << d.rows << "x" << d.cols);
        Layout l = make({d.rows, d.cols});
        auto x = randomVec(d.rows * d.cols, 3), dy = randomVec(d.rows * d.cols, 4);
        auto scale = randomVec(d.cols, 5, 0.5f, 1.5f), bias = randomVec(d.cols, 6);
        Ref ref = normRef(x, dy, scale, bias, d.rows, d.cols, rms, eps);
        cl_mem xm = f.upload(l, x), dym = f.upload(l, dy);
        cl_mem ym = must(f.s->allocate(l)), dxm = must(f.s->allocate(l));
        cl_mem sm = f.buf(scale), bm = f.buf(bias);
        cl_mem mean = must(f.s->buffer(d.rows)), inv = must(f.s->buffer(d.rows));
        cl_mem ds = must(f.s->buffer(d.cols)), db = must(f.s->buffer(d.cols));
        ReduceOperands ops{l, l, l, false, eps};
        auto fwd = fbl::codegen::emitRTileReduce("n", rms ? ReduceOp::kRmsNormFwd : ReduceOp::kLayerNormFwd, d.rows,
                                                 d.cols, ops, 16);
        auto rows = fbl::codegen::emitRTileReduce("nr", rms ? ReduceOp::kRmsNormBwd : ReduceOp::kLayerNormBwd, d.rows,
                                                  d.cols, ops, 16);
        auto cols = fbl::codegen::emitRTileReduce("nc", ReduceOp::kNormBwdCols, d.rows, d.cols, ops, 16);
        REQUIRE((fwd.ok() && rows.ok() && cols.ok()));
        if (rms)
          f.run(*fwd, {xm, ym, sm, mean, inv});
        else
          f.run(*fwd, {xm, ym, sm, bm, mean, inv});
        f.run(*rows, {xm, dym, dxm, sm, mean, inv});
        f.run(*cols, {xm, dym, mean, inv, ds, db});
        requireClose(must(f.s->download(ym, l)), ref.y, 1e-5, "y");
        requireClose(must(f.s->readBuffer(mean, d.rows)), ref.mean, 1e-5, "mean");
        requireClose(must(f.s->readBuffer(inv, d.rows)), ref.inv, 1e-5, "inv");
        requireClose(must(f.s->download(dxm, l)), ref.dx, 1e-4, "dx");
        requireClose(must(f.s->readBuffer(ds, d.cols)), ref.dscale, 1e-4, "dscale");
        requireClose(must(f.s->readBuffer(db, d.cols)), ref.dbias, 1e-4, "dbias");
        // explicit: x and dy converted to [cols x rows]; the same sums walking stored rows.
        Layout lt = make({d.cols, d.rows});
        cl_mem xt = f.upload(lt, transpose(x, d.rows, d.cols)), dyt = f.upload(lt, transpose(dy, d.rows, d.cols));
        auto colsT = fbl::codegen::emitRTileReduce("nct", ReduceOp::kNormBwdCols, d.rows, d.cols,
                                                   {lt, lt, lt, true, eps}, 16);
        REQUIRE(colsT.ok());
        f.run(*colsT, {xt, dyt, mean, inv, ds, db});
        requireClose(must(f.s->readBuffer(ds, d.cols)), ref.dscale, 1e-4, "dscale (transposed)");
        requireClose(must(f.s->readBuffer(db, d.cols)), ref.dbias, 1e-4, "dbias (transposed)");
      }
}

TEST_CASE("rtile norm strategies: fblayout, reuse and explicit give the same y, dx, dScale, dBias",
          "[rtile_kernels]") {
  Fixture f;
  auto prof = fbl::profile::loadProfile(FBL_SOURCE_DIR "/profiles/pocl-cpu.json");
  REQUIRE(prof.ok());
  const double eps = 1e-5;
  for (Dims d : {Dims{37, 96}, Dims{64, 128}}) {
    auto x = randomVec(d.rows * d.cols, 7), dy = randomVec(d.rows * d.cols, 8);
    auto scale = randomVec(d.cols, 9, 0.5f, 1.5f), bias = randomVec(d.cols, 10);
    Ref ref = normRef(x, dy, scale, bias, d.rows, d.cols, false, eps);
    std::vector<std::vector<float>> first;
    for (fbl::strategy::Strategy st : fbl::strategy::kAllStrategies) {
      INFO(fbl::strategy::strategyName(st) << " " << d.rows << "x" << d.cols);
      auto plan = fbl::bench::planNorm(st, d.rows, d.cols, *prof);
      REQUIRE(plan.ok());
      std::map<std::string, cl_mem> mem;
      for (const auto& [name, pl] : plan->tensors) mem[name] = must(f.s->allocate(pl.layout));
      const auto& L = [&](const char* t) { return plan->tensors.at(t).layout; };
      REQUIRE(f.s->upload(mem["x"], L("x"), x).ok());
      REQUIRE(f.s->upload(mem["dy"], L("dy"), dy).ok());
      cl_mem sm = f.buf(scale), bm = f.buf(bias);
      cl_mem mean = must(f.s->buffer(d.rows)), inv = must(f.s->buffer(d.rows));
      cl_mem ds = must(f.s->buffer(d.cols)), db = must(f.s->buffer(d.cols));
      f.run(must(fbl::codegen::emitRTileReduce("ln", ReduceOp::kLayerNormFwd, d.rows, d.cols,
                                               {L("x"), L("x"), L("y"), false, eps}, 32)),
            {mem["x"], mem["y"], sm, bm, mean, inv});
      f.run(must(fbl::codegen::emitRTileReduce("lnr", ReduceOp::kLayerNormBwd, d.rows, d.cols,
                                               {L("x"), L("dy"), L("dx"), false, eps}, 32)),
            {mem["x"], mem["dy"], mem["dx"], sm, mean, inv});
      for (const auto& c : plan->beforeCols)
        f.run(must(fbl::codegen::emitRTileConvert("cv", L(c.src.c_str()), c.transpose, L(c.dst.c_str()))),
              {mem[c.src], mem[c.dst]});
      const char* xs = plan->colsTransposed ? "xt" : "x";
      const char* dys = plan->colsTransposed ? "dyt" : "dy";
      f.run(must(fbl::codegen::emitRTileReduce("lnc", ReduceOp::kNormBwdCols, d.rows, d.cols,
                                               {L(xs), L(dys), L(xs), plan->colsTransposed, eps}, 32)),
            {mem[xs], mem[dys], mean, inv, ds, db});
      std::vector<std::vector<float>> got = {must(f.s->download(mem["y"], L("y"))),
                                             must(f.s->download(mem["dx"], L("dx"))),
                                             must(f.s->readBuffer(ds, d.cols)), must(f.s->readBuffer(db, d.cols))};
      requireClose(got[0], ref.y, 1e-5, "y");
      requireClose(got[1], ref.dx, 1e-4, "dx");
      requireClose(got[2], ref.dscale, 1e-4, "dscale");
      requireClose(got[3], ref.dbias, 1e-4, "dbias");
      if (first.empty()) {
        first = got;
      } else {
        // y and dx: the same row kernel body on every layout, bit for bit; the column sums of
        // explicit add the rows in texel groups of 4 (a different order), so fp32 tolerance.
        CHECK(got[0] == first[0]);
        CHECK(got[1] == first[1]);
        for (int i : {2, 3})
          requireClose(got[i], std::vector<double>(first[i].begin(), first[i].end()), 1e-5, "vs fblayout");
      }
    }
  }
}
