/* libksearch C ABI: running a search (see ksearch.h for the conventions).
 *
 *   ks_search_options o;
 *   ks_search_options_init(&o, KS_SEARCH_OPTIONS_VERSION);
 *   o.task = "examples/tasks/softmax";
 *   o.llm.source = KS_LLM_OFFLINE;      (with KS_STRATEGY_AUTO: the tune strategy)
 *   o.budget.max_rounds = 12;
 *   ks_result *r = NULL;
 *   if (ks_search_run(&o, &r) == KS_OK) printf("%f ms\n", ks_result_best_latency_ms(r));
 *   ks_result_destroy(r);
 *
 * The options are one struct of nested sub-structs (budget, world model,
 * tune, evaluation, LLM, evolve); ks_search_options_init initialises them
 * all. Every `ksearch run` option has a field (the CLI name is in brackets
 * beside it) or is a setting by name in config_json (docs/options.md). */
#ifndef KSEARCH_KS_SEARCH_H
#define KSEARCH_KS_SEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "ksearch/export.h"
#include "ksearch/ks_enums.h"
#include "ksearch/ks_eval.h"
#include "ksearch/ks_llm.h"
#include "ksearch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Cancellation ------------------------------------------------------------ */

/* A cancel token stops the runs that carry it promptly: an LLM request in
 * flight is aborted (HTTP transfers, a command's process), an evaluation in
 * flight is abandoned and its worker processes killed, and nothing that was
 * cut short is journalled, so the run folder stays resumable. The run
 * returns KS_E_CANCELLED with its result. A token stays cancelled; use a new
 * one for the next run. (The in-process evaluator cannot interrupt a kernel:
 * there the run stops after it. A host's own callback in flight is waited
 * for: a long one should poll ks_cancel_token_is_cancelled.) */
typedef struct ks_cancel_token ks_cancel_token;
KS_API ks_status ks_cancel_token_create(ks_cancel_token **out);
/* The runs using the token keep their own reference: destroying it while
 * they go on is safe (they can then no longer be cancelled through it). */
KS_API void ks_cancel_token_destroy(ks_cancel_token *token);
/* Thread-safe; may be called from any thread (not from a signal handler)
 * and from the search's own callbacks. */
KS_API void ks_cancel_token_cancel(ks_cancel_token *token);
KS_API int ks_cancel_token_is_cancelled(const ks_cancel_token *token);

/* ---- Progress and events ---------------------------------------------------- */

/* After every round. Valid only during the callback; fields may be appended. */
typedef struct ks_round_report {
  int round;              /* 1-based */
  int max_rounds;
  const char *action;     /* what the round tried */
  ks_eval_status status;
  const char *solution_id;
  double latency_ms;      /* this candidate; 0 unless passed */
  double best_latency_ms; /* best so far; 0 while nothing passed */
  double best_speedup;    /* best so far over the task's reference; 0 when unknown */
  int improved;           /* 1 when this round set a new best */
  int replayed;           /* 1 when answered from the run's journal during a resume */
  double elapsed_s;
  double cost_usd;        /* LLM cost so far */
} ks_round_report;

/* Return 0 to go on, anything else to stop the run cleanly after this round
 * (KS_E_CANCELLED; the run folder stays resumable). */
typedef int (*ks_progress_callback)(const ks_round_report *report, void *user_data);

/* A run event, as it is written to the run folder's events.jsonl. Valid only
 * during the callback. */
typedef struct ks_event {
  int64_t seq;      /* its number in events.jsonl */
  const char *type; /* "run_started", "llm_call", "round_started", "evaluated", "best_improved", ... */
  const char *json; /* the whole event, one JSON object (with "seq", "time", "type") */
} ks_event;

/* Called for every event as it is journalled (events already on disk that a
 * resume replays are not sent again). */
typedef void (*ks_event_callback)(const ks_event *event, void *user_data);

/* ---- Options ----------------------------------------------------------------- */

