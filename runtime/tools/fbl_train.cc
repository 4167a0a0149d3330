// fbl-train: fine-tunes a plan on an OpenCL device from the command line.
//
//   fbl-train PLAN [--weights WEIGHTS.safetensors] [--data PATH] [--eval-data PATH]
//             [--steps N | --epochs E] [--seed S] [--eval-split F | --eval-samples M] [--eval-every K]
//             [--checkpoint-every K] [--checkpoint PATH] [--resume | --resume-if-exists] [--dump-grads OUT]
//             [--export-adapter DIR] [--lr X] [--metrics FILE.jsonl] [--loss-curve FILE.svg] [--device N]
//             [--cache-dir DIR | --no-program-cache] [--list-devices]
//
// It is a desktop tool over the runtime library: the weights are the .safetensors `fblc compile`
// wrote beside the plan, synthetic inputs (no --data) are drawn within the plan's input_checks
// (runtime/synthetic_inputs.h), and TensorProto files (datasets in .pb, --dump-grads) go through
// its own small reader (tensor_proto_io.h). An app links the runtime alone, reads .safetensors
// and .npy datasets with runtime/dataset.h and feeds safetensors weights and raw input bytes
// through the C API.
// The dataset's order, held-out split and resume position are runtime/sample_order.h's and
// runtime/dataset_position.h's; this file runs the loop.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <numeric>
#include <optional>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/dataset.h"
#include "runtime/dataset_position.h"
#include "runtime/program_cache.h"
#include "runtime/safetensors.h"
#include "runtime/sample_order.h"
#include "runtime/session.h"
#include "runtime/synthetic_inputs.h"
#include "runtime/tools/loss_curve.h"
#include "runtime/tools/tensor_proto_io.h"
#include "runtime/tools/train_data.h"

namespace {

namespace fs = std::filesystem;
using fbl::Error;
using fbl::Result;
using fbl::Status;

// A failed call's line on stderr, and the run's exit code.
template <class R>
int fail(const R& result) {
  fmt::print(stderr, "error: {}\n", result.error().message);
  return 1;
}

struct Args {
  std::string plan, weights, data, evalData, checkpoint, dumpGrads, exportAdapter, cacheDir;
  std::string metrics;  // --metrics FILE.jsonl: a JSON line per optimizer step and per evaluation
  std::string lossCurve;  // --loss-curve FILE.svg: the run's losses drawn at its end
  int steps = -1;  // -1: not given (50, unless --epochs)
  int epochs = 0;
  std::optional<uint64_t> seed;
  double evalSplit = 0.0;
  int evalSamples = 0;
  int evalEvery = 0;
  int checkpointEvery = 0;
  int device = -1;
  std::optional<float> lr;  // --lr: the schedule's base learning rate (plans compiled with --lr-schedule)
  bool resume = false;
  // --resume-if-exists: a missing checkpoint starts the run from step 0, for a supervisor that
  // restarts the same command line; --resume alone refuses it, so a mistyped path is not a
  // silent fresh start.
  bool resumeIfExists = false;
  bool listDevices = false;
  bool noProgramCache = false;  // --no-program-cache
  bool help = false;
};

const char* kUsage =
    "usage: fbl-train PLAN [--weights WEIGHTS.safetensors] [--data PATH] [--eval-data PATH]\n"
    "                 [--steps N | --epochs E] [--seed S] [--eval-split F | --eval-samples M] [--eval-every K]\n"
    "                 [--checkpoint-every K] [--checkpoint PATH] [--resume | --resume-if-exists] [--dump-grads OUT]\n"
    "                 [--export-adapter DIR] [--lr X] [--metrics FILE.jsonl] [--loss-curve FILE.svg] [--device N]\n"
    "                 [--cache-dir DIR | --no-program-cache] [--list-devices]\n"
    "--weights: what `fblc compile` wrote beside the plan (default: PLAN with .safetensors).\n"
    "PATH: FILE.safetensors, FILE.npy, a folder of INPUT.npy, or TensorProtos (DIR/input_K.pb,\n"
    "DIR/test_data_set_*/input_K.pb); see docs/runtime.md, \"Datasets\".\n";

bool parseInt(const char* s, int* out) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (!*s || *end || v < 0 || v > 1000000000) return false;
  *out = static_cast<int>(v);
  return true;
}

