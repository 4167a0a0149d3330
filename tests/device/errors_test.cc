// Bad input and faults: every one is a clear line naming what is wrong, never a crash.
#include <filesystem>
#include <fstream>

#include "compiler/driver/compile_command.h"
#include "tests/device/device_test_util.h"
#include "tests/runtime/scoped_env.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

struct Compiled {
  driver::CompileArgs args;
  planfile::Plan plan;
};

Compiled compileBert() {
  Compiled c;
  c.args.model = std::string(FBL_TEST_DATA_DIR) + "/bert-tiny/model.onnx";
  c.args.profile = std::string(FBL_SOURCE_DIR) + "/profiles/pocl-cpu.json";
  c.args.output = tempDir() + "/bert-err.fbp";
  c.args.weights = tempDir() + "/bert-err.safetensors";
  auto r = driver::compileModel(c.args);
  REQUIRE(r.ok());
  REQUIRE(driver::writeWeights(c.args, r->plan).ok());
  c.plan = r->plan;
  return c;
}

std::string openError(const std::string& bytes) {
  const std::string path = tempDir() + "/bad.fbp";
  std::ofstream(path, std::ios::binary) << bytes;
  auto s = rt::Session::open(path);
  CHECK_FALSE(s.ok());
  return fbl::testing::errorText(s);
}

TEST_CASE("plans of another version or corrupted are refused", "[runtime][errors]") {
  const Compiled c = compileBert();
  std::string bytes = planfile::serialize(c.plan);
  std::string v = bytes;
  v[8] = static_cast<char>(planfile::kVersion + 1);
  CHECK_THAT(openError(v), Catch::Contains("version " + std::to_string(planfile::kVersion + 1) + " is not supported"));
  std::string bad = bytes;
  bad[bytes.size() / 3] ^= 1;
  CHECK_THAT(openError(bad), Catch::Contains("checksum"));
  CHECK_THAT(openError(""), Catch::Contains("not an fbl plan"));
}

TEST_CASE("pools larger than the device allocates at once are refused before anything is allocated",
          "[runtime][errors][pools]") {
  // As a plan compiled for a profile whose max_alloc_bytes is larger than this device's: 1 TiB
  // pools, where PoCL allocates a few GiB at once.
  Compiled c = compileBert();
  c.plan.arenaBytes = c.plan.poolBytes = int64_t{1} << 40;
  const std::string err = openError(planfile::serialize(c.plan));
  CHECK_THAT(err, Catch::Contains("its pools of 1099511627776 bytes exceed the device's largest allocation") &&
                      Catch::Contains("recompile with this device's profile"));
  CHECK(err.find('\n') == std::string::npos);
}

TEST_CASE("a missing weight or a shape mismatch names the tensor", "[runtime][errors]") {
  const Compiled c = compileBert();
  auto s = openPlan(c.plan, "bert-err");
  safetensors::File f = fbl::testing::requireValue(safetensors::read(c.args.weights));
  const std::string victim = f.tensors.begin()->first;
  safetensors::File missing = f;
  missing.tensors.erase(victim);
  REQUIRE_OK(safetensors::write(tempDir() + "/missing.safetensors", missing));
  CHECK_THAT(fbl::testing::errorText(s->loadWeights(tempDir() + "/missing.safetensors")), Catch::Contains("'" + victim + "'"));
  safetensors::File reshaped = f;
  reshaped.tensors[victim].shape.push_back(1);
  REQUIRE_OK(safetensors::write(tempDir() + "/reshaped.safetensors", reshaped));
  CHECK_THAT(fbl::testing::errorText(s->loadWeights(tempDir() + "/reshaped.safetensors")),
             Catch::Contains("'" + victim + "'") && Catch::Contains("plan expects"));
  float loss = 0.0f;
  CHECK_THAT(fbl::testing::errorText(s->trainStep(&loss)), Catch::Contains("never loaded"));
}

TEST_CASE("an OpenCL build failure prints the kernel and the build log", "[runtime][errors]") {
  Compiled c = compileBert();
  const size_t p = c.plan.program.find("__kernel void k3_");
  REQUIRE(p != std::string::npos);
  const size_t body = c.plan.program.find('{', p);
  c.plan.program.insert(body + 1, "\n  this_is_not_opencl;");
  const std::string err = openError(planfile::serialize(c.plan));
  CHECK_THAT(err, Catch::Contains("build failed") && Catch::Contains("this_is_not_opencl") &&
                      Catch::Contains("build log") && Catch::Contains("__kernel void k3_"));
}

