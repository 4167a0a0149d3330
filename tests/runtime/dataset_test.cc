// Datasets without a device: the .npy reader (every version, every refusal), Dataset::read for
// .safetensors, .npy and folders of .npy against a plan written by hand (both sample forms, and
// one line naming the file, tensor and sample for each bad file), the sample order (splitmix64's
// published outputs, permutations, held-out samples disjoint from training ones, determinism by
// seed) and the dataset position file beside a checkpoint.
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

#include <catch2/catch.hpp>

#include "runtime/dataset.h"
#include "runtime/dataset_position.h"
#include "runtime/include/fbl/fbl_runtime.h"
#include "runtime/npy.h"
#include "runtime/safetensors.h"
#include "runtime/sample_order.h"
#include "tests/runtime/temp_dir.h"
#include "tests/runtime/status_assertions.h"

namespace fbl::testing {
namespace {

// Inputs: ids i64[2,3] indexing a table of 10 rows, x f32[2,2].
planfile::Plan datasetPlan() {
  planfile::Plan p;
  p.model = "dataset";
  auto add = [&](std::string name, std::string dt, std::vector<int64_t> shape) {
    planfile::Tensor t;
    t.name = std::move(name);
    t.dtype = std::move(dt);
    t.shape = std::move(shape);
    t.role = planfile::Role::Input;
    t.bytes = planfile::logicalBytes(t);
    p.tensors.push_back(t);
    p.inputs.push_back(static_cast<int32_t>(p.tensors.size() - 1));
  };
  add("ids", "i64", {2, 3});
  add("x", "f32", {2, 2});
  planfile::InputCheck gather;
  gather.input = 0;
  gather.lo = -10;
  gather.hi = 10;
  gather.node = "node_embedding";
  gather.table = "embed.weight";
  p.inputChecks.push_back(gather);
  return p;
}

// Sample i of ids holds 6 values from i: i, i+1, ... mod 10; of x, i + 0.25 k.
std::vector<int64_t> idsOf(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < 6; ++k) v.push_back((i + k) % 10);
  return v;
}
std::vector<float> xOf(int64_t n) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i)
    for (int k = 0; k < 4; ++k) v.push_back(static_cast<float>(i) + 0.25f * static_cast<float>(k));
  return v;
}

