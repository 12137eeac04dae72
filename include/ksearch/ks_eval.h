/* libksearch C ABI: tasks and evaluation (see ksearch.h for the conventions).
 *
 * The search evaluates candidates with the built-in evaluator (isolated
 * worker processes, or this process for trusted code), configured by
 * ks_eval_options, or with the host's own: set eval.callback (or
 * eval.batch_callback) and every candidate goes to the host, which may
 * evaluate it anywhere (another machine, a cluster) and hands back the
 * result. */
#ifndef KSEARCH_KS_EVAL_H
#define KSEARCH_KS_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "ksearch/export.h"
#include "ksearch/ks_enums.h"
#include "ksearch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Host evaluators ------------------------------------------------------ */

/* One candidate to evaluate. Valid only during the callback. Frozen in v1
 * (batch callbacks get arrays of it): more request data would come with a
 * new callback type, never as fields added here. */
typedef struct ks_eval_request {
  const char *task_name;
  const char *task_json;     /* the task's specification, as ks_task_json gives it */
  const char *solution_json; /* the candidate: sources, launch plan, params (docs/candidate-format.md) */
  const char *solution_id;
  ks_language language;
} ks_eval_request;

/* What the library asks of this request's evaluation, as a JSON object with
 * the fields of EvalOptions::to_json (docs/evaluation.md): "only_workloads"
 * names the workloads to evaluate (during the search the task's feedback
 * subset where it has one, every workload in the final evaluation; empty:
 * all), "seeds_per_workload", the timing caps and the rest. A host that
 * evaluates with another libksearch passes it on as ks_eval_options.options_json.
 * Valid only during the callback that received the request, from any thread;
 * NULL for a pointer that is not a request of a callback in progress. */
KS_API const char *ks_eval_request_options_json(const ks_eval_request *request);

/* Where an evaluator callback puts its result; the library copies it. */
typedef struct ks_eval_answer ks_eval_answer;
/* The full result as JSON, the shape ks_evaluate returns (per-workload results,
 * latencies, log): what another libksearch evaluator produced, for example. */
KS_API ks_status ks_eval_answer_set_json(ks_eval_answer *answer, const char *result_json);
/* A summary result: the status, the candidate's latency and the task
 * reference's (both in ms, 0 = unknown; the latency must be > 0 when passed),
 * and a log (may be NULL) the LLM sees when the candidate failed. */
KS_API ks_status ks_eval_answer_set_result(ks_eval_answer *answer, ks_eval_status status, double latency_ms,
                                           double reference_latency_ms, const char *log);

/* Evaluates one candidate. Return 0 after setting the answer. KS_E_USER
 * stops the run (KS_E_CANCELLED); any other value is a failure of the
 * evaluator itself, which ends the run with KS_E_SUBPROCESS. A candidate
 * that does not compile or computes wrong values is a result, not a failure. */
typedef int (*ks_evaluate_callback)(const ks_eval_request *request, ks_eval_answer *answer, void *user_data);
/* Evaluates `count` candidates (answers[i] belongs to requests[i]), e.g. on
 * several machines at once; the same return values. */
typedef int (*ks_evaluate_batch_callback)(const ks_eval_request *requests, ks_eval_answer *const *answers,
                                          size_t count, void *user_data);

/* ---- Evaluation options ----------------------------------------------------- */

/* One layout per minor release (docs/api.md, "The C ABI's promise"): another
 * version, an older header's among them, is refused with KS_E_VERSION. */
#define KS_EVAL_OPTIONS_VERSION 2

/* Defaults in comments are what ks_eval_options_init sets; the CLI option
 * each field mirrors is in brackets. */
