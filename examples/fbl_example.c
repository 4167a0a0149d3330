/* fbl-example: what an app does with the runtime, in C over runtime/include/fbl/fbl_runtime.h
 * alone. It links libfbl_runtime and nothing else of fbl (no compiler, no protobuf, no LLVM).
 *
 *   fbl-example PLAN WEIGHTS OUT_DIR [--steps N] [--input NAME] [--vocab N]
 *               [--device N] [--cache-dir DIR]
 *
 * 1. Opens PLAN (written on a desktop by `fblc compile`) and loads WEIGHTS (the safetensors file
 *    `fblc compile` writes beside it). --cache-dir: where the built program is cached ("": no
 *    cache; default: the runtime's, docs/runtime.md).
 * 2. Prints the plan's memory, lists its inputs (fbl_input_info, fbl_input_role,
 *    fbl_input_bounds) and writes one batch to every one of them in the shape the plan gives:
 *    token ids (a fixed sequence in the values the plan accepts, the one named NAME, default the
 *    first, capped at --vocab), ones for an unbounded integer input (a mask), 0.5 for a float
 *    input. An app hands its tokenizer's output here.
 * 3. Evaluates it (fbl_eval_step: forward only), trains N steps on it, evaluates it again, and
 *    prints the model's outputs where the plan keeps them (fblc compile --outputs).
 * 4. Saves a checkpoint to OUT_DIR/checkpoint.safetensors, loads it back, and exports the LoRA
 *    adapter (peft's adapter_model.safetensors + adapter_config.json) into OUT_DIR, which must exist.
 *
 * The last line is "eval loss BEFORE -> AFTER" (tests/scripts/example_app.sh and
 * scripts/arm64_example_test.sh read it). Exit status: 0, 1 when the runtime refuses something
 * (one line from fbl_last_error), 2 for a bad command line. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime: Linux and Android have it; timespec_get needs API 29 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/include/fbl/fbl_runtime.h"

static const char* kUsage =
    "usage: fbl-example PLAN WEIGHTS OUT_DIR [--steps N] [--input NAME] [--vocab N]\n"
    "                   [--device N] [--cache-dir DIR]\n";

typedef struct Args {
  const char* plan;
  const char* weights;
  const char* out;
  const char* input;
  const char* cacheDir;
  long steps, vocab, device;
} Args;

/* A whole decimal number in [lo, hi], else 0. */
static int parseLong(const char* s, long lo, long hi, long* out) {
  char* end = NULL;
  long v = strtol(s, &end, 10);
  if (!*s || *end || v < lo || v > hi) return 0;
  *out = v;
  return 1;
}

static int usageError(const char* what, const char* arg) {
  fprintf(stderr, "error: %s%s%s\n%s", what, arg ? " " : "", arg ? arg : "", kUsage);
  return 2;
}

static int parseArgs(int argc, char** argv, Args* a) {
  const char* positional[3] = {NULL, NULL, NULL};
  int npos = 0;
  for (int i = 1; i < argc; ++i) {
    const char* k = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(k, "-h") || !strcmp(k, "--help")) {
      fputs(kUsage, stdout);
      exit(0);
    }
    if (k[0] == '-' && !v) return usageError("missing the value of", k);
    if (!strcmp(k, "--steps")) {
      if (!parseLong(v, 0, 1000000, &a->steps)) return usageError("--steps needs a number in [0, 1000000], not", v);
    } else if (!strcmp(k, "--vocab")) {
      if (!parseLong(v, 1, 1L << 30, &a->vocab)) return usageError("--vocab needs a number in [1, 2^30], not", v);
    } else if (!strcmp(k, "--device")) {
      if (!parseLong(v, -1, 1024, &a->device)) return usageError("--device needs -1 or a device index, not", v);
    } else if (!strcmp(k, "--input")) {
      a->input = v;
    } else if (!strcmp(k, "--cache-dir")) {
      a->cacheDir = v;
    } else if (k[0] == '-') {
      return usageError("unknown option", k);
    } else {
      if (npos == 3) return usageError("one argument too many:", k);
      positional[npos++] = k;
      continue;
    }
    ++i; /* the option's value */
  }
  if (npos < 3) return usageError("PLAN, WEIGHTS and OUT_DIR are required", NULL);
  a->plan = positional[0];
  a->weights = positional[1];
  a->out = positional[2];
  return 0;
}

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Reports the end of each phase of the first step: under an emulator it takes minutes, because
 * the OpenCL driver compiles every kernel at its first launch. */