template <typename T>
std::vector<unsigned char> bytesOf(const std::vector<T>& v) {
  std::vector<unsigned char> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

void writeFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

safetensors::File goodSafetensors(int64_t n) {
  safetensors::File f;
  f.tensors["ids"] = safetensors::Entry{"I64", {n, 2, 3}, bytesOf(idsOf(n))};
  f.tensors["x"] = safetensors::Entry{"F32", {n, 2, 2}, bytesOf(xOf(n))};
  return f;
}

void checkSamples(const rt::Dataset& d, int64_t n) {
  REQUIRE(d.size() == n);
  const std::vector<int64_t> ids = idsOf(n);
  const std::vector<float> x = xOf(n);
  for (int64_t i = 0; i < n; ++i) {
    CHECK(std::memcmp(d.sample(0, i), ids.data() + 6 * i, 48) == 0);
    CHECK(std::memcmp(d.sample(1, i), x.data() + 4 * i, 16) == 0);
  }
}

std::string readError(const std::string& path) {
  return fbl::testing::errorText(rt::Dataset::read(path, datasetPlan()));
}

TEST_CASE("npy: every version reads, every malformed file is one line", "[dataset]") {
  npy::Array a{"i64", {3, 2}, bytesOf(std::vector<int64_t>{1, 2, 3, 4, 5, 6})};
  const std::string v1 = npy::serialize(a);
  npy::Array back = fbl::testing::requireValue(npy::parse(v1, "a.npy"));
  CHECK(back.dtype == "i64");
  CHECK(back.shape == std::vector<int64_t>{3, 2});
  CHECK(back.data == a.data);
  CHECK((10 + v1.find('\n') - 9) % 64 == 0);  // numpy's alignment: data at a multiple of 64
  // Versions 2.0 and 3.0 have a 4-byte header length.
  for (char major : {'\x02', '\x03'}) {
    std::string v = v1.substr(0, 6) + major + '\x00' + v1.substr(8, 2) + std::string(2, '\0') + v1.substr(10);
    npy::Array b = fbl::testing::requireValue(npy::parse(v, "v.npy"));
    CHECK(b.data == a.data);
  }
  // One-dimensional, scalar and the other dtypes.
  for (const auto& [dtype, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"f32", {4}}, {"i32", {}}, {"u8", {2, 1, 2}}, {"bool", {0}}, {"f64", {1}}, {"f16", {2}}}) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const size_t width = dtype == "f64" ? 8 : dtype == "f32" || dtype == "i32" ? 4 : dtype == "f16" ? 2 : 1;
    npy::Array c{dtype, shape, std::vector<unsigned char>(static_cast<size_t>(n) * width, 1)};
    npy::Array d;
    INFO(dtype);
    d = fbl::testing::requireValue(npy::parse(npy::serialize(c), "c.npy"));
    CHECK(d.dtype == dtype);
    CHECK(d.shape == shape);
  }

  auto header = [&](const std::string& dict) {
    std::string h = dict;
    while ((10 + h.size() + 1) % 64 != 0) h.push_back(' ');
    h.push_back('\n');
    return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(h.size()) + '\0' + h;
  };
  const std::string data(48, '\0');
  const std::string good = "{'descr': '<i8', 'fortran_order': False, 'shape': (3, 2), }";
  back = fbl::testing::requireValue(npy::parse(header(good) + data, "h.npy"));
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"PK\x03\x04 not numpy at all", "is not a .npy file"},
      {std::string("\x93NUMPY\x04\x00", 8) + "xx", "version 4.0 is not 1.0, 2.0 or 3.0"},
      {header(good).substr(0, 30), "is truncated: its header says"},
      {header(good) + data.substr(0, 40), "is truncated: i64 of its shape needs 48 data bytes, the file has 40"},
      {header(good) + data + "x", "has trailing bytes"},
      {header("{'descr': '>i8', 'fortran_order': False, 'shape': (3, 2), }") + data, "'>i8' is not supported (big-endian"},
      {header("{'descr': '<c8', 'fortran_order': False, 'shape': (3, 2), }") + data, "'<c8' is not supported"},
      {header("{'descr': '<i8', 'fortran_order': True, 'shape': (3, 2), }") + data, "Fortran order"},
      {header("{'descr': '<i8', 'shape': (3, 2), }") + data, "lacks one of"},
      {header("{'descr': '<i8', 'fortran_order': False, 'shape': (3, -2), }") + data, "not a non-negative integer"},
      {header("{'descr': '<i8', 'fortran_order': False, 'shape': [3, 2], }") + data, "not a tuple"},
      {header("{'descr': '<i8', 'fortran_order': False, 'shape': (3, 2), 'extra': 1}") + data, "unknown key 'extra'"},
      {header("{'descr': '<i8', 'fortran_order': False, 'shape': (3 2), }") + data, "without ','"},
      {header("{'descr': '<i8', 'fortran_order': False, 'shape': (3, 2), } trailing") + data, "does not end with"},
  };
  for (const auto& [bytes, message] : bad) {
    INFO(message);
    const std::string e = fbl::testing::errorText(npy::parse(bytes, "bad.npy"));
    CHECK_THAT(e, Catch::StartsWith("'bad.npy'") && Catch::Contains(message));
    CHECK(e.find('\n') == std::string::npos);
  }
}

// Every truncation and every header byte set to a few values: the reader refuses in one line or
// reads an array whose bytes are exactly its dtype x shape, never reads past the file.
TEST_CASE("npy: truncated and mutated headers are refused or read whole", "[dataset]") {
  const std::string good = npy::serialize({"i64", {3, 2}, bytesOf(std::vector<int64_t>{1, 2, 3, 4, 5, 6})});
  const size_t headerEnd = good.find('\n') + 1;
  int refused = 0, read = 0;
  auto judge = [&](const std::string& bytes) {
    const Result<npy::Array> parsed = npy::parse(bytes, "m.npy");
    if (!parsed.ok()) {
      const std::string& e = parsed.error().message;
      CHECK(e.find('\n') == std::string::npos);
      CHECK_THAT(e, Catch::Contains("'m.npy'"));
      ++refused;
      return;
    }
    const npy::Array& a = *parsed;
    int64_t n = 1;
    for (int64_t d : a.shape) n *= d;
    const int64_t width = a.dtype == "i64" || a.dtype == "u64" || a.dtype == "f64"   ? 8
                          : a.dtype == "i32" || a.dtype == "u32" || a.dtype == "f32" ? 4
                          : a.dtype == "i16" || a.dtype == "u16" || a.dtype == "f16" ? 2
                                                                                       : 1;
    CHECK(static_cast<int64_t>(a.data.size()) == n * width);
    CHECK(a.data.size() <= bytes.size());
    ++read;
  };
  for (size_t len = 0; len < good.size(); ++len) judge(good.substr(0, len));
  for (size_t at = 0; at < headerEnd; ++at)
    for (const char c : {'\0', '\xff', ' ', '(', ')', ',', '9', '\'', '}', '\n'}) {
      std::string m = good;
      m[at] = c;
      judge(m);
    }
  CHECK(refused > 0);
  INFO("refused " << refused << ", read " << read);
}

