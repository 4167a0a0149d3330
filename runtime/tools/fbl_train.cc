// fbl-train: fine-tunes a plan on an OpenCL device from the command line.
//
//   fbl-train PLAN --weights MODEL.onnx|WEIGHTS.safetensors [--data DIR] [--eval-data DIR] [--steps N]
//             [--checkpoint-every K] [--checkpoint PATH] [--resume] [--dump-grads OUT]
//             [--export-adapter DIR] [--device N] [--cache-dir DIR] [--list-devices]
//
// It is a desktop tool over the runtime library: it links the compiler library only to read
// ONNX (weights from MODEL.onnx, inputs from DIR/input_N.pb TensorProtos, or without --data the
// graph of MODEL.onnx for synthetic inputs); an app links the runtime alone and feeds
// safetensors weights and raw input bytes through the C API.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "compiler/onnx/load_model.h"
#include "compiler/onnx/tensor_proto.h"
#include "compiler/plan/compile_command.h"
#include "compiler/zoo/synthetic_inputs.h"
#include "runtime/session.h"

namespace {

namespace fs = std::filesystem;

struct Args {
  std::string plan, weights, data, evalData, checkpoint, dumpGrads, exportAdapter, cacheDir;
  int steps = 50;
  int checkpointEvery = 0;
  int device = -1;
  bool resume = false;
  bool listDevices = false;
};

const char* kUsage =
    "usage: fbl-train PLAN --weights MODEL.onnx|WEIGHTS.safetensors [--data DIR] [--eval-data DIR] [--steps N]\n"
    "                 [--checkpoint-every K] [--checkpoint PATH] [--resume] [--dump-grads OUT]\n"
    "                 [--export-adapter DIR] [--device N] [--cache-dir DIR] [--list-devices]\n";

bool parseInt(const char* s, int* out) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (!*s || *end || v < 0 || v > 1000000000) return false;
  *out = static_cast<int>(v);
  return true;
}

std::string parseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&](std::string* out) -> bool {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    auto number = [&](int* out) -> bool { return i + 1 < argc && parseInt(argv[++i], out); };
    bool ok = true;
    if (k == "--weights") ok = value(&a->weights);
    else if (k == "--data") ok = value(&a->data);
    else if (k == "--eval-data") ok = value(&a->evalData);
    else if (k == "--steps") ok = number(&a->steps);
    else if (k == "--checkpoint-every") ok = number(&a->checkpointEvery);
    else if (k == "--checkpoint") ok = value(&a->checkpoint);
    else if (k == "--resume") a->resume = true;
    else if (k == "--dump-grads") ok = value(&a->dumpGrads);
    else if (k == "--export-adapter") ok = value(&a->exportAdapter);
    else if (k == "--device") ok = number(&a->device);
    else if (k == "--cache-dir") ok = value(&a->cacheDir);
    else if (k == "--list-devices") a->listDevices = true;
    else if (k == "-h" || k == "--help") return "help";
    else if (!k.empty() && k[0] != '-' && a->plan.empty()) a->plan = k;
    else return fmt::format("unknown argument '{}'", k);
    if (!ok) return fmt::format("{} needs a {}", k, k == "--steps" || k == "--device" || k == "--checkpoint-every" ? "non-negative number" : "value");
  }
  if (a->listDevices) return "";
  if (a->plan.empty()) return "a plan file is required";
  if (a->weights.empty()) return "--weights is required";
  if (a->data.empty() && fs::path(a->weights).extension() != ".onnx")
    return "without --data, --weights must be MODEL.onnx: synthetic inputs take their value ranges from its graph";
  if (a->checkpoint.empty()) a->checkpoint = fs::path(a->plan).replace_extension(".ckpt.safetensors").string();
  return "";
}

// One batch: the raw bytes of input_N.pb for every plan input. DIR holds input_N.pb itself, or
// test_data_set_K/ folders that the steps cycle through.
struct Batch {
  std::vector<fbl::ir::Tensor> inputs;
  std::vector<std::string> files;  // where each input came from, for messages ("" if synthetic)
};

std::string readBatch(const fs::path& dir, size_t count, Batch* b) {
  for (size_t i = 0; i < count; ++i) {
    const fs::path p = dir / fmt::format("input_{}.pb", i);
    auto t = fbl::onnx::readTensorProtoFile(p.string());
    if (!t.ok()) return t.error().message;
    b->inputs.push_back(std::move(t->tensor));
    b->files.push_back(p.string());
  }
  return "";
}

