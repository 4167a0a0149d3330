// TensorProto datasets (fbl-train's reader): input_K.pb with a leading N, and test_data_set_*
// folders of different sample counts concatenated, each sample named by its own file.
// fbl-train on a dataset file, end to end on PoCL with tests/data/llama-tiny: two epochs over a
// small generated .safetensors dataset, shuffled by seed with two samples held out; the eval
// loss is printed at each epoch's end; a run stopped mid-epoch and resumed gives exactly the
// losses of the uninterrupted one; a resume with another seed and a dataset with a token id
// outside the vocabulary are one line each and exit 1. The same under --grad-accum 2, with an
// epoch ending inside an accumulation window. Without --data, synthetic batches from the plan.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/driver/compile_command.h"
#include "compiler/onnx/tensor_proto.h"
#include "compiler/passes/load_model.h"
#include "compiler/zoo/synthetic_inputs.h"
#include "runtime/include/fbl/fbl_runtime.h"
#include "runtime/safetensors.h"
#include "runtime/tools/train_data.h"
#include "tests/device/device_test_util.h"
#include "tests/runtime/scoped_env.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

struct Run {
  int status = -1;
  std::string log;  // stdout and stderr
};

Run fblTrain(const std::string& args, const std::string& name) {
  const std::string log = tempDir() + "/" + name + ".log";
  const int st = std::system((std::string(FBL_BIN_DIR) + "/fbl-train " + args + " > " + log + " 2>&1").c_str());
  std::stringstream out;
  out << std::ifstream(log).rdbuf();
  return Run{WIFEXITED(st) ? WEXITSTATUS(st) : -1, out.str()};
}

// "step 3/20 [...] loss 5.123456 ..." -> "3 5.123456", one a step.
std::vector<std::string> stepLosses(const std::string& log) {
  static const std::regex line(R"(step (\d+)/\d+ \[[^\]]*\] loss (\S+))");
  std::vector<std::string> out;
  for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it) out.push_back((*it)[1].str() + " " + (*it)[2].str());
  return out;
}

std::vector<double> numbersAfter(const std::string& log, const std::string& pattern) {
  const std::regex re(pattern);
  std::vector<double> out;
  for (std::sregex_iterator it(log.begin(), log.end(), re), end; it != end; ++it) out.push_back(std::stod((*it)[1].str()));
  return out;
}

std::string lineWith(const std::string& log, const std::string& start) {
  const size_t at = log.find(start);
  return at == std::string::npos ? "" : log.substr(at, log.find('\n', at) - at);
}

// llama-tiny compiled for PoCL into tempDir()/NAME.fbp with its weights beside it.
driver::CompileArgs compiledLlamaTiny(const std::string& name, driver::Compiled* out, int gradAccum = 1,
                                      float lr = 1e-3f) {
  driver::CompileArgs a;
  a.model = std::string(FBL_TEST_DATA_DIR) + "/llama-tiny/model.onnx";
  a.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  a.output = tempDir() + "/" + name + ".fbp";
  a.weights = tempDir() + "/" + name + ".safetensors";
  a.gradAccum = gradAccum;
  a.lr = lr;
  auto c = driver::compileModel(a);
  REQUIRE(c.ok());
  REQUIRE(driver::writeWeights(a, c->plan).ok());
  REQUIRE_OK(safetensors::writeFileAtomic(a.output, planfile::serialize(c->plan)));
  *out = std::move(*c);
  return a;
}

TEST_CASE("TensorProto datasets: a leading N, and folders concatenated in name order", "[dataset]") {
  planfile::Plan plan;
  planfile::Tensor t;
  t.name = "ids";
  t.dtype = "i64";
  t.shape = {1, 4};
  t.role = planfile::Role::Input;
  t.bytes = 32;
  plan.tensors.push_back(t);
  plan.inputs.push_back(0);
  const std::string dir = tempDir() + "/pb-dataset";
  std::system(("rm -rf " + dir + " && mkdir -p " + dir + "/one " + dir + "/sets/test_data_set_0 " + dir + "/sets/test_data_set_1").c_str());
  auto ids = [](int64_t n, int64_t from) {
    ir::Tensor x(ir::DType::I64, {n, 1, 4});
    for (int64_t i = 0; i < x.numel(); ++i) x.set(i, static_cast<double>(from + i));
    return x;
  };
  REQUIRE(onnx::writeTensorProtoFile(dir + "/one/input_0.pb", "ids", ids(3, 0)).ok());
  rt::Dataset d = fbl::testing::requireValue(train::loadDataset(dir + "/one", plan));
  CHECK(d.size() == 3);
  CHECK(reinterpret_cast<const int64_t*>(d.sample(0, 2))[0] == 8);

  // test_data_set_0 holds one sample of the plan's own shape, test_data_set_1 two more.
  ir::Tensor first(ir::DType::I64, {1, 4});
  for (int64_t i = 0; i < 4; ++i) first.set(i, 100.0 + static_cast<double>(i));
  REQUIRE(onnx::writeTensorProtoFile(dir + "/sets/test_data_set_0/input_0.pb", "ids", first).ok());
  REQUIRE(onnx::writeTensorProtoFile(dir + "/sets/test_data_set_1/input_0.pb", "ids", ids(2, 0)).ok());
  d = fbl::testing::requireValue(train::loadDataset(dir + "/sets", plan));
  CHECK(d.size() == 3);
  CHECK(reinterpret_cast<const int64_t*>(d.sample(0, 0))[0] == 100);
  CHECK(reinterpret_cast<const int64_t*>(d.sample(0, 2))[0] == 4);
  CHECK(d.where(0, 0) == dir + "/sets/test_data_set_0/input_0.pb: sample 0");
  CHECK(d.where(0, 2) == dir + "/sets/test_data_set_1/input_0.pb: sample 2");

  ir::Tensor wrong(ir::DType::I64, {3, 5});
  REQUIRE(onnx::writeTensorProtoFile(dir + "/one/input_0.pb", "ids", wrong).ok());
  CHECK(fbl::testing::errorText(train::loadDataset(dir + "/one", plan)) ==
        "'" + dir + "/one/input_0.pb': tensor 'ids' is i64[3,5] but a sample of the plan's input is i64[1,4]: give i64[N,1,4] or i64[N*1,4]");
  CHECK_THAT(fbl::testing::errorText(train::loadDataset(dir + "/none", plan)), Catch::Contains("does not exist"));
  std::system(("mkdir -p " + dir + "/empty").c_str());
  CHECK(fbl::testing::errorText(train::loadDataset(dir + "/empty", plan)) ==
        "dataset '" + dir + "/empty' holds no input_0.pb, test_data_set_*/input_0.pb or INPUT.npy");
}

