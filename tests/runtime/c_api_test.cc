// The C API never crashes: every entry point, driven with NULL pointers, directories for files,
// calls out of order, wrong sizes and calls from inside the progress callback, returns an error
// whose message starts with the function's name and names the argument at fault. Only the C API
// and the runtime's own headers are used, so that this file also builds, with the runtime's
// sources, into fbl_c_api_asan_tests (AddressSanitizer and UBSan; CMakeLists.txt). The plan is
// llama-tiny's, compiled by fblc and kept in tests/data/c_api/ (FBL_C_API_PLAN, FBL_C_API_WEIGHTS),
// so this binary builds without the compiler.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "runtime/files.h"
#include "runtime/include/fbl/fbl_runtime.h"
#include "runtime/plan_file.h"
#include "runtime/safetensors.h"
#include "tests/runtime/scoped_env.h"
#include "tests/runtime/status_assertions.h"
#include "tests/runtime/temp_dir.h"

namespace fbl::testing {
namespace {

namespace fs = std::filesystem;

const planfile::Plan& plan() {
  static const planfile::Plan p = [] {
    std::string bytes;
    planfile::Plan out;
    bytes = fbl::testing::requireValue(rt::readWholeFile(FBL_C_API_PLAN, "a plan file"));
    out = fbl::testing::requireValue(planfile::parse(bytes));
    return out;
  }();
  return p;
}

// The first tensor of the plan with `role`, and a tensor's row-major size.
const planfile::Tensor& tensorWith(planfile::Role role) {
  const auto& ts = plan().tensors;
  const auto it = std::find_if(ts.begin(), ts.end(), [&](const planfile::Tensor& t) { return t.role == role; });
  INFO("role " << planfile::roleName(role));
  REQUIRE(it != ts.end());
  return *it;
}
size_t bytesOf(const planfile::Tensor& t) { return static_cast<size_t>(planfile::logicalBytes(t)); }

// Input `in`'s i64 token ids for sample k, inside the bounds the plan records.
std::vector<int64_t> tokens(int32_t in, int k) {
  const planfile::Tensor& t = plan().tensors[in];
  REQUIRE(t.dtype == "i64");
  int64_t bound = 1 << 20;
  for (const planfile::InputCheck& c : plan().inputChecks)
    if (c.input == in) bound = std::min(bound, c.hi);
  std::vector<int64_t> v(bytesOf(t) / 8);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>((i * 31 + static_cast<size_t>(k) * 7 + 3) % static_cast<size_t>(bound));
  return v;
}

// A dataset of `samples` samples of every input ([N, S...], named after the inputs).
std::string writeDataset(int samples) {
  safetensors::File f;
  for (int32_t in : plan().inputs) {
    safetensors::Entry e;
    e.dtype = "I64";
    e.shape = plan().tensors[in].shape;
    e.shape.insert(e.shape.begin(), samples);
    for (int k = 0; k < samples; ++k) {
      const std::vector<int64_t> v = tokens(in, k);
      const auto* b = reinterpret_cast<const unsigned char*>(v.data());
      e.data.insert(e.data.end(), b, b + v.size() * 8);
    }
    f.tensors[plan().tensors[in].name] = std::move(e);
  }
  const std::string path = tempDir() + "/data.safetensors";
  REQUIRE_OK(safetensors::write(path, f));
  return path;
}

// The call failed with `code` and a message "FN: ..." that contains `what`.
void refused(int rc, const std::string& fn, const std::string& what, int code = FBL_ERROR) {
  const std::string e = fbl_last_error();
  INFO(fn << " returned " << rc << ": " << e);
  CHECK(rc == code);
  CHECK(e.rfind(fn + ": ", 0) == 0);
  CHECK(e.find(what) != std::string::npos);
  CHECK(e.find('\n') == std::string::npos);
}

fbl_session* open() {
  fbl_session* s = nullptr;
  const int rc = fbl_open(FBL_C_API_PLAN, -1, nullptr, &s);
  INFO(fbl_last_error());
  REQUIRE(rc == FBL_OK);
  REQUIRE(s != nullptr);
  return s;
}

fbl_session* openLoaded() {
  fbl_session* s = open();
  INFO(fbl_last_error());
  REQUIRE(fbl_load_weights(s, FBL_C_API_WEIGHTS) == FBL_OK);
  return s;
}

void writeInputs(fbl_session* s) {
  for (int32_t in : plan().inputs) {
    const std::vector<int64_t> v = tokens(in, 0);
    INFO(fbl_last_error());
    REQUIRE(fbl_write_tensor(s, plan().tensors[in].name.c_str(), v.data(), v.size() * 8) == FBL_OK);
  }
}

TEST_CASE("C API: a NULL session is refused by every function that takes one", "[runtime][c_api]") {
  float loss = 0.0f;
  int64_t dims[1] = {1};
  const unsigned char byte = 0;
  unsigned char into = 0;
  const std::vector<std::pair<std::string, std::function<int()>>> calls = {
      {"fbl_load_weights", [] { return fbl_load_weights(nullptr, FBL_C_API_WEIGHTS); }},
      {"fbl_write_tensor", [&] { return fbl_write_tensor(nullptr, "x", &byte, 1); }},
      {"fbl_write_input", [&] { return fbl_write_input(nullptr, "x", "i64", dims, 1, &byte, 1); }},
      {"fbl_read_tensor", [&] { return fbl_read_tensor(nullptr, "x", &into, 1); }},
      {"fbl_train_step", [&] { return fbl_train_step(nullptr, &loss); }},
      {"fbl_eval_step", [&] { return fbl_eval_step(nullptr, &loss); }},
      {"fbl_set_progress", [] { return fbl_set_progress(nullptr, nullptr, nullptr, 1); }},
      {"fbl_cancel", [] { return fbl_cancel(nullptr); }},
      {"fbl_set_learning_rate", [] { return fbl_set_learning_rate(nullptr, 1e-3f); }},
      {"fbl_save_checkpoint", [] { return fbl_save_checkpoint(nullptr, "x"); }},
      {"fbl_load_checkpoint", [] { return fbl_load_checkpoint(nullptr, "x"); }},
      {"fbl_export_adapter", [] { return fbl_export_adapter(nullptr, "."); }},
      {"fbl_dataset_write_sample", [] { return fbl_dataset_write_sample(nullptr, nullptr, 0); }},
      {"fbl_input_count", [] { size_t n = 0; return fbl_input_count(nullptr, &n); }},
      {"fbl_input_info", [] { return fbl_input_info(nullptr, 0, nullptr, nullptr, nullptr, nullptr); }},
      {"fbl_trainable_count", [] { size_t n = 0; return fbl_trainable_count(nullptr, &n); }},
      {"fbl_trainable_name", [] { const char* n = nullptr; return fbl_trainable_name(nullptr, 0, &n); }},
      {"fbl_tensor_info", [] { return fbl_tensor_info(nullptr, "x", nullptr, nullptr, nullptr); }},
      {"fbl_loss_name", [] { const char* n = nullptr; return fbl_loss_name(nullptr, &n); }},
      {"fbl_input_bounds", [] { return fbl_input_bounds(nullptr, 0, nullptr, nullptr, nullptr); }},
      {"fbl_input_role", [] { const char* r = nullptr; return fbl_input_role(nullptr, 0, &r); }},
      {"fbl_input_ignore_index", [] { return fbl_input_ignore_index(nullptr, 0, nullptr, nullptr); }},
      {"fbl_plan_memory", [] { return fbl_plan_memory(nullptr, nullptr, nullptr, nullptr); }},
      {"fbl_device_memory", [] { return fbl_device_memory(nullptr, nullptr, nullptr); }},
      {"fbl_output_count", [] { size_t n = 0; return fbl_output_count(nullptr, &n); }},
      {"fbl_output_name", [] { const char* n = nullptr; return fbl_output_name(nullptr, 0, &n); }},
  };
  for (const auto& [fn, call] : calls) refused(call(), fn, "s must not be NULL");

  fbl_dataset* d = reinterpret_cast<fbl_dataset*>(&into);  // not NULL: the call must clear it
  refused(fbl_dataset_open(nullptr, "x.npy", &d), "fbl_dataset_open", "s must not be NULL");
  CHECK(d == nullptr);  // *out is cleared on failure

  CHECK(fbl_step(nullptr) == -1);
  refused(FBL_ERROR, "fbl_step", "s must not be NULL");
  CHECK(fbl_accumulated(nullptr) == -1);
  refused(FBL_ERROR, "fbl_accumulated", "s must not be NULL");
  CHECK(fbl_learning_rate(nullptr) == -1.0);
  refused(FBL_ERROR, "fbl_learning_rate", "s must not be NULL");
  CHECK(fbl_dataset_size(nullptr) == -1);
  refused(FBL_ERROR, "fbl_dataset_size", "d must not be NULL");
  fbl_close(nullptr);
  fbl_dataset_close(nullptr);
}

TEST_CASE("C API: a session describes its plan's inputs, trainables and loss", "[runtime][c_api]") {
  fbl_session* s = open();
  size_t inputs = 0, trainables = 0;
  REQUIRE(fbl_input_count(s, &inputs) == FBL_OK);
  REQUIRE(inputs == plan().inputs.size());
  REQUIRE(inputs > 0);
  for (size_t i = 0; i < inputs; ++i) {
    const planfile::Tensor& want = plan().tensors[plan().inputs[i]];
    const char *name = nullptr, *dtype = nullptr;
    const int64_t* shape = nullptr;
    size_t rank = 0;
    REQUIRE(fbl_input_info(s, i, &name, &dtype, &shape, &rank) == FBL_OK);
    CHECK(std::string(name) == want.name);
    CHECK(std::string(dtype) == want.dtype);
    CHECK(std::vector<int64_t>(shape, shape + rank) == want.shape);
    // The description is what fbl_write_input takes.
    const std::vector<int64_t> v = tokens(plan().inputs[i], 0);
    INFO(fbl_last_error());
    CHECK(fbl_write_input(s, name, dtype, shape, rank, v.data(), v.size() * 8) == FBL_OK);
  }
  CHECK(fbl_input_info(s, 0, nullptr, nullptr, nullptr, nullptr) == FBL_OK);  // every out pointer optional
  // The bounds are the plan's checks, intersected: llama-tiny's token ids index the embedding.
  for (size_t i = 0; i < inputs; ++i) {
    int bounded = -1;
    int64_t lo = 1, hi = -1;
    REQUIRE(fbl_input_bounds(s, i, &bounded, &lo, &hi) == FBL_OK);
    bool any = false;
    for (const planfile::InputCheck& c : plan().inputChecks) {
      if (c.input != plan().inputs[i]) continue;
      CHECK(lo >= c.lo);
      CHECK(hi <= c.hi);
      any = true;
    }
    CHECK(bounded == (any ? 1 : 0));
    if (any) CHECK(lo < hi);
  }
  refused(fbl_input_bounds(s, inputs, nullptr, nullptr, nullptr), "fbl_input_bounds", "outside the plan's");
  // llama-tiny's one input: ids into the embedding that the loss also reads, shifted, as labels.
  const char* role = nullptr;
  REQUIRE(inputs == 1);
  REQUIRE(fbl_input_role(s, 0, &role) == FBL_OK);
  CHECK(std::string(role) == "tokens+labels");
  CHECK(fbl_input_role(s, 0, nullptr) == FBL_OK);
  refused(fbl_input_role(s, inputs, &role), "fbl_input_role", "outside the plan's");
  // Its loss ignores -100, PyTorch's default, where labels are padding.
  int has = -1;
  int64_t ignore = 0;
  REQUIRE(fbl_input_ignore_index(s, 0, &has, &ignore) == FBL_OK);
  CHECK(has == 1);
  CHECK(ignore == -100);
  CHECK(fbl_input_ignore_index(s, 0, nullptr, nullptr) == FBL_OK);
  refused(fbl_input_ignore_index(s, inputs, &has, &ignore), "fbl_input_ignore_index", "outside the plan's");
  int64_t peak = 0, largest = 0, allocations = 0;
  REQUIRE(fbl_plan_memory(s, &peak, &largest, &allocations) == FBL_OK);
  CHECK(peak == plan().arenaBytes + plan().imageBytes());
  CHECK(largest >= plan().poolSize(0));
  CHECK(largest <= peak);
  // The device holds the plan: its largest allocation admits the pools, its memory the peak.
  int64_t global = 0, maxAlloc = 0;
  REQUIRE(fbl_device_memory(s, &global, &maxAlloc) == FBL_OK);
  CHECK(maxAlloc >= plan().poolSize(0));
  CHECK(global >= peak);
  CHECK(maxAlloc <= global);
  CHECK(fbl_device_memory(s, nullptr, nullptr) == FBL_OK);
  CHECK(allocations == plan().poolCount() + static_cast<int64_t>(plan().imageSlots.size()));
  refused(fbl_input_info(s, inputs, nullptr, nullptr, nullptr, nullptr), "fbl_input_info",
          "index is " + std::to_string(inputs) + ", outside the plan's " + std::to_string(inputs) + " inputs");
  REQUIRE(fbl_trainable_count(s, &trainables) == FBL_OK);
  REQUIRE(trainables == plan().trainables.size());
  for (size_t i = 0; i < trainables; ++i) {
    const char* name = nullptr;
    REQUIRE(fbl_trainable_name(s, i, &name) == FBL_OK);
    CHECK(std::string(name) == plan().tensors[plan().trainables[i].param].name);
    const int64_t* shape = nullptr;
    size_t rank = 0;
    REQUIRE(fbl_tensor_info(s, name, nullptr, &shape, &rank) == FBL_OK);
    CHECK(std::vector<int64_t>(shape, shape + rank) == plan().tensors[plan().trainables[i].param].shape);
  }
  refused(fbl_trainable_name(s, trainables, nullptr), "fbl_trainable_name", "outside the plan's");
  const char* loss = nullptr;
  REQUIRE(fbl_loss_name(s, &loss) == FBL_OK);
  CHECK(std::string(loss) == plan().tensors[plan().loss].name);
  const char* dtype = nullptr;
  size_t rank = 7;
  REQUIRE(fbl_tensor_info(s, loss, &dtype, nullptr, &rank) == FBL_OK);
  CHECK(std::string(dtype) == "f32");
  CHECK(rank == plan().tensors[plan().loss].shape.size());
  refused(fbl_tensor_info(s, "no such tensor", nullptr, nullptr, nullptr), "fbl_tensor_info", "the plan has no tensor 'no such tensor'");
  refused(fbl_tensor_info(s, nullptr, nullptr, nullptr, nullptr), "fbl_tensor_info", "name must not be NULL");
  refused(fbl_input_count(s, nullptr), "fbl_input_count", "count must not be NULL");
  refused(fbl_loss_name(s, nullptr), "fbl_loss_name", "loss_name must not be NULL");
  // Compiled without --outputs: none (tests/device/outputs_test.cc reads them from a plan with).
  size_t outputs = 7;
  REQUIRE(fbl_output_count(s, &outputs) == FBL_OK);
  CHECK(outputs == plan().outputs.size());
  refused(fbl_output_name(s, outputs, nullptr), "fbl_output_name", "compile with --outputs");
  fbl_close(s);
}

TEST_CASE("C API: NULL strings and buffers are refused, naming the argument", "[runtime][c_api]") {
  fbl_session* s = nullptr;
  refused(fbl_open(nullptr, -1, nullptr, &s), "fbl_open", "plan_path must not be NULL");
  CHECK(s == nullptr);
  refused(fbl_open(FBL_C_API_PLAN, -1, nullptr, nullptr), "fbl_open", "out must not be NULL");
  refused(fbl_open(FBL_C_API_PLAN, -2, nullptr, &s), "fbl_open", "device is -2");
  refused(fbl_open(FBL_C_API_PLAN, 1 << 20, nullptr, &s), "fbl_open", "device 1048576 does not exist");

  s = openLoaded();
  const planfile::Tensor& input = plan().tensors[plan().inputs[0]];
  const std::vector<unsigned char> buf(bytesOf(input));
  std::vector<unsigned char> out(buf.size());
  const std::vector<int64_t> shape = input.shape;
  refused(fbl_load_weights(s, nullptr), "fbl_load_weights", "safetensors_path must not be NULL");
  refused(fbl_write_tensor(s, nullptr, buf.data(), buf.size()), "fbl_write_tensor", "name must not be NULL");
  refused(fbl_write_tensor(s, input.name.c_str(), nullptr, buf.size()), "fbl_write_tensor", "data must not be NULL");
  refused(fbl_write_input(s, nullptr, "i64", shape.data(), shape.size(), buf.data(), buf.size()), "fbl_write_input",
          "name must not be NULL");
  refused(fbl_write_input(s, input.name.c_str(), nullptr, shape.data(), shape.size(), buf.data(), buf.size()),
          "fbl_write_input", "dtype must not be NULL");
  refused(fbl_write_input(s, input.name.c_str(), "i64", nullptr, shape.size(), buf.data(), buf.size()), "fbl_write_input",
          "shape must not be NULL");
  refused(fbl_write_input(s, input.name.c_str(), "i64", shape.data(), shape.size(), nullptr, buf.size()),
          "fbl_write_input", "data must not be NULL");
  const planfile::Tensor& weight = tensorWith(planfile::Role::Trainable);
  refused(fbl_read_tensor(s, nullptr, out.data(), out.size()), "fbl_read_tensor", "name must not be NULL");
  refused(fbl_read_tensor(s, weight.name.c_str(), nullptr, bytesOf(weight)), "fbl_read_tensor", "data must not be NULL");
  refused(fbl_save_checkpoint(s, nullptr), "fbl_save_checkpoint", "path must not be NULL");
  refused(fbl_load_checkpoint(s, nullptr), "fbl_load_checkpoint", "path must not be NULL");
  refused(fbl_export_adapter(s, nullptr), "fbl_export_adapter", "dir must not be NULL");
  fbl_dataset* d = nullptr;
  refused(fbl_dataset_open(s, nullptr, &d), "fbl_dataset_open", "path must not be NULL");
  refused(fbl_dataset_open(s, "x.npy", nullptr), "fbl_dataset_open", "out must not be NULL");
  refused(fbl_dataset_write_sample(s, nullptr, 0), "fbl_dataset_write_sample", "d must not be NULL");

  // A success clears the last error.
  REQUIRE(fbl_read_tensor(s, weight.name.c_str(), std::vector<unsigned char>(bytesOf(weight)).data(), bytesOf(weight)) ==
          FBL_OK);
  CHECK(std::string(fbl_last_error()).empty());
  fbl_close(s);
}

TEST_CASE("C API: a directory given as a file is refused by name", "[runtime][c_api]") {
  const std::string dir = tempDir() + "/a-directory.safetensors";  // the suffix a dataset file has
  fs::create_directories(dir);
  fbl_session* s = nullptr;
  refused(fbl_open(dir.c_str(), -1, nullptr, &s), "fbl_open", "'" + dir + "' is a directory, not a plan file");
  CHECK(s == nullptr);

  s = open();
  refused(fbl_load_weights(s, dir.c_str()), "fbl_load_weights", "'" + dir + "' is a directory, not a weights file");
  refused(fbl_load_checkpoint(s, dir.c_str()), "fbl_load_checkpoint", "'" + dir + "' is a directory, not a checkpoint file");
  fbl_dataset* d = nullptr;
  refused(fbl_dataset_open(s, dir.c_str(), &d), "fbl_dataset_open", "'" + dir + "' is a directory, not a dataset file");
  CHECK(d == nullptr);
  REQUIRE(fbl_load_weights(s, FBL_C_API_WEIGHTS) == FBL_OK);
  refused(fbl_save_checkpoint(s, dir.c_str()), "fbl_save_checkpoint", "'" + dir + "' is a directory, not a checkpoint file");
  CHECK(fs::is_directory(dir));
  CHECK_FALSE(fs::exists(dir + ".tmp"));
  // And the other way round: the adapter goes into a directory.
  const std::string file = tempDir() + "/a-file";
  std::ofstream(file) << "x";
  refused(fbl_export_adapter(s, file.c_str()), "fbl_export_adapter", "'" + file + "' is not a directory");
  refused(fbl_export_adapter(s, (tempDir() + "/missing").c_str()), "fbl_export_adapter", "does not exist");
  fbl_close(s);
}

TEST_CASE("C API: cache_dir names the program cache, \"\" opens without one", "[runtime][c_api]") {
  const ScopedEnv cacheOn("FBL_PROGRAM_CACHE", nullptr);  // the test binaries turn it off
  const std::string dir = tempDir() + "/program-cache";
  fs::remove_all(dir);
  const ScopedEnv defaultDir("FBL_CACHE_DIR", dir.c_str());  // where NULL would store
  fbl_session* s = nullptr;
  INFO(fbl_last_error());
  REQUIRE(fbl_open(FBL_C_API_PLAN, -1, "", &s) == FBL_OK);
  fbl_close(s);
  CHECK(entriesIn(dir) == 0);
  REQUIRE(fbl_open(FBL_C_API_PLAN, -1, dir.c_str(), &s) == FBL_OK);
  fbl_close(s);
  CHECK(entriesIn(dir) == 1);
}

TEST_CASE("C API: calls out of order are refused", "[runtime][c_api]") {
  fbl_session* s = open();
  const planfile::Tensor& trainable = tensorWith(planfile::Role::Trainable);
  const planfile::Tensor& input = plan().tensors[plan().inputs[0]];
  std::vector<unsigned char> out(bytesOf(trainable));
  float loss = 0.0f;
  // Before the weights: nothing to read, save, export or train.
  refused(fbl_read_tensor(s, trainable.name.c_str(), out.data(), out.size()), "fbl_read_tensor", "was never loaded");
  refused(fbl_save_checkpoint(s, (tempDir() + "/early.ckpt").c_str()), "fbl_save_checkpoint", "was never loaded");
  CHECK_FALSE(fs::exists(tempDir() + "/early.ckpt"));
  refused(fbl_export_adapter(s, tempDir().c_str()), "fbl_export_adapter", "was never loaded");
  refused(fbl_train_step(s, &loss), "fbl_train_step", "was never loaded");
  refused(fbl_eval_step(s, &loss), "fbl_eval_step", "was never loaded");
  // Before the inputs.
  REQUIRE(fbl_load_weights(s, FBL_C_API_WEIGHTS) == FBL_OK);
  std::vector<unsigned char> in(bytesOf(input));
  refused(fbl_read_tensor(s, input.name.c_str(), in.data(), in.size()), "fbl_read_tensor",
          "input '" + input.name + "' was never written");
  refused(fbl_train_step(s, &loss), "fbl_train_step", "was never written");
  CHECK(fbl_step(s) == 0);
  fbl_close(s);
}

TEST_CASE("C API: wrong sizes and values are refused", "[runtime][c_api]") {
  fbl_session* s = openLoaded();
  const planfile::Tensor& input = plan().tensors[plan().inputs[0]];
  const planfile::Tensor& trainable = tensorWith(planfile::Role::Trainable);
  std::vector<unsigned char> buf(bytesOf(input) + 8);
  refused(fbl_write_tensor(s, input.name.c_str(), buf.data(), buf.size()), "fbl_write_tensor", "bytes", FBL_ERROR_INPUT);
  refused(fbl_write_tensor(s, "no such tensor", buf.data(), 8), "fbl_write_tensor", "no tensor 'no such tensor'");
  std::vector<int64_t> shape = input.shape;
  shape.push_back(1);
  refused(fbl_write_input(s, input.name.c_str(), "i64", shape.data(), shape.size(), buf.data(), bytesOf(input)),
          "fbl_write_input", "'" + input.name + "'", FBL_ERROR_INPUT);
  refused(fbl_write_input(s, input.name.c_str(), "f32", input.shape.data(), input.shape.size(), buf.data(), bytesOf(input)),
          "fbl_write_input", "'" + input.name + "'", FBL_ERROR_INPUT);
  std::vector<unsigned char> out(bytesOf(trainable) + 4);
  refused(fbl_read_tensor(s, trainable.name.c_str(), out.data(), out.size()), "fbl_read_tensor",
          "bytes is " + std::to_string(out.size()));
  refused(fbl_read_tensor(s, trainable.name.c_str(), out.data(), 0), "fbl_read_tensor", "bytes is 0");
  refused(fbl_set_progress(s, [](void*, const fbl_progress*) { return 0; }, nullptr, 0), "fbl_set_progress", "every is 0");
  refused(fbl_set_learning_rate(s, -1.0f), "fbl_set_learning_rate", "learning rate");
  fbl_dataset* d = nullptr;
  refused(fbl_dataset_open(s, (tempDir() + "/none.safetensors").c_str(), &d), "fbl_dataset_open", "cannot open");
  INFO(fbl_last_error());
  REQUIRE(fbl_dataset_open(s, writeDataset(2).c_str(), &d) == FBL_OK);
  CHECK(fbl_dataset_size(d) == 2);
  refused(fbl_dataset_write_sample(s, d, 2), "fbl_dataset_write_sample", "index is 2, outside the dataset's samples [0, 2)");
  refused(fbl_dataset_write_sample(s, d, -1), "fbl_dataset_write_sample", "index is -1");
  CHECK(fbl_dataset_write_sample(s, d, 1) == FBL_OK);
  fbl_dataset_close(d);
  fbl_close(s);

  CHECK(fbl_sample_at(0, 0, 0, 0, 0) == -1);
  refused(FBL_ERROR, "fbl_sample_at", "samples is 0");
  CHECK(fbl_sample_at(4, 4, 0, 0, 0) == -1);
  refused(FBL_ERROR, "fbl_sample_at", "held_out is 4");
  CHECK(fbl_sample_at(4, 1, 0, 0, -1) == -1);
  refused(FBL_ERROR, "fbl_sample_at", "position is -1");
  CHECK(fbl_held_out_sample(4, 1, 1, 7, 1) == -1);
  refused(FBL_ERROR, "fbl_held_out_sample", "i is 1");
  // More samples than memory holds: an error, not std::terminate.
  CHECK(fbl_sample_at(INT64_MAX, 0, 1, 7, 0) == -1);
  refused(FBL_ERROR, "fbl_sample_at", "");
  CHECK(fbl_sample_at(4, 1, 0, 0, 5) == 2);  // file order: epoch 1 visits 0, 1, 2
}

// What the progress callback tried, and what came back.
struct Reentry {
  fbl_session* s = nullptr;
  fbl_dataset* data = nullptr;
  int reports = 0;
  std::vector<std::pair<std::string, int>> results;  // (function, return code) from the first report
  std::vector<std::string> errors;                   // fbl_last_error() after each
  int64_t stepSeen = -2;
  std::string otherThreadError, otherThreadMainError;
  int otherThreadRc = FBL_OK, otherThreadCancel = FBL_ERROR;
};

int reenter(void* user, const fbl_progress*) {
  auto* r = static_cast<Reentry*>(user);
  if (r->reports++ > 0) return 0;
  fbl_session* s = r->s;
  float loss = 0.0f;
  const planfile::Tensor& trainable = tensorWith(planfile::Role::Trainable);
  std::vector<unsigned char> bytes(bytesOf(trainable));
  const std::string ckpt = tempDir() + "/reentry.ckpt";
  const std::vector<std::pair<std::string, std::function<int()>>> calls = {
      {"fbl_train_step", [&] { return fbl_train_step(s, &loss); }},
      {"fbl_eval_step", [&] { return fbl_eval_step(s, &loss); }},
      {"fbl_load_weights", [&] { return fbl_load_weights(s, FBL_C_API_WEIGHTS); }},
      {"fbl_write_tensor", [&] { return fbl_write_tensor(s, trainable.name.c_str(), bytes.data(), bytes.size()); }},
      {"fbl_read_tensor", [&] { return fbl_read_tensor(s, trainable.name.c_str(), bytes.data(), bytes.size()); }},
      {"fbl_set_progress", [&] { return fbl_set_progress(s, nullptr, nullptr, 1); }},
      {"fbl_set_learning_rate", [&] { return fbl_set_learning_rate(s, 1e-3f); }},
      {"fbl_save_checkpoint", [&] { return fbl_save_checkpoint(s, ckpt.c_str()); }},
      {"fbl_load_checkpoint", [&] { return fbl_load_checkpoint(s, ckpt.c_str()); }},
      {"fbl_export_adapter", [&] { return fbl_export_adapter(s, tempDir().c_str()); }},
      {"fbl_dataset_write_sample", [&] { return fbl_dataset_write_sample(s, r->data, 0); }},
      // void: its refusal shows in fbl_last_error, and in the step going on.
      {"fbl_close", [&] {
         fbl_close(s);
         return FBL_ERROR;
       }},
  };
  for (const auto& [fn, call] : calls) {
    r->results.emplace_back(fn, call());
    r->errors.emplace_back(fbl_last_error());
  }
  r->stepSeen = fbl_step(s);
  // Another thread while this one is inside the step: refused too, with its own last error.
  std::thread other([r, s] {
    float l = 0.0f;
    r->otherThreadRc = fbl_train_step(s, &l);
    r->otherThreadError = fbl_last_error();
    r->otherThreadCancel = fbl_cancel(s);  // allowed: this cancels the step in flight
  });
  other.join();
  return 0;
}

TEST_CASE("C API: calls from the progress callback that would change the session are refused", "[runtime][c_api]") {
  fbl_session* s = openLoaded();
  writeInputs(s);
  Reentry r;
  r.s = s;
  INFO(fbl_last_error());
  REQUIRE(fbl_dataset_open(s, writeDataset(1).c_str(), &r.data) == FBL_OK);
  REQUIRE(fbl_set_progress(s, &reenter, &r, 1 << 30) == FBL_OK);
  float loss = 0.0f;
  const int rc = fbl_train_step(s, &loss);
  REQUIRE(r.reports >= 1);
  REQUIRE(r.results.size() == r.errors.size());
  for (size_t i = 0; i < r.results.size(); ++i) {
    INFO(r.results[i].first << ": " << r.errors[i]);
    CHECK(r.results[i].second == FBL_ERROR);
    CHECK(r.errors[i].rfind(r.results[i].first + ": session s is in another call", 0) == 0);
  }
  CHECK(r.stepSeen == 0);
  CHECK(r.otherThreadRc == FBL_ERROR);
  CHECK(r.otherThreadError.rfind("fbl_train_step: session s is in another call", 0) == 0);
  CHECK(r.otherThreadCancel == FBL_OK);
  // The other thread's cancel came during the forward phase's report: the step stops there.
  CHECK(rc == FBL_CANCELLED);
  CHECK(fbl_step(s) == 0);

  // The session survived all of it: the next step runs, and closing works.
  REQUIRE(fbl_set_progress(s, nullptr, nullptr, 0) == FBL_OK);
  INFO(fbl_last_error());
  REQUIRE(fbl_train_step(s, &loss) == FBL_OK);
  CHECK(std::string(fbl_last_error()).empty());
  CHECK(fbl_step(s) == 1);
  fbl_dataset_close(r.data);
  fbl_close(s);
}

}  // namespace
}  // namespace fbl::testing