bool parseSeed(const char* s, std::optional<uint64_t>* out) {
  const std::string t = s;
  if (t.empty() || t.size() > 20 || t.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  const unsigned long long v = std::strtoull(s, nullptr, 10);
  if (errno == ERANGE) return false;
  *out = static_cast<uint64_t>(v);
  return true;
}

const char* valueKind(const std::string& flag) {
  if (flag == "--steps" || flag == "--device" || flag == "--checkpoint-every") return "a non-negative number";
  if (flag == "--epochs" || flag == "--eval-samples" || flag == "--eval-every") return "a positive number";
  if (flag == "--seed") return "a number in [0, 2^64)";
  if (flag == "--eval-split") return "a fraction strictly between 0 and 1";
  if (flag == "--lr") return "a positive number";
  return "a value";
}

bool parseFraction(const char* s, double* out) {
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (!*s || *end || !(v > 0.0 && v < 1.0)) return false;
  *out = v;
  return true;
}

// Can files be written in `dir`? It is created if missing (as the write would), then a probe file
// is created, written, flushed and removed: a read-only or full disk, a missing permission or a
// path through a file fails here, before any training, not after the run. `flag` and `given` name
// what the user typed.
Status checkWritableDir(const fs::path& dir, const std::string& flag, const std::string& given) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) return Error{fmt::format("{} '{}': cannot create the folder '{}': {}", flag, given, dir.string(), ec.message())};
  }
  if (!fs::is_directory(dir, ec)) return Error{fmt::format("{} '{}': '{}' is not a folder", flag, given, dir.string())};
  const fs::path probe = dir / fmt::format(".fbl-train-write-probe-{}", ::getpid());
  std::FILE* f = std::fopen(probe.string().c_str(), "wb");
  if (!f) return Error{fmt::format("{} '{}': cannot write in '{}': {}", flag, given, dir.string(), std::strerror(errno))};
  const bool ok = std::fputc('x', f) != EOF && std::fflush(f) == 0;
  const int err = errno;
  const bool closed = std::fclose(f) == 0;
  std::remove(probe.string().c_str());
  if (!ok || !closed)
    return Error{fmt::format("{} '{}': cannot write in '{}': {}", flag, given, dir.string(), std::strerror(err ? err : EIO))};
  return Status::success();
}

// Every file the run will write, checked before the device is opened: the checkpoint (and its
// dataset position file beside it), the adapter, the gradient dump.
Status checkOutputs(const Args& a) {
  std::error_code ec;
  if (fs::is_directory(a.checkpoint, ec))
    return Error{fmt::format("--checkpoint '{}' is a folder, not a checkpoint file", a.checkpoint)};
  fs::path parent = fs::path(a.checkpoint).parent_path();
  if (parent.empty()) parent = ".";
  FBL_TRY(checkWritableDir(parent, "--checkpoint", a.checkpoint));
  if (!a.exportAdapter.empty())
    FBL_TRY(checkWritableDir(a.exportAdapter, "--export-adapter", a.exportAdapter));
  if (!a.dumpGrads.empty())
    FBL_TRY(checkWritableDir(fs::path(a.dumpGrads) / "grads", "--dump-grads", a.dumpGrads));
  for (const auto& [flag, path] : {std::pair<const char*, const std::string&>{"--metrics", a.metrics}, {"--loss-curve", a.lossCurve}}) {
    if (path.empty()) continue;
    if (fs::is_directory(path, ec)) return Error{fmt::format("{} '{}' is a folder, not a file", flag, path)};
    fs::path folder = fs::path(path).parent_path();
    FBL_TRY(checkWritableDir(folder.empty() ? fs::path(".") : folder, flag, path));
  }
  return Status::success();
}

