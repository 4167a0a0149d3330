// The C API over fbl::rt::Session. Every entry point runs its body through `guarded`, so that:
//  1. no exception reaches the C caller (it would be std::terminate, SIGABRT): it becomes
//     FBL_ERROR and a message;
//  2. every message is one line starting with the function's name, and a NULL pointer is
//     named by its argument;
//  3. a call that changes a session or uses its queue holds the session (`withSession`) while it
//     runs: a second such call meanwhile, from the step's own progress callback or from another
//     thread, is refused, because the step in flight owns the queue, the arena and the callback.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "runtime/dataset.h"
#include "runtime/include/fbl/fbl_runtime.h"
#include "runtime/sample_order.h"
#include "runtime/session.h"

struct fbl_session {
  std::unique_ptr<fbl::rt::Session> s;
  std::atomic<bool> busy{false};  // a call that holds the session is running
};
struct fbl_dataset {
  fbl::rt::Dataset d;
};

namespace {

thread_local std::string lastError;
thread_local bool lastErrorLost = false;  // the message could not be allocated

// Never throws: it runs in the handlers of `guarded`.
void setError(const char* fn, const char* what, const char* detail = "") noexcept {
  try {
    lastError.assign(fn).append(": ").append(what).append(detail);
    lastErrorLost = false;
  } catch (...) {
    lastErrorLost = true;
  }
}

// One entry point's failures, each message prefixed with its name.
class Call {
 public:
  explicit Call(const char* fn) : fn_(fn) {}
  int fail(const std::string& what, int code = FBL_ERROR) const {
    setError(fn_, what.c_str());
    return code;
  }
  // A runtime Status or Result: FBL_OK, or its error with `code`.
  template <class R>
  int check(const R& result, int code = FBL_ERROR) const {
    return result.ok() ? FBL_OK : fail(result.error().message, code);
  }
  int null(const char* arg) const { return fail(std::string(arg) + " must not be NULL"); }
  // For entry points that return a value: `value` (their error value) after recording `what`.
  template <class T>
  T failWith(T value, const std::string& what) const {
    fail(what);
    return value;
  }

 private:
  const char* fn_;
};

// Runs one entry point's body; `onError` is what it returns when an exception was caught.
template <class T, class Body>
T guarded(const char* fn, T onError, Body&& body) noexcept {
  try {
    return body(Call(fn));
  } catch (const std::bad_alloc&) {
    setError(fn, "out of memory");
  } catch (const std::exception& e) {
    setError(fn, "internal error: ", e.what());
  } catch (...) {
    setError(fn, "internal error (an unknown exception)");
  }
  return onError;
}

// An entry point returning FBL_OK or an error code: success clears the thread's last error.
template <class Body>
int api(const char* fn, Body&& body) noexcept {
  const int r = guarded(fn, FBL_ERROR, body);
  if (r == FBL_OK) {
    lastError.clear();
    lastErrorLost = false;
  }
  return r;
}

// Marks the session busy for one call, and releases it however the call ends.
class Hold {
 public:
  explicit Hold(fbl_session* s) : s_(s), held_(!s->busy.exchange(true)) {}
  ~Hold() {
    if (held_) s_->busy.store(false);
  }
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;
  bool held() const { return held_; }

