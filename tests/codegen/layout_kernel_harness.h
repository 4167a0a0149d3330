// Shared by the layout-kernel tests (operand_layout_test.cc, fused_elementwise_test.cc): random
// operand layouts (row-major, permuted, tile-major R-Tiles, and read-throughs built from random
// movement chains over those), device buffers bound by value id, and host-side reads through a
// layout's index map, the definition every kernel must agree with.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>

#include "compiler/codegen/operand_layout.h"
#include "harness/cl_session.h"
#include "tests/ops/graph_builder.h"

namespace fbl::codegen::kernel_test {

using layout::Layout;
using layout::MovementOp;
using layout::TileSpec;
using ir::Shape;

inline std::unique_ptr<fbl::harness::ClSession> openSession() {
  setenv("POCL_CACHE_DIR", FBL_SOURCE_DIR "/build-pocl-cache", 0);
  auto s = fbl::harness::ClSession::open();
  if (!s.ok()) FAIL(s.error().message);
  return std::move(*s);
}

inline Layout must(Result<Layout> l) {
  if (!l.ok()) FAIL(l.error().message);
  return *l;
}

// A layout with no read-through: row-major, permuted, or an R-Tile stored tile-major.
inline Layout simpleLayout(const Shape& s, std::mt19937& rng) {
  if (s.empty()) return Layout::rowMajor(s);
  switch (rng() % 4) {
    case 0: return Layout::rowMajor(s);
    case 1: {
      std::vector<int64_t> perm(s.size());
      for (size_t d = 0; d < perm.size(); ++d) perm[d] = static_cast<int64_t>(d);
      std::shuffle(perm.begin(), perm.end(), rng);
      return must(Layout::permuted(s, perm));
    }
    default: {
      const TileSpec specs[] = {TileSpec::rowStrips(4, 8), TileSpec::rowStrips(2, 4), TileSpec::rowStrips(8, 16),
                                TileSpec::blocks(4, 8, 2, 8, 1, 4)};
      TileSpec t = specs[rng() % 4];
      t.rowsAlongX = rng() % 2;
      return must(Layout::rtile(s, t, layout::Storage::Buffer));
    }
  }
}

// A layout for `s` read through a random movement chain: pick an op that produces `s`, make a
// source shape for it, lay the source out (recursively), apply the op.
inline Layout randomLayout(const Shape& s, std::mt19937& rng, int depth) {
  if (depth == 0 || s.empty() || rng() % 5 == 0) return simpleLayout(s, rng);
  const size_t r = s.size();
  switch (rng() % 4) {
    case 0: {  // Transpose
      std::vector<int64_t> perm(r);
      for (size_t d = 0; d < r; ++d) perm[d] = static_cast<int64_t>(d);
      std::shuffle(perm.begin(), perm.end(), rng);
      Shape src(r);
      for (size_t k = 0; k < r; ++k) src[perm[k]] = s[k];
      return must(randomLayout(src, rng, depth - 1).transpose(perm));
    }
    case 1: {  // Reshape: split a dim of even extent, or merge two neighbours
      Shape src = s;
      const size_t d = rng() % r;
      if (s[d] % 2 == 0 && s[d] > 2) {
        src[d] = 2;
        src.insert(src.begin() + static_cast<int64_t>(d) + 1, s[d] / 2);
      } else if (d + 1 < r) {
        src[d] = s[d] * s[d + 1];
        src.erase(src.begin() + static_cast<int64_t>(d) + 1);
      }
      return must(randomLayout(src, rng, depth - 1).reshape(s));
    }
    case 2: {  // Slice one axis of a larger source
      Shape src = s;
      const size_t d = rng() % r;
      const int64_t step = 1 + static_cast<int64_t>(rng() % 2), start = static_cast<int64_t>(rng() % 3);
      src[d] = start + (s[d] - 1) * step + 1 + static_cast<int64_t>(rng() % 2);
      const MovementOp op = MovementOp::slice({static_cast<int64_t>(d)}, {start}, {start + (s[d] - 1) * step + 1}, {step});
      return must(randomLayout(src, rng, depth - 1).apply(op));
    }
    default: {  // Expand a source with unit dims
      Shape src = s;
      for (int64_t& x : src)
        if (rng() % 3 == 0) x = 1;
      return must(randomLayout(src, rng, depth - 1).apply(MovementOp::expand(s)));
    }
  }
}

inline std::vector<int64_t> unflatten(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}

// The operand index that output index `o` reads (numpy broadcast).
inline std::vector<int64_t> broadcastIndex(const std::vector<int64_t>& o, const Shape& in) {
  std::vector<int64_t> idx(in.size());
  const size_t lead = o.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) idx[d] = in[d] == 1 ? 0 : o[lead + d];
  return idx;
}