TEST_CASE("dataset: safetensors, npy and npy folders in both sample forms", "[dataset]") {
  const std::string dir = tempDir() + "/dataset-good";
  std::system(("mkdir -p " + dir + "/npy " + dir + "/rows").c_str());
  const planfile::Plan plan = datasetPlan();

  REQUIRE_OK(safetensors::write(dir + "/ds.safetensors", goodSafetensors(5)));
  rt::Dataset d = fbl::testing::requireValue(rt::Dataset::read(dir + "/ds.safetensors", plan));
  checkSamples(d, 5);
  CHECK_OK(d.checkValues(plan));
  CHECK(d.where(1, 3) == dir + "/ds.safetensors: sample 3");

  // Rows: ids as [2N, 3] and x as [2N, 2], two rows a sample.
  writeFile(dir + "/rows/ids.npy", npy::serialize({"i64", {10, 3}, bytesOf(idsOf(5))}));
  writeFile(dir + "/rows/x.npy", npy::serialize({"f32", {10, 2}, bytesOf(xOf(5))}));
  rt::Dataset rows = fbl::testing::requireValue(rt::Dataset::read(dir + "/rows", plan));
  checkSamples(rows, 5);
  CHECK(rows.fingerprint() == d.fingerprint());

  // One .npy for a plan of one input.
  planfile::Plan one = plan;
  one.inputs.pop_back();
  writeFile(dir + "/ids.npy", npy::serialize({"i64", {4, 2, 3}, bytesOf(idsOf(4))}));
  rt::Dataset single = fbl::testing::requireValue(rt::Dataset::read(dir + "/ids.npy", one));
  CHECK(single.size() == 4);
  CHECK(single.fingerprint() != d.fingerprint());
}