TEST_CASE("fbl-train: two epochs of a dataset, eval loss, resume mid-epoch, bad data", "[runtime][dataset-train]") {
  driver::Compiled compiled;
  const driver::CompileArgs a = compiledLlamaTiny("llama-dataset", &compiled);
  const driver::Compiled* c = &compiled;
  const planfile::Tensor& input = c->plan.tensors[c->plan.inputs.at(0)];
  REQUIRE(input.shape == std::vector<int64_t>{1, 16});

  // 12 samples: runs of token ids with a step of 1..4 from a random start, something to learn.
  const int64_t n = 12;
  std::vector<int64_t> ids;
  std::mt19937 rng(5);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t start = rng() % 256, step = 1 + rng() % 4;
    for (int64_t k = 0; k < 16; ++k) ids.push_back((start + step * k) % 256);
  }
  auto writeDataset = [&](const std::string& path, const std::vector<int64_t>& v) {
    safetensors::File f;
    f.tensors[input.name] = safetensors::Entry{"I64", {n, 1, 16}, std::vector<unsigned char>(v.size() * 8)};
    std::memcpy(f.tensors[input.name].data.data(), v.data(), v.size() * 8);
    REQUIRE_OK(safetensors::write(path, f));
  };
  const std::string data = tempDir() + "/tokens.safetensors";
  writeDataset(data, ids);
  const std::string common = a.output + " --weights " + a.weights + " --data " + data + " --eval-samples 2 ";

  const Run whole = fblTrain(common + "--seed 7 --epochs 2", "dataset-whole");
  INFO(whole.log);
  REQUIRE(whole.status == 0);
  CHECK_THAT(whole.log, Catch::Contains("data: 12 samples from " + data + ": 10 to train on, 2 held out, shuffled by seed 7"));
  const std::vector<std::string> losses = stepLosses(whole.log);
  CHECK(losses.size() == 20);
  const std::vector<double> trainMeans = numbersAfter(whole.log, R"(epoch \d/2 done at step \d+: mean train loss (\S+) over 10 steps)");
  const std::vector<double> evalLosses = numbersAfter(whole.log, R"(eval loss (\S+) \(2 batches at step (?:10|20)\))");
  REQUIRE(trainMeans.size() == 2);
  REQUIRE(evalLosses.size() == 2);
  CHECK(trainMeans[1] < trainMeans[0]);
  CHECK(evalLosses[1] < evalLosses[0]);

  // The C API with the same order trains the same first step.
  fbl_session* cs = nullptr;
  REQUIRE(fbl_open(a.output.c_str(), -1, nullptr, &cs) == FBL_OK);
  REQUIRE(fbl_load_weights(cs, a.weights.c_str()) == FBL_OK);
  fbl_dataset* ds = nullptr;
  REQUIRE(fbl_dataset_open(cs, data.c_str(), &ds) == FBL_OK);
  CHECK(fbl_dataset_size(ds) == n);
  REQUIRE(fbl_dataset_write_sample(cs, ds, fbl_sample_at(n, 2, 1, 7, 0)) == FBL_OK);
  float first = 0.0f;
  REQUIRE(fbl_train_step(cs, &first) == FBL_OK);
  CHECK(fmt::format("1 {:.6f}", first) == losses.at(0));
  CHECK(fbl_dataset_write_sample(cs, ds, n) == FBL_ERROR);
  fbl_dataset_close(ds);

  // Stopped at step 13 (epoch 2, sample 3), resumed to the end: the same losses, step for step.
  const std::string ckpt = " --checkpoint " + tempDir() + "/dataset.ckpt --checkpoint-every 4 ";
  std::remove((tempDir() + "/dataset.ckpt").c_str());
  const Run part = fblTrain(common + "--seed 7 --steps 13" + ckpt, "dataset-part");
  REQUIRE(part.status == 0);
  const Run rest = fblTrain(common + "--seed 7 --epochs 2 --resume" + ckpt, "dataset-rest");
  INFO(rest.log);
  REQUIRE(rest.status == 0);
  CHECK_THAT(rest.log, Catch::Contains("at step 13 (epoch 2, sample 3 of 10)"));
  std::vector<std::string> resumed = stepLosses(part.log);
  for (const std::string& l : stepLosses(rest.log)) resumed.push_back(l);
  CHECK(resumed == losses);
  CHECK(lineWith(rest.log, "eval loss") == lineWith(whole.log.substr(whole.log.find("at step 10)")), "eval loss"));
  const std::string doneLoss = R"(done: step 20 loss (\S+))";
  CHECK(numbersAfter(rest.log, doneLoss) == numbersAfter(whole.log, doneLoss));
  CHECK(numbersAfter(rest.log, doneLoss).size() == 1);

  // Another seed cannot go on from that checkpoint.
  const Run otherSeed = fblTrain(common + "--seed 8 --epochs 2 --resume" + ckpt, "dataset-seed");
  CHECK(otherSeed.status == 1);
  CHECK_THAT(otherSeed.log, Catch::Contains("error: the checkpoint's dataset position '" + tempDir() +
                                            "/dataset.ckpt.data.json' has --seed 7, this run --seed 8"));

  // A token id outside the vocabulary: the file and the sample, before any step.
  std::vector<int64_t> bad = ids;
  bad[5 * 16 + 9] = 300;
  const std::string badData = tempDir() + "/bad-tokens.safetensors";
  writeDataset(badData, bad);
  const Run refused = fblTrain(a.output + " --weights " + a.weights + " --data " + badData + " --epochs 1",
                               "dataset-bad");
  CHECK(refused.status == 1);
  CHECK_THAT(refused.log, Catch::Contains("error: " + badData + ": sample 5: input '" + input.name + "' position 9 ([0, 9]): index 300 is outside"));
  CHECK_THAT(refused.log, !Catch::Contains("step 1/"));
  CHECK(fbl_dataset_open(cs, badData.c_str(), &ds) == FBL_ERROR_INPUT);
  CHECK_THAT(std::string(fbl_last_error()),
             Catch::StartsWith("fbl_dataset_open: " + badData + ": sample 5: input '" + input.name + "' position 9"));
  fbl_close(cs);
}

