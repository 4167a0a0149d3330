/* fbl runtime: the C API an app links (C89-compatible; the library itself is C++17 over the
 * OpenCL ICD loader). docs/runtime.md describes it.
 *
 * Errors. Every function returning int returns FBL_OK (0) on success; on failure,
 * FBL_ERROR_INPUT when an input's values, dtype or shape are refused (the session is unchanged:
 * an app may skip the batch and go on), FBL_CANCELLED when a step was cancelled (nothing changed),
 * FBL_ERROR otherwise. Then fbl_last_error() gives one line that starts with the function's name
 * and names the argument, file, tensor, kernel or step at fault ("fbl_load_weights:
 * safetensors_path must not be NULL", "fbl_open: 'x' is a directory, not a plan file"). No call
 * aborts or crashes on a NULL pointer, a directory given as a file, a call out of order or an
 * exception inside the library: each returns an error. Pointers other than NULL must be valid:
 * a closed or made-up handle cannot be detected.
 *
 * Threads. fbl_last_error is per thread. A session is used by one thread at a time; fbl_cancel
 * may come from any thread. A call that changes a session or uses its device queue (loading,
 * writing, reading, stepping, saving, exporting, setting the callback or the learning rate,
 * closing) is refused with FBL_ERROR while another such call on that session runs: from the
 * step's own progress callback, or from another thread. The progress callback may call
 * fbl_cancel, fbl_step, fbl_accumulated, fbl_learning_rate, fbl_last_error, and anything on
 * other sessions. Sessions are independent of each other. */
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

/* Opens a plan written by `fblc compile` into a new session, which the caller owns and frees
 * with fbl_close. device: -1 picks the first GPU, else the first device; N >= 0 the N-th device
 * (fbl-train --list-devices). cache_dir: where built programs are cached (NULL: the default, see
 * docs/runtime.md; "": none, the program is built at every open). *out is set to the session,
 * or to NULL on failure; out must not be NULL. */
int fbl_open(const char* plan_path, int device, const char* cache_dir, fbl_session** out);
/* Frees the session and everything it holds on the device; s is invalid afterwards. NULL does
 * nothing. Refused while another call on s runs, as from its progress callback (nothing is
 * freed, fbl_last_error says why): close it after the step returns. */
void fbl_close(fbl_session* s);
/* The message of this thread's last failed call; "" after an int function succeeded. The
 * string is owned by the library and valid until this thread's next fbl_ call. */
const char* fbl_last_error(void);

/* Base weights and initial trainables, by name, from a safetensors file (`fblc compile` writes
 * it beside the plan). The file is checked whole first, its fbl.checksum included where it has
 * one: a refused file writes nothing. */
int fbl_load_weights(fbl_session* s, const char* safetensors_path);
/* Raw row-major bytes of a tensor (inputs before a step; any tensor for inspection); bytes must
 * be its size, and data may be NULL only when bytes is 0. The caller keeps data. An input's
 * values are checked before anything is written: integers against the bounds the plan records
 * (a Gather's table rows, a loss's classes and ignore_index), floats for NaN and infinity. */
int fbl_write_tensor(fbl_session* s, const char* name, const void* data, size_t bytes);
/* An input with its dtype ("i64", "i32", "f32", ...) and shape (rank dims; shape may be NULL
 * only when rank is 0), which must be the plan's; then as fbl_write_tensor. */
int fbl_write_input(fbl_session* s, const char* name, const char* dtype, const int64_t* shape, size_t rank,
                    const void* data, size_t bytes);
/* Copies a tensor's row-major bytes into data, which the caller owns; bytes must be the tensor's
 * size. A weight or trainable before fbl_load_weights or fbl_load_checkpoint, and an input
 * before its write, are refused (their bytes would be whatever the device memory held). */
int fbl_read_tensor(fbl_session* s, const char* name, void* data, size_t bytes);
/* One optimizer step on the inputs written; *loss receives the step's loss (loss may be NULL).
 * Refused while a weight was never loaded or an input never written. */
int fbl_train_step(fbl_session* s, float* loss);
/* The loss of the inputs written, without backward or update (the forward phase only): trainables,
 * optimizer state and the step counter do not change. loss may be NULL. */
int fbl_eval_step(fbl_session* s, float* loss);

/* Progress of a step, reported as its launches finish. */
typedef struct fbl_progress {
  int64_t step;      /* the step being run, 1-based */
  const char* phase; /* "forward", "backward" or "optimizer"; valid during the callback only */
  int32_t done;      /* launches of this step finished */
  int32_t total;     /* launches this step runs */
} fbl_progress;
/* Return 0 to go on, non-zero to cancel the step (as fbl_cancel does). It runs inside
 * fbl_train_step or fbl_eval_step: see "Threads" above for what it may call. */
