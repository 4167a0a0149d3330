/* fbl runtime: the C API an app links (C89-compatible; the library itself is C++17 over the
 * OpenCL ICD loader). Every function returning int returns FBL_OK (0) on success; on failure,
 * FBL_ERROR_INPUT when an input's values, dtype or shape are refused (the session is unchanged:
 * an app may skip the batch and go on), FBL_ERROR otherwise, and fbl_last_error() gives one line
 * naming the file, tensor, kernel or step at fault. */
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
int64_t fbl_step(const fbl_session* s);

int fbl_save_checkpoint(fbl_session* s, const char* path);
int fbl_load_checkpoint(fbl_session* s, const char* path);
/* adapter_model.safetensors + adapter_config.json (peft) into an existing directory. */
int fbl_export_adapter(fbl_session* s, const char* dir);

#ifdef __cplusplus
}
#endif

#endif /* FBL_RUNTIME_H_ */