// Without --data, fbl-train draws batch k from the plan alone (its inputs and input_checks) and
// reads the weights `fblc compile` wrote beside the plan; the batches are those the compiler
// draws from the ONNX graph (zoo::syntheticInputs), so the C API fed those gives the same losses.
// The reference executor is the reference for fbl-train runs: `fblc run-ref --data` reads the
// same dataset forms and trains step k on fbl-train's k-th sample for the same seed, across an
// epoch's reshuffle, to PoCL's losses.
TEST_CASE("fblc run-ref trains on fbl-train's dataset in fbl-train's order", "[runtime][dataset-train]") {
  driver::Compiled compiled;
  const driver::CompileArgs a = compiledLlamaTiny("llama-run-ref", &compiled);
  const planfile::Tensor& input = compiled.plan.tensors[compiled.plan.inputs.at(0)];
  const int64_t n = 3, steps = 7;  // two epochs and a third begun, each shuffled
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < 16; ++k) ids.push_back((40 * i + (i + 1) * k) % 256);
  safetensors::File f;
  f.tensors[input.name] = safetensors::Entry{"I64", {n, 1, 16}, std::vector<unsigned char>(ids.size() * 8)};
  std::memcpy(f.tensors[input.name].data.data(), ids.data(), ids.size() * 8);
  const std::string data = tempDir() + "/run-ref-tokens.safetensors";
  REQUIRE_OK(safetensors::write(data, f));

  const Run device = fblTrain(a.output + " --data " + data + " --seed 3 --steps " + std::to_string(steps),
                              "run-ref-device");
  INFO(device.log);
  REQUIRE(device.status == 0);
  auto runRef = [&](const std::string& seed, const std::string& name) {
    const std::string log = tempDir() + "/" + name + ".log";
    const int st = std::system((std::string(FBL_BIN_DIR) + "/fblc run-ref " + a.model + " --data " + data + seed + " --steps " +
                                std::to_string(steps) + " > " + log + " 2>&1")
                                   .c_str());
    std::stringstream out;
    out << std::ifstream(log).rdbuf();
    INFO(out.str());
    REQUIRE(WIFEXITED(st));
    REQUIRE(WEXITSTATUS(st) == 0);
    return numbersAfter(out.str(), R"(step \d+ loss (\S+))");
  };
  const std::vector<double> reference = runRef(" --seed 3", "run-ref-seeded"), fileOrder = runRef("", "run-ref-file-order");
  const std::vector<double> pocl = numbersAfter(device.log, R"(step \d+/\d+ \[[^\]]*\] loss (\S+))");
  REQUIRE(reference.size() == static_cast<size_t>(steps));
  REQUIRE(pocl.size() == static_cast<size_t>(steps));
  double worst = 0, orderMatters = 0;
  for (int64_t k = 0; k < steps; ++k) {
    worst = std::max(worst, std::fabs(reference[k] - pocl[k]) / std::fabs(reference[k]));
    orderMatters = std::max(orderMatters, std::fabs(fileOrder[k] - pocl[k]));
  }
  std::printf("run-ref --seed 3 against fbl-train --seed 3, %lld steps over 3 samples: worst relative loss difference %.1e\n",
              static_cast<long long>(steps), worst);
  CHECK(worst <= 1e-5);
  CHECK(orderMatters > 1e-3);  // the seed's order is not file order: the check above can fail
}

