// The runtime: opens a plan on an OpenCL device and trains. The arena of exactly the planned
// peak, allocated as pools no larger than the device allocates at once, holds every buffer
// tensor at its planned offset; one program holds every kernel; each launch has its own kernel
// object with its arguments (pools and byte offsets, images) bound once. C++17, the OpenCL ICD
// loader and the standard library only, so it builds for Android as it is.
//
// Every method returning Status or Result fails with one line naming the file, tensor, kernel or
// step at fault (runtime/status.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/plan_check.h"
#include "runtime/plan_file.h"
#include "runtime/status.h"
#include "runtime/step_control.h"

namespace fbl::rt {

struct OpenOptions {
  int device = -1;       // index into listDevices(); -1: the first GPU, else the first device
  std::string cacheDir;  // built programs; empty: $FBL_CACHE_DIR, else ~/.cache/fbl, else none
  // false: build the program from source at every open and store nothing. For drivers that keep
  // a cache of their own: PoCL compiles every kernel again to hand out a binary, so there the store
  // costs more than the build. FBL_PROGRAM_CACHE=0 in the environment has the same effect.
  bool cachePrograms = true;
  bool verbose = false;  // say which device and whether the program came from the cache
  // Create the queue with CL_QUEUE_PROFILING_ENABLE and keep one event per launch, so that
  // launchTimes() gives each launch's device time. Off by default: no events, no overhead.
  bool profileLaunches = false;
};

// One launch's device time: CL_PROFILING_COMMAND_END - CL_PROFILING_COMMAND_START.
struct LaunchTime {
  int32_t launch = -1;   // index into plan().launches
  double seconds = 0.0;
};

struct DeviceInfo {
  std::string platform, name, driver;
  bool gpu = false;
};
std::vector<DeviceInfo> listDevices();

class Session {
 public:
  static Result<std::unique_ptr<Session>> open(const std::string& planPath, const OpenOptions& opts = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const planfile::Plan& plan() const;
  const DeviceInfo& device() const;
  // What the device allows a launch; the plan's launches were checked against it at open.
  const DeviceLimits& deviceLimits() const;
  bool programFromCache() const;

  // Base weights and trainables' initial values from a safetensors file, by the plan's names.
  Status loadWeights(const std::string& safetensorsPath);
  // Raw row-major bytes of a tensor, checked against its size; an input's values are checked
  // too (runtime/input_check.h: integer bounds from the plan, no NaN or infinity in floats),
  // and nothing is written when they fail.
  Status writeTensor(const std::string& name, const void* data, size_t bytes);
  // A typed input write: the dtype ("i64", "f32", ...) and shape must be the plan's, then as
  // writeTensor.
  Status writeInput(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                    const void* data, size_t bytes);
  // What writeTensor / writeInput would refuse, without writing (an app can check a whole data
  // set before the first step).
  Status checkInput(const std::string& name, const void* data, size_t bytes) const;
  Status checkInput(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                    const void* data, size_t bytes) const;
  Status readTensor(const std::string& name, std::vector<unsigned char>* out);
  Status readTensor(int32_t tensor, std::vector<unsigned char>* out);

  // One optimizer step: forward, backward, a check that the loss is finite, then the optimizer
  // and the commits of updated parameters and state. With the plan's grad_accum K
  // (runtime/training_loop.h) one micro-batch: forward, backward and the gradient's
  // accumulation, the optimizer only on every K-th call. A non-finite loss returns an error naming
  // the step and leaves trainables and state untouched. Refused before any launch while a
  // weight or an input was never written. *loss gets the loss whenever the step read it, also
  // when it then fails as not finite.
  Status trainStep(float* loss);
  // The loss of the current inputs without backward or update: the forward phase only. Nothing
  // the step owns changes (trainables, state, the step number).
  Status evalStep(float* loss);
  // Progress reports and cancellation (runtime/step_control.h): `fn` is called after every
  // `every` launches and at each phase's end, on the calling thread, once the device finished
  // them; returning false cancels. cancel() may be called from any thread. A cancelled step
  // returns an error, cancelled() is then true, and trainables, optimizer state and step() are
  // exactly as before it; the next step runs normally.
  void setProgress(ProgressFn fn, int32_t every = 1);
  void cancel();
  bool cancelled() const;
  // Runs the launches of the given phases only ("forward", ...) and nothing else (tests,
  // benchmarks); refused while an input was never written.
  Status runPhases(const std::vector<std::string>& phases);
  int64_t step() const;  // optimizer steps done
  // Micro-batches accumulated since the last optimizer step (0 without grad_accum).
  int32_t accumulated() const;
  // A plan compiled with a schedule: sets the schedule's base learning rate, from the next
  // optimizer step on (the warmup and decay factors still apply); saved in checkpoints. Refused
  // for a plan whose lr is a literal in its kernels, or an lr not positive.
  Status setLearningRate(float lr);
  // The learning rate the next optimizer step uses (the compiled one without a schedule).
  double learningRate() const;
  // With OpenOptions::profileLaunches: the launches of the last successful trainStep or
  // runPhases, in enqueue order, with their device times (commit copies are not launches).
  // Empty without profiling or after a failed call.
  const std::vector<LaunchTime>& launchTimes() const;

  // Trainables, optimizer state and the step, written atomically (temporary file + rename).
  Status saveCheckpoint(const std::string& path);
  Status loadCheckpoint(const std::string& path);
  // peft's adapter_model.safetensors + adapter_config.json into `dir` (which must exist).
  Status exportAdapter(const std::string& dir);
  // Success when exportAdapter can export this plan's adapter once its trainables are loaded;
  // else why not (its adapter_refusal, or no trainable of peft's). A tool asks before training,
  // not after.
  Status canExportAdapter() const;

 private:
  struct Impl;
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fbl::rt