typedef struct ks_eval_options {
  uint32_t version;             /* KS_EVAL_OPTIONS_VERSION */
  ks_backend backend;           /* KS_BACKEND_AUTO [--backend] */
  const int *devices;           /* device_count GPU ordinals to evaluate on in parallel; 0: all visible [--device] */
  size_t device_count;
  int in_process;               /* 0; 1: run kernels in this process (trusted code only) [--in-process] */
  const char *cache_dir;        /* NULL: $KSEARCH_CACHE_DIR, else ~/.cache/ksearch [--cache-dir] */
  const char *cuda_arch;        /* NULL: the device's own, e.g. "sm_90a" [--cuda-arch] */
  ks_sandbox_mode sandbox;      /* KS_SANDBOX_AUTO [--sandbox] */
  uint64_t memory_limit_bytes;  /* 0: half the RAM; the host candidates' worker limit [--memory-limit] */
  double timing_cap_s;          /* 2: longest time timing one benchmark workload [--timing-cap] */
  int seeds;                    /* 2: input seeds checked per workload, 2..64 [--seeds] */
  double compile_timeout_s;     /* 120 */
  double run_timeout_s;         /* 60: per workload, for the candidate's own runs */
  int compile_workers;          /* 0: min(hardware threads, 8) */
  const char *worker_path;      /* NULL: the ksearch-worker installed with the library */
  /* NULL; a JSON file {"<device>": {"<workload>": ms}} of baseline latencies
   * per card, for tasks scored against a baseline [--baseline-latencies] */
  const char *baseline_latencies_path;
  /* NULL, or a JSON object of further evaluation settings by name, e.g.
   * {"min_reps": 10, "flush_l2": false} (the fields of EvalOptions::to_json;
   * an unknown one is an error). They apply after the fields above. */
  const char *options_json;

  /* The host's evaluator; when either is set, no built-in evaluator is made
   * and the fields above are not used (batch_callback wins). */
  ks_evaluate_callback callback;
  ks_evaluate_batch_callback batch_callback;
  void *user_data;
  /* With a callback: where it evaluates, as JSON {"backend": "cuda", "name":
   * "NVIDIA H100", "arch": "sm_90a", ...} (prompts show it); NULL: unknown. */
  const char *callback_device_json;
  /* KS_TIMING_DEFAULT; KS_TIMING_UPSTREAM times as GPUMode's
   * eval.py does, for side-by-side figures with that harness only
   * (docs/evaluation.md) [ksearch eval --timing]. A "timing" in options_json
   * wins. */
  ks_timing_mode timing;
} ks_eval_options;

/* Fills *options with the defaults above (pass KS_EVAL_OPTIONS_VERSION). */
KS_API ks_status ks_eval_options_init(ks_eval_options *options, uint32_t version);

/* ---- Tasks and single evaluations ---------------------------------------- */

typedef struct ks_task ks_task;
/* A built-in task by name ("gpumode/trimul"), or a task file or folder. */
KS_API ks_status ks_task_load(const char *name_or_path, ks_task **out);
KS_API void ks_task_destroy(ks_task *task);
KS_API const char *ks_task_name(const ks_task *task);
/* The specification (tensors, workloads, tolerance, references) as JSON. */
KS_API const char *ks_task_json(const ks_task *task);

typedef struct ks_evaluator ks_evaluator;
/* A built-in evaluator; `options` may be NULL (the defaults). Its callback
 * fields are not used. KS_E_NO_DEVICE when backend is KS_BACKEND_CUDA and no
 * GPU is usable. */
KS_API ks_status ks_evaluator_create(const ks_eval_options *options, ks_evaluator **out);
KS_API void ks_evaluator_destroy(ks_evaluator *evaluator);
/* Evaluates a solution given as JSON (docs/candidate-format.md) or as an
 * LLM-style answer; *result_json receives the evaluation as JSON, to be
 * released with ks_string_free. A kernel that fails to compile or run is not
 * an error: its status is in the JSON. */
KS_API ks_status ks_evaluate(ks_evaluator *evaluator, const ks_task *task, const char *solution,
                             char **result_json);
KS_API void ks_string_free(char *s);

#ifdef __cplusplus
}
#endif

#endif /* KSEARCH_KS_EVAL_H */