 private:
  fbl_session* s_;
  bool held_;
};

constexpr const char* kBusy =
    "session s is in another call (this is its progress callback, or another thread): only fbl_cancel, fbl_step, "
    "fbl_accumulated, fbl_learning_rate and fbl_last_error may be called until that call returns";

// An entry point that changes session `s` or uses its queue: body(call, session).
template <class Body>
int withSession(const char* fn, fbl_session* s, Body&& body) noexcept {
  return api(fn, [&](const Call& c) {
    if (!s) return c.null("s");
    const Hold hold(s);
    if (!hold.held()) return c.fail(kBusy);
    return body(c, *s->s);
  });
}

// A value of session `s` that needs no hold; `onError` when s is NULL.
template <class T, class Get>
T getter(const char* fn, const fbl_session* s, T onError, Get&& get) noexcept {
  return guarded(fn, onError, [&](const Call& c) {
    if (!s) return c.failWith(onError, "s must not be NULL");
    return get(*s->s);
  });
}

// FBL_ERROR_INPUT for what an input's check refuses; other tensors' writes fail as FBL_ERROR.
int inputCode(const fbl::planfile::Plan& p, int32_t t) {
  return p.tensors[t].role == fbl::planfile::Role::Input ? FBL_ERROR_INPUT : FBL_ERROR;
}

// fbl_write_input's check and write, apart so that fbl_dataset_write_sample can name the sample.
// A failure sets *code: FBL_ERROR_INPUT for what the input's check refuses, so the check comes
// first.
fbl::Status writeInput(fbl::rt::Session& s, const std::string& name, const char* dtype, const std::vector<int64_t>& dims,
                       const void* data, size_t bytes, int* code) {
  *code = FBL_ERROR;
  const int32_t t = s.plan().findTensor(name);
  if (t < 0) return fbl::Error{"the plan has no tensor '" + name + "'"};
  if (fbl::Status e = s.checkInput(name, dtype, dims, data, bytes); !e.ok()) {
    *code = inputCode(s.plan(), t);
    return e;
  }
  return s.writeInput(name, dtype, dims, data, bytes);
}

// A step's code: FBL_CANCELLED when it stopped for a cancel request.
int stepResult(const Call& c, const fbl::rt::Session& s, const fbl::Status& step) {
  return c.check(step, s.cancelled() ? FBL_CANCELLED : FBL_ERROR);
}

std::string outOfRange(const char* arg, int64_t value, const std::string& range) {
  return std::string(arg) + " is " + std::to_string(value) + ", outside " + range;
}

// A plan tensor's description into the caller's pointers, any of which may be NULL.
void describe(const fbl::planfile::Tensor& t, const char** dtype, const int64_t** shape, size_t* rank) {
  if (dtype) *dtype = t.dtype.c_str();
  if (shape) *shape = t.shape.data();
  if (rank) *rank = t.shape.size();
}

// The refusal of an index past the end of a plan list of `size` entries ("inputs", ...).
std::string indexOutside(size_t index, size_t size, const std::string& what) {
  return outOfRange("index", static_cast<int64_t>(index), "the plan's " + std::to_string(size) + " " + what);
}

// A list's length into *count.
int countInto(const Call& c, size_t size, size_t* count) {
  if (!count) return c.null("count");
  *count = size;
  return FBL_OK;
}

// *name of the tensor at `index` of a plan list of `size` entries (tensorAt(i) is its tensor).
template <class TensorAt>
int nameAt(const Call& c, const fbl::planfile::Plan& p, size_t index, size_t size, const std::string& what,
           TensorAt tensorAt, const char** name) {
  if (index >= size) return c.fail(indexOutside(index, size, what));
  if (!name) return c.null("name");
  *name = p.tensors[tensorAt(index)].name.c_str();
  return FBL_OK;
}

// Session `s` to body(call, session) for what fbl_open fixed (its plan, its device): no hold,
// since nothing changes them after it.
template <class Body>
int withSession(const char* fn, const fbl_session* s, Body&& body) noexcept {
  return api(fn, [&](const Call& c) {
    if (!s) return c.null("s");
    return body(c, *s->s);
  });
}

// The plan of session `s` to body(call, plan).
template <class Body>
int withPlan(const char* fn, const fbl_session* s, Body&& body) noexcept {
  return withSession(fn, s, [&](const Call& c, const fbl::rt::Session& session) { return body(c, session.plan()); });
}

// Input `index` of the plan of session `s` to body(call, plan, checks): its plan tensor's checks
// (Plan::inputChecks), in the plan's order; an index past the inputs is refused.
template <class Body>
int withInput(const char* fn, const fbl_session* s, size_t index, Body&& body) noexcept {
  return withPlan(fn, s, [&](const Call& c, const fbl::planfile::Plan& p) {
    if (index >= p.inputs.size()) return c.fail(indexOutside(index, p.inputs.size(), "inputs"));
    std::vector<const fbl::planfile::InputCheck*> checks;
    for (const fbl::planfile::InputCheck& check : p.inputChecks)
      if (check.input == p.inputs[index]) checks.push_back(&check);
    return body(c, p, checks);
  });
}

}  // namespace