typedef int (*fbl_progress_fn)(void* user, const fbl_progress* progress);
/* Calls fn(user, ...) on the stepping thread after every `every` launches (every >= 1) and at the
 * end of each phase, once the device has finished them (a report waits for the device: a larger
 * `every` costs less). fn NULL switches reports off (every and user are then ignored). The
 * session keeps fn and user until they are replaced or it is closed; user stays the caller's. */
int fbl_set_progress(fbl_session* s, fbl_progress_fn fn, void* user, int32_t every);
/* Asks the running step to stop; safe from any thread (an app going to the background) and from
 * the progress callback. It is honoured between launches of the forward and backward phases and
 * before the optimizer phase, which is never interrupted: the step then returns FBL_CANCELLED,
 * and trainables, optimizer state and fbl_step() are exactly as before it. A request the step
 * could not honour (it came during the optimizer phase, or between steps) cancels the next step
 * before its first launch. The step after a cancelled one runs normally. FBL_ERROR only for a
 * NULL s. */
int fbl_cancel(fbl_session* s);
/* Optimizer steps done; -1 for a NULL s. */
int64_t fbl_step(const fbl_session* s);

/* What the plan holds, for an app that did not compile it. These read the plan only: they need
 * no hold, may be called from the progress callback, and hand out strings and shapes that the
 * session owns, valid until fbl_close. Any of the out pointers may be NULL.
 * The plan's run-time inputs (what fbl_write_input takes), in the order the model declares them. */
int fbl_input_count(const fbl_session* s, size_t* count);
/* Input `index` (0 <= index < fbl_input_count): its name, dtype ("i64", "f32", ...) and shape. */
int fbl_input_info(const fbl_session* s, size_t index, const char** name, const char** dtype, const int64_t** shape,
                   size_t* rank);
/* The values input `index` accepts, as the plan checks them (docs/runtime.md, "Inputs"): *bounded
 * is 1 when every element must lie in [*lo, *hi) (a Gather's table rows, a loss's classes; a
 * label may also be the loss's ignore_index, fbl_input_ignore_index), 0 when the plan checks
 * no bounds (a mask, a float input: then only NaN and infinity are refused). */
int fbl_input_bounds(const fbl_session* s, size_t index, int* bounded, int64_t* lo, int64_t* hi);
/* The value a label input may hold outside its bounds, for positions the loss ignores (padding:
 * -100 in PyTorch's losses): *has is 1 and *value that value when the plan's loss accepts one
 * for input `index`, else *has is 0. */
int fbl_input_ignore_index(const fbl_session* s, size_t index, int* has, int64_t* value);
/* What input `index` is to the model, from how the plan reads it: "tokens" (ids into an
 * embedding or another table), "labels" (a loss's targets), "tokens+labels" (both: a causal LM
 * whose input ids are also its labels) or "values" (anything else: a mask, pixels, features). */
int fbl_input_role(const fbl_session* s, size_t index, const char** role);
/* What the plan allocates on the device: *peak_bytes every pool and image together (the
 * session holds them all from fbl_open to fbl_close), *largest_allocation_bytes the largest one
 * (what CL_DEVICE_MAX_MEM_ALLOC_SIZE must admit), *allocations their count. */
int fbl_plan_memory(const fbl_session* s, int64_t* peak_bytes, int64_t* largest_allocation_bytes, int64_t* allocations);
/* The limits of the device the session runs on, as its driver reports them: *global_bytes its
 * memory (CL_DEVICE_GLOBAL_MEM_SIZE) and *max_alloc_bytes its largest single allocation
 * (CL_DEVICE_MAX_MEM_ALLOC_SIZE), against which fbl_plan_memory's figures can be shown. */
int fbl_device_memory(const fbl_session* s, int64_t* global_bytes, int64_t* max_alloc_bytes);
/* The trainable parameters (what checkpoints save and fbl_read_tensor reads after a step), in
 * the plan's order: their count, and each one's name. */
int fbl_trainable_count(const fbl_session* s, size_t* count);
int fbl_trainable_name(const fbl_session* s, size_t index, const char** name);
/* Any tensor of the plan by name (an input, a trainable, the loss): its dtype and shape, row-major
 * as fbl_read_tensor and fbl_write_tensor take it. *loss_name (fbl_loss_name) is the loss's name,
 * "" for a plan without one. */
