// Shared by the device tests: run a small graph through codegen + plan + runtime on PoCL and
// through the reference executor, and compare every output element.
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "compiler/ops/op_schema.h"
#include "compiler/plan/plan_builder.h"
#include "compiler/ref/executor.h"
#include "runtime/safetensors.h"
#include "runtime/session.h"
#include "tests/ops/graph_builder.h"
#include "tests/runtime/temp_dir.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {

inline ir::Tensor randomTensor(ir::DType dt, const ir::Shape& s, std::mt19937& rng, double lo = -1.0,
                               double hi = 1.0) {
  ir::Tensor t(dt, s);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double x = u(rng);
    t.set(i, ir::isFloat(dt) ? x : dt == ir::DType::Bool ? (x > (lo + hi) / 2 ? 1 : 0) : std::floor(x));
  }
  return t;
}

// Max |a - b| over max(1, max |b|).
inline double scaledError(const ir::Tensor& a, const ir::Tensor& b) {
  double err = 0.0, scale = 1.0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    err = std::max(err, std::fabs(a.at(i) - b.at(i)));
    scale = std::max(scale, std::fabs(b.at(i)));
  }
  return err / scale;
}

// Max |a - b| over max |b|: the corpus's measure for gradients.
inline double relativeToMaxAbs(const ir::Tensor& a, const ir::Tensor& b) {
  double err = 0.0, scale = 0.0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    err = std::max(err, std::fabs(a.at(i) - b.at(i)));
    scale = std::max(scale, std::fabs(b.at(i)));
  }
  return scale > 0.0 ? err / scale : err;
}

// The f32 tensors of a safetensors file (exported adapters), by name.
inline std::map<std::string, ir::Tensor> readSafetensors(const std::string& path) {
  safetensors::File f = fbl::testing::requireValue(safetensors::read(path));
  std::map<std::string, ir::Tensor> out;
  for (const auto& [name, e] : f.tensors) {
    REQUIRE(e.dtype == "F32");
    ir::Tensor t(ir::DType::F32, e.shape);
    REQUIRE(t.nbytes() == e.data.size());
    std::memcpy(t.raw(), e.data.data(), e.data.size());
    out.emplace(name, std::move(t));
  }
  return out;
}

inline plan::Profile testProfile() {
  plan::Profile p;
  p.name = "pocl-cpu";
  p.workgroupSize = 64;
  p.bufferAlignment = 512;
  return p;
}

inline std::unique_ptr<rt::Session> openPlan(const planfile::Plan& plan, const std::string& name) {
  const std::string path = tempDir() + "/" + name + ".fbp";
  REQUIRE_OK(safetensors::writeFileAtomic(path, planfile::serialize(plan)));
  return fbl::testing::requireValue(rt::Session::open(path));
}

// Infers the types of every node of `g`, runs it on PoCL and with the reference executor from
// the same random inputs (`feeds`, by graph input order), and checks `g.outputs`.
inline void checkOnDevice(ir::Graph& g, const std::vector<ir::Tensor>& feeds, double tol = 1e-5,
                          const plan::Profile& profile = testProfile()) {
  for (ir::Node& n : g.nodes) {
    if (!ops::findSchema(n.op)) continue;  // fbl ops under test set their output types by hand
    Status st = ops::inferNode(g, n);
    INFO((st.ok() ? std::string() : st.error().message));
    REQUIRE(st.ok());
  }
  auto expected = ref::runGraph(g, feeds);
  INFO((expected.ok() ? std::string() : expected.error().message));
  REQUIRE(expected.ok());
  plan::PlanInputs in;
  in.graph = &g;
  in.keep = g.outputs;
  in.model = g.nodes.empty() ? "empty" : g.nodes.back().op;
  plan::BuildStats stats;
  auto plan = plan::buildPlan(in, profile, &stats);
  INFO((plan.ok() ? std::string() : plan.error().message));
  REQUIRE(plan.ok());
  auto s = openPlan(plan.value(), "kernel");
  for (size_t i = 0; i < g.inputs.size(); ++i)
    REQUIRE_OK(s->writeTensor(g.values[g.inputs[i]].name, feeds[i].raw(), feeds[i].nbytes()));
  REQUIRE_OK(s->runPhases({"forward", "backward", "optimizer"}));
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    const ir::Value& v = g.values[g.outputs[o]];
    std::vector<unsigned char> bytes;
    // A view or in-place output lives in its source's tensor.
    REQUIRE(stats.tensorOfValue.count(g.outputs[o]) == 1);
    const int32_t t = stats.tensorOfValue[g.outputs[o]];
    REQUIRE_OK(s->readTensor(t, &bytes));
    ir::Tensor got(v.dtype, v.shape);
    REQUIRE(bytes.size() == got.nbytes());
    std::memcpy(got.raw(), bytes.data(), bytes.size());
    INFO("output " << v.name << " of " << in.model);
    CHECK(scaledError(got, expected.value()[o]) <= tol);
  }
}

// One small graph under test: random inputs, then a device-vs-reference check of its outputs.
struct Case {
  GraphBuilder b;
  std::vector<ir::Tensor> feeds;
  std::mt19937 rng{7};
  plan::Profile profile = testProfile();
  ir::ValueId in(const std::string& name, ir::DType dt, ir::Shape s, double lo = -1.0, double hi = 1.0) {
    feeds.push_back(randomTensor(dt, s, rng, lo, hi));
    return b.input(name, dt, std::move(s));
  }
  void run(ir::ValueId out, double tol = 1e-5) { run(std::vector<ir::ValueId>{out}, tol); }
  void run(const std::vector<ir::ValueId>& outs, double tol = 1e-5) {
    for (ir::ValueId o : outs)
      if (o != ir::kNoValue) b.output(o);
    checkOnDevice(b.g, feeds, tol, profile);
  }
  // The error building a plan for `out` gives (the case fails if the plan builds).
  std::string planError(ir::ValueId out, const std::string& model) {
    b.output(out);
    for (ir::Node& n : b.g.nodes) REQUIRE(ops::inferNode(b.g, n).ok());
    plan::PlanInputs in;
    in.graph = &b.g;
    in.keep = b.g.outputs;
    in.model = model;
    auto plan = plan::buildPlan(in, testProfile());
    REQUIRE_FALSE(plan.ok());
    return plan.error().message;
  }
};

}  // namespace fbl::testing
