// Progress reports and cancellation of a step (docs/runtime.md, "Progress and cancelling").
// A step reports after every `every` launches and at the end of each phase, once the device has
// finished them (the queue is drained first, so a report means the work is done). A cancel
// request, from the progress callback or any thread, is honoured at the next launch boundary of
// the forward or backward phase; the optimizer phase is never interrupted, because it updates
// trainables and optimizer state in place. A request the step could not honour stays pending and
// cancels the next step before its first launch.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

namespace fbl::rt {

struct Progress {
  int64_t step = 0;           // the step being run, 1-based
  const char* phase = "";     // "forward", "backward" or "optimizer"
  int32_t done = 0;           // launches of this step finished
  int32_t total = 0;          // launches this step runs
};

// Returns false to cancel the step (as StepControl::cancel does).
using ProgressFn = std::function<bool(const Progress&)>;

class StepControl {
 public:
  // every >= 1: launches between reports; a null fn switches reports off.
  void setProgress(ProgressFn fn, int32_t every) {
    fn_ = std::move(fn);
    every_ = every < 1 ? 1 : every;
  }
  bool reporting() const { return static_cast<bool>(fn_); }
  // Whether a report is due after `done` launches, the last of its phase when `phaseEnd`.
  bool due(int32_t done, bool phaseEnd) const { return fn_ && (phaseEnd || done % every_ == 0); }
  // Calls the callback; a false return is a cancel request.
  void report(const Progress& p) {
    if (fn_ && !fn_(p)) cancel();
  }
  // Safe from any thread.
  void cancel() { cancel_.store(true); }
  bool requested() const { return cancel_.load(); }
  // Consumes the request: the step that honours it clears it.
  bool take() { return cancel_.exchange(false); }

 private:
  ProgressFn fn_;
  int32_t every_ = 1;
  std::atomic<bool> cancel_{false};
};

}  // namespace fbl::rt