std::string readData(const std::string& dir, size_t count, std::vector<Batch>* out) {
  std::vector<fs::path> dirs;
  if (fs::exists(fs::path(dir) / "input_0.pb") || count == 0) {
    dirs.push_back(dir);
  } else {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_directory() && fs::exists(e.path() / "input_0.pb")) dirs.push_back(e.path());
    if (ec) return fmt::format("--data '{}': {}", dir, ec.message());
    std::sort(dirs.begin(), dirs.end());
  }
  if (dirs.empty()) return fmt::format("--data '{}' has no input_0.pb (nor test_data_set_*/input_0.pb)", dir);
  for (const fs::path& d : dirs) {
    Batch b;
    if (auto e = readBatch(d, count, &b); !e.empty()) return e;
    out->push_back(std::move(b));
  }
  return "";
}

// Without --data: the graph of MODEL.onnx, loaded with the plan's input shapes (the plan may
// have been compiled with --shape), so that zoo::syntheticInputs reads each integer input's
// bound (vocabulary, class count) from it.
std::string loadSyntheticGraph(const std::string& model, const fbl::planfile::Plan& plan, fbl::ir::Graph* out) {
  auto g = fbl::onnx::loadModel(model);
  if (!g.ok()) return g.error().message;
  if (g->inputs.size() != plan.inputs.size())
    return fmt::format("{} has {} inputs but the plan {}", model, g->inputs.size(), plan.inputs.size());
  fbl::onnx::LoadOptions lo;
  bool differ = false;
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const auto& shape = plan.tensors[plan.inputs[i]].shape;
    lo.shapeOverrides[g->values[g->inputs[i]].name] = fbl::ir::Shape(shape.begin(), shape.end());
    differ = differ || g->values[g->inputs[i]].shape != lo.shapeOverrides[g->values[g->inputs[i]].name];
  }
  if (differ) {
    g = fbl::onnx::loadModel(model, lo);
    if (!g.ok()) return g.error().message;
  }
  *out = std::move(g.value());
  return "";
}

std::string syntheticBatch(const fbl::ir::Graph& g, int64_t step, Batch* b) {
  auto inputs = fbl::zoo::syntheticInputs(g, /*seed=*/0, step);
  if (!inputs.ok()) return inputs.error().message;
  b->inputs.clear();
  for (fbl::ir::ValueId v : g.inputs) b->inputs.push_back(std::move(inputs.value().at(v)));
  return "";
}

// Writes a batch through the runtime's typed input write, which checks dtype, shape and values
// (runtime/input_check.h); with `checkOnly` it only checks. Errors name the file.
std::string feed(fbl::rt::Session& s, const Batch& b, bool checkOnly = false) {
  const auto& plan = s.plan();
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const auto& t = plan.tensors[plan.inputs[i]];
    const auto& x = b.inputs[i];
    const std::string dtype(fbl::ir::dtypeName(x.dtype()));
    const std::vector<int64_t> shape(x.shape().begin(), x.shape().end());
    std::string e = checkOnly ? s.checkInput(t.name, dtype, shape, x.raw(), x.nbytes())
                              : s.writeInput(t.name, dtype, shape, x.raw(), x.nbytes());
    if (!e.empty()) return i < b.files.size() && !b.files[i].empty() ? b.files[i] + ": " + e : e;
  }
  return "";
}

// The first step's loss and gradients, as `fblc run-ref --dump` writes them: OUT/loss.pb and
// OUT/grads/<initializer>.pb, TensorProtos named after the loss value and the initializers.
std::string dumpGrads(fbl::rt::Session& s, const std::string& out, float loss) {
  std::error_code ec;
  fs::create_directories(fs::path(out) / "grads", ec);
  if (ec) return fmt::format("--dump-grads '{}': cannot create the folder: {}", out, ec.message());
  const auto& plan = s.plan();
  const auto& lt = plan.tensors[plan.loss];
  fbl::ir::Tensor l(fbl::ir::DType::F32, lt.shape);
  l.set(0, loss);
  if (auto st = fbl::onnx::writeTensorProtoFile((fs::path(out) / "loss.pb").string(), lt.name, l); !st.ok())
    return st.error().message;
  for (const auto& t : plan.trainables) {
    const auto& pt = plan.tensors[t.param];
    std::vector<unsigned char> bytes;
    if (auto e = s.readTensor(t.grad, &bytes); !e.empty()) return e;
    fbl::ir::Tensor g(fbl::ir::DType::F32, pt.shape);
    std::memcpy(g.raw(), bytes.data(), std::min(bytes.size(), g.nbytes()));
    std::string file = pt.name + ".pb";
    for (char& ch : file)
      if (ch == '/' || ch == '\\') ch = '_';
    if (auto st = fbl::onnx::writeTensorProtoFile((fs::path(out) / "grads" / file).string(), pt.name, g); !st.ok())
      return st.error().message;
  }
  return "";
}