TEST_CASE("fbl-train: synthetic inputs from the plan's bounds, weights beside the plan", "[runtime][dataset-train]") {
  driver::Compiled compiled;
  const driver::CompileArgs a = compiledLlamaTiny("llama-synthetic", &compiled);
  const std::string dump = tempDir() + "/synthetic-dump";
  const Run run = fblTrain(a.output + " --steps 3 --seed 5 --dump-grads " + dump, "synthetic");
  INFO(run.log);
  REQUIRE(run.status == 0);
  CHECK_THAT(run.log, Catch::Contains("data: synthetic inputs (seed 5)"));
  const std::vector<std::string> losses = stepLosses(run.log);
  REQUIRE(losses.size() == 3);

  auto g = passes::loadModel(a.model);
  REQUIRE(g.ok());
  fbl_session* cs = nullptr;
  REQUIRE(fbl_open(a.output.c_str(), -1, nullptr, &cs) == FBL_OK);
  REQUIRE(fbl_load_weights(cs, a.weights.c_str()) == FBL_OK);
  for (int64_t k = 0; k < 3; ++k) {
    auto batch = zoo::syntheticInputs(*g, 5, k);
    REQUIRE(batch.ok());
    for (ir::ValueId v : g->inputs) {
      const ir::Tensor& t = batch->at(v);
      const std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
      INFO(fbl_last_error());
      REQUIRE(fbl_write_input(cs, g->values[v].name.c_str(), std::string(ir::dtypeName(t.dtype())).c_str(), shape.data(),
                              shape.size(), t.raw(), t.nbytes()) == FBL_OK);
    }
    float loss = 0.0f;
    REQUIRE(fbl_train_step(cs, &loss) == FBL_OK);
    CHECK(fmt::format("{} {:.6f}", k + 1, loss) == losses.at(static_cast<size_t>(k)));
    if (k > 0) continue;
    // --dump-grads wrote the first step's loss and gradients as TensorProtos.
    auto dumpedLoss = onnx::readTensorProtoFile(dump + "/loss.pb");
    REQUIRE(dumpedLoss.ok());
    CHECK(dumpedLoss->tensor.at(0) == loss);
    for (const planfile::Trainable& t : compiled.plan.trainables) {
      const planfile::Tensor& param = compiled.plan.tensors[t.param];
      std::string file = param.name + ".pb";
      std::replace(file.begin(), file.end(), '/', '_');
      auto dumped = onnx::readTensorProtoFile(dump + "/grads/" + file);
      INFO(file);
      REQUIRE(dumped.ok());
      CHECK(dumped->name == param.name);
      REQUIRE(dumped->tensor.nbytes() == static_cast<size_t>(planfile::logicalBytes(param)));
      std::vector<float> grad(dumped->tensor.nbytes() / 4);
      REQUIRE(fbl_read_tensor(cs, compiled.plan.tensors[t.grad].name.c_str(), grad.data(), dumped->tensor.nbytes()) == FBL_OK);
      CHECK(std::memcmp(grad.data(), dumped->tensor.raw(), dumped->tensor.nbytes()) == 0);
    }
  }
  fbl_close(cs);

  const Run onnx = fblTrain(a.output + " --weights " + a.model + " --steps 1", "synthetic-onnx");
  CHECK(onnx.status == 2);
  CHECK_THAT(onnx.log, Catch::Contains("error: --weights takes the .safetensors `fblc compile` wrote beside the plan"));
  const std::string missing = tempDir() + "/no-such.safetensors";
  const Run none = fblTrain(a.output + " --weights " + missing + " --steps 1", "synthetic-missing");
  CHECK(none.status == 1);
  CHECK_THAT(none.log, Catch::Contains("error: weights '" + missing + "' do not exist"));
}

