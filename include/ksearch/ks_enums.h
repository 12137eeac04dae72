/* libksearch C ABI: the closed sets, as enums (see ksearch.h for the conventions).
 *
 * Values are pinned: a value never changes meaning, new ones are appended
 * and KS_*_COUNT grows with them. Each enum has a name function returning a
 * static string (the name the CLI and the run folder use, e.g. "world_model"),
 * or "" for a value outside the set, and a parser from that name. */
#ifndef KSEARCH_KS_ENUMS_H
#define KSEARCH_KS_ENUMS_H

#include "ksearch/export.h"
#include "ksearch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the search proceeds (--strategy). */
typedef enum ks_strategy {
  KS_STRATEGY_AUTO = 0,        /* world_model, or tune when the LLM source is KS_LLM_OFFLINE */
  KS_STRATEGY_WORLD_MODEL = 1, /* K-Search: a world model of hypotheses steers the LLM */
  KS_STRATEGY_GREEDY = 2,      /* refine the best kernel, `parallel` candidates at a time */
  KS_STRATEGY_TUNE = 3,        /* search declared tunable parameters; no LLM */
  KS_STRATEGY_EVOLVE = 4       /* islands, migration and an elite archive (OpenEvolve, ShinkaEvolve) */
} ks_strategy;
#define KS_STRATEGY_COUNT 5

/* What candidates are written in (--language). */
typedef enum ks_language {
  KS_LANGUAGE_CUDA = 0, /* device code compiled by NVRTC, plus a launch plan */
  KS_LANGUAGE_CPP = 1,   /* host C++ compiled by the system compiler, plus a call plan */
  KS_LANGUAGE_TRITON = 2, /* a Python module with Triton kernels (PyTorch allowed), run on the GPU */
  KS_LANGUAGE_PYTHON = 3  /* a Python module of PyTorch operations, run on the GPU or the CPU */
} ks_language;
#define KS_LANGUAGE_COUNT 4

/* Where candidates are evaluated (--backend). */
typedef enum ks_backend {
  KS_BACKEND_AUTO = 0, /* CUDA candidates on the GPU, C++ candidates on the CPU */
  KS_BACKEND_CUDA = 1,
  KS_BACKEND_HOST = 2
} ks_backend;
#define KS_BACKEND_COUNT 3

/* Confinement of candidates and their compilers (--sandbox, docs/security.md). */
typedef enum ks_sandbox_mode {
  KS_SANDBOX_AUTO = 0, /* bubblewrap where it works; one warning where it does not */
  KS_SANDBOX_ON = 1,   /* refuse to evaluate without it */
  KS_SANDBOX_OFF = 2
} ks_sandbox_mode;
#define KS_SANDBOX_MODE_COUNT 3

/* How candidates and references are timed (--timing, docs/evaluation.md). */
typedef enum ks_timing_mode {
  KS_TIMING_DEFAULT = 0, /* libksearch's: poisoned outputs and a flushed L2 before every timed call */
  KS_TIMING_UPSTREAM = 1 /* GPUMode eval.py's, for side-by-side figures only: warm caches, no poisoning */
} ks_timing_mode;
#define KS_TIMING_MODE_COUNT 2

/* Who answers the prompts (--llm). */
typedef enum ks_llm_source {
  KS_LLM_OPENAI = 0,         /* an OpenAI-compatible HTTP endpoint (llm.model, llm.base_url, ...) */
  KS_LLM_OFFLINE = 1,        /* no model: only the tune strategy runs */
  KS_LLM_REPLAY = 2,         /* a recorded transcript (llm.replay_path) */
  KS_LLM_COMMAND = 3,        /* a program: prompt on stdin, answer on stdout (llm.command_argv) */
  KS_LLM_CALLBACK = 4,       /* llm.callback, one prompt per call */
  KS_LLM_BATCH_CALLBACK = 5  /* llm.batch_callback, every prompt of a step in one call */
} ks_llm_source;
#define KS_LLM_SOURCE_COUNT 6

/* Which OpenAI API is called (--api). */
typedef enum ks_api_kind {
  KS_API_CHAT = 0,     /* /chat/completions: every compatible server */
  KS_API_RESPONSES = 1 /* /responses: OpenAI's API for reasoning models */
} ks_api_kind;
#define KS_API_KIND_COUNT 2

/* How a KS_LLM_COMMAND program receives the prompt. */
typedef enum ks_command_input {
  KS_COMMAND_INPUT_PLAIN = 0, /* stdin is the prompt; the system message is in $KSEARCH_SYSTEM_PROMPT */
  KS_COMMAND_INPUT_JSON = 1   /* stdin is {"kind", "system", "prompt"} */
} ks_command_input;
#define KS_COMMAND_INPUT_COUNT 2

/* Where a KS_LLM_REPLAY run goes when the search asks for another kind of
 * answer than the transcript holds next (--on-divergence). */
