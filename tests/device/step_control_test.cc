// Progress reports and cancellation through the C API: a step cancelled from its progress
// callback leaves trainables, optimizer state and the step counter bit-identical, and the steps
// after it give exactly the losses of a run that was never cancelled. Also the evaluation step:
// the forward loss, with nothing updated.
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/driver/compile_command.h"
#include "runtime/include/fbl/fbl_runtime.h"
#include "tests/device/device_test_util.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

struct Files {
  std::string plan, weights;
  planfile::Plan parsed;
};

const Files& llamaTiny() {
  static const Files f = [] {
    driver::CompileArgs a;
    a.model = std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/model.onnx";
    a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
    a.output = tempDir() + "/control.fbp";
    a.weights = tempDir() + "/control.safetensors";
    auto c = driver::compileModel(a);
    REQUIRE(c.ok());
    REQUIRE(driver::writeWeights(a, c->plan).ok());
    Files out{a.output, a.weights, {}};
    const std::string bytes = planfile::serialize(c->plan);
    std::ofstream(out.plan, std::ios::binary) << bytes;
    out.parsed = fbl::testing::requireValue(planfile::parse(bytes));
    return out;
  }();
  return f;
}

fbl_session* openSession(const Files& f) {
  fbl_session* s = nullptr;
  INFO(fbl_last_error());
  REQUIRE(fbl_open(f.plan.c_str(), -1, nullptr, &s) == FBL_OK);
  REQUIRE(fbl_load_weights(s, f.weights.c_str()) == FBL_OK);
  return s;
}

// Batch k: token ids and labels inside the plan's bounds.
void writeBatch(fbl_session* s, const planfile::Plan& p, int k) {
  for (int32_t in : p.inputs) {
    const planfile::Tensor& t = p.tensors[in];
    REQUIRE(t.dtype == "i64");
    int64_t bound = 1 << 20;
    for (const auto& c : p.inputChecks)
      if (c.input == in) bound = std::min(bound, c.hi);
    std::vector<int64_t> v(static_cast<size_t>(planfile::logicalBytes(t) / 8));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>((i * 31 + static_cast<size_t>(k) * 7 + 3) % static_cast<size_t>(bound));
    INFO(fbl_last_error());
    REQUIRE(fbl_write_tensor(s, t.name.c_str(), v.data(), v.size() * 8) == FBL_OK);
  }
}

// Every byte a step may update: trainables and optimizer state, with the step counter.
std::vector<std::vector<unsigned char>> snapshot(fbl_session* s, const planfile::Plan& p) {
  std::vector<int32_t> ids;
  for (const auto& t : p.trainables) ids.push_back(t.param);
  ids.insert(ids.end(), p.state.begin(), p.state.end());
  std::vector<std::vector<unsigned char>> out;
  for (int32_t t : ids) {
    out.emplace_back(static_cast<size_t>(planfile::logicalBytes(p.tensors[t])));
    REQUIRE(fbl_read_tensor(s, p.tensors[t].name.c_str(), out.back().data(), out.back().size()) == FBL_OK);
  }
  const int64_t step = fbl_step(s);
  out.emplace_back(reinterpret_cast<const unsigned char*>(&step), reinterpret_cast<const unsigned char*>(&step) + 8);
  return out;
}

struct Recorder {
  std::vector<fbl_progress> reports;
  std::vector<std::string> phases;  // fbl_progress::phase is valid during the call only
  std::string cancelIn;             // cancel at the first report of this phase
  static int callback(void* user, const fbl_progress* p) {
    auto* r = static_cast<Recorder*>(user);
    r->reports.push_back(*p);
    r->phases.emplace_back(p->phase);
    return r->cancelIn == p->phase ? 1 : 0;
  }
};