TEST_CASE("fbl-train: --cache-dir stores the built program, --no-program-cache builds without one", "[runtime][cache]") {
  const ScopedEnv cacheOn("FBL_PROGRAM_CACHE", nullptr);  // the test binaries turn it off
  driver::Compiled compiled;
  const driver::CompileArgs a = compiledLlamaTiny("llama-cache", &compiled);
  const std::string dir = tempDir() + "/train-cache";
  std::filesystem::remove_all(dir);
  const Run none = fblTrain(a.output + " --steps 1 --cache-dir " + dir + " --no-program-cache", "cache-none");
  INFO(none.log);
  REQUIRE(none.status == 0);
  CHECK(entriesIn(dir) == 0);
  CHECK_THAT(none.log, !Catch::Contains("read from the cache"));
  {
    const ScopedEnv defaultDir("FBL_CACHE_DIR", dir.c_str());  // where the default would store
    const Run empty = fblTrain(a.output + " --steps 1 --cache-dir ''", "cache-empty");  // "" as in fbl_open
    REQUIRE(empty.status == 0);
    CHECK(entriesIn(dir) == 0);
  }
  const Run first = fblTrain(a.output + " --steps 1 --cache-dir " + dir, "cache-first");
  REQUIRE(first.status == 0);
  CHECK(entriesIn(dir) == 1);
  const Run second = fblTrain(a.output + " --steps 1 --cache-dir " + dir, "cache-second");
  REQUIRE(second.status == 0);
  CHECK_THAT(second.log, Catch::Contains(", program from cache"));
  const ScopedEnv typo("FBL_PROGRAM_CACHE", "no");
  const Run refused = fblTrain(a.output + " --steps 1", "cache-typo");
  CHECK(refused.status == 1);
  CHECK_THAT(refused.log, Catch::Contains("error: FBL_PROGRAM_CACHE is 'no': 0 switches the runtime's program cache off"));
}

// --lr sets the base learning rate of a plan compiled with a schedule (step 1's loss is before
// any update, step 2's after one at that lr); a plan whose lr is a literal in its kernels refuses it.
TEST_CASE("fbl-train: --lr sets a scheduled plan's learning rate, and is refused where it is compiled in",
          "[runtime][train-files]") {
  driver::Compiled fixed;
  const driver::CompileArgs a = compiledLlamaTiny("llama-lr-fixed", &fixed);
  const Run refused = fblTrain(a.output + " --steps 2 --seed 3 --lr 0.05", "lr-fixed");
  CHECK(refused.status == 1);
  CHECK_THAT(refused.log, Catch::Contains("error: --lr: the plan's learning rate is compiled into its kernels") &&
                              Catch::Contains("--lr-schedule"));
  CHECK(stepLosses(refused.log).empty());
  const Run bad = fblTrain(a.output + " --lr -1", "lr-bad");
  CHECK(bad.status == 2);
  CHECK_THAT(bad.log, Catch::Contains("--lr needs a positive number"));

  driver::CompileArgs s = a;
  s.output = tempDir() + "/llama-lr-scheduled.fbp";
  s.weights = tempDir() + "/llama-lr-scheduled.safetensors";
  s.lrSchedule = "constant";
  auto c = driver::compileModel(s);
  REQUIRE(c.ok());
  REQUIRE(driver::writeWeights(s, c->plan).ok());
  REQUIRE_OK(safetensors::writeFileAtomic(s.output, planfile::serialize(c->plan)));
  const Run compiled = fblTrain(s.output + " --steps 2 --seed 3", "lr-compiled");
  const Run faster = fblTrain(s.output + " --steps 2 --seed 3 --lr 0.05", "lr-faster");
  INFO(compiled.log << faster.log);
  REQUIRE(compiled.status == 0);
  REQUIRE(faster.status == 0);
  CHECK_THAT(faster.log, Catch::Contains("learning rate: 0.05 (--lr"));
  const auto before = stepLosses(compiled.log), after = stepLosses(faster.log);
  REQUIRE(before.size() == 2);
  REQUIRE(after.size() == 2);
  CHECK(before[0] == after[0]);
  CHECK(before[1] != after[1]);
}

// --metrics writes a JSON line per optimizer step (the loss printed, the lr it used) and per
// evaluation; a resumed run appends, and its --loss-curve draws the whole run.
TEST_CASE("fbl-train: --metrics logs every step and evaluation as JSON lines, --loss-curve draws them", "[runtime][train-files]") {
  driver::Compiled compiled;
  const driver::CompileArgs a = compiledLlamaTiny("llama-metrics", &compiled);
  const std::string log = tempDir() + "/metrics/run.jsonl";
  const std::string ckpt = " --checkpoint " + tempDir() + "/metrics.ckpt";
  const Run run = fblTrain(a.output + " --steps 3 --seed 2 --metrics " + log + ckpt, "metrics");
  INFO(run.log);
  REQUIRE(run.status == 0);
  const std::string curve = tempDir() + "/metrics/run.svg";
  const Run more = fblTrain(a.output + " --steps 4 --seed 2 --resume --metrics " + log + " --loss-curve " + curve + ckpt,
                            "metrics-resumed");
  INFO(more.log);
  REQUIRE(more.status == 0);
  std::vector<nlohmann::json> lines;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  REQUIRE(lines.size() == 4);
  std::vector<std::string> printed = stepLosses(run.log);
  for (const std::string& l : stepLosses(more.log)) printed.push_back(l);
  REQUIRE(printed.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(lines[i]["step"] == static_cast<int64_t>(i + 1));
    CHECK(fmt::format("{} {:.6f}", i + 1, lines[i]["loss"].get<double>()) == printed[i]);
    CHECK(lines[i]["lr"].get<double>() == Approx(1e-3));
    CHECK(lines[i]["samples_per_s"].get<double>() > 0);
  }
  std::ifstream svgIn(curve);
  REQUIRE(svgIn.good());
  const std::string svg((std::istreambuf_iterator<char>(svgIn)), std::istreambuf_iterator<char>());
  CHECK_THAT(svg, Catch::Contains("4 training steps"));
  for (size_t i = 0; i < 4; ++i)
    CHECK_THAT(svg, Catch::Contains(fmt::format("<title>step {} loss {:.6g}</title>", i + 1, lines[i]["loss"].get<double>())));
  CHECK_THAT(more.log, Catch::Contains("loss curve: " + curve));
  const Run folder = fblTrain(a.output + " --steps 1 --metrics " + tempDir(), "metrics-folder");
  CHECK(folder.status == 1);
  CHECK_THAT(folder.log, Catch::Contains("--metrics '" + tempDir() + "' is a folder"));
  const Run curveFolder = fblTrain(a.output + " --steps 1 --loss-curve " + tempDir(), "curve-folder");
  CHECK(curveFolder.status == 1);
  CHECK_THAT(curveFolder.log, Catch::Contains("--loss-curve '" + tempDir() + "' is a folder"));
}