// Device memory of one kernel argument, as raw 32-bit words (bytes for bool).
struct Buffer {
  ir::DType dtype = ir::DType::F32;
  std::vector<float> words;  // storage; ints and bytes are reinterpreted
  double get(int64_t i) const {
    if (dtype == ir::DType::F32) return words[i];
    if (dtype == ir::DType::I32) {
      int32_t v;
      std::memcpy(&v, &words[0] + i, 4);
      return v;
    }
    return reinterpret_cast<const uint8_t*>(words.data())[i];
  }
  void set(int64_t i, double x) {
    if (dtype == ir::DType::F32) words[i] = static_cast<float>(x);
    else if (dtype == ir::DType::I32) { const int32_t v = static_cast<int32_t>(x); std::memcpy(&words[0] + i, &v, 4); }
    else reinterpret_cast<uint8_t*>(words.data())[i] = static_cast<uint8_t>(x);
  }
  static Buffer make(ir::DType t, int64_t elems) {
    Buffer b;
    b.dtype = t;
    b.words.assign(static_cast<size_t>(t == ir::DType::Bool ? (elems + 3) / 4 : elems), std::nanf(""));
    return b;
  }
};

// Runs every launch of `code`, arguments bound to `bufs` by value id (scratch allocated here);
// downloads every value buffer afterwards.
inline void runCode(fbl::harness::ClSession& s, const NodeCode& code, std::map<ir::ValueId, Buffer>& bufs) {
  std::map<ir::ValueId, cl_mem> mems;
  for (auto& [v, b] : bufs) {
    auto m = s.buffer(b.words.size(), b.words.data());
    REQUIRE(m.ok());
    mems[v] = *m;
  }
  std::vector<cl_mem> scratch;
  for (const ScratchSpec& sc : code.scratch) {
    auto m = s.buffer(static_cast<size_t>(ir::numElements(sc.shape)));
    REQUIRE(m.ok());
    scratch.push_back(*m);
  }
  int k = 0;
  for (const LaunchSpec& l : code.launches) {
    RTileKernel kern;
    kern.name = "k" + std::to_string(k++) + l.entry;
    kern.source = l.source;
    for (size_t p; (p = kern.source.find("{{NAME}}")) != std::string::npos;) kern.source.replace(p, 8, "k" + std::to_string(k - 1));
    for (int64_t g : l.global) kern.global.push_back(static_cast<size_t>(g));
    for (int64_t g : l.local) kern.local.push_back(static_cast<size_t>(g));
    std::vector<cl_mem> args;
    for (const ArgRef& a : l.args) args.push_back(a.scratch ? scratch[a.index] : mems.at(a.index));
    kern.args.assign(args.size(), "arg");
    auto t = s.run(kern, args);
    INFO(kern.source);
    if (!t.ok()) FAIL(t.error().message);
  }
  for (auto& [v, b] : bufs) {
    auto r = s.readBuffer(mems[v], b.words.size());
    REQUIRE(r.ok());
    b.words = *r;
    s.release(mems[v]);
  }
  for (cl_mem m : scratch) s.release(m);
}

// A random source buffer behind an operand layout.
inline Buffer randomSource(const Layout& l, ir::DType t, std::mt19937& rng) {
  Buffer b = Buffer::make(t, l.bufferSize());
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  for (int64_t i = 0; i < l.bufferSize(); ++i) b.set(i, t == ir::DType::Bool ? rng() % 2 : u(rng));
  return b;
}

inline double readThrough(const Buffer& b, const Layout& l, const std::vector<int64_t>& idx,
                   const std::optional<layout::Expr>& sign) {
  const double v = b.get(l.locate(idx)[0]);
  return sign ? v * static_cast<double>(layout::eval(*sign, idx)) : v;
}

// +1 on the upper half of the last dim, -1 on the lower (RoPE's rotate_half); needs an even dim.
inline std::optional<layout::Expr> randomSign(const Shape& s, std::mt19937& rng) {
  if (s.empty() || s.back() % 2 != 0 || rng() % 3 != 0) return std::nullopt;
  const int d = static_cast<int>(s.size()) - 1;
  return layout::floorDiv(layout::Expr::var(d, s.back()), s.back() / 2) * 2 + (-1);
}

inline Shape randomShape(std::mt19937& rng, size_t minRank = 1) {
  const int64_t dims[] = {1, 2, 3, 4, 6, 8, 5, 16};
  Shape s(minRank + rng() % (5 - minRank));
  for (int64_t& x : s) x = dims[rng() % 8];
  return s;
}

// A float node of output shape `out` (GraphBuilder leaves shapes to inference).
inline ir::ValueId typedOp(testing::GraphBuilder& b, const std::string& op, std::vector<ir::ValueId> ins,
                           const Shape& out) {
  const ir::ValueId y = b.op(op, std::move(ins));
  b.g.values[y].shape = out;
  b.g.values[y].dtype = ir::DType::F32;
  return y;
}

}  // namespace fbl::codegen::kernel_test