bool sameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST_CASE("a step cancelled from its progress callback changes nothing, and training resumes", "[runtime][cancel]") {
  const Files& f = llamaTiny();
  const planfile::Plan& p = f.parsed;

  // The run that is never cancelled: three steps.
  fbl_session* plain = openSession(f);
  std::vector<float> expected(3);
  for (int k = 0; k < 3; ++k) {
    writeBatch(plain, p, k);
    REQUIRE(fbl_train_step(plain, &expected[k]) == FBL_OK);
  }
  const auto expectedState = snapshot(plain, p);
  fbl_close(plain);

  fbl_session* s = openSession(f);
  Recorder rec;
  fbl_set_progress(s, &Recorder::callback, &rec, 16);
  float loss = 0.0f;
  writeBatch(s, p, 0);
  REQUIRE(fbl_train_step(s, &loss) == FBL_OK);
  CHECK(sameBits(loss, expected[0]));
  // Reports: increasing, every 16 launches and at each phase's end, the last one the whole step.
  REQUIRE_FALSE(rec.reports.empty());
  for (size_t i = 0; i < rec.reports.size(); ++i) {
    CHECK(rec.reports[i].step == 1);
    CHECK(rec.reports[i].total == static_cast<int32_t>(p.launches.size()));
    if (i > 0) CHECK(rec.reports[i].done > rec.reports[i - 1].done);
  }
  CHECK(rec.reports.back().done == static_cast<int32_t>(p.launches.size()));
  CHECK(rec.phases.front() == "forward");
  CHECK(rec.phases.back() == "optimizer");

  // Step 2 cancelled in its backward phase.
  writeBatch(s, p, 1);
  const auto before = snapshot(s, p);
  rec = Recorder{};
  rec.cancelIn = "backward";
  CHECK(fbl_train_step(s, &loss) == FBL_CANCELLED);
  CHECK_THAT(fbl_last_error(), Catch::Contains("cancelled"));
  CHECK(rec.phases.back() == "backward");
  CHECK(std::find(rec.phases.begin(), rec.phases.end(), "optimizer") == rec.phases.end());
  CHECK(snapshot(s, p) == before);
  CHECK(fbl_step(s) == 1);

  // The step after it runs normally: the losses of the uncancelled run, bit for bit.
  rec.cancelIn.clear();
  REQUIRE(fbl_train_step(s, &loss) == FBL_OK);
  CHECK(sameBits(loss, expected[1]));

  // A cancel between steps stops the next one before it launches anything.
  writeBatch(s, p, 2);
  fbl_cancel(s);
  rec = Recorder{};
  CHECK(fbl_train_step(s, &loss) == FBL_CANCELLED);
  CHECK(rec.reports.empty());
  // A cancel in the optimizer phase is not honoured by that step: it completes, and the request
  // stops the following step.
  rec.cancelIn = "optimizer";
  REQUIRE(fbl_train_step(s, &loss) == FBL_OK);
  CHECK(sameBits(loss, expected[2]));
  CHECK(fbl_step(s) == 3);
  CHECK(snapshot(s, p) == expectedState);
  rec.cancelIn.clear();
  CHECK(fbl_train_step(s, &loss) == FBL_CANCELLED);
  CHECK(fbl_step(s) == 3);
  fbl_close(s);
}

TEST_CASE("an evaluation step gives the forward loss and updates nothing", "[runtime][eval]") {
  const Files& f = llamaTiny();
  const planfile::Plan& p = f.parsed;
  fbl_session* s = openSession(f);
  writeBatch(s, p, 0);
  float eval = 0.0f, train = 0.0f;
  const auto before = snapshot(s, p);
  INFO(fbl_last_error());
  REQUIRE(fbl_eval_step(s, &eval) == FBL_OK);
  CHECK(snapshot(s, p) == before);
  REQUIRE(fbl_train_step(s, &train) == FBL_OK);
  CHECK(sameBits(eval, train));
  // After the update the same batch evaluates lower.
  const auto after = snapshot(s, p);
  REQUIRE(fbl_eval_step(s, &eval) == FBL_OK);
  CHECK(snapshot(s, p) == after);
  CHECK(eval < train);
  fbl_close(s);
}

}  // namespace
}  // namespace fbl::testing