// --resume goes on from a checkpoint that must exist: a mistyped path is one line and exit 1, not a
// fresh start. --resume-if-exists, for a supervisor that restarts one command line, starts from
// step 0 when there is none yet.
TEST_CASE("fbl-train: --resume refuses a missing checkpoint, --resume-if-exists starts without one", "[runtime][train-files]") {
  driver::Compiled compiled;
  const driver::CompileArgs a = compiledLlamaTiny("llama-resume", &compiled);
  const std::string common = a.output + " ";
  const std::string typo = tempDir() + "/resume-typo.ckpt";
  std::remove(typo.c_str());
  const Run missing = fblTrain(common + "--steps 2 --resume --checkpoint " + typo, "resume-missing");
  INFO(missing.log);
  CHECK(missing.status == 1);
  CHECK_THAT(missing.log, Catch::Contains("error: --resume: no checkpoint at '" + typo + "'"));
  CHECK_THAT(missing.log, !Catch::Contains("step 1/"));

  const std::string ckpt = tempDir() + "/resume-supervised.ckpt";
  std::remove(ckpt.c_str());
  const Run first = fblTrain(common + "--steps 2 --resume-if-exists --checkpoint " + ckpt, "resume-first");
  INFO(first.log);
  REQUIRE(first.status == 0);
  CHECK_THAT(first.log, Catch::Contains("no checkpoint at " + ckpt + ": starting from step 0"));
  const Run again = fblTrain(common + "--steps 3 --resume-if-exists --checkpoint-every 1 --checkpoint " + ckpt, "resume-again");
  INFO(again.log);
  REQUIRE(again.status == 0);
  const Run strict = fblTrain(common + "--steps 4 --resume --checkpoint " + ckpt, "resume-strict");
  INFO(strict.log);
  REQUIRE(strict.status == 0);
  CHECK_THAT(strict.log, Catch::Contains("resumed from " + ckpt + " at step 3"));
  CHECK_THAT(strict.log, Catch::Contains("done: step 4"));

  const Run both = fblTrain(common + "--resume --resume-if-exists", "resume-both");
  CHECK(both.status == 2);
  CHECK_THAT(both.log, Catch::Contains("error: give --resume or --resume-if-exists, not both"));
}