extern "C" {

int fbl_open(const char* plan_path, int device, const char* cache_dir, fbl_session** out) {
  return api("fbl_open", [&](const Call& c) {
    if (!out) return c.null("out");
    *out = nullptr;
    if (!plan_path) return c.null("plan_path");
    if (device < -1) return c.fail(outOfRange("device", device, "-1 (the first GPU, else the first device) and the device indices"));
    fbl::rt::OpenOptions o;
    o.device = device;
    if (cache_dir) o.cacheDir = cache_dir;
    o.cachePrograms = !cache_dir || *cache_dir;
    auto session = fbl::rt::Session::open(plan_path, o);
    if (int r = c.check(session)) return r;
    auto handle = std::make_unique<fbl_session>();
    handle->s = std::move(session).value();
    *out = handle.release();
    return FBL_OK;
  });
}

void fbl_close(fbl_session* s) {
  guarded("fbl_close", 0, [&](const Call& c) {
    if (!s) return 0;  // as free(NULL)
    // Closing from the step's own callback would free the step in flight: refused, nothing freed.
    if (s->busy.exchange(true)) return c.fail(std::string(kBusy) + "; nothing was closed");
    delete s;
    return 0;
  });
}

const char* fbl_last_error(void) { return lastErrorLost ? "out of memory (while recording an error)" : lastError.c_str(); }

int fbl_load_weights(fbl_session* s, const char* safetensors_path) {
  return withSession("fbl_load_weights", s, [&](const Call& c, fbl::rt::Session& session) {
    if (!safetensors_path) return c.null("safetensors_path");
    return c.check(session.loadWeights(safetensors_path));
  });
}

int fbl_write_tensor(fbl_session* s, const char* name, const void* data, size_t bytes) {
  return withSession("fbl_write_tensor", s, [&](const Call& c, fbl::rt::Session& session) {
    if (!name) return c.null("name");
    if (!data && bytes > 0) return c.null("data");
    const int32_t t = session.plan().findTensor(name);
    if (t < 0) return c.fail("the plan has no tensor '" + std::string(name) + "'");
    if (int r = c.check(session.checkInput(name, data, bytes), inputCode(session.plan(), t))) return r;
    return c.check(session.writeTensor(name, data, bytes));
  });
}

int fbl_write_input(fbl_session* s, const char* name, const char* dtype, const int64_t* shape, size_t rank,
                    const void* data, size_t bytes) {
  return withSession("fbl_write_input", s, [&](const Call& c, fbl::rt::Session& session) {
    if (!name) return c.null("name");
    if (!dtype) return c.null("dtype");
    if (!shape && rank > 0) return c.null("shape");
    if (!data && bytes > 0) return c.null("data");
    const std::vector<int64_t> dims(shape, shape + rank);
    int code = FBL_ERROR;
    const fbl::Status written = writeInput(session, name, dtype, dims, data, bytes, &code);
    return c.check(written, code);
  });
}

int fbl_read_tensor(fbl_session* s, const char* name, void* data, size_t bytes) {
  return withSession("fbl_read_tensor", s, [&](const Call& c, fbl::rt::Session& session) {
    if (!name) return c.null("name");
    if (!data && bytes > 0) return c.null("data");
    std::vector<unsigned char> v;
    if (int r = c.check(session.readTensor(name, &v))) return r;
    if (v.size() != bytes)
      return c.fail("bytes is " + std::to_string(bytes) + " but tensor '" + name + "' has " + std::to_string(v.size()));
    if (bytes > 0) std::memcpy(data, v.data(), bytes);
    return FBL_OK;
  });
}

int fbl_train_step(fbl_session* s, float* loss) {
  return withSession("fbl_train_step", s,
                     [&](const Call& c, fbl::rt::Session& session) { return stepResult(c, session, session.trainStep(loss)); });
}

int fbl_eval_step(fbl_session* s, float* loss) {
  return withSession("fbl_eval_step", s,
                     [&](const Call& c, fbl::rt::Session& session) { return stepResult(c, session, session.evalStep(loss)); });
}

int fbl_set_progress(fbl_session* s, fbl_progress_fn fn, void* user, int32_t every) {
  return withSession("fbl_set_progress", s, [&](const Call& c, fbl::rt::Session& session) {
    if (!fn) {
      session.setProgress(nullptr, 1);
      return FBL_OK;
    }
    if (every < 1) return c.fail(outOfRange("every", every, "[1, 2^31)"));
    session.setProgress(
        [fn, user](const fbl::rt::Progress& p) {
          const fbl_progress report{p.step, p.phase, p.done, p.total};
          return fn(user, &report) == 0;
        },
        every);
    return FBL_OK;
  });
}

// No hold: a cancel request is for the call in flight, from its callback or another thread.
int fbl_cancel(fbl_session* s) {
  return api("fbl_cancel", [&](const Call& c) {
    if (!s) return c.null("s");
    s->s->cancel();
    return FBL_OK;
  });
}

int64_t fbl_step(const fbl_session* s) {
  return getter("fbl_step", s, int64_t{-1}, [](const fbl::rt::Session& session) { return session.step(); });
}

int fbl_input_count(const fbl_session* s, size_t* count) {
  return withPlan("fbl_input_count", s,
                  [&](const Call& c, const fbl::planfile::Plan& p) { return countInto(c, p.inputs.size(), count); });
}

int fbl_input_info(const fbl_session* s, size_t index, const char** name, const char** dtype, const int64_t** shape,
                   size_t* rank) {
  return withInput("fbl_input_info", s, index, [&](const Call&, const fbl::planfile::Plan& p, const auto&) {
    const fbl::planfile::Tensor& t = p.tensors[p.inputs[index]];
    if (name) *name = t.name.c_str();
    describe(t, dtype, shape, rank);
    return FBL_OK;
  });
}

int fbl_input_bounds(const fbl_session* s, size_t index, int* bounded, int64_t* lo, int64_t* hi) {
  return withInput("fbl_input_bounds", s, index, [&](const Call&, const fbl::planfile::Plan&, const auto& checks) {
    int64_t from = 0, to = 0;
    for (size_t k = 0; k < checks.size(); ++k) {
      from = k ? std::max(from, checks[k]->lo) : checks[k]->lo;
      to = k ? std::min(to, checks[k]->hi) : checks[k]->hi;
    }
    if (bounded) *bounded = checks.empty() ? 0 : 1;
    if (lo) *lo = from;
    if (hi) *hi = to;
    return FBL_OK;
  });
}

int fbl_input_ignore_index(const fbl_session* s, size_t index, int* has, int64_t* value) {
  return withInput("fbl_input_ignore_index", s, index, [&](const Call&, const fbl::planfile::Plan&, const auto& checks) {
    const fbl::planfile::InputCheck* found = nullptr;
    for (const fbl::planfile::InputCheck* check : checks)
      if (check->kind == "label" && check->hasIgnore) found = check;
    if (has) *has = found ? 1 : 0;
    if (value) *value = found ? found->ignoreIndex : 0;
    return FBL_OK;
  });
}

int fbl_input_role(const fbl_session* s, size_t index, const char** role) {
  return withInput("fbl_input_role", s, index, [&](const Call&, const fbl::planfile::Plan&, const auto& checks) {
    bool indices = false, labels = false;
    for (const fbl::planfile::InputCheck* check : checks) (check->kind == "label" ? labels : indices) = true;
    if (role) *role = indices && labels ? "tokens+labels" : indices ? "tokens" : labels ? "labels" : "values";
    return FBL_OK;
  });
}

int fbl_plan_memory(const fbl_session* s, int64_t* peak_bytes, int64_t* largest_allocation_bytes, int64_t* allocations) {
  return withPlan("fbl_plan_memory", s, [&](const Call&, const fbl::planfile::Plan& p) {
    int64_t largest = p.poolSize(0);
    for (size_t slot = 0; slot < p.imageSlots.size(); ++slot) largest = std::max(largest, p.imageSlotBytes(slot));
    if (peak_bytes) *peak_bytes = p.arenaBytes + p.imageBytes();
    if (largest_allocation_bytes) *largest_allocation_bytes = largest;
    if (allocations) *allocations = p.poolCount() + static_cast<int64_t>(p.imageSlots.size());
    return FBL_OK;
  });
}

int fbl_device_memory(const fbl_session* s, int64_t* global_bytes, int64_t* max_alloc_bytes) {
  return withSession("fbl_device_memory", s, [&](const Call&, const fbl::rt::Session& session) {
    const fbl::rt::DeviceLimits& l = session.deviceLimits();
    if (global_bytes) *global_bytes = static_cast<int64_t>(l.globalBytes);
    if (max_alloc_bytes) *max_alloc_bytes = static_cast<int64_t>(l.maxAllocBytes);
    return FBL_OK;
  });
}

int fbl_trainable_count(const fbl_session* s, size_t* count) {
  return withPlan("fbl_trainable_count", s,
                  [&](const Call& c, const fbl::planfile::Plan& p) { return countInto(c, p.trainables.size(), count); });
}

int fbl_trainable_name(const fbl_session* s, size_t index, const char** name) {
  return withPlan("fbl_trainable_name", s, [&](const Call& c, const fbl::planfile::Plan& p) {
    return nameAt(c, p, index, p.trainables.size(), "trainables", [&](size_t i) { return p.trainables[i].param; }, name);
  });
}

int fbl_tensor_info(const fbl_session* s, const char* name, const char** dtype, const int64_t** shape, size_t* rank) {
  return withPlan("fbl_tensor_info", s, [&](const Call& c, const fbl::planfile::Plan& p) {
    if (!name) return c.null("name");
    const int32_t t = p.findTensor(name);
    if (t < 0) return c.fail(std::string("the plan has no tensor '") + name + "'");
    describe(p.tensors[t], dtype, shape, rank);
    return FBL_OK;
  });
}

int fbl_output_count(const fbl_session* s, size_t* count) {
  return withPlan("fbl_output_count", s,
                  [&](const Call& c, const fbl::planfile::Plan& p) { return countInto(c, p.outputs.size(), count); });
}

int fbl_output_name(const fbl_session* s, size_t index, const char** name) {
  return withPlan("fbl_output_name", s, [&](const Call& c, const fbl::planfile::Plan& p) {
    return nameAt(c, p, index, p.outputs.size(), "outputs (compile with --outputs to keep them)",
                  [&](size_t i) { return p.outputs[i]; }, name);
  });
}

int fbl_loss_name(const fbl_session* s, const char** loss_name) {
  return withPlan("fbl_loss_name", s, [&](const Call& c, const fbl::planfile::Plan& p) {
    if (!loss_name) return c.null("loss_name");
    *loss_name = p.loss >= 0 ? p.tensors[p.loss].name.c_str() : "";
    return FBL_OK;
  });
}

int32_t fbl_accumulated(const fbl_session* s) {
  return getter("fbl_accumulated", s, int32_t{-1}, [](const fbl::rt::Session& session) { return session.accumulated(); });
}

int fbl_set_learning_rate(fbl_session* s, float lr) {
  return withSession("fbl_set_learning_rate", s,
                     [&](const Call& c, fbl::rt::Session& session) { return c.check(session.setLearningRate(lr)); });
}

double fbl_learning_rate(const fbl_session* s) {
  return getter("fbl_learning_rate", s, -1.0, [](const fbl::rt::Session& session) { return session.learningRate(); });
}

int fbl_save_checkpoint(fbl_session* s, const char* path) {
  return withSession("fbl_save_checkpoint", s, [&](const Call& c, fbl::rt::Session& session) {
    if (!path) return c.null("path");
    return c.check(session.saveCheckpoint(path));
  });
}

int fbl_load_checkpoint(fbl_session* s, const char* path) {
  return withSession("fbl_load_checkpoint", s, [&](const Call& c, fbl::rt::Session& session) {
    if (!path) return c.null("path");
    return c.check(session.loadCheckpoint(path));
  });
}

int fbl_export_adapter(fbl_session* s, const char* dir) {
  return withSession("fbl_export_adapter", s, [&](const Call& c, fbl::rt::Session& session) {
    if (!dir) return c.null("dir");
    return c.check(session.exportAdapter(dir));
  });
}

// No hold: it reads the plan, which nothing changes after fbl_open.
int fbl_dataset_open(const fbl_session* s, const char* path, fbl_dataset** out) {
  return api("fbl_dataset_open", [&](const Call& c) {
    if (!out) return c.null("out");
    *out = nullptr;
    if (!s) return c.null("s");
    if (!path) return c.null("path");
    auto read = fbl::rt::Dataset::read(path, s->s->plan());
    if (int r = c.check(read)) return r;
    auto d = std::make_unique<fbl_dataset>();
    d->d = std::move(read).value();
    if (int r = c.check(d->d.checkValues(s->s->plan()), FBL_ERROR_INPUT)) return r;
    *out = d.release();
    return FBL_OK;
  });
}

void fbl_dataset_close(fbl_dataset* d) { delete d; }

int64_t fbl_dataset_size(const fbl_dataset* d) {
  return guarded("fbl_dataset_size", int64_t{-1}, [&](const Call& c) {
    if (!d) return c.failWith(int64_t{-1}, "d must not be NULL");
    return d->d.size();
  });
}

int fbl_dataset_write_sample(fbl_session* s, const fbl_dataset* d, int64_t index) {
  return withSession("fbl_dataset_write_sample", s, [&](const Call& c, fbl::rt::Session& session) {
    if (!d) return c.null("d");
    if (index < 0 || index >= d->d.size())
      return c.fail(outOfRange("index", index, "the dataset's samples [0, " + std::to_string(d->d.size()) + ")"));
    for (size_t k = 0; k < d->d.inputCount(); ++k) {
      int code = FBL_ERROR;
      const fbl::Status written = writeInput(session, d->d.inputName(k), d->d.dtype(k).c_str(), d->d.sampleShape(k),
                                             d->d.sample(k, index), d->d.sampleBytes(k), &code);
      if (!written.ok()) return c.fail(d->d.where(k, index) + ": " + written.error().message, code);
    }
    return FBL_OK;
  });
}

int64_t fbl_sample_at(int64_t samples, int64_t held_out, int has_seed, uint64_t seed, int64_t position) {
  return guarded("fbl_sample_at", int64_t{-1}, [&](const Call& c) {
    if (samples < 1) return c.failWith(int64_t{-1}, outOfRange("samples", samples, "[1, 2^63)"));
    if (held_out < 0 || held_out >= samples) return c.failWith(int64_t{-1}, outOfRange("held_out", held_out, "[0, samples)"));
    if (position < 0) return c.failWith(int64_t{-1}, outOfRange("position", position, "[0, 2^63)"));
    fbl::rt::SampleOrder order(samples, held_out, has_seed ? std::optional<uint64_t>(seed) : std::nullopt);
    return order.sampleAt(position);
  });
}

int64_t fbl_held_out_sample(int64_t samples, int64_t held_out, int has_seed, uint64_t seed, int64_t i) {
  return guarded("fbl_held_out_sample", int64_t{-1}, [&](const Call& c) {
    if (samples < 1) return c.failWith(int64_t{-1}, outOfRange("samples", samples, "[1, 2^63)"));
    if (held_out < 0 || held_out >= samples) return c.failWith(int64_t{-1}, outOfRange("held_out", held_out, "[0, samples)"));
    if (i < 0 || i >= held_out) return c.failWith(int64_t{-1}, outOfRange("i", i, "[0, held_out)"));
    const fbl::rt::SampleOrder order(samples, held_out, has_seed ? std::optional<uint64_t>(seed) : std::nullopt);
    return order.heldOut()[static_cast<size_t>(i)];
  });
}

}  // extern "C"