TEST_CASE("a NaN loss stops with the step number and leaves the trainables as they were",
          "[runtime][errors]") {
  const Compiled c = compileBert();
  auto s = openPlan(c.plan, "bert-nan");
  REQUIRE_OK(s->loadWeights(c.args.weights));
  std::vector<unsigned char> ids(c.plan.tensors[c.plan.inputs[0]].bytes, 0), labels(c.plan.tensors[c.plan.inputs[1]].bytes, 0);
  REQUIRE_OK(s->writeTensor(c.plan.tensors[c.plan.inputs[0]].name, ids.data(), ids.size()));
  REQUIRE_OK(s->writeTensor(c.plan.tensors[c.plan.inputs[1]].name, labels.data(), labels.size()));
  float loss = 0.0f;
  REQUIRE_OK(s->trainStep(&loss));
  const std::string ckpt = tempDir() + "/nan.ckpt";
  REQUIRE_OK(s->saveCheckpoint(ckpt));
  // Poison a frozen weight: the next loss is NaN.
  for (const planfile::Tensor& t : c.plan.tensors)
    if (t.role == planfile::Role::Weight && t.dtype == "f32") {
      std::vector<float> nan(static_cast<size_t>(t.bytes / 4), std::nanf(""));
      REQUIRE_OK(s->writeTensor(t.name, nan.data(), static_cast<size_t>(t.bytes)));
      break;
    }
  std::vector<unsigned char> before, after;
  REQUIRE_OK(s->readTensor(c.plan.trainables[0].param, &before));
  CHECK_THAT(fbl::testing::errorText(s->trainStep(&loss)), Catch::Contains("NaN at step 2"));
  REQUIRE_OK(s->readTensor(c.plan.trainables[0].param, &after));
  CHECK(before == after);
  CHECK(s->step() == 1);
  CHECK_OK(s->loadCheckpoint(ckpt));
  CHECK(s->step() == 1);
}

TEST_CASE("adapters are exported under peft's names", "[runtime][adapter]") {
  const Compiled c = compileBert();
  auto s = openPlan(c.plan, "bert-adapter");
  REQUIRE_OK(s->loadWeights(c.args.weights));
  const std::string dir = tempDir() + "/adapter";
  std::filesystem::create_directories(dir);
  REQUIRE_OK(s->exportAdapter(dir));
  safetensors::File f = fbl::testing::requireValue(safetensors::read(dir + "/adapter_model.safetensors"));
  CHECK(f.tensors.size() == c.plan.trainables.size());
  for (const auto& [name, e] : f.tensors) {
    CHECK(name.rfind("base_model.model.", 0) == 0);
    CHECK(name.find(".default.") == std::string::npos);
    CHECK((name.find(".lora_A.weight") != std::string::npos || name.find(".lora_B.weight") != std::string::npos));
  }
  std::ifstream cfg(dir + "/adapter_config.json");
  const auto j = nlohmann::json::parse(cfg);
  CHECK(j.at("peft_type") == "LORA");
  CHECK(j.at("r") == 8);
  CHECK(j.at("lora_alpha") == 16.0);
  CHECK_OK(s->canExportAdapter());

  // A plan whose trainables peft cannot load, or that has none of peft's, says why before any
  // step (fbl-train asks first) and exportAdapter refuses with the same reason.
  planfile::Plan refused = c.plan;
  refused.adapterRefusal = "LoRA on parameters is not written in peft's layout";
  auto r = openPlan(refused, "bert-adapter-refused");
  REQUIRE_OK(r->loadWeights(c.args.weights));
  CHECK(fbl::testing::errorText(r->canExportAdapter()) == refused.adapterRefusal);
  CHECK(fbl::testing::errorText(r->exportAdapter(dir)) == "cannot export the adapter: " + refused.adapterRefusal);
  planfile::Plan none = c.plan;
  none.adapterConfig = nlohmann::json::object();
  auto n = openPlan(none, "bert-adapter-none");
  CHECK_THAT(fbl::testing::errorText(n->canExportAdapter()), Catch::Contains("the plan has no peft adapter to export"));
  CHECK_THAT(fbl::testing::errorText(n->exportAdapter(dir)), Catch::Contains("the plan has no peft adapter to export"));
}

TEST_CASE("a built program is cached per device and source, unless the cache is switched off", "[runtime][cache]") {
  const fbl::testing::ScopedEnv cacheOn("FBL_PROGRAM_CACHE", nullptr);  // the test binaries turn it off
  const Compiled c = compileBert();
  const std::string dir = tempDir() + "/fresh-cache";
  std::filesystem::remove_all(dir);
  const std::string path = tempDir() + "/cached.fbp";
  std::ofstream(path, std::ios::binary) << planfile::serialize(c.plan);
  rt::OpenOptions o;
  o.cacheDir = dir;
  o.cachePrograms = false;
  CHECK_FALSE(fbl::testing::requireValue(rt::Session::open(path, o))->programFromCache());
  CHECK(entriesIn(dir) == 0);
  o.cachePrograms = true;
  {
    const fbl::testing::ScopedEnv off("FBL_PROGRAM_CACHE", "0");  // wins over the named directory
    CHECK_FALSE(fbl::testing::requireValue(rt::Session::open(path, o))->programFromCache());
    CHECK(entriesIn(dir) == 0);
  }
  auto first = fbl::testing::requireValue(rt::Session::open(path, o));
  CHECK_FALSE(first->programFromCache());
  CHECK(entriesIn(dir) == 1);
  auto second = fbl::testing::requireValue(rt::Session::open(path, o));
  CHECK(second->programFromCache());
  {
    const fbl::testing::ScopedEnv off("FBL_PROGRAM_CACHE", "0");  // a stored binary is not read either
    CHECK_FALSE(fbl::testing::requireValue(rt::Session::open(path, o))->programFromCache());
  }
  const fbl::testing::ScopedEnv typo("FBL_PROGRAM_CACHE", "off");
  CHECK(fbl::testing::errorText(rt::Session::open(path, o)) ==
        "FBL_PROGRAM_CACHE is 'off': 0 switches the runtime's program cache off, 1 or unset keeps it on");
}

}  // namespace
}  // namespace fbl::testing