typedef enum ks_replay_divergence {
  KS_REPLAY_STOP = 0, /* say where and why, and stop the run */
  KS_REPLAY_SKIP = 1  /* answer each request with the next recorded answer of its kind */
} ks_replay_divergence;
#define KS_REPLAY_DIVERGENCE_COUNT 2

/* Why a prompt is sent. */
typedef enum ks_prompt_kind {
  KS_PROMPT_WM_INIT = 0,     /* build the world model from the task specification */
  KS_PROMPT_WM_PROPOSE = 1,  /* add executable actions to the world model */
  KS_PROMPT_WM_REFINE = 2,   /* update the world model with a cycle's evidence */
  KS_PROMPT_WM_TOO_HARD = 3, /* downgrade an action that produced no passing kernel */
  KS_PROMPT_GENERATE = 4,    /* write a kernel */
  KS_PROMPT_DEBUG = 5,       /* fix a failing kernel */
  KS_PROMPT_IMPROVE = 6      /* make a passing kernel faster */
} ks_prompt_kind;
#define KS_PROMPT_KIND_COUNT 7

/* The outcome of one evaluation. */
typedef enum ks_eval_status {
  KS_EVAL_PASSED = 0,
  KS_EVAL_COMPILE_ERROR = 1,
  KS_EVAL_RUNTIME_ERROR = 2,
  KS_EVAL_INCORRECT = 3,
  KS_EVAL_TIMEOUT = 4,
  KS_EVAL_CRASHED = 5,
  KS_EVAL_INVALID = 6,           /* rejected by an anti-cheat check */
  KS_EVAL_GENERATION_FAILED = 7, /* the LLM produced no usable candidate */
  KS_EVAL_MEMORY_LIMIT = 8       /* a host candidate reached the worker's memory limit */
} ks_eval_status;
#define KS_EVAL_STATUS_COUNT 9

/* Why a search stopped (ks_result_stop_reason_code). */
typedef enum ks_stop_reason {
  KS_STOP_MAX_ROUNDS = 0,      /* the round budget is spent */
  KS_STOP_STRATEGY_DONE = 1,   /* the strategy ended by itself */
  KS_STOP_CANCELLED = 2,       /* ks_search_cancel, a callback's stop, the CLI's first Ctrl-C or SIGTERM */
  KS_STOP_INTERRUPTED = 3,     /* the CLI's second Ctrl-C (only ever in a run folder's manifest) */
  KS_STOP_MAX_COST = 4,        /* the cost budget is spent */
  KS_STOP_MAX_WALL_TIME = 5,   /* the wall-time budget is spent */
  KS_STOP_LLM_EXHAUSTED = 6,   /* an offline, recorded or scripted model has no answer left */
  KS_STOP_REPLAY_DIVERGED = 7, /* a replay met a request its recording does not answer */
  KS_STOP_RECORDING_ENDED = 8  /* a replay passed the end of its recording */
} ks_stop_reason;
#define KS_STOP_REASON_COUNT 9

KS_API const char *ks_strategy_name(ks_strategy value);
KS_API const char *ks_language_name(ks_language value);
KS_API const char *ks_backend_name(ks_backend value);
KS_API const char *ks_sandbox_mode_name(ks_sandbox_mode value);
KS_API const char *ks_timing_mode_name(ks_timing_mode value);
KS_API const char *ks_llm_source_name(ks_llm_source value);
KS_API const char *ks_api_kind_name(ks_api_kind value);
KS_API const char *ks_command_input_name(ks_command_input value);
KS_API const char *ks_replay_divergence_name(ks_replay_divergence value);
KS_API const char *ks_prompt_kind_name(ks_prompt_kind value);
KS_API const char *ks_eval_status_name(ks_eval_status value);
KS_API const char *ks_stop_reason_name(ks_stop_reason value);

/* The value named `name` (as the name functions spell it) in *out;
 * KS_E_INVALID_ARGUMENT, with the known names in the message, otherwise. */
KS_API ks_status ks_strategy_parse(const char *name, ks_strategy *out);
KS_API ks_status ks_language_parse(const char *name, ks_language *out);
KS_API ks_status ks_backend_parse(const char *name, ks_backend *out);
KS_API ks_status ks_sandbox_mode_parse(const char *name, ks_sandbox_mode *out);
KS_API ks_status ks_timing_mode_parse(const char *name, ks_timing_mode *out);
KS_API ks_status ks_llm_source_parse(const char *name, ks_llm_source *out);
KS_API ks_status ks_api_kind_parse(const char *name, ks_api_kind *out);
KS_API ks_status ks_command_input_parse(const char *name, ks_command_input *out);
KS_API ks_status ks_replay_divergence_parse(const char *name, ks_replay_divergence *out);
KS_API ks_status ks_prompt_kind_parse(const char *name, ks_prompt_kind *out);
KS_API ks_status ks_eval_status_parse(const char *name, ks_eval_status *out);
KS_API ks_status ks_stop_reason_parse(const char *name, ks_stop_reason *out);

#ifdef __cplusplus
}
#endif

#endif /* KSEARCH_KS_ENUMS_H */
