/* libksearch C ABI: kernels the host launches (see ksearch.h for the conventions).
 *
 * A found CUDA kernel is code plus a launch plan (docs/launch-plan.md) plus,
 * often, tuned parameter values. ks_kernel_load compiles it with NVRTC exactly
 * as the evaluator did (same options, same cache) and loads the module into
 * the CUDA context current on the calling thread: the host program owns its
 * context, its streams and its memory. ks_kernel_launch then resolves the
 * plan for the caller's dimensions (per-shape variants, per-shape tuned
 * parameters, grid and block expressions, scratch sizes) and enqueues the
 * plan's kernels on the caller's stream with the caller's device pointers.
 *
 *   cuCtxSetCurrent(my_ctx);
 *   ks_kernel_load_options lo;
 *   ks_kernel_load_options_init(&lo, KS_KERNEL_LOAD_OPTIONS_VERSION);
 *   lo.result = result;                           (or run_dir, or solution_path + task)
 *   ks_kernel *k = NULL;
 *   ks_kernel_load(&lo, &k);
 *   ks_kernel_dim dims[] = {{"R", rows}, {"C", cols}};
 *   ks_kernel_tensor tensors[] = {{"x", (uint64_t)d_x, 0}, {"y", (uint64_t)d_y, 0}};
 *   ks_kernel_launch_args la;
 *   ks_kernel_launch_args_init(&la, KS_KERNEL_LAUNCH_ARGS_VERSION);
 *   la.dims = dims; la.dim_count = 2; la.tensors = tensors; la.tensor_count = 2;
 *   la.stream = my_stream;
 *   ks_kernel_launch(k, &la);                     (asynchronous, like a kernel launch)
 *   ...
 *   ks_kernel_destroy(k);                         (after the stream's work is done)
 *
 * The CUDA driver is opened at run time (it is the process's libcuda, the
 * one the host uses); no CUDA library is linked. */
#ifndef KSEARCH_KS_KERNEL_H
#define KSEARCH_KS_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "ksearch/export.h"
#include "ksearch/ks_search.h"
#include "ksearch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ks_kernel ks_kernel;

#define KS_KERNEL_LOAD_OPTIONS_VERSION 1

/* Where the kernel comes from: exactly one of result, run_dir,
 * solution_path and solution_json. */
typedef struct ks_kernel_load_options {
  uint32_t version;            /* KS_KERNEL_LOAD_OPTIONS_VERSION */
  const ks_result *result;     /* the best solution of a search */
  const char *run_dir;         /* the best solution of a run folder (best.json) */
  const char *solution_path;   /* a solution file: solution JSON or an LLM-style answer */
  const char *solution_json;   /* a solution given as text, in either form */
  /* The task (built-in name, or task file/folder). Required with
   * solution_path and solution_json; otherwise the run's own task. */
  const char *task;
  const char *cuda_arch;       /* NULL: the current context's device; e.g. "sm_90a" */
  const char *cache_dir;       /* NULL: the evaluator's default cubin cache */
  /* 1 (default): load the module into the current context now (one must be
   * current). 0: compile and check only; the kernel can be inspected and
   * resolved (ks_kernel_resolve) but not launched, and no driver is needed
   * (cuda_arch must then be set). */
  int load_module;
} ks_kernel_load_options;

KS_API ks_status ks_kernel_load_options_init(ks_kernel_load_options *options, uint32_t version);

/* Compiles every parameter set the solution uses (its `values` and each
 * per-shape entry) and loads the modules. KS_E_COMPILE (with NVRTC's log in
 * the message) when the code does not compile, KS_E_NO_DEVICE without a
 * driver, KS_E_STATE without a current context, KS_E_INVALID_ARGUMENT for a
 * solution that is not CUDA or whose plan does not fit its module. */
KS_API ks_status ks_kernel_load(const ks_kernel_load_options *options, ks_kernel **out);
KS_API void ks_kernel_destroy(ks_kernel *kernel);

/* A dimension of the task by name ("R", "C"). */
typedef struct ks_kernel_dim {
  const char *name;
  int64_t value;
} ks_kernel_dim;

