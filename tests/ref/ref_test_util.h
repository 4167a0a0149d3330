// Helpers for the reference-kernel tests: run one node, make random tensors, and do the index
// arithmetic the naive references are written with.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/ref/kernels.h"

namespace fbl::reftest {

using ir::AttrValue;
using ir::DType;
using ir::Shape;
using ir::Tensor;
using Attrs = std::map<std::string, AttrValue>;

// Evaluates one node of op `op` on `inputs` (nullptr: omitted input).
inline Result<std::vector<Tensor>> runOp(const std::string& op, std::vector<const Tensor*> inputs,
                                         Attrs attrs = {}, int numOutputs = 1) {
  ir::Graph g;
  g.name = "test";
  ir::Node n;
  n.op = op;
  n.name = op + "_0";
  n.attrs = std::move(attrs);
  for (int i = 0; i < numOutputs; ++i) n.outputs.push_back(i);
  return ref::evalNode(g, n, inputs);
}

// Same, failing the test (with the kernel's message) on an error.
inline std::vector<Tensor> mustRun(const std::string& op, std::vector<const Tensor*> inputs,
                                   Attrs attrs = {}, int numOutputs = 1) {
  auto r = runOp(op, std::move(inputs), std::move(attrs), numOutputs);
  INFO((r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
  return std::move(r).value();
}

inline Tensor randomF32(const Shape& s, std::mt19937& rng, float lo = -2.0f, float hi = 2.0f) {
  Tensor t(DType::F32, s);
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

inline Tensor randomInt(DType dt, const Shape& s, std::mt19937& rng, int64_t lo, int64_t hi) {
  Tensor t(dt, s);
  std::uniform_int_distribution<int64_t> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>(d(rng)));
  return t;
}

inline Tensor i64s(std::vector<int64_t> v) {
  return Tensor::fromVector<int64_t>({static_cast<int64_t>(v.size())}, v);
}

inline Shape randomShape(std::mt19937& rng, int minRank, int maxRank, int maxDim) {
  std::uniform_int_distribution<int> r(minRank, maxRank), d(1, maxDim);
  Shape s(r(rng));
  for (auto& x : s) x = d(rng);
  return s;
}

// A shape that broadcasts to `out`: some leading dims dropped, some dims set to 1.
inline Shape broadcastableTo(const Shape& out, std::mt19937& rng) {
  std::uniform_int_distribution<size_t> drop(0, out.size());
  std::bernoulli_distribution one(0.3);
  Shape s(out.begin() + drop(rng), out.end());
  for (auto& x : s)
    if (one(rng)) x = 1;
  return s;
}

inline std::vector<int64_t> unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}

// Flat offset in a tensor of shape `in` of the (right-aligned, broadcast) index `idx`.
inline int64_t ravelBroadcast(const std::vector<int64_t>& idx, const Shape& in) {
  int64_t off = 0;
  size_t lead = idx.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) off = off * in[d] + (in[d] == 1 ? 0 : idx[lead + d]);
  return off;
}

// max |a - b| / max(1, max |b|): the corpus's comparison.
inline double scaledMaxError(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double err = 0, scale = 1;
  for (int64_t i = 0; i < a.numel(); ++i) {
    err = std::max(err, std::abs(a.at(i) - b.at(i)));
    scale = std::max(scale, std::abs(b.at(i)));
  }
  return err / scale;
}

// Every element equal (exact: movement ops and integer arithmetic).
inline void requireEqual(const Tensor& a, const Tensor& b) {
  REQUIRE(a.dtype() == b.dtype());
  REQUIRE(a.shape() == b.shape());
  for (int64_t i = 0; i < a.numel(); ++i) {
    INFO("element " << i);
    REQUIRE(a.at(i) == b.at(i));
  }
}

}  // namespace fbl::reftest