static int onProgress(void* user, const fbl_progress* p) {
  const double* start = (const double*)user;
  if (p->step == 1)
    fprintf(stderr, "step 1: %s done, %d of %d launches (%.1f s)\n", p->phase, p->done, p->total, seconds() - *start);
  return 0;
}

/* The runtime's message names the function and the argument at fault. */
static int fail(void) {
  fprintf(stderr, "error: %s\n", fbl_last_error());
  return 1;
}

/* Input `index`, described by the plan, filled the way an app would: token ids (a fixed sequence)
 * where the plan bounds the values (an embedding's rows, a loss's classes; --vocab caps the
 * input named by --input, default the first), ones for other integers (a mask that attends to
 * everything), a small constant for floats (pixels, features). */
static int writeInput(fbl_session* s, size_t index, const Args* a) {
  const char *name = NULL, *dtype = NULL, *role = NULL;
  const int64_t* shape = NULL;
  size_t rank = 0;
  int bounded = 0;
  int64_t lo = 0, hi = 0;
  if (fbl_input_info(s, index, &name, &dtype, &shape, &rank) != FBL_OK) return fail();
  if (fbl_input_bounds(s, index, &bounded, &lo, &hi) != FBL_OK) return fail();
  if (fbl_input_role(s, index, &role) != FBL_OK) return fail();
  size_t count = 1;
  for (size_t d = 0; d < rank; ++d) count *= (size_t)shape[d];
  fprintf(stderr, "input %s (%s) %s[", name, role, dtype);
  for (size_t d = 0; d < rank; ++d) fprintf(stderr, "%s%lld", d ? ", " : "", (long long)shape[d]);
  if (bounded) fprintf(stderr, "] in [%lld, %lld)\n", (long long)lo, (long long)hi);
  else fprintf(stderr, "]\n");
  const int tokens = a->input ? !strcmp(a->input, name) : index == 0;
  if (lo < 0) lo = 0; /* a Gather also takes negative indices; token ids are not */
  if (tokens && bounded && a->vocab > 0 && lo + a->vocab < hi) hi = lo + a->vocab;
  const int isFloat = !strcmp(dtype, "f32");
  if (!isFloat && strcmp(dtype, "i64")) {
    fprintf(stderr, "error: input %s is %s; this example writes i64 and f32 inputs\n", name, dtype);
    return 1;
  }
  void* data = malloc((count ? count : 1) * 8);
  if (!data) {
    fprintf(stderr, "error: out of memory for input %s\n", name);
    return 1;
  }
  for (size_t i = 0; i < count; ++i) {
    if (isFloat) ((float*)data)[i] = 0.5f;
    else ((int64_t*)data)[i] = bounded && hi > lo ? lo + (int64_t)((i * 37 + 11) % (size_t)(hi - lo)) : 1;
  }
  const int rc = fbl_write_input(s, name, dtype, shape, rank, data, count * (isFloat ? 4 : 8));
  free(data);
  return rc == FBL_OK ? FBL_OK : fail();
}