// Every file fbl-train writes is checked before the device is opened (a folder it cannot create
// or write in: one line naming the flag and the path). The run is checkpointed by default, so an
// adapter export that fails after training loses nothing: the error names the checkpoint and the
// command that exports it, which gives the adapter an uninterrupted run exports.
TEST_CASE("fbl-train: output paths checked before training, the run checkpointed by default", "[runtime][train-files]") {
  driver::Compiled compiled;
  const driver::CompileArgs a = compiledLlamaTiny("llama-outputs", &compiled);
  const std::string blocker = tempDir() + "/outputs-a-file";
  std::ofstream(blocker) << "not a folder";
  for (const std::string flag : {"--checkpoint", "--export-adapter", "--dump-grads"}) {
    const std::string path = blocker + "/out";
    const Run refused = fblTrain(a.output + " --steps 1 " + flag + " " + path, "outputs-refused");
    INFO(refused.log);
    CHECK(refused.status == 1);
    CHECK_THAT(refused.log, Catch::StartsWith("error: " + flag + " '" + path + "': "));
    CHECK(std::count(refused.log.begin(), refused.log.end(), '\n') == 1);  // before the device is opened
  }
  const Run folder = fblTrain(a.output + " --steps 1 --checkpoint " + tempDir(), "outputs-folder");
  CHECK(folder.status == 1);
  CHECK_THAT(folder.log, Catch::Contains("error: --checkpoint '" + tempDir() + "' is a folder, not a checkpoint file"));

  // No --checkpoint-every: the end of the run is saved beside the plan all the same.
  const std::string ckpt = tempDir() + "/llama-outputs.ckpt.safetensors";
  std::remove(ckpt.c_str());
  const std::string out = tempDir() + "/outputs-adapter";
  std::filesystem::remove_all(out);
  std::filesystem::create_directories(out + "/adapter_model.safetensors");  // in the export's way
  const Run failed = fblTrain(a.output + " --steps 3 --export-adapter " + out, "outputs-export-failed");
  INFO(failed.log);
  CHECK(failed.status == 1);
  CHECK_THAT(failed.log, Catch::Contains("checkpoint: " + ckpt + " (at the end)"));
  CHECK_THAT(failed.log, Catch::Contains("done: step 3"));
  CHECK_THAT(failed.log, Catch::Contains("is a directory") && Catch::Contains("; the run is saved in '" + ckpt + "' (step 3)"));
  safetensors::File saved = fbl::testing::requireValue(safetensors::read(ckpt));
  CHECK(saved.metadata.at("step") == "3");

  // The command the error prints exports the saved run without training: the adapter is the one
  // an uninterrupted run exports.
  const size_t open = failed.log.find("export it with `fbl-train "), close = failed.log.find('`', open + 16);
  REQUIRE(open != std::string::npos);
  REQUIRE(close != std::string::npos);
  const std::string printed = failed.log.substr(open + 26, close - open - 26);
  CHECK(printed == a.output + " --weights " + a.weights + " --resume --checkpoint " + ckpt + " --steps 0 --export-adapter " + out);
  std::filesystem::remove(out + "/adapter_model.safetensors");
  const Run exported = fblTrain(printed, "outputs-exported");
  INFO(exported.log);
  REQUIRE(exported.status == 0);
  CHECK_THAT(exported.log, Catch::Contains("resumed from " + ckpt + " at step 3") && Catch::Contains("done: already at step 3"));
  const Run straight = fblTrain(a.output + " --steps 3 --checkpoint " + tempDir() + "/outputs-straight.ckpt --export-adapter " + out +
                                    "-straight",
                                "outputs-straight");
  REQUIRE(straight.status == 0);
  std::string exportedBytes, straightBytes;
  exportedBytes = fbl::testing::requireValue(rt::readWholeFile(out + "/adapter_model.safetensors", "an adapter"));
  straightBytes = fbl::testing::requireValue(rt::readWholeFile(out + "-straight/adapter_model.safetensors", "an adapter"));
  CHECK(exportedBytes == straightBytes);
}

// Weights and checkpoints carry fbl.checksum: a flipped bit is refused in one line. A checkpoint
// records the frozen weights it was trained on, so another model's checkpoint with the same
// trainable names and shapes is refused. Files without the keys (older ones) still load.
TEST_CASE("fbl-train: corrupted files and another model's checkpoint are refused", "[runtime][train-files]") {
  driver::Compiled compiled;
  const driver::CompileArgs a = compiledLlamaTiny("llama-identity", &compiled);
  safetensors::File weights = fbl::testing::requireValue(safetensors::read(a.weights));
  REQUIRE(weights.metadata.count("fbl.checksum") == 1);  // fblc compile wrote it

  // One bit of a frozen weight flipped, the header untouched.
  std::string bytes = fbl::testing::requireValue(rt::readWholeFile(a.weights, "weights"));
  bytes[bytes.size() - 5] = static_cast<char>(bytes[bytes.size() - 5] ^ 0x10);
  const std::string flipped = tempDir() + "/identity-flipped.safetensors";
  REQUIRE_OK(safetensors::writeFileAtomic(flipped, bytes));
  const Run corrupt = fblTrain(a.output + " --weights " + flipped + " --steps 1", "identity-corrupt");
  CHECK(corrupt.status == 1);
  CHECK_THAT(corrupt.log, Catch::Contains("error: '" + flipped + "' is corrupted: its tensors or metadata do not match its checksum"));
  CHECK_THAT(corrupt.log, !Catch::Contains("step 1/"));

  const std::string ckpt = tempDir() + "/identity.ckpt";
  const Run trained = fblTrain(a.output + " --steps 2 --checkpoint " + ckpt, "identity-trained");
  REQUIRE(trained.status == 0);
  safetensors::File saved = fbl::testing::requireValue(safetensors::read(ckpt));
  CHECK(saved.metadata.count("fbl.checksum") == 1);
  CHECK(saved.metadata.count("fbl.base_weights") == 1);

  // The checkpoint with one bit of its data flipped.
  bytes = fbl::testing::requireValue(rt::readWholeFile(ckpt, "checkpoint"));
  bytes[bytes.size() - 3] = static_cast<char>(bytes[bytes.size() - 3] ^ 0x01);
  const std::string badCkpt = tempDir() + "/identity-flipped.ckpt";
  REQUIRE_OK(safetensors::writeFileAtomic(badCkpt, bytes));
  const Run corruptCkpt = fblTrain(a.output + " --steps 3 --resume --checkpoint " + badCkpt, "identity-corrupt-ckpt");
  CHECK(corruptCkpt.status == 1);
  CHECK_THAT(corruptCkpt.log, Catch::Contains("error: '" + badCkpt + "' is corrupted"));

  // Another model: the same names and shapes, other frozen weights (a valid file of its own).
  safetensors::File other = weights;
  std::string frozen;
  for (const planfile::Tensor& t : compiled.plan.tensors)
    if (t.role == planfile::Role::Weight && frozen.empty()) frozen = t.source;
  REQUIRE_FALSE(frozen.empty());
  other.tensors.at(frozen).data[0] ^= 0x01;
  other.metadata.erase("fbl.checksum");
  safetensors::addChecksum(&other);
  const std::string otherWeights = tempDir() + "/identity-other.safetensors";
  REQUIRE_OK(safetensors::write(otherWeights, other));
  const Run foreign = fblTrain(a.output + " --weights " + otherWeights + " --steps 3 --resume --checkpoint " + ckpt,
                               "identity-foreign");
  INFO(foreign.log);
  CHECK(foreign.status == 1);
  CHECK_THAT(foreign.log, Catch::Contains("error: checkpoint '" + ckpt + "' was trained on other frozen weights (" +
                                          saved.metadata.at("fbl.base_weights") + ", model 'llama-tiny')") &&
                              Catch::Contains("it belongs to another model or weights file"));
  CHECK_THAT(foreign.log, !Catch::Contains("step 3/"));

  // Files without the keys, as written before them, load as they did.
  weights.metadata.erase("fbl.checksum");
  const std::string oldWeights = tempDir() + "/identity-old.safetensors";
  REQUIRE_OK(safetensors::write(oldWeights, weights));
  saved.metadata.erase("fbl.checksum");
  saved.metadata.erase("fbl.base_weights");
  const std::string oldCkpt = tempDir() + "/identity-old.ckpt";
  REQUIRE_OK(safetensors::write(oldCkpt, saved));
  const Run old = fblTrain(a.output + " --weights " + oldWeights + " --steps 3 --resume --checkpoint " + oldCkpt,
                           "identity-old");
  INFO(old.log);
  CHECK(old.status == 0);
  CHECK_THAT(old.log, Catch::Contains("resumed from " + oldCkpt + " at step 2") && Catch::Contains("done: step 3"));
}