int fbl_tensor_info(const fbl_session* s, const char* name, const char** dtype, const int64_t** shape, size_t* rank);
int fbl_loss_name(const fbl_session* s, const char** loss_name);
/* The model's outputs before its loss (the logits its cross-entropy reads), for a plan compiled
 * with `fblc compile --outputs`; none otherwise. After fbl_eval_step or fbl_train_step they hold
 * that batch's outputs (computed with the trainables the step started from): read them with
 * fbl_read_tensor by this name, fbl_tensor_info giving their dtype and shape. */
int fbl_output_count(const fbl_session* s, size_t* count);
int fbl_output_name(const fbl_session* s, size_t index, const char** name);

/* The training loop (docs/runtime.md, "The training loop"): what `fblc compile` set with
 * --grad-accum, --clip-grad-norm and --lr-schedule.
 * With --grad-accum K, fbl_train_step takes one micro-batch: it returns that micro-batch's loss and
 * adds its gradient (divided by K, as PyTorch's loss / K) to the accumulated one; every K-th call
 * also runs the optimizer (clipping included) on the accumulated gradient and starts a new window.
 * fbl_step counts optimizer steps; this counts the micro-batches accumulated since the last one
 * (0 to K-1); -1 for a NULL s. */
int32_t fbl_accumulated(const fbl_session* s);
/* Sets the base learning rate of the plan's schedule (--lr-schedule) from the next optimizer step
 * on: the step uses lr * factor(step), the warmup and decay factors unchanged, as if the plan had
 * been compiled with --lr lr. Checkpoints save it. FBL_ERROR for a plan compiled without
 * --lr-schedule (its lr is a literal in the kernels) or an lr that is not a positive number. */
int fbl_set_learning_rate(fbl_session* s, float lr);
/* The learning rate the next optimizer step will use; -1 for a NULL s. */
double fbl_learning_rate(const fbl_session* s);

/* Trainables, optimizer state and the step into one safetensors file, written atomically
 * (path.tmp, then renamed over path). Refused before the trainables were loaded. */
int fbl_save_checkpoint(fbl_session* s, const char* path);
/* Restores what fbl_save_checkpoint saved, after checking the whole file (its checksum, and that
 * it was trained on the frozen weights loaded: call fbl_load_weights first): a refused
 * checkpoint leaves the session as it was. */
int fbl_load_checkpoint(fbl_session* s, const char* path);
/* adapter_model.safetensors + adapter_config.json (peft) into dir, which must be an existing
 * directory. Refused before the trainables were loaded, and for a plan without LoRA adapters. */
int fbl_export_adapter(fbl_session* s, const char* dir);

/* Datasets (docs/runtime.md, "Datasets"): N samples, each one batch of every plan input, from
 * FILE.safetensors (a tensor per input, named after it), FILE.npy (a plan of one input) or a
 * folder of INPUT.npy; an input of shape S is given as [N, S...] or [N*S0, S1...]. Opening reads
 * the whole dataset into memory and checks every sample's dtype, shape and values against the
 * session's plan (fbl_last_error names the file, tensor and sample). The dataset is the caller's,
 * freed with fbl_dataset_close, and may outlive the session; *out is NULL on failure. Opening
 * does not hold the session (it reads the plan only). */
typedef struct fbl_dataset fbl_dataset;
int fbl_dataset_open(const fbl_session* s, const char* path, fbl_dataset** out);
/* Frees the dataset; NULL does nothing. */
void fbl_dataset_close(fbl_dataset* d);
/* Samples in the dataset; -1 for a NULL d. */
int64_t fbl_dataset_size(const fbl_dataset* d);
/* Writes sample `index` (0-based, below fbl_dataset_size) of every input, as fbl_write_input does. */
int fbl_dataset_write_sample(fbl_session* s, const fbl_dataset* d, int64_t index);
/* The documented sample order, the same as fbl-train's on every platform: of `samples` samples,
 * `held_out` are set aside for evaluation (fbl_held_out_sample gives the i-th of them) and the
 * rest visited once an epoch, in file order without a seed (has_seed 0), else in a new
 * permutation by `seed` each epoch. fbl_sample_at gives the sample training position
 * `position` (0-based, over all epochs) visits. Both return -1 for arguments out of range (with
 * fbl_last_error naming the argument); each call costs O(samples) time and memory. Pure
 * functions: safe from any thread. */
int64_t fbl_sample_at(int64_t samples, int64_t held_out, int has_seed, uint64_t seed, int64_t position);
int64_t fbl_held_out_sample(int64_t samples, int64_t held_out, int has_seed, uint64_t seed, int64_t i);

#ifdef __cplusplus
}
#endif

#endif /* FBL_RUNTIME_H_ */