#define KS_BUDGET_OPTIONS_VERSION 1
typedef struct ks_budget_options {
  uint32_t version;          /* KS_BUDGET_OPTIONS_VERSION */
  int max_rounds;            /* 20; a round is one evaluated candidate [--max-rounds] */
  double max_cost_usd;       /* 0 = unlimited; LLM spending [--max-cost] */
  double max_wall_s;         /* 0 = unlimited; checked between rounds [--max-wall-time] */
  uint64_t max_answer_bytes; /* 4 MiB; a longer LLM answer is a failed generation [--max-answer-size] */
} ks_budget_options;
KS_API ks_status ks_budget_options_init(ks_budget_options *options, uint32_t version);

#define KS_WORLD_MODEL_OPTIONS_VERSION 2
typedef struct ks_world_model_options {
  uint32_t version;          /* KS_WORLD_MODEL_OPTIONS_VERSION */
  int stagnation_window;     /* 5: a cycle ends after this many rounds without improvement [--wm-stagnation-window] */
  int max_difficulty;        /* 4: actions up to this difficulty (1..5) first [--wm-max-difficulty] */
  int edit_retries;          /* 3: attempts per world-model edit before the deterministic fallback */
  uint64_t max_chars;        /* 50000: the world model's share of a code-generation prompt */
  /* 0: an edit answer that breaks a rule is rejected whole and
   * its problems go back to the model. 1: it is repaired where that is safe
   * (numbers clamped, unknown fields dropped, operations that break a rule
   * skipped), each repair recorded in the run's events and counted in its
   * totals (docs/world-model.md, "Lenient edits") [--wm-lenient-edits]. */
  int lenient_edits;
} ks_world_model_options;
KS_API ks_status ks_world_model_options_init(ks_world_model_options *options, uint32_t version);

#define KS_TUNE_OPTIONS_VERSION 1
typedef struct ks_tune_options {
  uint32_t version;          /* KS_TUNE_OPTIONS_VERSION */
  int rounds;                /* 0; after an LLM search, tune the best kernel's parameters this many rounds [--tune-rounds] */
} ks_tune_options;
KS_API ks_status ks_tune_options_init(ks_tune_options *options, uint32_t version);

#define KS_EVOLVE_OPTIONS_VERSION 1
/* The evolve strategy's islands, migration and elite archive (docs/search.md). */
typedef struct ks_evolve_options {
  uint32_t version;          /* KS_EVOLVE_OPTIONS_VERSION */
  int islands;               /* 3: each with its own population of passing kernels, sampled in turn [--evolve-islands] */
  int island_size;           /* 8: kernels kept per island; the worst goes when it is full [--evolve-island-size] */
  int migration_interval;    /* 4: generations (of `parallel` samples) between migrations [--evolve-migration-interval] */
  int migration_size;        /* 1: kernels each island sends to the next, a ring; 0: none [--evolve-migration-size] */
  int archive_size;          /* 12: cells of the elite archive [--evolve-archive-size] */
  int inspirations;          /* 2: kernels shown beside the parent in each prompt [--evolve-inspirations] */
  double exploit_ratio;      /* 0.7: chance that the parent is the island's best kernel [--evolve-exploit-ratio] */
} ks_evolve_options;
KS_API ks_status ks_evolve_options_init(ks_evolve_options *options, uint32_t version);

/* One layout per minor release (docs/api.md, "The C ABI's promise"): a
 * struct of another version, an older header's among them, is refused with
 * KS_E_VERSION. The search's knobs beyond the fields below are settings by
 * name (config_json; the ks_search_setting_* functions list them), so a new
 * knob changes no layout. */
#define KS_SEARCH_OPTIONS_VERSION 7

