/* fbl runtime: the C API an app links (C89-compatible; the library itself is C++17 over the
 * OpenCL ICD loader). Every function returning int returns FBL_OK (0) on success; on failure,
 * FBL_ERROR_INPUT when an input's values, dtype or shape are refused (the session is unchanged:
 * an app may skip the batch and go on), FBL_CANCELLED when a step was cancelled (nothing changed),
 * FBL_ERROR otherwise, and fbl_last_error() gives one line naming the file, tensor, kernel or step
 * at fault. */
#ifndef FBL_RUNTIME_H_
#define FBL_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FBL_OK 0
#define FBL_ERROR 1
#define FBL_ERROR_INPUT 2
#define FBL_CANCELLED 3

typedef struct fbl_session fbl_session;

/* Opens a plan written by `fblc compile`. device: -1 picks the first GPU, else the first
 * device; cache_dir: where built programs are cached (NULL: the default, see docs/runtime.md). */
int fbl_open(const char* plan_path, int device, const char* cache_dir, fbl_session** out);
void fbl_close(fbl_session* s);
/* The last error of this thread, "" when none. */
const char* fbl_last_error(void);

/* Base weights and initial trainables, by name, from a safetensors file. */
int fbl_load_weights(fbl_session* s, const char* safetensors_path);
/* Raw row-major bytes of a tensor (inputs before a step; any tensor for inspection). An input's
 * values are checked before anything is written: integers against the bounds the plan records
 * (a Gather's table rows, a loss's classes and ignore_index), floats for NaN and infinity. */
int fbl_write_tensor(fbl_session* s, const char* name, const void* data, size_t bytes);
/* An input with its dtype ("i64", "i32", "f32", ...) and shape (rank dims), which must be the
 * plan's; then as fbl_write_tensor. */
int fbl_write_input(fbl_session* s, const char* name, const char* dtype, const int64_t* shape, size_t rank,
                    const void* data, size_t bytes);
int fbl_read_tensor(fbl_session* s, const char* name, void* data, size_t bytes);
/* One optimizer step; *loss receives the step's loss. */
int fbl_train_step(fbl_session* s, float* loss);
/* The loss of the inputs written, without backward or update (the forward phase only): trainables,
 * optimizer state and the step counter do not change. */
int fbl_eval_step(fbl_session* s, float* loss);

/* Progress of a step, reported as its launches finish. */
typedef struct fbl_progress {
  int64_t step;      /* the step being run, 1-based */
  const char* phase; /* "forward", "backward" or "optimizer" */
  int32_t done;      /* launches of this step finished */
  int32_t total;     /* launches this step runs */
} fbl_progress;
/* Return 0 to go on, non-zero to cancel the step (as fbl_cancel does). */
typedef int (*fbl_progress_fn)(void* user, const fbl_progress* progress);
/* Calls fn on the stepping thread after every `every` launches (at least 1) and at the end of each
 * phase, once the device has finished them (a report waits for the device: a larger `every`
 * costs less). NULL switches reports off. */
void fbl_set_progress(fbl_session* s, fbl_progress_fn fn, void* user, int32_t every);
/* Asks the running step to stop; safe from any thread (an app going to the background). It is
 * honoured between launches of the forward and backward phases and before the optimizer phase,
 * which is never interrupted: the step then returns FBL_CANCELLED, and trainables, optimizer
 * state and fbl_step() are exactly as before it. A request the step could not honour (it came
 * during the optimizer phase, or between steps) cancels the next step before its first launch.
 * The step after a cancelled one runs normally. */
void fbl_cancel(fbl_session* s);
/* Optimizer steps done. */
int64_t fbl_step(const fbl_session* s);

/* The training loop (docs/runtime.md, "The training loop"): what `fblc compile` set with
 * --grad-accum, --clip-grad-norm and --lr-schedule.
 * With --grad-accum K, fbl_train_step takes one micro-batch: it returns that micro-batch's loss and
 * adds its gradient (divided by K, as PyTorch's loss / K) to the accumulated one; every K-th call
 * also runs the optimizer (clipping included) on the accumulated gradient and starts a new window.
 * fbl_step counts optimizer steps; this counts the micro-batches accumulated since the last one
 * (0 to K-1). */
int32_t fbl_accumulated(const fbl_session* s);
/* Sets the base learning rate of the plan's schedule (--lr-schedule) from the next optimizer step
 * on: the step uses lr * factor(step), the warmup and decay factors unchanged, as if the plan had
 * been compiled with --lr lr. Checkpoints save it. FBL_ERROR for a plan compiled without
 * --lr-schedule (its lr is a literal in the kernels) or an lr that is not a positive number. */
int fbl_set_learning_rate(fbl_session* s, float lr);
/* The learning rate the next optimizer step will use. */
double fbl_learning_rate(const fbl_session* s);

int fbl_save_checkpoint(fbl_session* s, const char* path);
int fbl_load_checkpoint(fbl_session* s, const char* path);
/* adapter_model.safetensors + adapter_config.json (peft) into an existing directory. */
int fbl_export_adapter(fbl_session* s, const char* dir);

/* Datasets (docs/runtime.md, "Datasets"): N samples, each one batch of every plan input, from
 * FILE.safetensors (a tensor per input, named after it), FILE.npy (a plan of one input) or a
 * folder of INPUT.npy; an input of shape S is given as [N, S...] or [N*S0, S1...]. Opening reads
 * the whole dataset and checks every sample's dtype, shape and values against the session's plan
 * (fbl_last_error names the file, tensor and sample). */
typedef struct fbl_dataset fbl_dataset;
int fbl_dataset_open(const fbl_session* s, const char* path, fbl_dataset** out);
void fbl_dataset_close(fbl_dataset* d);
int64_t fbl_dataset_size(const fbl_dataset* d);
/* Writes sample `index` (0-based) of every input, as fbl_write_input does. */
int fbl_dataset_write_sample(fbl_session* s, const fbl_dataset* d, int64_t index);
/* The documented sample order, the same as fbl-train's on every platform: of `samples` samples,
 * `held_out` are set aside for evaluation (fbl_held_out_sample gives the i-th of them) and the
 * rest visited once an epoch, in file order without a seed (has_seed 0), else in a new
 * permutation by `seed` each epoch. fbl_sample_at gives the sample training position
 * `position` (0-based, over all epochs) visits. Both return -1 for arguments out of range; each
 * call costs O(samples). */
int64_t fbl_sample_at(int64_t samples, int64_t held_out, int has_seed, uint64_t seed, int64_t position);
int64_t fbl_held_out_sample(int64_t samples, int64_t held_out, int has_seed, uint64_t seed, int64_t i);

#ifdef __cplusplus
}
#endif

#endif /* FBL_RUNTIME_H_ */