// "step 12/50 [=======>      ] loss 5.1234  41.2 samples/s  ETA 3s"; rewritten in place on a
// terminal, one line per step otherwise (logs, CI).
void progress(int step, int total, float loss, double samplesPerSec, double eta, bool tty) {
  const int width = 24, filled = total > 0 ? width * step / total : width;
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < width) bar += '>' + std::string(static_cast<size_t>(width - filled - 1), ' ');
  fmt::print(stderr, "{}step {}/{} [{}] loss {:.6f}  {:.1f} samples/s  ETA {:.0f}s{}", tty ? "\r" : "", step, total,
             bar, loss, samplesPerSec, eta, tty ? "" : "\n");
}

int run(const Args& a) {
  fbl::rt::OpenOptions o;
  o.device = a.device;
  o.cacheDir = a.cacheDir;
  std::string err;
  auto s = fbl::rt::Session::open(a.plan, o, &err);
  if (!s) return fmt::print(stderr, "error: {}\n", err), 1;
  fmt::print(stderr, "device: {} ({}){}\n", s->device().name, s->device().platform,
             s->programFromCache() ? ", program from cache" : "");
  std::string weights = a.weights;
  if (fs::path(weights).extension() == ".onnx") {
    // The runtime parses no protobuf: convert the initializers the plan names through the compiler.
    fbl::plan::CompileArgs ca;
    ca.model = a.weights;
    ca.weights = (fs::temp_directory_path() / fmt::format("fbl-train-{}.safetensors", ::getpid())).string();
    if (auto st = fbl::plan::writeWeights(ca, s->plan()); !st.ok()) return fmt::print(stderr, "error: {}\n", st.error().message), 1;
    weights = ca.weights;
  }
  err = s->loadWeights(weights);
  if (weights != a.weights) fs::remove(weights);
  if (!err.empty()) return fmt::print(stderr, "error: {}\n", err), 1;
  std::vector<Batch> batches;
  fbl::ir::Graph synthetic;
  if (a.data.empty()) {
    if (auto e = loadSyntheticGraph(a.weights, s->plan(), &synthetic); !e.empty()) return fmt::print(stderr, "error: {}\n", e), 1;
    fmt::print(stderr, "data: synthetic inputs (seed 0)\n");
  } else if (auto e = readData(a.data, s->plan().inputs.size(), &batches); !e.empty()) {
    return fmt::print(stderr, "error: {}\n", e), 1;
  }
  std::vector<Batch> evalBatches;
  if (!a.evalData.empty())
    if (auto e = readData(a.evalData, s->plan().inputs.size(), &evalBatches); !e.empty())
      return fmt::print(stderr, "error: --eval-data: {}\n", e), 1;
  // Every batch is checked before the first step, so a bad one stops the run before it trains.
  for (const auto* list : {&batches, &evalBatches})
    for (const Batch& b : *list)
      if (auto e = feed(*s, b, /*checkOnly=*/true); !e.empty()) return fmt::print(stderr, "error: {}\n", e), 1;
  if (a.resume) {
    if (fs::exists(a.checkpoint)) {
      if (auto e = s->loadCheckpoint(a.checkpoint); !e.empty()) return fmt::print(stderr, "error: {}\n", e), 1;
      fmt::print(stderr, "resumed from {} at step {}\n", a.checkpoint, s->step());
    } else {
      fmt::print(stderr, "no checkpoint at {}: starting from step 0\n", a.checkpoint);
    }
  }
  const bool tty = ::isatty(2) != 0;
  const int64_t batchSize = s->plan().inputs.empty() ? 1 : std::max<int64_t>(1, s->plan().tensors[s->plan().inputs[0]].shape.empty() ? 1 : s->plan().tensors[s->plan().inputs[0]].shape[0]);
  const auto start = std::chrono::steady_clock::now();
  const int64_t first = s->step();
  float loss = 0.0f;
  bool dumped = a.dumpGrads.empty();
  // The first step also pays for lazy work in the driver (PoCL compiles each kernel's
  // work-group function at its first launch), so the steady rate is timed from the second.
  auto firstDone = start;
  // A plan compiled with --grad-accum K: each train step is one micro-batch, --steps counts
  // optimizer steps, and the batches advance per micro-batch.
  const int64_t accum = s->plan().loop.gradAccum, firstMicro = first * accum + s->accumulated();
  while (s->step() < a.steps) {
    const int64_t micro = s->step() * accum + s->accumulated();
    Batch generated;
    if (batches.empty())
      if (auto e = syntheticBatch(synthetic, micro, &generated); !e.empty()) return fmt::print(stderr, "error: {}\n", e), 1;
    const Batch& b = batches.empty() ? generated : batches[static_cast<size_t>(micro) % batches.size()];
    if (auto e = feed(*s, b); !e.empty()) return fmt::print(stderr, "error: {}\n", e), 1;
    if (auto e = s->trainStep(&loss); !e.empty()) {
      fmt::print(stderr, "{}error: {}\n", tty ? "\n" : "", e);
      if (fs::exists(a.checkpoint)) fmt::print(stderr, "the last good checkpoint is {}\n", a.checkpoint);
      return 1;
    }
    if (micro == firstMicro) firstDone = std::chrono::steady_clock::now();
    if (!dumped) {
      if (auto e = dumpGrads(*s, a.dumpGrads, loss); !e.empty()) return fmt::print(stderr, "error: {}\n", e), 1;
      dumped = true;
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double done = static_cast<double>(micro + 1 - firstMicro);
    progress(static_cast<int>(s->step()), a.steps, loss, done * static_cast<double>(batchSize) / secs,
             secs / done * static_cast<double>(a.steps * accum - micro - 1), tty);
    if (a.checkpointEvery > 0 && s->accumulated() == 0 && s->step() % a.checkpointEvery == 0)
      if (auto e = s->saveCheckpoint(a.checkpoint); !e.empty()) return fmt::print(stderr, "\nerror: {}\n", e), 1;
  }
  if (tty) fmt::print(stderr, "\n");
  if (s->step() > first) {
    const auto now = std::chrono::steady_clock::now();
    const double firstSecs = std::chrono::duration<double>(firstDone - start).count();
    const double rest = std::chrono::duration<double>(now - firstDone).count();
    const int64_t restSteps = s->step() - first - 1;
    fmt::print("done: step {} loss {:.9g} (first step {:.2f} s, then {:.2f} ms/step)\n", s->step(), loss, firstSecs,
               restSteps > 0 ? 1e3 * rest / static_cast<double>(restSteps) : 0.0);
  } else {
    fmt::print("done: already at step {}\n", s->step());
  }
  if (a.checkpointEvery > 0)
    if (auto e = s->saveCheckpoint(a.checkpoint); !e.empty()) return fmt::print(stderr, "error: {}\n", e), 1;
  // The held-out loss: the forward phase of every evaluation batch, averaged; nothing is updated.
  if (!evalBatches.empty()) {
    double sum = 0.0;
    for (const Batch& b : evalBatches) {
      float l = 0.0f;
      if (auto e = feed(*s, b); !e.empty()) return fmt::print(stderr, "error: {}\n", e), 1;
      if (auto e = s->evalStep(&l); !e.empty()) return fmt::print(stderr, "error: {}\n", e), 1;
      sum += l;
    }
    fmt::print("eval loss {:.9g} ({} batches at step {})\n", sum / static_cast<double>(evalBatches.size()), evalBatches.size(), s->step());
  }
  if (!a.exportAdapter.empty()) {
    std::error_code ec;
    fs::create_directories(a.exportAdapter, ec);
    if (auto e = s->exportAdapter(a.exportAdapter); !e.empty()) return fmt::print(stderr, "error: {}\n", e), 1;
    fmt::print("adapter: {}/adapter_model.safetensors, adapter_config.json\n", a.exportAdapter);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a;
    const std::string e = parseArgs(argc, argv, &a);
    if (e == "help") return fmt::print("{}", kUsage), 0;
    if (!e.empty()) return fmt::print(stderr, "error: {}\n{}", e, kUsage), 2;
    if (a.listDevices) {
      const auto devs = fbl::rt::listDevices();
      for (size_t i = 0; i < devs.size(); ++i)
        fmt::print("{}: {} ({}){}\n", i, devs[i].name, devs[i].platform, devs[i].gpu ? " GPU" : "");
      return 0;
    }
    return run(a);
  } catch (const std::exception& ex) {
    fmt::print(stderr, "fbl-train: internal error: {}\n", ex.what());
    return 3;
  }
}
