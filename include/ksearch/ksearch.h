/* libksearch: the C ABI.
 *
 * Conventions:
 * - Every function that can fail returns a ks_status (KS_OK == 0, failures
 *   negative). After a failure, ks_last_error_message() describes it; the
 *   message is thread-local and valid until the next failing call on the
 *   same thread.
 * - Objects are opaque handles with create/destroy pairs; destroy accepts NULL.
 * - Parameter structs start with a `version` field and are initialised with
 *   the matching *_init function, so new fields can be appended without
 *   breaking callers compiled against an older header.
 * - Strings returned by accessors belong to the object they came from and
 *   live as long as it does.
 * - No C++ exception ever crosses this boundary.
 */
#ifndef KSEARCH_H
#define KSEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "ksearch/export.h"
#include "ksearch/status.h"
#include "ksearch/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Version and errors ------------------------------------------------- */

/* The library's version, e.g. "0.1.0" (may differ from KS_VERSION_STRING of the header). */
KS_API const char *ks_version_string(void);
KS_API void ks_version(int *major, int *minor, int *patch);
/* The message of the last failure on this thread; "" when there was none. Never NULL. */
KS_API const char *ks_last_error_message(void);

/* ---- LLM callback: a host program supplies its own model --------------- */

typedef enum ks_prompt_kind {
  KS_PROMPT_WM_INIT = 0,     /* build the world model from the task specification */
  KS_PROMPT_WM_PROPOSE = 1,  /* add executable actions to the world model */
  KS_PROMPT_WM_REFINE = 2,   /* update the world model with a cycle's evidence */
  KS_PROMPT_WM_TOO_HARD = 3, /* downgrade an action that produced no passing kernel */
  KS_PROMPT_GENERATE = 4,    /* write a kernel */
  KS_PROMPT_DEBUG = 5,       /* fix a failing kernel */
  KS_PROMPT_IMPROVE = 6      /* make a passing kernel faster */
} ks_prompt_kind;

typedef struct ks_llm_request {
  ks_prompt_kind kind;
  const char *system; /* system message, may be "" */
  const char *prompt; /* the user message */
} ks_llm_request;

/* Where the callback puts its answer; the library copies what it is given. */
typedef struct ks_llm_answer ks_llm_answer;
KS_API ks_status ks_llm_answer_set_text(ks_llm_answer *answer, const char *text, size_t length);
KS_API ks_status ks_llm_answer_set_usage(ks_llm_answer *answer, int64_t input_tokens,
                                         int64_t output_tokens, double cost_usd);

/* Answers one prompt. Return 0 after ks_llm_answer_set_text; any other value
 * is a failed generation the search survives, except KS_E_USER, which stops
 * the run (ks_search_run then returns KS_E_CANCELLED). */
typedef int (*ks_llm_callback)(const ks_llm_request *request, ks_llm_answer *answer, void *user_data);

/* ---- Progress callback ----------------------------------------------------- */

typedef struct ks_round_report {
  int round;              /* 1-based */
  int max_rounds;
  const char *action;     /* what the round tried */
  const char *status;     /* "passed", "compile_error", "incorrect", ... */
  const char *solution_id;
  double latency_ms;      /* this candidate; 0 unless passed */
  double best_latency_ms; /* best so far; 0 while nothing passed */
  double best_speedup;    /* best so far over the task's reference; 0 when unknown */
  int improved;           /* 1 when this round set a new best */
  int replayed;           /* 1 when answered from the run's journal during a resume */
  double elapsed_s;
  double cost_usd;        /* LLM cost so far */
} ks_round_report;

/* Called after every round. Return 0 to go on, anything else to stop the run
 * cleanly after this round (the run folder stays resumable). */
typedef int (*ks_progress_callback)(const ks_round_report *report, void *user_data);

/* ---- Search ------------------------------------------------------------ */

#define KS_SEARCH_PARAMS_VERSION 1