typedef struct ks_search_options {
  uint32_t version;               /* KS_SEARCH_OPTIONS_VERSION */
  const char *task;               /* built-in name ("gpumode/trimul") or task file/folder; required [--task] */
  const char *run_dir;            /* NULL: runs/<task>-<UTC time>; must not hold a run [--run-dir] */
  const char *kernelbench_dir;    /* NULL: $KSEARCH_KERNELBENCH; a KernelBench checkout [--kernelbench] */
  ks_strategy strategy;           /* KS_STRATEGY_AUTO [--strategy] */
  ks_language language;           /* KS_LANGUAGE_CUDA [--language] */
  /* 1: a task written in one language only runs in that language, whatever
   * `language` says (the CLI without --language); a task with several uses
   * `language`. 0: `language` must be one of the task's (the CLI with it). */
  int language_from_task;
  int parallel;                   /* 1: candidates generated and evaluated at once (greedy); world-model
                                   * cycles run at once (world_model) [--parallel] */
  uint64_t seed;                  /* 0: the strategies' random choices [--seed] */
  ks_budget_options budget;
  ks_world_model_options world_model;
  ks_tune_options tune;
  ks_eval_options eval;
  ks_llm_options llm;
  ks_progress_callback progress;  /* NULL */
  void *progress_user_data;
  ks_event_callback event;        /* NULL */
  void *event_user_data;
  ks_cancel_token *cancel;        /* NULL */
  /* 1: before the first LLM request, check that the task's check
   * fails candidates that compute nothing (zeros, ones, an input echoed, the
   * task's weakened references); one that passes is a warning on stderr and
   * the manifest's "weak_check" record (docs/evaluation.md, "Weak checks").
   * 0 skips it [--no-weak-check]. */
  int weak_check;
  /* NULL, or K-Search's --continue-from-solution (world_model
   * strategy): a solution file, an attempt folder or a run folder (its best
   * solution). Where the run folder recorded its evaluation for this task on
   * this device, that evaluation is used (not a round); else it is evaluated
   * again in round 1. When it passes it is attached to the world model's
   * root and is the best so far (docs/world-model.md, "Warm start"). With
   * language_from_task, its language is the run's. */
  const char *continue_from_solution;
  /* NULL, or K-Search's --continue-from-world-model (world_model
   * strategy): a run folder (its latest tree and the kernels attached in
   * it), a snapshot file of one, K-Search's world_model.json (with the
   * solution_db.jsonl beside it), or "auto" (the latest run of the same task
   * in the folder run_dir is made in, runs/ by default). The search starts
   * from that tree instead of asking for a new one. */
  const char *continue_from_world_model;
  /* 1: without continue_from_solution and continue_from_world_model,
   * the world-model search starts from the task's starting point (round 1
   * evaluates it; attached to the root when it passes). 0: not
   * [--no-starting-point]. */
  int start_from_starting_point;
  /* 0; 1: adopt no evaluation a run folder recorded, even for this
   * task on this device: continue_from_solution is evaluated again in round
   * 1, and continue_from_world_model's kernels are known by their code only
   * [--remeasure]. */
  int remeasure;
  /* NULL, or a FlashInfer-Trace checkout: task "flashinfer/<definition>"
   * is that definition of it, with its workloads (named by UUID) [--dataset]. */
  const char *dataset;
  /* NULL: for a dataset's definition, the baseline latencies come
   * from the PASSED traces of its flashinfer_wrapper* solution, per card,
   * when the dataset has one; a solution name: that one's; "none": no
   * traces (docs/tasks/flashinfer.md) [--baseline-solution]. */
  const char *baseline_solution;
  /* 0; 1: measure that solution (python or triton, from the
   * dataset's solutions/) here where its traces lack the card or a workload
   * [--measure-baseline]. */
  int measure_baseline;
  /* feedback_workload_count names of the workloads the search
   * evaluates each round (UUIDs for a dataset); the best kernel is then
   * evaluated on every workload [--feedback-workloads]. */
  const char *const *feedback_workloads;
  size_t feedback_workload_count;
  /* NULL: the task's own feedback subset; "first" or "random":
   * that many (`feedback_count`) of the timed workloads, the first ones or
   * drawn with `feedback_seed` [--feedback-policy]. */
  const char *feedback_policy;
  int feedback_count;             /* 5 [--feedback-count] */
  uint64_t feedback_seed;         /* 0 [--feedback-seed] */
  /* 0; 1: log the run to Weights & Biases as it goes, under
   * K-Search's names, through a `python3 -m ksearch.tracking` child
   * ($KSEARCH_PYTHON) that gets no LLM key; W&B missing or unreachable is a
   * warning, never a failed search (docs/search.md) [--wandb]. */
  int wandb;
  const char *wandb_project;      /* NULL: $WANDB_PROJECT, else "flashinfer-bench" [--wandb-project] */
  const char *run_name;           /* NULL: $RUN_NAME, else W&B's generated name [--run-name] */
  /* The evolve strategy's knobs (strategy KS_STRATEGY_EVOLVE). */
  ks_evolve_options evolve;
  /* NULL, or a JSON object of search settings by name, applied after the
   * fields above: {"wm_propose_every": 0, "tune_batch": 2}. Every setting of
   * the manifest's "config" that can be set (docs/options.md; the names are
   * ks_search_setting_name's). An unknown name, a value of the wrong type or
   * out of its bounds is KS_E_INVALID_ARGUMENT naming it. */
  const char *config_json;
} ks_search_options;

