// See matmul_sweep.h.
#include "bench/matmul_sweep.h"


#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/profile_paths.h"
#include "compiler/codegen/matmul_tiling.h"
#include "compiler/codegen/rtile_kernels.h"
#include "compiler/plan/profile.h"
#include "compiler/profile/profile.h"
#include "harness/cl_session.h"

namespace fbl::bench {

using namespace fbl::harness;  // the kernel harness: strategy plans, their traffic, ClSession

namespace {

using codegen::MatmulCandidate;
using codegen::MatmulTiling;
using layout::Layout;

struct Product {
  std::string name;
  int64_t m, k, n;
  bool lhsT, rhsT;
};

std::vector<Product> products(int64_t r, int64_t sc) {
  std::vector<Product> v = {{"fig16 forward A*B", 512, 2048, 8192, false, false},
          {"fig16 dA = dC*B^T", 512, 8192, 2048, false, true},
          {"fig16 dB = A^T*dC", 2048, 512, 8192, true, false},
          {"lm_head x*W^T", 512, 2048, 128256, false, true},
          {"lm_head dx = dy*W", 512, 128256, 2048, false, false},
          {"lora x*A^T", 512, 2048, r, false, true},
          {"lora h*B^T", 512, r, 2048, false, true},
          {"lora dh = dy*B", 512, 2048, r, false, false},
          // B as plans store it under matmul.narrow.k_contiguous_weights: transposed.
          {"lora dh = dy*B, B stored transposed", 512, 2048, r, false, true},
          {"lora dB = dy^T*h", 2048, 512, r, true, false},
          {"lora dA = dh^T*x", r, 512, 2048, true, false},
          {"lora dx = dh*A", 512, r, 2048, false, false},
          // The MLP's, 4x as wide (8192): 16 MB a product, where the memory, not the launch,
          // should set the time. down's x A^T, gate and up's dy B (B stored transposed),
          // gate and up's dy^T h, down's dh^T x.
          {"lora mlp x*A^T", 512, 8192, r, false, true},
          {"lora mlp dh = dy*B, B stored transposed", 512, 8192, r, false, true},
          {"lora mlp dB = dy^T*h", 8192, 512, r, true, false},
          {"lora mlp dA = dh^T*x", r, 512, 8192, true, false}};
  for (Product& p : v)  // --scale shrinks every extent but the rank
    for (int64_t* d : {&p.m, &p.k, &p.n})
      if (*d != r) *d = std::max<int64_t>(1, *d / sc);
  return v;
}

Result<Layout> operandLayout(const std::string& storage, int64_t rows, int64_t cols) {
  if (storage == "buffer") return Layout::rowMajor({rows, cols});
  return Layout::image({rows, cols}).fitImage(32768, 32768, 1, 1);
}

struct Operands {
  std::vector<float> lhs, rhs;  // stored row-major: lhs [M x K] or [K x M], rhs [K x N] or [N x K]
  cl_mem l = nullptr, r = nullptr, out = nullptr, partial = nullptr;
  Layout outLayout = Layout::rowMajor({1, 1});
  size_t partialFloats = 0;
};

float lhsAt(const Product& p, const Operands& o, int64_t i, int64_t kk) {
  return p.lhsT ? o.lhs[static_cast<size_t>(kk * p.m + i)] : o.lhs[static_cast<size_t>(i * p.k + kk)];
}
float rhsAt(const Product& p, const Operands& o, int64_t kk, int64_t j) {
  return p.rhsT ? o.rhs[static_cast<size_t>(j * p.k + kk)] : o.rhs[static_cast<size_t>(kk * p.n + j)];
}

// Worst relative error of `out`'s sampled entries against their double sums.
Result<double> sampledError(ClSession& s, const Product& p, cl_mem out, const Layout& ol,
                            const std::vector<std::pair<int64_t, int64_t>>& probes, const std::vector<double>& want) {
  FBL_ASSIGN(std::vector<float> got, s.download(out, ol));
  double worst = 0;
  for (size_t q = 0; q < probes.size(); ++q) {
    const double v = got[static_cast<size_t>(probes[q].first * p.n + probes[q].second)];
    worst = std::max(worst, std::fabs(v - want[q]) / std::max(1.0, std::fabs(want[q])));
  }
  return worst;
}

// The fastest of `runs` launches (after one warm-up), in us.
Result<double> fastestUs(ClSession& s, const codegen::RTileKernel& k, const std::vector<cl_mem>& args, int runs) {
  double best = 1e300;
  for (int r = -1; r < runs; ++r) {
    FBL_ASSIGN(double ms, s.run(k, args));
    if (r >= 0) best = std::min(best, ms * 1e3);
  }
  return best;
}

// Per launch of `k` queued back to back as a step queues launches (ClSession::runQueued), us:
// the fastest of three batches.
Result<double> queuedUs(ClSession& s, const codegen::RTileKernel& k, const std::vector<cl_mem>& args) {
  constexpr int kBatch = 50;
  double best = 1e300;
  for (int r = 0; r < 3; ++r) {
    FBL_ASSIGN(double ms, s.runQueued(k, args, kBatch));
    best = std::min(best, ms * 1e3);
  }
  return best;
}

// What a narrow product cannot beat on this device: one launch that streams its operands' bytes
// from a plain buffer and writes its output's (a float4 each per work-item, 256 to a group), and
// one launch that does nothing. Both pay the launch and the memory's ramp that the product pays.
Result<nlohmann::json> streamFloor(ClSession& s, const Product& p, int runs) {
  const int64_t in4 = (p.m * p.k + p.k * p.n + 3) / 4, out4 = (p.m * p.n + 3) / 4;
  const int64_t items = (std::max(in4, out4) + 255) / 256 * 256;
  codegen::RTileKernel stream;
  stream.name = "stream_floor";
  stream.source = fmt::format(R"CL(
__kernel void stream_floor(__global const float4* in, __global float4* out) {{
  const uint i = get_global_id(0);
  if (i < {0}u) {{
    const float4 v = in[i];
    if (i < {1}u) out[i] = v;
    else if (v.x == 1234.5f) out[0] = v;  // keeps the load
  }} else if (i < {1}u) {{
    out[i] = (float4)(0.0f);
  }}
}}
__kernel void empty_launch(__global const float4* in, __global float4* out) {{}}
)CL", in4, out4);
  stream.args = {"in", "out"};
  stream.global = {static_cast<size_t>(items), 1, 1};
  stream.local = {256, 1, 1};
  codegen::RTileKernel empty = stream;
  empty.name = "empty_launch";
  empty.global = {256, 1, 1};
  FBL_ASSIGN(cl_mem in, s.buffer(static_cast<size_t>(in4 * 4)));
  FBL_ASSIGN(cl_mem out, s.buffer(static_cast<size_t>(out4 * 4)));
  auto streamUs = fastestUs(s, stream, {in, out}, runs);
  auto emptyUs = fastestUs(s, empty, {in, out}, runs);
  auto streamQueuedUs = queuedUs(s, stream, {in, out});
  auto emptyQueuedUs = queuedUs(s, empty, {in, out});
  s.release(in);
  s.release(out);
  for (const Result<double>* r : {&streamUs, &emptyUs, &streamQueuedUs, &emptyQueuedUs})
    if (!r->ok()) return r->error();
  return nlohmann::json{{"stream_us", *streamUs},
                        {"empty_launch_us", *emptyUs},
                        {"stream_queued_us", *streamQueuedUs},
                        {"empty_launch_queued_us", *emptyQueuedUs},
                        {"bytes", 16.0 * static_cast<double>(in4 + out4)}};
}

// `products` copies of a narrow product in one launch, as plans batch siblings
// (compiler/plan/launch_batching.h): `single` is the product tiled for such a launch
// (emitRTileMatmulNarrow's launchProducts); one lhs and one rhs here, an output each, every
// output checked on the sampled entries. Alone and queued us for the launch, and the worst error.
struct BatchedTiming {
  double us = 0, queuedUs = 0, worst = 0;
};

Result<BatchedTiming> timeBatched(ClSession& s, const codegen::RTileKernel& single, int64_t products, const Product& p,
                                  const Operands& ops, const Layout& ol,
                                  const std::vector<std::pair<int64_t, int64_t>>& probes,
                                  const std::vector<double>& want, int runs) {
  codegen::RTileKernel batched = single;
  batched.source += codegen::narrowBatchEntry(single.name, single.productParams, products,
                                              static_cast<int64_t>(single.global[2]));
  batched.name += codegen::narrowBatchEntryName(products);
  batched.global[2] *= static_cast<size_t>(products);
  for (int64_t i = 1; i < products; ++i) batched.args.insert(batched.args.end(), single.args.begin(), single.args.end());
  std::vector<cl_mem> outs{ops.out}, args;
  for (int64_t i = 1; i < products; ++i) {
    auto o = s.allocate(ol);
    if (!o.ok()) {
      for (size_t j = 1; j < outs.size(); ++j) s.release(outs[j]);
      return o.error();
    }
    outs.push_back(*o);
  }
  for (cl_mem o : outs) args.insert(args.end(), {ops.l, ops.r, o});
  auto timed = [&]() -> Result<BatchedTiming> {
    BatchedTiming t;
    FBL_ASSIGN(t.us, fastestUs(s, batched, args, runs));
    FBL_ASSIGN(t.queuedUs, queuedUs(s, batched, args));
    for (cl_mem o : outs) {
      FBL_ASSIGN(double e, sampledError(s, p, o, ol, probes, want));
      t.worst = std::max(t.worst, e);
    }
    return t;
  };
  Result<BatchedTiming> t = timed();
  for (size_t j = 1; j < outs.size(); ++j) s.release(outs[j]);
  return t;
}

// A narrow tiling as the sweep prints it: TMxTN/KS, then b<blocks a work-item> and k<chunks>
// where it has more than one.
std::string tileLabel(const codegen::NarrowTiling& t) {
  return fmt::format("{}x{}/{}", t.tm, t.tn, t.ks) + (t.bm * t.bn > 1 ? fmt::format(" b{}", t.bm * t.bn) : "") +
         (t.chunks > 1 ? fmt::format(" k{}", t.chunks) : "");
}

// rtile_matmul_narrow.cl on one product: the profile's own settings, the same with the narrow
// operand's staging switched, with its texel walk switched, with a narrow M's row blocks in one
// group switched, with K in chunks switched and with the narrow side whole in a work-item
// switched, then group sizes and fill targets around them, each checked on the sampled entries;
// beside them the stream floor (streamFloor).
Result<nlohmann::json> timeNarrow(ClSession& s, const codegen::MatmulCostModel& model, const Product& p,
                                  const Operands& ops, const Layout& ll, const Layout& rl, const Layout& ol,
                                  const std::vector<std::pair<int64_t, int64_t>>& probes,
                                  const std::vector<double>& want, int runs) {
  FBL_ASSIGN(nlohmann::json floor, streamFloor(s, p, runs));
  fmt::print("  plans run this product in rtile_matmul_narrow.cl (matmul.narrow); "
             "stream floor {:.1f} us for {:.2f} MB, empty launch {:.1f} us; queued as in a step {:.1f} and {:.1f} us\n",
             floor["stream_us"].get<double>(), floor["bytes"].get<double>() * 1e-6,
             floor["empty_launch_us"].get<double>(), floor["stream_queued_us"].get<double>(),
             floor["empty_launch_queued_us"].get<double>());
  constexpr int64_t kProducts = 3;  // q, k and v's
  fmt::print("  {:>5} {:>8} {:>6} {:>10} {:>10} {:>8} {:>10} {:>8} {:>10} {:>10} {:>8} {:>10}\n", "items", "fill",
             "walk", "tile/ks", "measured", "/floor", "queued", "/floor", "x3 tile", "x3 queued", "/product",
             "max relerr");
  std::vector<codegen::NarrowOptions> variants{model.narrow, model.narrow};
  variants[1].stageNarrowOperand = !model.narrow.stageNarrowOperand;
  // ... and with each rule that turns on at a narrow side switched for this product: off where
  // the profile's threshold takes it, on (from 1 wide) where it does not. dy B's texel walk
  // (matmul.narrow.texel_walk_min_side), then a narrow M's row blocks in one group
  // (rows_in_group_min_side).
  const int64_t side = std::min(p.m, p.n);
  auto switched = [side](int64_t minSide) -> int64_t { return minSide > 0 && side >= minSide ? 0 : 1; };
  variants.push_back(model.narrow);
  variants.back().texelWalkMinSide = switched(model.narrow.texelWalkMinSide);
  variants.push_back(model.narrow);
  variants.back().rowsInGroupMinSide = switched(model.narrow.rowsInGroupMinSide);
  // K in chunks (chunk_min_k), switched by K: a product the tiling chunks does not chunk it.
  variants.push_back(model.narrow);
  variants.back().chunkMinK = model.narrow.chunkMinK > 0 && p.k >= model.narrow.chunkMinK ? 0 : 1;
  // The narrow side whole in a work-item (wide_run): off where the profile has it, else runs of 8
  // and 32 texels (a product whose walk is not along its wide side is tiled as the profile's row).
  for (int64_t run : model.narrow.wideRun > 0 ? std::vector<int64_t>{0} : std::vector<int64_t>{8, 32}) {
    variants.push_back(model.narrow);
    variants.back().wideRun = run;
  }
  for (int64_t items : {64, 128, 256})
    for (int64_t fill : {0, 65536, 262144}) {
      codegen::NarrowOptions v = model.narrow;
      v.workItems = items;
      v.fillWorkItems = fill;
      variants.push_back(v);
    }
  nlohmann::json runsJson = nlohmann::json::array();
  for (size_t i = 0; i < variants.size(); ++i) {
    const codegen::NarrowOptions& v = variants[i];
    FBL_ASSIGN(auto k, codegen::emitRTileMatmulNarrow("sweep_narrow", p.m, p.k, p.n, {ll, p.lhsT}, {rl, p.rhsT}, ol, v,
                                                      model.localMemoryBytes));
    // The walk and tile the kernel was generated with, and whether it took the staging (it needs
    // the narrow operand stored along K, and room).
    const codegen::NarrowTiling& t = k.narrowTiling;
    const bool staged = k.stagesNarrowOperand;
    // How neighbouring work-items walk the product: the narrow kernel's FAST, or the staging.
    const char* walk = staged                                              ? "staged"
                       : k.narrowOrder == codegen::NarrowOrder::kSlices    ? "slices"
                       : k.narrowOrder == codegen::NarrowOrder::kRowBlocks ? "rows"
                                                                           : "texels";
    // K in chunks: the tiles' partial planes and their counts, zero before the first launch
    // (every launch leaves them zero; the queued runs and the check after them rely on it).
    FBL_ASSIGN(const std::vector<cl_mem> chunks, s.chunkBuffers(k));
    std::vector<cl_mem> args{ops.l, ops.r, ops.out};
    args.insert(args.end(), chunks.begin(), chunks.end());
    Result<double> us = fastestUs(s, k, args, runs), queued = us.ok() ? queuedUs(s, k, args) : us;
    for (cl_mem c : chunks) s.release(c);
    if (!queued.ok()) return queued.error();
    FBL_ASSIGN(double worst, sampledError(s, p, ops.out, ol, probes, want));
    // Three in one launch, tiled for it as plans tile a batched launch (the fill target counts
    // all three). Plans do not batch products with K in chunks (their scratch is their own).
    const bool batched = chunks.empty();
    BatchedTiming b;
    std::string batchedTile = "-";
    if (batched) {
      FBL_ASSIGN(auto kb, codegen::emitRTileMatmulNarrow("sweep_narrow", p.m, p.k, p.n, {ll, p.lhsT}, {rl, p.rhsT}, ol,
                                                         v, model.localMemoryBytes, nullptr, nullptr, kProducts));
      FBL_ASSIGN(b, timeBatched(s, kb, kProducts, p, ops, ol, probes, want, runs));
      worst = std::max(worst, b.worst);
      const codegen::NarrowTiling& tb = kb.narrowTiling;
      batchedTile = tileLabel(tb);
    }
    const std::string tile = tileLabel(t);
    fmt::print("  {:>5} {:>8} {:>6} {:>10} {:>10.1f} {:>8.2f} {:>10.1f} {:>8.2f} {:>10} {:>10} {:>8} {:>10.2g}{}{}\n",
               v.workItems, v.fillWorkItems, walk, tile, *us, *us / floor["stream_us"].get<double>(),
               *queued, *queued / floor["stream_queued_us"].get<double>(), batchedTile,
               batched ? fmt::format("{:.1f}", b.queuedUs) : "-", batched ? fmt::format("{:.1f}", b.queuedUs / kProducts) : "-",
               worst, worst > 1e-3 ? "  WRONG" : "", i == 0 ? "  (profile)" : "");
    runsJson.push_back({{"work_items", v.workItems}, {"fill_work_items", v.fillWorkItems}, {"staged", staged}, {"walk", walk},
                        {"tile", tile}, {"chunks", t.chunks}, {"min_us", *us}, {"queued_us", *queued}, {"max_rel_err", worst},
                        {"batched", batched ? nlohmann::json{{"products", kProducts}, {"tile", batchedTile},
                                                             {"min_us", b.us}, {"queued_us", b.queuedUs}}
                                            : nlohmann::json()},
                        {"profile", i == 0}});
  }
  floor["runs"] = runsJson;
  return floor;
}

}  // namespace

int runMatmulSweep(const MatmulSweepOptions& o) {
  auto session = ClSession::open(o.device);
  if (!session.ok()) return fmt::print(stderr, "error: {}\n", session.error().message), 1;
  ClSession& s = **session;
  const std::string profPath = !o.profile.empty() ? o.profile
                               : s.deviceName().find("H200") != std::string::npos ? findProfile("nvidia-h200")
                               : findProfile("pocl-cpu");
  auto hw = profile::loadProfile(profPath);
  if (!hw.ok()) return fmt::print(stderr, "error: {}\n", hw.error().message), 1;
  auto prof = plan::plannerProfile(*hw, profPath);
  if (!prof.ok()) return fmt::print(stderr, "error: {}\n", prof.error().message), 1;
  s.setBuildOptions(prof->buildOptions);
  if (o.storage != "buffer" && o.storage != "image")
    return fmt::print(stderr, "error: --storage must be buffer or image, not '{}'\n", o.storage), 2;
  codegen::MatmulCostModel model = prof->matmul;
  if (model.computeUnits <= 0) model.computeUnits = s.computeUnits();
  for (const std::string& spec : o.tiles) {
    auto t = codegen::parseTileSpec(spec, 1);
    if (!t.ok()) return fmt::print(stderr, "error: --tile: {}\n", t.error().message), 2;
    model.candidates.push_back({*t, 0.5, 1});
  }
  if (model.candidates.empty())
    return fmt::print(stderr, "error: {} has no matmul.tilings and no --tile was given\n", profPath), 2;
  if (model.peakGflops <= 0 || model.bandwidthGbps <= 0)
    return fmt::print(stderr, "error: {} needs peak_gflops and bandwidth_gbps for the cost model\n", profPath), 2;

  fmt::print("matmul sweep on {} ({} storage, profile {}), {} candidates, {} runs each, times in us\n", s.deviceName(),
             o.storage, profPath, model.candidates.size(), o.runs);
  nlohmann::json report{{"device", s.deviceName()}, {"profile", profPath}, {"storage", o.storage},
                        {"runs", o.runs}, {"products", nlohmann::json::array()}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const Product& p : products(o.rank, std::max(1, o.scale))) {
    if (!o.only.empty() && p.name.find(o.only) == std::string::npos) continue;
    Operands ops;
    const int64_t lr = p.lhsT ? p.k : p.m, lc = p.lhsT ? p.m : p.k;
    const int64_t rr = p.rhsT ? p.n : p.k, rc = p.rhsT ? p.k : p.n;
    ops.lhs.resize(static_cast<size_t>(lr * lc));
    ops.rhs.resize(static_cast<size_t>(rr * rc));
    for (float& x : ops.lhs) x = dist(rng);
    for (float& x : ops.rhs) x = dist(rng);
    auto ll = operandLayout(o.storage, lr, lc), rl = operandLayout(o.storage, rr, rc);
    auto ol = operandLayout(o.storage, p.m, p.n);
    if (!ll.ok() || !rl.ok() || !ol.ok()) return fmt::print(stderr, "error: {}: no image fits\n", p.name), 1;
    auto lm = s.allocate(*ll), rm = s.allocate(*rl), om = s.allocate(*ol);
    if (!lm.ok() || !rm.ok() || !om.ok()) return fmt::print(stderr, "error: {}: allocation failed\n", p.name), 1;
    ops.l = *lm;
    ops.r = *rm;
    ops.out = *om;
    if (auto st = s.upload(*lm, *ll, ops.lhs); !st.ok()) return fmt::print(stderr, "error: {}\n", st.error().message), 1;
    if (auto st = s.upload(*rm, *rl, ops.rhs); !st.ok()) return fmt::print(stderr, "error: {}\n", st.error().message), 1;
    // Sampled reference entries, summed in double.
    std::vector<std::pair<int64_t, int64_t>> probes;
    std::vector<double> want;
    std::uniform_int_distribution<int64_t> pi(0, p.m - 1), pj(0, p.n - 1);
    for (int q = 0; q < 64; ++q) {
      const int64_t i = pi(rng), j = pj(rng);
      double acc = 0;
      for (int64_t kk = 0; kk < p.k; ++kk) acc += static_cast<double>(lhsAt(p, ops, i, kk)) * rhsAt(p, ops, kk, j);
      probes.push_back({i, j});
      want.push_back(acc);
    }
    codegen::MatmulEstimate chosenE;
    const MatmulTiling chosen = codegen::chooseMatmulTiling(model, s.deviceClass(), p.m, p.n, p.k, 1, &chosenE);
    fmt::print("\n{} [{} x {}] x [{} x {}]{}{}: model picks {} p{} split {} (est {:.1f})\n", p.name, p.m, p.k, p.k, p.n,
               p.lhsT ? ", lhs^T" : "", p.rhsT ? ", rhs^T" : "", codegen::tileString(chosen), chosen.pipeline,
               chosen.splitK, chosenE.us);
    fmt::print("  {:<16} {:>2} {:>5} {:>10} {:>10} {:>8} {:>9} {:>10}\n", "tile", "p", "split", "measured", "estimate",
               "GFLOP/s", "implied", "max relerr");
    nlohmann::json jp{{"name", p.name}, {"m", p.m}, {"k", p.k}, {"n", p.n}, {"lhs_t", p.lhsT}, {"rhs_t", p.rhsT},
                      {"chosen", {{"tile", codegen::tileString(chosen)}, {"pipeline", chosen.pipeline},
                                  {"split", chosen.splitK}, {"estimate_us", chosenE.us}}},
                      {"runs", nlohmann::json::array()}};
    double bestUs = 1e300, chosenUs = -1;
    for (const MatmulCandidate& c : model.candidates) {
      if (model.localMemoryBytes > 0 && codegen::matmulLocalBytes(c.tiling) > model.localMemoryBytes) continue;
      codegen::MatmulCostModel one = model;
      one.candidates = {c};
      const MatmulTiling own = codegen::chooseMatmulTiling(one, s.deviceClass(), p.m, p.n, p.k);
      std::vector<int64_t> splits{1};
      if (own.splitK != 1) splits.push_back(own.splitK);
      if (chosen.tm == c.tiling.tm && chosen.tn == c.tiling.tn && chosen.tk == c.tiling.tk && chosen.rm == c.tiling.rm &&
          chosen.rn == c.tiling.rn && chosen.pipeline == c.tiling.pipeline &&
          std::find(splits.begin(), splits.end(), chosen.splitK) == splits.end())
        splits.push_back(chosen.splitK);
      for (int64_t split : splits) {
        MatmulTiling t = c.tiling;
        t.splitK = split;
        auto k = codegen::emitRTileMatmul("sweep_matmul", p.m, p.k, p.n, {*ll, p.lhsT}, {*rl, p.rhsT}, *ol, t);
        if (!k.ok()) {
          fmt::print("  {:<16} {:>2} {:>5} {}\n", codegen::tileString(t), t.pipeline, split, k.error().message);
          continue;
        }
        cl_mem partial = nullptr;
        std::optional<codegen::RTileKernel> sum;
        if (split > 1) {
          auto pb = s.buffer(static_cast<size_t>(split * p.m * p.n));
          if (!pb.ok()) return fmt::print(stderr, "error: {}\n", pb.error().message), 1;
          partial = *pb;
          auto sk = codegen::emitRTileSplitKSum("sweep_splitk", p.m, p.n, split, *ol);
          if (!sk.ok()) return fmt::print(stderr, "error: {}\n", sk.error().message), 1;
          sum = *sk;
        }
        std::vector<double> times;
        std::string failure;
        for (int r = -1; r < o.runs && failure.empty(); ++r) {
          auto ms = s.run(*k, {*lm, *rm, partial ? partial : *om});
          double t1 = 0;
          if (ms.ok() && sum) {
            auto ms2 = s.run(*sum, {partial, *om});
            if (!ms2.ok()) failure = ms2.error().message;
            else t1 = *ms2;
          }
          if (!ms.ok()) failure = ms.error().message;
          else if (r >= 0) times.push_back((*ms + t1) * 1e3);
        }
        if (partial) s.release(partial);
        if (!failure.empty()) {
          fmt::print("  {:<16} {:>2} {:>5} failed: {}\n", codegen::tileString(t), t.pipeline, split, failure);
          continue;
        }
        std::sort(times.begin(), times.end());
        auto checked = sampledError(s, p, *om, *ol, probes, want);
        if (!checked.ok()) return fmt::print(stderr, "error: {}\n", checked.error().message), 1;
        const double worst = *checked;
        const codegen::MatmulEstimate e = codegen::estimateMatmul(model, c, p.m, p.n, p.k, 1, split);
        const double us = times.front();
        // The efficiency that would make the compute term equal the measurement.
        const double implied = e.computeUs > 0 ? c.efficiency * e.computeUs / std::max(1e-9, us - e.sumUs) : 0;
        const double gflops = 2.0 * static_cast<double>(p.m * p.k * p.n) / (us * 1e-6) * 1e-9;
        fmt::print("  {:<16} {:>2} {:>5} {:>10.1f} {:>10.1f} {:>8.0f} {:>9.3f} {:>10.2g}{}\n", codegen::tileString(t),
                   t.pipeline, split, us, e.us, gflops, implied, worst, worst > 1e-3 ? "  WRONG" : "");
        const bool isChosen = t.tm == chosen.tm && t.tn == chosen.tn && t.tk == chosen.tk && t.rm == chosen.rm &&
                              t.rn == chosen.rn && t.pipeline == chosen.pipeline && split == chosen.splitK;
        if (isChosen) chosenUs = us;
        if (worst <= 1e-3) bestUs = std::min(bestUs, us);
        jp["runs"].push_back({{"tile", codegen::tileString(t)}, {"pipeline", t.pipeline}, {"split", split},
                              {"min_us", us}, {"median_us", times[times.size() / 2]}, {"estimate_us", e.us},
                              {"implied_efficiency", implied}, {"max_rel_err", worst}, {"gflops", gflops}});
      }
    }
    const double bytes = 4.0 * static_cast<double>(p.m * p.k + p.k * p.n + p.m * p.n);
    const double boundUs = bytes / model.bandwidthGbps * 1e-3;
    if (codegen::isNarrowProduct(model, p.m, p.n)) {
      auto narrow = timeNarrow(s, model, p, ops, *ll, *rl, *ol, probes, want, o.runs);
      if (!narrow.ok()) return fmt::print(stderr, "error: {}: {}\n", p.name, narrow.error().message), 1;
      jp["narrow"] = *narrow;
    }
    fmt::print("  fastest {:.1f} us, model's pick {:.1f} us ({:.2f}x the fastest); bandwidth bound {:.1f} us\n", bestUs,
               chosenUs, chosenUs > 0 ? chosenUs / bestUs : 0.0, boundUs);
    jp["fastest_us"] = bestUs;
    jp["chosen_us"] = chosenUs;
    jp["bandwidth_bound_us"] = boundUs;
    report["products"].push_back(jp);
    s.release(*lm);
    s.release(*rm);
    s.release(*om);
  }
  if (!o.json.empty()) {
    std::ofstream out(o.json);
    out << report.dump(1) << "\n";
  }
  return 0;
}

}  // namespace fbl::bench