typedef struct ks_search_params {
  uint32_t version;          /* KS_SEARCH_PARAMS_VERSION */
  const char *task;          /* built-in task name (e.g. "gpumode/trimul") or task file path; required */
  const char *strategy;      /* "world_model" (default), "greedy" or "tune" */
  const char *language;      /* "cuda" (default) or "cpp" */
  int max_rounds;            /* rounds = evaluated candidates; default 20 */
  int wm_stagnation_window;  /* default 5 */
  int wm_max_difficulty;     /* 1..5, default 4 */
  int parallel;              /* candidates generated at once (greedy); default 1 */
  int tune_rounds;           /* tuning rounds after the search; default 0 */
  uint64_t seed;             /* default 0 */
  double max_cost_usd;       /* 0 = unlimited */
  double max_wall_s;         /* 0 = unlimited */
  const char *run_dir;       /* NULL: runs/<task>-<UTC time> */
  /* How prompts are answered: NULL (or "callback") with llm_callback set = the callback;
   * "openai" (with model/base_url), "replay:PATH", "command:PROGRAM ARGS", "offline".
   * Naming another policy here while llm_callback is set is KS_E_INVALID_ARGUMENT. */
  const char *llm;
  const char *model;
  const char *base_url;
  const char *api_key_env;   /* NULL: OPENAI_API_KEY, then KSEARCH_API_KEY */
  ks_llm_callback llm_callback;
  void *llm_user_data;
  ks_progress_callback progress_callback;
  void *progress_user_data;
  const char *backend;       /* "auto" (default), "cuda" or "host" */
  int in_process;            /* 1: run kernels in this process (trusted code only) */
  double timing_cap_s;       /* longest time spent timing one benchmark workload; default 2 */
} ks_search_params;

/* Fills *params with defaults for the given version (pass KS_SEARCH_PARAMS_VERSION). */
KS_API ks_status ks_search_params_init(ks_search_params *params, uint32_t version);

typedef struct ks_result ks_result;

/* Runs a search. On KS_OK or KS_E_CANCELLED, *out receives the result
 * (destroy it with ks_result_destroy). */
KS_API ks_status ks_search_run(const ks_search_params *params, ks_result **out);
/* Resumes a run folder with its recorded configuration. `params` may be NULL;
 * otherwise its max_rounds raises the budget when it is larger than the
 * recorded one (a smaller value, such as the default, keeps the recorded
 * budget), and its callbacks and llm replace the recorded ones. */
KS_API ks_status ks_search_resume(const char *run_dir, const ks_search_params *params, ks_result **out);

KS_API void ks_result_destroy(ks_result *result);
KS_API int ks_result_has_best(const ks_result *result);
KS_API double ks_result_best_latency_ms(const ks_result *result);
KS_API double ks_result_best_speedup(const ks_result *result);
KS_API int ks_result_rounds(const ks_result *result);
KS_API const char *ks_result_run_dir(const ks_result *result);
KS_API const char *ks_result_stop_reason(const ks_result *result);
/* The best solution: its source files, launch plan and id ("" without a best). */
KS_API size_t ks_result_source_count(const ks_result *result);
KS_API const char *ks_result_source_path(const ks_result *result, size_t index);
KS_API const char *ks_result_source_content(const ks_result *result, size_t index);
KS_API const char *ks_result_launch_plan_json(const ks_result *result);
KS_API const char *ks_result_best_solution_id(const ks_result *result);
/* The whole outcome (best solution, evaluation, totals) as JSON. */
KS_API const char *ks_result_json(const ks_result *result);

/* ---- Tasks and single evaluations --------------------------------------- */

typedef struct ks_task ks_task;
KS_API ks_status ks_task_load(const char *name_or_path, ks_task **out);
KS_API void ks_task_destroy(ks_task *task);
KS_API const char *ks_task_name(const ks_task *task);
KS_API const char *ks_task_json(const ks_task *task);

typedef struct ks_evaluator ks_evaluator;
/* backend: "auto", "cuda" or "host"; KS_E_NO_DEVICE when "cuda" has no GPU. */
KS_API ks_status ks_evaluator_create(const char *backend, ks_evaluator **out);
KS_API void ks_evaluator_destroy(ks_evaluator *evaluator);
/* Evaluates a solution given as JSON (see docs/candidate-format.md) or as an
 * LLM-style answer; *result_json receives the evaluation as JSON, to be
 * released with ks_string_free. A kernel that fails to compile or run is not
 * an error: its status is in the JSON. */
KS_API ks_status ks_evaluate(ks_evaluator *evaluator, const ks_task *task, const char *solution,
                             char **result_json);
KS_API void ks_string_free(char *s);

#ifdef __cplusplus
}
#endif

#endif /* KSEARCH_H */