TEST_CASE("dataset: a bad file is one line naming the file, the tensor and the sample", "[dataset]") {
  const std::string dir = tempDir() + "/dataset-bad";
  std::system(("mkdir -p " + dir + "/folder").c_str());
  const planfile::Plan plan = datasetPlan();
  auto write = [&](const std::string& name, const safetensors::File& f) {
    REQUIRE_OK(safetensors::write(dir + "/" + name, f));
    return dir + "/" + name;
  };
  auto expect = [](const std::string& error, const std::string& message) {
    INFO(error);
    CHECK_THAT(error, Catch::Contains(message));
    CHECK(error.find('\n') == std::string::npos);
  };

  safetensors::File f = goodSafetensors(4);
  f.tensors["ids"].dtype = "I32";
  f.tensors["ids"].data.resize(f.tensors["ids"].data.size() / 2);
  std::string p = write("dtype.safetensors", f);
  expect(readError(p), "'" + p + "': tensor 'ids' is i32[4,2,3] but a sample of the plan's input is i64[2,3]: give i64[N,2,3] or i64[N*2,3]");

  f = goodSafetensors(4);
  f.tensors["x"] = safetensors::Entry{"F32", {4, 2, 3}, bytesOf(std::vector<float>(24))};
  p = write("shape.safetensors", f);
  expect(readError(p), "tensor 'x' is f32[4,2,3] but a sample of the plan's input is f32[2,2]");

  f = goodSafetensors(4);
  f.tensors["x"] = safetensors::Entry{"F32", {3, 2, 2}, bytesOf(xOf(3))};
  p = write("count.safetensors", f);
  expect(readError(p), "'" + p + "': tensor 'x' holds 3 samples but '" + p + "': tensor 'ids' holds 4");

  f = goodSafetensors(4);
  f.tensors["x"] = safetensors::Entry{"F32", {7, 2}, bytesOf(std::vector<float>(14))};  // 7 rows: 3.5 samples
  p = write("rows.safetensors", f);
  expect(readError(p), "tensor 'x' is f32[7,2]");

  f = goodSafetensors(4);
  f.tensors.erase("x");
  p = write("missing.safetensors", f);
  expect(readError(p), "'" + p + "' has no tensor 'x' for the plan's input of that name (the plan's inputs: 'ids', 'x')");

  f = goodSafetensors(4);
  f.tensors["labels"] = f.tensors["ids"];
  p = write("extra.safetensors", f);
  expect(readError(p), "'" + p + "': tensor 'labels' is no input of the plan");

  f = goodSafetensors(0);
  p = write("empty.safetensors", f);
  expect(readError(p), "holds no samples");

  const std::string whole = safetensors::serialize(goodSafetensors(4));
  p = dir + "/truncated.safetensors";
  writeFile(p, whole.substr(0, whole.size() - 5));
  expect(readError(p), "'" + p + "': tensor");  // the safetensors parser's own line
  expect(readError(dir + "/nothing.safetensors"), "cannot open '" + dir + "/nothing.safetensors'");

  expect(readError(dir + "/folder"), "dataset '" + dir + "/folder' has no readable 'ids.npy' for the plan's input 'ids'");
  writeFile(dir + "/one.npy", npy::serialize({"i64", {4, 2, 3}, bytesOf(idsOf(4))}));
  expect(readError(dir + "/one.npy"), "one .npy feeds a plan of one input, and this plan has 2");

  // Values: the runtime's own input check, with the sample.
  f = goodSafetensors(6);
  std::vector<int64_t> ids = idsOf(6);
  ids[4 * 6 + 5] = 12;  // sample 4, position 5
  f.tensors["ids"].data = bytesOf(ids);
  p = write("bounds.safetensors", f);
  rt::Dataset d = fbl::testing::requireValue(rt::Dataset::read(p, plan));
  expect(fbl::testing::errorText(d.checkValues(plan)), p + ": sample 4: input 'ids' position 5 ([1, 2]): index 12 is outside [-10, 10)");
  f = goodSafetensors(6);
  std::vector<float> x = xOf(6);
  x[2 * 4 + 1] = std::numeric_limits<float>::quiet_NaN();
  f.tensors["x"].data = bytesOf(x);
  p = write("nan.safetensors", f);
  d = fbl::testing::requireValue(rt::Dataset::read(p, plan));
  expect(fbl::testing::errorText(d.checkValues(plan)), p + ": sample 2: input 'x' position 1");
}

TEST_CASE("sample order: splitmix64 and the permutations are the documented ones", "[dataset]") {
  // Vigna's reference outputs for seed 1234567 (also rand_xoshiro's SplitMix64 test).
  uint64_t state = 1234567;
  for (uint64_t want : {6457827717110365317ull, 3203168211198807973ull, 9817491932198370423ull, 4593380528125082431ull,
                        16408922859458223821ull})
    CHECK(rt::splitmix64(&state) == want);
  // Pinned so that a change of the algorithm (or a platform that computes it differently) shows:
  // computed by a Python transcription of runtime/sample_order.h's five steps.
  CHECK(rt::seededPermutation(10, 42, 0) == std::vector<int64_t>{0, 9, 5, 8, 6, 4, 7, 2, 1, 3});
  CHECK(rt::seededPermutation(10, 42, 1) == std::vector<int64_t>{6, 9, 1, 5, 0, 8, 4, 2, 3, 7});
}