// --metrics: one JSON object a line, flushed as written, so a run killed midway keeps its curve;
// a resumed run appends to it. The losses are also kept for --loss-curve: a resumed run's from
// the start, read back from the file it appends to.
class MetricsLog {
 public:
  Status open(const std::string& path, bool append) {
    if (path.empty()) return Status::success();
    if (append) {
      std::ifstream in(path, std::ios::binary);
      std::stringstream earlier;
      earlier << in.rdbuf();
      fbl::train::readMetricsPoints(earlier.str(), &train_, &eval_);
    }
    f_ = std::fopen(path.c_str(), append ? "ab" : "wb");
    if (!f_) return Error{fmt::format("--metrics '{}': cannot open it for writing: {}", path, std::strerror(errno))};
    return Status::success();
  }
  ~MetricsLog() {
    if (f_) std::fclose(f_);
  }
  void step(int64_t step, float loss, double lr, double samplesPerSec) {
    train_.push_back({step, loss});
    if (f_) write(fmt::format(R"({{"step": {}, "loss": {:.9g}, "lr": {:.9g}, "samples_per_s": {:.4g}}})", step, loss, lr,
                              samplesPerSec));
  }
  void eval(int64_t step, double loss) {
    eval_.push_back({step, loss});
    if (f_) write(fmt::format(R"({{"step": {}, "eval_loss": {:.9g}}})", step, loss));
  }

 private:
  void write(const std::string& line) {
    std::fputs((line + "\n").c_str(), f_);
    std::fflush(f_);
  }
  std::FILE* f_ = nullptr;

 public:
  // --loss-curve: written whole at the end of a run (atomically: an earlier curve is replaced
  // only by a complete one).
  Status writeCurve(const std::string& path, const std::string& title) const {
    if (path.empty()) return Status::success();
    return fbl::safetensors::writeFileAtomic(path, fbl::train::lossCurveSvg(train_, eval_, title), "--loss-curve");
  }

 private:
  std::vector<fbl::train::LossPoint> train_, eval_;
};

// A path as a POSIX shell reads it back: quoted unless it is plain.
std::string shellWord(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./-+=:,@%") ==
                        std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

Status parseArgs(int argc, char** argv, Args* a) {
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
    else if (k == "--epochs") ok = number(&a->epochs) && a->epochs > 0;
    else if (k == "--seed") ok = i + 1 < argc && parseSeed(argv[++i], &a->seed);
    else if (k == "--eval-split") ok = i + 1 < argc && parseFraction(argv[++i], &a->evalSplit);
    else if (k == "--eval-samples") ok = number(&a->evalSamples) && a->evalSamples > 0;
    else if (k == "--eval-every") ok = number(&a->evalEvery) && a->evalEvery > 0;
    else if (k == "--checkpoint-every") ok = number(&a->checkpointEvery);
    else if (k == "--checkpoint") ok = value(&a->checkpoint);
    else if (k == "--resume") a->resume = true;
    else if (k == "--resume-if-exists") a->resumeIfExists = true;
    else if (k == "--dump-grads") ok = value(&a->dumpGrads);
    else if (k == "--export-adapter") ok = value(&a->exportAdapter);
    else if (k == "--metrics") ok = value(&a->metrics);
    else if (k == "--loss-curve") ok = value(&a->lossCurve);
    else if (k == "--device") ok = number(&a->device);
    else if (k == "--lr") {
      char* end = nullptr;
      const float v = i + 1 < argc ? std::strtof(argv[++i], &end) : 0.0f;
      ok = end && !*end && std::isfinite(v) && v > 0.0f;
      if (ok) a->lr = v;
    }
    else if (k == "--cache-dir") {
      ok = value(&a->cacheDir);
      if (a->cacheDir.empty()) a->noProgramCache = true;  // as fbl_open's "" (and fbl-example's)
    }
    else if (k == "--no-program-cache") a->noProgramCache = true;
    else if (k == "--list-devices") a->listDevices = true;
    else if (k == "-h" || k == "--help") {
      a->help = true;
      return Status::success();
    }
    else if (!k.empty() && k[0] != '-' && a->plan.empty()) a->plan = k;
    else return Error{fmt::format("unknown argument '{}'", k)};
    if (!ok) return Error{fmt::format("{} needs {}", k, valueKind(k))};
  }
  if (a->listDevices) return Status::success();
  if (a->plan.empty()) return Error{"a plan file is required"};
  if (a->weights.empty()) a->weights = fs::path(a->plan).replace_extension(".safetensors").string();
  if (fs::path(a->weights).extension() == ".onnx")
    return Error{"--weights takes the .safetensors `fblc compile` wrote beside the plan (default: PLAN with .safetensors), not the ONNX model"};
  if (a->epochs > 0 && a->steps >= 0) return Error{"give --steps or --epochs, not both"};
  if (a->resume && a->resumeIfExists) return Error{"give --resume or --resume-if-exists, not both"};
  if (a->data.empty() && (a->epochs > 0 || a->evalSplit > 0.0 || a->evalSamples > 0))
    return Error{"--epochs, --eval-split and --eval-samples need a dataset (--data)"};
  if (a->evalSplit > 0.0 && a->evalSamples > 0) return Error{"give --eval-split or --eval-samples, not both"};
  if (!a->evalData.empty() && (a->evalSplit > 0.0 || a->evalSamples > 0))
    return Error{"give --eval-data or a held-out split of --data (--eval-split, --eval-samples), not both"};
  if (a->evalEvery > 0 && a->evalData.empty() && a->evalSplit == 0.0 && a->evalSamples == 0)
    return Error{"--eval-every needs evaluation samples (--eval-data, --eval-split or --eval-samples)"};
  if (a->steps < 0 && a->epochs == 0) a->steps = 50;
  if (a->checkpoint.empty()) a->checkpoint = fs::path(a->plan).replace_extension(".ckpt.safetensors").string();
  return Status::success();
}