/* Fills *options, and each nested struct, with the defaults (pass
 * KS_SEARCH_OPTIONS_VERSION; another version is KS_E_VERSION). */
KS_API ks_status ks_search_options_init(ks_search_options *options, uint32_t version);

/* ---- Settings by name ------------------------------------------------------- */

/* The search's settings as the library's table has them (docs/options.md),
 * for config_json: their names, types, bounds and defaults. */
typedef enum ks_setting_type {
  KS_SETTING_INTEGER = 0,
  KS_SETTING_NUMBER = 1,
  KS_SETTING_BOOLEAN = 2, /* true or false in config_json; 0 and 1 here */
  KS_SETTING_BYTES = 3    /* an integer count of bytes */
} ks_setting_type;

/* Frozen: a setting's description never grows. min and max are inclusive,
 * -HUGE_VAL and HUGE_VAL where there is no bound. */
typedef struct ks_setting_bounds {
  ks_setting_type type;
  double min;
  double max;
  double default_value;
} ks_setting_bounds;

KS_API size_t ks_search_setting_count(void);
/* The index-th setting's name, "" past the end. */
KS_API const char *ks_search_setting_name(size_t index);
/* KS_E_NOT_FOUND for a name that is not a setting. */
KS_API ks_status ks_search_setting_bounds(const char *name, ks_setting_bounds *out);
/* The whole table as a JSON array of {"key", "component", "type", "default",
 * "min", "max", "help", "flag", "replay"}; valid until the library is unloaded. */
KS_API const char *ks_search_settings_json(void);

/* ---- Running ------------------------------------------------------------------ */

typedef struct ks_result ks_result;

/* Runs a search to its end; blocks the calling thread. On KS_OK, and on
 * KS_E_CANCELLED (stopped by a callback or the cancel token), *out receives
 * the result (destroy it with ks_result_destroy); otherwise *out is NULL. */
KS_API ks_status ks_search_run(const ks_search_options *options, ks_result **out);

#define KS_RESUME_OPTIONS_VERSION 1

/* What may change when a run folder is resumed. */
typedef struct ks_resume_options {
  uint32_t version;               /* KS_RESUME_OPTIONS_VERSION */
  int max_rounds;                 /* 0; above the recorded budget it raises it, else the budget stays
                                   * (a tune run's above the budget its tuner planned for:
                                   * KS_E_INVALID_ARGUMENT, the folder unchanged) */
  /* NULL: the recorded LLM. Otherwise answers new prompts (a run made with
   * a callback needs it again: callbacks cannot be recorded). */
  const ks_llm_options *llm;
  ks_evaluate_callback eval_callback;             /* NULL: the recorded evaluator settings */
  ks_evaluate_batch_callback eval_batch_callback;
  void *eval_user_data;
  ks_progress_callback progress;
  void *progress_user_data;
  ks_event_callback event;
  void *event_user_data;
  ks_cancel_token *cancel;
} ks_resume_options;
KS_API ks_status ks_resume_options_init(ks_resume_options *options, uint32_t version);

/* Resumes a run folder with its recorded configuration: the journal is
 * replayed (no LLM call or evaluation is repeated) and the search goes on.
 * `options` may be NULL. Returns as ks_search_run does. */