/* A device buffer by tensor name: a task tensor, or a scratch buffer of the
 * plan (then it replaces the one the kernel would allocate). `bytes`: the
 * buffer's size, checked against what the shape needs; 0 = not checked. */
typedef struct ks_kernel_tensor {
  const char *name;
  uint64_t device_ptr; /* a CUdeviceptr in the current context */
  uint64_t bytes;
} ks_kernel_tensor;

/* A scalar input of the task by name (e.g. "sm_scale"), passed by value. */
typedef struct ks_kernel_scalar {
  const char *name;
  double value;
} ks_kernel_scalar;

#define KS_KERNEL_LAUNCH_ARGS_VERSION 1

typedef struct ks_kernel_launch_args {
  uint32_t version;                 /* KS_KERNEL_LAUNCH_ARGS_VERSION */
  const ks_kernel_dim *dims;        /* every dimension of the task */
  size_t dim_count;
  const ks_kernel_tensor *tensors;  /* every task tensor the plan passes */
  size_t tensor_count;
  const ks_kernel_scalar *scalars;  /* the task's scalar inputs; one omitted takes the same-shaped workload's */
  size_t scalar_count;
  void *stream;                     /* a CUstream of the current context; NULL: the default stream */
  /* Which tuned values to use: NULL picks the per-shape values of the
   * task's workload whose dimensions equal `dims`, else the solution's
   * `values`; a workload name picks that workload's. */
  const char *workload;
} ks_kernel_launch_args;

KS_API ks_status ks_kernel_launch_args_init(ks_kernel_launch_args *args, uint32_t version);

/* Enqueues the plan on args->stream and returns (no synchronisation). The
 * context current on the calling thread must be the one the kernel was
 * loaded into. Scratch buffers the plan needs are allocated in that context
 * and kept (grown when a larger shape needs more) until ks_kernel_destroy;
 * launches that may overlap on different streams should pass their own
 * scratch buffers, or use one ks_kernel per stream. KS_E_INVALID_ARGUMENT
 * names a missing dimension or tensor, a buffer too small, or a plan that
 * does not fit these dimensions; KS_E_STATE means another context is
 * current; KS_E_CUDA is a driver call that failed (the CUDA error is named).
 * Thread-safe: one ks_kernel may be launched from several threads. */
KS_API ks_status ks_kernel_launch(ks_kernel *kernel, const ks_kernel_launch_args *args);

/* What a launch with these arguments would do, without launching (no
 * context needed): {"variant": -1 | index, "params": {...}, "workload":
 * name | null, "launches": [{"kernel", "symbol", "grid", "block", "cluster",
 * "shared_bytes"}], "scratch": [{"name", "bytes"}]}. Release *plan_json
 * with ks_string_free. */
KS_API ks_status ks_kernel_resolve(ks_kernel *kernel, const ks_kernel_launch_args *args, char **plan_json);

KS_API const char *ks_kernel_solution_id(const ks_kernel *kernel);
KS_API const char *ks_kernel_task(const ks_kernel *kernel);
KS_API const char *ks_kernel_arch(const ks_kernel *kernel);
/* The launch plan and the parameter declarations, as JSON ("null" without parameters). */
KS_API const char *ks_kernel_launch_plan_json(const ks_kernel *kernel);
KS_API const char *ks_kernel_params_json(const ks_kernel *kernel);
/* The task's dimension names and tensors, in kernel-argument order. */
KS_API size_t ks_kernel_dim_count(const ks_kernel *kernel);
KS_API const char *ks_kernel_dim_name(const ks_kernel *kernel, size_t index);
KS_API size_t ks_kernel_tensor_count(const ks_kernel *kernel);
KS_API const char *ks_kernel_tensor_name(const ks_kernel *kernel, size_t index);
KS_API const char *ks_kernel_tensor_dtype(const ks_kernel *kernel, size_t index); /* "f32", "bf16", ... */
KS_API int ks_kernel_tensor_is_output(const ks_kernel *kernel, size_t index);
/* How many modules were compiled (one per distinct parameter set). */
KS_API size_t ks_kernel_module_count(const ks_kernel *kernel);

#ifdef __cplusplus
}
#endif

#endif /* KSEARCH_KS_KERNEL_H */
