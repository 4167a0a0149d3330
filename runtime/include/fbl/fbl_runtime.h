/* fbl runtime: the C API an app links (C89-compatible; the library itself is C++17 over the
 * OpenCL ICD loader). Every function returning int returns 0 on success; on failure,
 * fbl_last_error() gives one line naming the file, tensor, kernel or step at fault. */
#ifndef FBL_RUNTIME_H_
#define FBL_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fbl_session fbl_session;

/* Opens a plan written by `fblc compile`. device: -1 picks the first GPU, else the first
 * device; cache_dir: where built programs are cached (NULL: the default, see docs/runtime.md). */
int fbl_open(const char* plan_path, int device, const char* cache_dir, fbl_session** out);
void fbl_close(fbl_session* s);
/* The last error of this thread, "" when none. */
const char* fbl_last_error(void);

/* Base weights and initial trainables, by name, from a safetensors file. */
int fbl_load_weights(fbl_session* s, const char* safetensors_path);
/* Raw bytes of a tensor (inputs before a step; any tensor for inspection). */
int fbl_write_tensor(fbl_session* s, const char* name, const void* data, size_t bytes);
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