// Without --data: batch `step` of runtime/synthetic_inputs.h, drawn within the plan's
// input_checks, written through the runtime's typed input write, which checks dtype, shape and
// values (runtime/input_check.h).
Status feedSynthetic(fbl::rt::Session& s, const std::vector<fbl::rt::SyntheticInput>& inputs, uint64_t seed,
                     int64_t step) {
  FBL_ASSIGN(const auto batch, fbl::rt::syntheticBatch(inputs, seed, step));
  for (size_t i = 0; i < inputs.size(); ++i)
    FBL_TRY(s.writeInput(inputs[i].name, inputs[i].dtype, inputs[i].shape, batch[i].data(), batch[i].size()));
  return Status::success();
}

// The first step's loss and gradients, as `fblc run-ref --dump` writes them: OUT/loss.pb and
// OUT/grads/<initializer>.pb, TensorProtos named after the loss value and the initializers.
Status dumpGrads(fbl::rt::Session& s, const std::string& out, float loss) {
  std::error_code ec;
  fs::create_directories(fs::path(out) / "grads", ec);
  if (ec) return Error{fmt::format("--dump-grads '{}': cannot create the folder: {}", out, ec.message())};
  const auto& plan = s.plan();
  const auto& lt = plan.tensors[plan.loss];
  fbl::train::ProtoTensor l{lt.name, "f32", lt.shape, {}};  // the loader makes the loss f32, of one element or more
  l.bytes.resize(static_cast<size_t>(fbl::planfile::logicalBytes(lt)), 0);
  std::memcpy(l.bytes.data(), &loss, sizeof loss);
  FBL_TRY(fbl::train::writeTensorProto((fs::path(out) / "loss.pb").string(), l));
  for (const auto& t : plan.trainables) {
    const auto& pt = plan.tensors[t.param];
    fbl::train::ProtoTensor g{pt.name, "f32", pt.shape, {}};
    FBL_TRY(s.readTensor(t.grad, &g.bytes));
    g.bytes.resize(static_cast<size_t>(fbl::planfile::logicalBytes(pt)), 0);
    std::string file = pt.name + ".pb";
    for (char& ch : file)
      if (ch == '/' || ch == '\\') ch = '_';
    FBL_TRY(fbl::train::writeTensorProto((fs::path(out) / "grads" / file).string(), g));
  }
  return Status::success();
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

// The dataset side of a run: the training samples and their order, the evaluation samples, and
// the step the run goes to.
struct Data {
  bool fromFile = false;  // --data given; else synthetic inputs
  fbl::rt::Dataset train, heldOutFile;
  std::optional<fbl::rt::SampleOrder> order;
  uint64_t fingerprint = 0;  // train's, hashed once: every checkpoint records it
  const fbl::rt::Dataset* evalSet = nullptr;  // the dataset `evalSamples` index, if any
  std::vector<int64_t> evalSamples;
  std::vector<fbl::rt::SyntheticInput> synthetic;  // no --data: the plan's inputs and their bounds
  int64_t lastStep = 0;
  int64_t epochs = 0;  // --epochs, 0 if the run is counted in --steps
  // Samples an optimizer step takes: one a micro-batch (a sample is one batch of the plan's
  // inputs), the plan's --grad-accum of them a step. The resume position counts samples.
  int64_t samplesPerStep = 1;
};

// What the checkpoint's dataset position says at `step`.
fbl::rt::DatasetPosition positionAt(const Args& a, const Data& d, int64_t step) {
  fbl::rt::DatasetPosition p;
  p.step = step;
  p.seed = a.seed;
  p.samples = d.train.size();
  p.trainSamples = d.order->trainCount();
  p.heldOut = static_cast<int64_t>(d.order->heldOut().size());
  p.samplesPerStep = d.samplesPerStep;
  p.fingerprint = d.fingerprint;
  p.epoch = step * d.samplesPerStep / p.trainSamples;
  p.position = step * d.samplesPerStep % p.trainSamples;
  return p;
}

Status setUpData(const Args& a, const fbl::rt::Session& s, Data* d) {
  const auto& plan = s.plan();
  d->fromFile = !a.data.empty();
  if (!d->fromFile) {
    d->synthetic = fbl::rt::syntheticInputs(plan);
    // --steps 0 trains nothing (an evaluation or export of a checkpoint): no data to announce.
    if (a.steps != 0) fmt::print(stderr, "data: synthetic inputs (seed {})\n", a.seed.value_or(0));
  } else {
    FBL_ASSIGN(d->train, fbl::train::loadDataset(a.data, plan));
    const int64_t n = d->train.size();
    // --eval-split F holds out floor(F x N) samples, at least one.
    const int64_t heldOut = a.evalSamples > 0 ? a.evalSamples
                            : a.evalSplit > 0.0 ? std::max<int64_t>(1, static_cast<int64_t>(a.evalSplit * static_cast<double>(n)))
                                                : 0;
    if (heldOut >= n)
      return Error{fmt::format("'{}' has {} samples: holding out {} for evaluation leaves none to train on", a.data, n, heldOut)};
    d->order.emplace(n, heldOut, a.seed);
    d->fingerprint = d->train.fingerprint();
    if (heldOut > 0) {
      d->evalSet = &d->train;
      d->evalSamples = d->order->heldOut();
    }
    fmt::print(stderr, "data: {} samples from {}: {} to train on{}{}\n", n, a.data, d->order->trainCount(),
               heldOut > 0 ? fmt::format(", {} held out", heldOut) : "",
               a.seed ? fmt::format(", shuffled by seed {}", *a.seed) : ", in file order");
  }
  if (!a.evalData.empty()) {
    Result<fbl::rt::Dataset> heldOut = fbl::train::loadDataset(a.evalData, plan);
    if (!heldOut.ok()) return Error{"--eval-data: " + heldOut.error().message};
    d->heldOutFile = std::move(heldOut).value();
    d->evalSet = &d->heldOutFile;
    d->evalSamples.resize(static_cast<size_t>(d->heldOutFile.size()));
    std::iota(d->evalSamples.begin(), d->evalSamples.end(), int64_t{0});
  }
  d->epochs = a.epochs;
  d->samplesPerStep = std::max<int64_t>(1, plan.loop.gradAccum);
  // With accumulation, samples past the last whole window of the last epoch are not trained on.
  d->lastStep = a.epochs > 0 ? a.epochs * d->order->trainCount() / d->samplesPerStep : a.steps;
  return Status::success();
}

// --resume, --resume-if-exists: the checkpoint, and with a dataset its position file, which must describe this run's data.
Status resume(const Args& a, const Data& d, fbl::rt::Session& s) {
  if (!fs::exists(a.checkpoint)) {  // --resume-if-exists: run() refused this under --resume
    fmt::print(stderr, "no checkpoint at {}: starting from step 0\n", a.checkpoint);
    return Status::success();
  }
  FBL_TRY(s.loadCheckpoint(a.checkpoint));
  if (!d.fromFile) {
    fmt::print(stderr, "resumed from {} at step {}\n", a.checkpoint, s.step());
    return Status::success();
  }
  const std::string path = fbl::rt::datasetPositionPath(a.checkpoint);
  if (!fs::exists(path))
    return Error{fmt::format("checkpoint '{}' has no dataset position '{}': it was not written by a run on --data; "
                             "remove the checkpoint to start over",
                             a.checkpoint, path)};
  FBL_ASSIGN(const fbl::rt::DatasetPosition saved, fbl::rt::readDatasetPosition(path));
  const fbl::rt::DatasetPosition now = positionAt(a, d, s.step());
  FBL_TRY(fbl::rt::checkSameData(saved, now, path));
  fmt::print(stderr, "resumed from {} at step {} (epoch {}, sample {} of {})\n", a.checkpoint, s.step(), now.epoch + 1,
             now.position, now.trainSamples);
  return Status::success();
}

// The dataset position first, then the checkpoint: a position file is never behind its checkpoint.
Status saveCheckpoint(const Args& a, const Data& d, fbl::rt::Session& s) {
  if (d.fromFile) FBL_TRY(fbl::rt::writeDatasetPosition(fbl::rt::datasetPositionPath(a.checkpoint), positionAt(a, d, s.step())));
  return s.saveCheckpoint(a.checkpoint);
}

Status printEvalLoss(fbl::rt::Session& s, const Data& d, MetricsLog& metrics) {
  FBL_ASSIGN(const double mean, fbl::train::meanEvalLoss(s, *d.evalSet, d.evalSamples));
  fmt::print("eval loss {:.9g} ({} batches at step {})\n", mean, d.evalSamples.size(), s.step());
  std::fflush(stdout);
  metrics.eval(s.step(), mean);
  return Status::success();
}

int run(const Args& a) {
  // Before the device builds the program: a missing default file is the likely mistake.
  if (!fs::exists(a.weights))
    return fmt::print(stderr, "error: weights '{}' do not exist: `fblc compile` writes them beside the plan (--weights names another file)\n",
                      a.weights),
           1;
  if (a.resume && !fs::exists(a.checkpoint))
    return fmt::print(stderr, "error: --resume: no checkpoint at '{}' (--checkpoint names it; --resume-if-exists "
                              "starts from step 0 when there is none)\n",
                      a.checkpoint),
           1;
  // Where the run's results go is checked now, not after the run.
  if (Status e = checkOutputs(a); !e.ok()) return fail(e);
  fbl::rt::OpenOptions o;
  o.device = a.device;
  o.cacheDir = a.cacheDir;
  o.cachePrograms = !a.noProgramCache;
  const Result<bool> cacheOn = fbl::rt::programCacheEnabled();
  if (!cacheOn.ok()) return fail(cacheOn);
  // Building a plan's program takes 10-30 s on a phone or PoCL the first time: say so before it.
  fmt::print(stderr, "opening the plan: its kernels are built on a device's first run{}\n",
             o.cachePrograms && *cacheOn ? ", then read from the cache" : "");
  Result<std::unique_ptr<fbl::rt::Session>> opened = fbl::rt::Session::open(a.plan, o);
  if (!opened.ok()) return fail(opened);
  const std::unique_ptr<fbl::rt::Session> s = std::move(opened).value();
  fmt::print(stderr, "device: {} ({}){}\n", s->device().name, s->device().platform,
             s->programFromCache() ? ", program from cache" : "");
  if (Status e = s->loadWeights(a.weights); !e.ok()) return fail(e);
  // An adapter the plan cannot write is known now, not after the run.
  if (!a.exportAdapter.empty())
    if (Status r = s->canExportAdapter(); !r.ok()) return fmt::print(stderr, "error: --export-adapter: {}\n", r.error().message), 1;
  // Every sample is read and checked before the first step, so a bad one stops the run before it trains.
  Data data;
  if (Status e = setUpData(a, *s, &data); !e.ok()) return fail(e);
  if (a.resume || a.resumeIfExists)
    if (Status e = resume(a, data, *s); !e.ok()) return fail(e);
  // After --resume, which restores a checkpoint's learning rate: the command line wins.
  if (a.lr) {
    if (Status e = s->setLearningRate(*a.lr); !e.ok()) return fmt::print(stderr, "error: --lr: {}\n", e.error().message), 1;
    fmt::print(stderr, "learning rate: {} (--lr; the schedule's warmup and decay apply to it)\n", *a.lr);
  }
  MetricsLog metrics;
  if (Status e = metrics.open(a.metrics, s->step() > 0); !e.ok()) return fail(e);
  // Checkpoints are on by default: the end of the run (and each epoch's end) is saved even
  // without --checkpoint-every, so a failure after training (the adapter export) loses nothing.
  if (s->step() < data.lastStep) {
    const bool replaces = s->step() == 0 && fs::exists(a.checkpoint);
    fmt::print(stderr, "checkpoint: {} ({}at the end{}){}\n", a.checkpoint,
               a.checkpointEvery > 0 ? fmt::format("every {} steps and ", a.checkpointEvery) : "",
               a.checkpointEvery == 0 && data.fromFile && data.order->trainCount() > 1 ? " of each epoch and of the run" : "",
               replaces ? "; it replaces an earlier run's at the first save (--resume goes on from it)" : "");
  }
  const bool tty = ::isatty(2) != 0;
  const int64_t batchSize = s->plan().inputs.empty() ? 1 : std::max<int64_t>(1, s->plan().tensors[s->plan().inputs[0]].shape.empty() ? 1 : s->plan().tensors[s->plan().inputs[0]].shape[0]);
  const auto start = std::chrono::steady_clock::now();
  const int64_t first = s->step();
  float loss = 0.0f;
  bool dumped = a.dumpGrads.empty();
  int64_t evaluatedAt = -1;  // the step of the last eval line
  bool endedOnReport = false;  // the last step printed epoch or eval lines, which ended the progress line
  double epochLoss = 0.0;    // this epoch's losses so far, as this process ran them
  int64_t epochSteps = 0;
  // The first step also pays for lazy work in the driver (PoCL compiles each kernel's
  // work-group function at its first launch), so the steady rate is timed from the second.
  auto firstDone = start;
  // A plan compiled with --grad-accum K: each train step is one micro-batch (one sample), --steps
  // counts optimizer steps, and the samples advance per micro-batch.
  const int64_t accum = data.samplesPerStep, firstMicro = first * accum + s->accumulated();
  bool epochEvalDue = false;  // an epoch ended inside the current accumulation window
  bool epochSaveDue = false;  // likewise, for the default checkpoint at each epoch's end
  while (s->step() < data.lastStep) {
    const int64_t micro = s->step() * accum + s->accumulated();
    if (data.fromFile) {
      const int64_t sample = data.order->sampleAt(micro);
      if (Status e = fbl::train::feedSample(*s, data.train, sample); !e.ok()) return fail(e);
    } else {
      if (Status e = feedSynthetic(*s, data.synthetic, a.seed.value_or(0), micro); !e.ok())
        return fail(e);
    }
    const double stepLr = s->learningRate();  // what this step's optimizer phase uses
    if (Status e = s->trainStep(&loss); !e.ok()) {
      fmt::print(stderr, "{}error: {}\n", tty ? "\n" : "", e.error().message);
      if (fs::exists(a.checkpoint)) fmt::print(stderr, "the last good checkpoint is {}\n", a.checkpoint);
      return 1;
    }
    if (micro == firstMicro) firstDone = std::chrono::steady_clock::now();
    if (!dumped) {
      if (Status e = dumpGrads(*s, a.dumpGrads, loss); !e.ok()) return fail(e);
      dumped = true;
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double done = static_cast<double>(micro + 1 - firstMicro);
    progress(static_cast<int>(s->step()), static_cast<int>(data.lastStep), loss, done * static_cast<double>(batchSize) / secs,
             secs / done * static_cast<double>(data.lastStep * accum - micro - 1), tty);
    if (s->accumulated() == 0) metrics.step(s->step(), loss, stepLr, done * static_cast<double>(batchSize) / secs);
    epochLoss += loss;
    ++epochSteps;
    // An epoch of one sample (a single batch cycled, the old --data DIR) gets no report of its own.
    const bool epochEnd = data.fromFile && data.order->trainCount() > 1 && (micro + 1) % data.order->trainCount() == 0;
    epochEvalDue = epochEvalDue || epochEnd;
    epochSaveDue = epochSaveDue || epochEnd;
    // Evaluations and checkpoints fall between accumulation windows, after an optimizer step.
    const bool windowEnd = s->accumulated() == 0;
    const bool evaluate = data.evalSet && windowEnd && (epochEvalDue || (a.evalEvery > 0 && s->step() % a.evalEvery == 0));
    const bool report = epochEnd || evaluate;
    if (tty && report) fmt::print(stderr, "\n");  // end the progress line before ours
    if (epochEnd) {
      const int64_t epoch = (micro + 1) / data.order->trainCount();
      fmt::print("epoch {}{} done at step {}: mean train loss {:.9g} over {} {}\n", epoch,
                 data.epochs > 0 ? fmt::format("/{}", data.epochs) : "", s->step(), epochLoss / static_cast<double>(epochSteps),
                 epochSteps, accum > 1 ? "micro-batches" : "steps");
      std::fflush(stdout);
      epochLoss = 0.0;
      epochSteps = 0;
    }
    if (evaluate) {
      if (Status e = printEvalLoss(*s, data, metrics); !e.ok()) return fail(e);
      evaluatedAt = s->step();
      epochEvalDue = false;
    }
    const bool saveNow = a.checkpointEvery > 0 ? s->step() % a.checkpointEvery == 0 : epochSaveDue;
    if (windowEnd && saveNow && s->step() < data.lastStep) {  // the last step is saved below
      if (Status e = saveCheckpoint(a, data, *s); !e.ok()) return fmt::print(stderr, "\nerror: {}\n", e.error().message), 1;
      epochSaveDue = false;
    }
    endedOnReport = report;
  }
  if (tty && !endedOnReport) fmt::print(stderr, "\n");
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
  // The end of the run, whenever it trained: a run that took no step (--steps 0 to export a
  // resumed checkpoint) does not rewrite the checkpoint, nor replace an earlier run's.
  std::string saved;  // the checkpoint that holds this run's final state, if any
  Status saveStatus;
  if (s->step() > first) {
    saveStatus = saveCheckpoint(a, data, *s);
    if (saveStatus.ok()) saved = a.checkpoint;
    else fmt::print(stderr, "error: {}\n", saveStatus.error().message);
  } else if ((a.resume || a.resumeIfExists) && fs::exists(a.checkpoint)) {
    saved = a.checkpoint;
  }
  // The held-out loss at the end, unless the last step printed it: the forward phase of every
  // evaluation sample, averaged; nothing is updated.
  if (data.evalSet && evaluatedAt != s->step())
    if (Status e = printEvalLoss(*s, data, metrics); !e.ok()) return fail(e);
  if (!a.lossCurve.empty()) {
    if (Status e = metrics.writeCurve(a.lossCurve, fs::path(a.plan).filename().string()); !e.ok())
      return fail(e);
    fmt::print("loss curve: {}\n", a.lossCurve);
  }
  if (!a.exportAdapter.empty()) {
    std::error_code ec;
    fs::create_directories(a.exportAdapter, ec);
    if (Status e = s->exportAdapter(a.exportAdapter); !e.ok()) {
      // The trained state is in the checkpoint: say how to export it again without training.
      if (saved.empty()) return fail(e);
      fmt::print(stderr, "error: {}; the run is saved in '{}' (step {}): export it with `fbl-train {} --weights {} --resume "
                         "--checkpoint {} --steps 0 --export-adapter {}`\n",
                 e.error().message, saved, s->step(), shellWord(a.plan), shellWord(a.weights), shellWord(saved), shellWord(a.exportAdapter));
      return 1;
    }
    fmt::print("adapter: {}/adapter_model.safetensors, adapter_config.json\n", a.exportAdapter);
  }
  return saveStatus.ok() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a;
    if (Status e = parseArgs(argc, argv, &a); !e.ok()) return fmt::print(stderr, "error: {}\n{}", e.error().message, kUsage), 2;
    if (a.help) return fmt::print("{}", kUsage), 0;
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
