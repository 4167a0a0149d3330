// The C API over fbl::rt::Session: errors become a thread-local message and a non-zero return.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/dataset.h"
#include "runtime/include/fbl/fbl_runtime.h"
#include "runtime/sample_order.h"
#include "runtime/session.h"

struct fbl_session {
  std::unique_ptr<fbl::rt::Session> s;
};
struct fbl_dataset {
  fbl::rt::Dataset d;
};

namespace {
thread_local std::string lastError;
std::string noTensor(const fbl_session* s, const char* name) {
  return s->s->plan().findTensor(name) < 0 ? "the plan has no tensor '" + std::string(name) + "'" : "";
}
int result(const std::string& e, int code = FBL_ERROR) {
  lastError = e;
  return e.empty() ? FBL_OK : code;
}
// FBL_ERROR_INPUT for what an input's check refuses; other tensors' writes fail as FBL_ERROR.
int inputCode(const fbl_session* s, const char* name) {
  const auto& p = s->s->plan();
  return p.tensors[p.findTensor(name)].role == fbl::planfile::Role::Input ? FBL_ERROR_INPUT : FBL_ERROR;
}
}  // namespace

extern "C" {

int fbl_open(const char* plan_path, int device, const char* cache_dir, fbl_session** out) {
  if (!plan_path || !out) return result("fbl_open: plan_path and out must not be NULL");
  fbl::rt::OpenOptions o;
  o.device = device;
  if (cache_dir) o.cacheDir = cache_dir;
  std::string e;
  auto s = fbl::rt::Session::open(plan_path, o, &e);
  if (!s) return result(e);
  *out = new fbl_session{std::move(s)};
  return result("");
}

void fbl_close(fbl_session* s) { delete s; }
const char* fbl_last_error(void) { return lastError.c_str(); }

int fbl_load_weights(fbl_session* s, const char* path) { return result(s->s->loadWeights(path)); }

// The checks first, apart, so that a refused input gets its own code.
int fbl_write_tensor(fbl_session* s, const char* name, const void* data, size_t bytes) {
  if (!s || !name) return result("fbl_write_tensor: s and name must not be NULL");
  if (int r = result(noTensor(s, name))) return r;
  if (int r = result(s->s->checkInput(name, data, bytes), inputCode(s, name))) return r;
  return result(s->s->writeTensor(name, data, bytes));
}

int fbl_write_input(fbl_session* s, const char* name, const char* dtype, const int64_t* shape, size_t rank,
                    const void* data, size_t bytes) {
  if (!s || !name || !dtype || (!shape && rank > 0)) return result("fbl_write_input: s, name, dtype and shape must not be NULL");
  if (int r = result(noTensor(s, name))) return r;
  const std::vector<int64_t> dims(shape, shape + rank);
  if (int r = result(s->s->checkInput(name, dtype, dims, data, bytes), inputCode(s, name))) return r;
  return result(s->s->writeInput(name, dtype, dims, data, bytes));
}

int fbl_read_tensor(fbl_session* s, const char* name, void* data, size_t bytes) {
  std::vector<unsigned char> v;
  if (int r = result(s->s->readTensor(name, &v))) return r;
  if (v.size() != bytes)
    return result("tensor '" + std::string(name) + "' has " + std::to_string(v.size()) + " bytes, not " + std::to_string(bytes));
  std::memcpy(data, v.data(), bytes);
  return 0;
}

int fbl_train_step(fbl_session* s, float* loss) {
  const std::string e = s->s->trainStep(loss);
  return result(e, s->s->cancelled() ? FBL_CANCELLED : FBL_ERROR);
}
int fbl_eval_step(fbl_session* s, float* loss) {
  const std::string e = s->s->evalStep(loss);
  return result(e, s->s->cancelled() ? FBL_CANCELLED : FBL_ERROR);
}

void fbl_set_progress(fbl_session* s, fbl_progress_fn fn, void* user, int32_t every) {
  if (!fn) {
    s->s->setProgress(nullptr, every);
    return;
  }
  s->s->setProgress(
      [fn, user](const fbl::rt::Progress& p) {
        const fbl_progress c{p.step, p.phase, p.done, p.total};
        return fn(user, &c) == 0;
      },
      every);
}
void fbl_cancel(fbl_session* s) { s->s->cancel(); }
int64_t fbl_step(const fbl_session* s) { return s->s->step(); }
int32_t fbl_accumulated(const fbl_session* s) { return s->s->accumulated(); }
int fbl_set_learning_rate(fbl_session* s, float lr) {
  if (!s) return result("fbl_set_learning_rate: s must not be NULL");
  return result(s->s->setLearningRate(lr));
}
double fbl_learning_rate(const fbl_session* s) { return s->s->learningRate(); }
int fbl_save_checkpoint(fbl_session* s, const char* path) { return result(s->s->saveCheckpoint(path)); }
int fbl_load_checkpoint(fbl_session* s, const char* path) { return result(s->s->loadCheckpoint(path)); }
int fbl_export_adapter(fbl_session* s, const char* dir) { return result(s->s->exportAdapter(dir)); }

int fbl_dataset_open(const fbl_session* s, const char* path, fbl_dataset** out) {
  if (!s || !path || !out) return result("fbl_dataset_open: s, path and out must not be NULL");
  auto d = std::make_unique<fbl_dataset>();
  if (int r = result(fbl::rt::Dataset::read(path, s->s->plan(), &d->d))) return r;
  if (int r = result(d->d.checkValues(s->s->plan()), FBL_ERROR_INPUT)) return r;
  *out = d.release();
  return FBL_OK;
}
void fbl_dataset_close(fbl_dataset* d) { delete d; }
int64_t fbl_dataset_size(const fbl_dataset* d) { return d ? d->d.size() : 0; }

int fbl_dataset_write_sample(fbl_session* s, const fbl_dataset* d, int64_t index) {
  if (!s || !d) return result("fbl_dataset_write_sample: s and d must not be NULL");
  if (index < 0 || index >= d->d.size())
    return result("sample " + std::to_string(index) + " is outside the dataset's " + std::to_string(d->d.size()));
  for (size_t k = 0; k < d->d.inputCount(); ++k) {
    const auto& shape = d->d.sampleShape(k);
    const int r = fbl_write_input(s, d->d.inputName(k).c_str(), d->d.dtype(k).c_str(), shape.data(), shape.size(),
                                  d->d.sample(k, index), d->d.sampleBytes(k));
    if (r != FBL_OK) return result(d->d.where(k, index) + ": " + lastError, r);
  }
  return FBL_OK;
}

int64_t fbl_sample_at(int64_t samples, int64_t held_out, int has_seed, uint64_t seed, int64_t position) {
  if (samples < 1 || held_out < 0 || held_out >= samples || position < 0) return -1;
  fbl::rt::SampleOrder order(samples, held_out, has_seed ? std::optional<uint64_t>(seed) : std::nullopt);
  return order.sampleAt(position);
}

int64_t fbl_held_out_sample(int64_t samples, int64_t held_out, int has_seed, uint64_t seed, int64_t i) {
  if (samples < 1 || held_out < 0 || held_out >= samples || i < 0 || i >= held_out) return -1;
  const fbl::rt::SampleOrder order(samples, held_out, has_seed ? std::optional<uint64_t>(seed) : std::nullopt);
  return order.heldOut()[static_cast<size_t>(i)];
}

}  // extern "C"