TEST_CASE("sample order: epochs are permutations of the training samples, held out ones never among them", "[dataset]") {
  for (const std::optional<uint64_t> seed : {std::optional<uint64_t>{}, std::optional<uint64_t>{7}, std::optional<uint64_t>{~0ull}}) {
    INFO((seed ? std::to_string(*seed) : "no seed"));
    const int64_t n = 23, held = 5;
    rt::SampleOrder order(n, held, seed);
    REQUIRE(order.trainCount() == n - held);
    const std::set<int64_t> heldOut(order.heldOut().begin(), order.heldOut().end());
    CHECK(heldOut.size() == static_cast<size_t>(held));
    std::vector<std::vector<int64_t>> epochs(3);
    for (int64_t p = 0; p < 3 * order.trainCount(); ++p) epochs[static_cast<size_t>(p / order.trainCount())].push_back(order.sampleAt(p));
    for (const auto& e : epochs) {
      const std::set<int64_t> visited(e.begin(), e.end());
      CHECK(visited.size() == static_cast<size_t>(n - held));  // each training sample once
      for (int64_t i : e) CHECK(heldOut.count(i) == 0);
      CHECK((*visited.begin() >= 0 && *visited.rbegin() < n));
    }
    if (!seed) {
      CHECK(order.heldOut() == std::vector<int64_t>{18, 19, 20, 21, 22});
      CHECK(epochs[0] == epochs[1]);
      CHECK(epochs[0][0] == 0);
    } else {
      CHECK(epochs[0] != epochs[1]);  // reshuffled each epoch
      // The same seed gives the same order, in any order of asking (a resumed run starts mid-way).
      rt::SampleOrder again(n, held, seed);
      CHECK(again.sampleAt(2 * order.trainCount() + 3) == epochs[2][3]);
      CHECK(again.sampleAt(0) == epochs[0][0]);
      CHECK(again.heldOut() == order.heldOut());
      rt::SampleOrder other(n, held, *seed + 1);
      CHECK(other.heldOut() != order.heldOut());
    }
  }
}

TEST_CASE("sample order: the C API gives SampleOrder's samples", "[dataset]") {
  rt::SampleOrder order(9, 2, 11);
  for (int64_t p = 0; p < 20; ++p) CHECK(fbl_sample_at(9, 2, 1, 11, p) == order.sampleAt(p));
  CHECK(fbl_held_out_sample(9, 2, 1, 11, 1) == order.heldOut()[1]);
  CHECK(fbl_sample_at(9, 2, 0, 11, 8) == 1);  // file order: position 8 is epoch 2's second sample
  CHECK(fbl_held_out_sample(9, 2, 0, 0, 0) == 7);
  CHECK(fbl_sample_at(9, 9, 1, 11, 0) == -1);
  CHECK(fbl_sample_at(0, 0, 1, 11, 0) == -1);
  CHECK(fbl_sample_at(9, 2, 1, 11, -1) == -1);
  CHECK(fbl_held_out_sample(9, 2, 1, 11, 2) == -1);
}

TEST_CASE("dataset position: round trip, and a resumed run on other data or another seed is refused", "[dataset]") {
  const std::string path = rt::datasetPositionPath(tempDir() + "/m.ckpt.safetensors");
  CHECK(path == tempDir() + "/m.ckpt.safetensors.data.json");
  rt::DatasetPosition p;
  p.step = 13;
  p.epoch = 1;
  p.position = 3;
  p.seed = 18446744073709551615ull;  // 2^64 - 1 survives (a decimal string, not a JSON number)
  p.samples = 12;
  p.heldOut = 2;
  p.trainSamples = 10;
  p.fingerprint = 0xfedcba9876543210ull;
  REQUIRE_OK(rt::writeDatasetPosition(path, p));
  rt::DatasetPosition q = fbl::testing::requireValue(rt::readDatasetPosition(path));
  CHECK((q.step == 13 && q.epoch == 1 && q.position == 3 && q.seed == p.seed && q.fingerprint == p.fingerprint));
  CHECK_OK(rt::checkSameData(q, p, path));
  rt::DatasetPosition r = p;
  r.seed = 3;
  CHECK_THAT(fbl::testing::errorText(rt::checkSameData(q, r, path)), Catch::Contains("has --seed 18446744073709551615, this run --seed 3"));
  r = p;
  r.seed.reset();
  CHECK_THAT(fbl::testing::errorText(rt::checkSameData(q, r, path)), Catch::Contains("this run no --seed"));
  r = p;
  r.fingerprint = 1;
  CHECK_THAT(fbl::testing::errorText(rt::checkSameData(q, r, path)), Catch::Contains("was written for another dataset"));
  r = p;
  r.heldOut = 3;
  r.trainSamples = 9;
  CHECK_THAT(fbl::testing::errorText(rt::checkSameData(q, r, path)), Catch::Contains("holds out 2 samples, this run 3"));

  writeFile(path, "{\"format\": \"fbl-dataset-position-1\", \"step\": -1}");
  CHECK_THAT(fbl::testing::errorText(rt::readDatasetPosition(path)), Catch::Contains("'step' is not a non-negative integer"));
  writeFile(path, "not json");
  CHECK_THAT(fbl::testing::errorText(rt::readDatasetPosition(path)), Catch::Contains("is not an fbl dataset position"));
}

}  // namespace
}  // namespace fbl::testing