static int run(const Args* a) {
  const double start = seconds();
  fbl_session* s = NULL;
  if (fbl_open(a->plan, (int)a->device, a->cacheDir, &s) != FBL_OK) return fail();
  int rc = 1;
  char path[4096];
  if (fbl_load_weights(s, a->weights) != FBL_OK) {
    fail();
    goto done;
  }
  fprintf(stderr, "opened %s and loaded %s in %.1f s\n", a->plan, a->weights, seconds() - start);

  /* What the plan reads: an app that did not compile it learns names, dtypes, shapes and the
   * values each input accepts here. */
  int64_t peak = 0, largest = 0, allocations = 0, device = 0, deviceLargest = 0;
  if (fbl_plan_memory(s, &peak, &largest, &allocations) != FBL_OK ||
      fbl_device_memory(s, &device, &deviceLargest) != FBL_OK) {
    fail();
    goto done;
  }
  fprintf(stderr, "plan memory: %.1f MB in %lld allocations, the largest %.1f MB (the device: %.1f MB, at most %.1f MB at once)\n",
          (double)peak / 1e6, (long long)allocations, (double)largest / 1e6, (double)device / 1e6, (double)deviceLargest / 1e6);
  size_t inputs = 0;
  if (fbl_input_count(s, &inputs) != FBL_OK) {
    fail();
    goto done;
  }
  for (size_t i = 0; i < inputs; ++i) {
    if (writeInput(s, i, a) != FBL_OK) goto done;
  }

  float before = 0.0f, after = 0.0f, loss = 0.0f;
  if (fbl_eval_step(s, &before) != FBL_OK) {
    fail();
    goto done;
  }
  printf("eval loss before training: %.6f\n", before);

  double first = 0.0;
  if (fbl_set_progress(s, onProgress, (void*)&start, 1 << 30) != FBL_OK) {
    fail();
    goto done;
  }
  const double trainStart = seconds();
  for (long i = 0; i < a->steps; ++i) {
    const double t = seconds();
    if (fbl_train_step(s, &loss) != FBL_OK) {
      fail();
      goto done;
    }
    if (i == 0) first = seconds() - t;
    printf("step %lld loss %.6f (%.2f s)\n", (long long)fbl_step(s), loss, seconds() - t);
    fflush(stdout);
  }
  fbl_set_progress(s, NULL, NULL, 1);
  const double trained = seconds() - trainStart;

  if (fbl_eval_step(s, &after) != FBL_OK) {
    fail();
    goto done;
  }
  /* A plan compiled with `fblc compile --outputs` keeps the model's outputs (the logits): the
   * evaluation just left this batch's there. */
  size_t outputs = 0;
  if (fbl_output_count(s, &outputs) != FBL_OK) {
    fail();
    goto done;
  }
  for (size_t i = 0; i < outputs; ++i) {
    const char* name = NULL;
    const int64_t* shape = NULL;
    size_t rank = 0, count = 1;
    if (fbl_output_name(s, i, &name) != FBL_OK || fbl_tensor_info(s, name, NULL, &shape, &rank) != FBL_OK) {
      fail();
      goto done;
    }
    for (size_t d = 0; d < rank; ++d) count *= (size_t)shape[d];
    float* values = (float*)malloc((count ? count : 1) * sizeof(float));
    if (!values || fbl_read_tensor(s, name, values, count * sizeof(float)) != FBL_OK) {
      free(values);
      if (values) fail();
      else fprintf(stderr, "error: out of memory for output %s\n", name);
      goto done;
    }
    printf("output %s: %zu values, the first %.6f\n", name, count, count ? values[0] : 0.0f);
    free(values);
  }

  snprintf(path, sizeof path, "%s/checkpoint.safetensors", a->out);
  if (fbl_save_checkpoint(s, path) != FBL_OK) {
    fail();
    goto done;
  }
  /* An app restarted later resumes here: trainables, optimizer state and the step come back. */
  if (fbl_load_checkpoint(s, path) != FBL_OK) {
    fail();
    goto done;
  }
  printf("checkpoint: %s (step %lld)\n", path, (long long)fbl_step(s));
  if (fbl_export_adapter(s, a->out) != FBL_OK) {
    fail();
    goto done;
  }
  printf("adapter: %s/adapter_model.safetensors, adapter_config.json\n", a->out);
  printf("time: %.1f s in all, first step %.1f s, %ld steps %.1f s\n", seconds() - start, first, a->steps, trained);
  printf("eval loss %.6f -> %.6f\n", before, after);
  rc = 0;
done:
  fbl_close(s);
  return rc;
}

int main(int argc, char** argv) {
  Args a = {NULL, NULL, NULL, NULL, NULL, 5, 256, -1};
  const int e = parseArgs(argc, argv, &a);
  if (e) return e;
  return run(&a);
}