KS_API ks_status ks_search_resume(const char *run_dir, const ks_resume_options *options, ks_result **out);

#define KS_REPLAY_OPTIONS_VERSION 1

/* What `ksearch replay` takes: a run folder reproduced into a new one from
 * its recorded LLM answers and evaluations (nothing is asked or measured
 * again: no model, no GPU), with settings changed or not. */
typedef struct ks_replay_options {
  uint32_t version;                 /* KS_REPLAY_OPTIONS_VERSION */
  const char *run_dir;              /* NULL: runs/<task>-<UTC time>; the new folder [--run-dir] */
  /* NULL, or a JSON object of recorded settings to change, named as in the
   * run's manifest config, e.g. {"wm_stagnation_window": 3, "max_rounds": 30}
   * [--strategy, --max-rounds, --wm-*, --parallel, --tune-rounds, --seed, --max-wall-time] */
  const char *config_changes_json;
  /* Where the search leaves the recording: KS_REPLAY_STOP says where and why
   * (ks_result_json's "divergence") and stops; KS_REPLAY_SKIP takes recorded
   * answers by kind and recorded evaluations by solution id. With `llm` set,
   * KS_REPLAY_STOP goes on live with that model instead [--on-divergence]. */
  ks_replay_divergence on_divergence;
  int allow_prompt_changes;         /* 0; 1: a changed prompt of the recorded kind keeps the recorded answer [--allow-prompt-changes] */
  const ks_llm_options *llm;        /* NULL; the model to go on with live [--llm] */
  ks_evaluate_callback eval_callback;             /* NULL: the recorded evaluator settings, for live evaluations */
  ks_evaluate_batch_callback eval_batch_callback;
  void *eval_user_data;
  ks_progress_callback progress;
  void *progress_user_data;
  ks_event_callback event;
  void *event_user_data;
  ks_cancel_token *cancel;
} ks_replay_options;
KS_API ks_status ks_replay_options_init(ks_replay_options *options, uint32_t version);

/* Replays the run folder `recorded_run_dir` into a new one; `options` may be
 * NULL (the recorded settings, a new folder under runs/). Returns as
 * ks_search_run does; with the recorded settings the new folder ends with
 * the same attempts and best solution. */
KS_API ks_status ks_search_replay(const char *recorded_run_dir, const ks_replay_options *options, ks_result **out);

/* ---- Results ------------------------------------------------------------------ */

KS_API void ks_result_destroy(ks_result *result);
KS_API int ks_result_has_best(const ks_result *result);
KS_API double ks_result_best_latency_ms(const ks_result *result);
KS_API double ks_result_best_speedup(const ks_result *result);
KS_API int ks_result_best_round(const ks_result *result);
KS_API int ks_result_rounds(const ks_result *result);
KS_API const char *ks_result_run_dir(const ks_result *result);
/* Why the search stopped: ks_stop_reason_name's name of ks_result_stop_reason_code ("" for NULL). */
KS_API const char *ks_result_stop_reason(const ks_result *result);
/* Why the search stopped (KS_STOP_MAX_ROUNDS for NULL, with nothing to say). */
KS_API ks_stop_reason ks_result_stop_reason_code(const ks_result *result);
KS_API const char *ks_result_task(const ks_result *result);
/* The best solution: its source files, launch plan and id ("" without a best). */
KS_API size_t ks_result_source_count(const ks_result *result);
KS_API const char *ks_result_source_path(const ks_result *result, size_t index);
KS_API const char *ks_result_source_content(const ks_result *result, size_t index);
KS_API const char *ks_result_launch_plan_json(const ks_result *result);
KS_API const char *ks_result_best_solution_id(const ks_result *result);
/* The best solution as solution JSON (what ks_evaluate and ks_kernel_load read). */
KS_API const char *ks_result_best_solution_json(const ks_result *result);
/* The whole outcome (best solution, evaluation, totals) as JSON. */
KS_API const char *ks_result_json(const ks_result *result);

#ifdef __cplusplus
}
#endif

#endif /* KSEARCH_KS_SEARCH_H */