// A plan compiled with --grad-accum 2: each train step is one micro-batch of one sample, an
// optimizer step takes two. 13 samples, 2 held out: epoch 1 ends on the first micro-batch of the
// sixth window, so its evaluation waits for that window's optimizer step; a run stopped after 3
// optimizer steps and resumed gives the uninterrupted run's losses, micro-batch for micro-batch.
TEST_CASE("fbl-train: a dataset under gradient accumulation, epochs ending inside a window", "[runtime][dataset-train]") {
  driver::Compiled compiled;
  const driver::CompileArgs a = compiledLlamaTiny("llama-dataset-accum", &compiled, 2, 1e-2f);
  const driver::Compiled* c = &compiled;
  const planfile::Tensor& input = c->plan.tensors[c->plan.inputs.at(0)];
  const int64_t n = 13;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < 16; ++k) ids.push_back((i * 17 + (1 + i % 3) * k) % 256);
  safetensors::File f;
  f.tensors[input.name] = safetensors::Entry{"I64", {n, 1, 16}, std::vector<unsigned char>(ids.size() * 8)};
  std::memcpy(f.tensors[input.name].data.data(), ids.data(), ids.size() * 8);
  const std::string data = tempDir() + "/tokens-accum.safetensors";
  REQUIRE_OK(safetensors::write(data, f));
  const std::string common = a.output + " --weights " + a.weights + " --data " + data + " --eval-samples 2 --seed 3 ";

  const Run whole = fblTrain(common + "--epochs 2", "accum-whole");
  INFO(whole.log);
  REQUIRE(whole.status == 0);
  const std::vector<std::string> losses = stepLosses(whole.log);
  CHECK(losses.size() == 22);  // 2 epochs x 11 samples, one a micro-batch: 11 optimizer steps
  CHECK(losses.front().rfind("0 ", 0) == 0);  // the first window's micro-batches report step 0, then 1
  CHECK(numbersAfter(whole.log, R"(epoch 1/2 done at step (\d+): mean train loss \S+ over 11 micro-batches)") ==
        std::vector<double>{5});
  CHECK(numbersAfter(whole.log, R"(epoch 2/2 done at step (\d+): mean train loss \S+ over 11 micro-batches)") ==
        std::vector<double>{11});
  // Epoch 1 ended inside window 6: its evaluation comes after that window's optimizer step.
  CHECK(numbersAfter(whole.log, R"(eval loss \S+ \(2 batches at step (\d+)\))") == std::vector<double>{6, 11});
  CHECK_THAT(whole.log, Catch::Contains("done: step 11 "));

  const std::string ckpt = " --checkpoint " + tempDir() + "/accum.ckpt --checkpoint-every 3 ";
  std::remove((tempDir() + "/accum.ckpt").c_str());
  const Run part = fblTrain(common + "--steps 3" + ckpt, "accum-part");
  INFO(part.log);
  REQUIRE(part.status == 0);
  const Run rest = fblTrain(common + "--epochs 2 --resume" + ckpt, "accum-rest");
  INFO(rest.log);
  REQUIRE(rest.status == 0);
  CHECK_THAT(rest.log, Catch::Contains("at step 3 (epoch 1, sample 6 of 11)"));
  std::vector<std::string> resumed = stepLosses(part.log);
  CHECK(resumed.size() == 6);
  for (const std::string& l : stepLosses(rest.log)) resumed.push_back(l);
  CHECK(resumed == losses);
}

}  // namespace
}  // namespace fbl::testing
