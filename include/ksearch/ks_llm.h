/* libksearch C ABI: who answers the prompts (see ksearch.h for the conventions).
 *
 * A host program that brings its own model sets llm.source to
 * KS_LLM_CALLBACK (one prompt per call) or KS_LLM_BATCH_CALLBACK (every prompt
 * of a step in one call: with parallel = N the greedy strategy asks N at once,
 * so the host can have N requests in flight). Everything else selects a
 * built-in policy; every `ksearch run` LLM option has a field here. */
#ifndef KSEARCH_KS_LLM_H
#define KSEARCH_KS_LLM_H

#include <stddef.h>
#include <stdint.h>

#include "ksearch/export.h"
#include "ksearch/ks_enums.h"
#include "ksearch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One prompt. Valid only during the callback that receives it. Frozen in
 * v1 (batch callbacks get arrays of it): more request data would come with a
 * new callback type, never as fields added here. */
typedef struct ks_llm_request {
  ks_prompt_kind kind;
  const char *system; /* system message, may be "" */
  const char *prompt; /* the user message */
} ks_llm_request;

/* Where a callback puts one answer. The library copies what it is given;
 * an answer left without text is a failed generation (the search goes on). */
typedef struct ks_llm_answer ks_llm_answer;
KS_API ks_status ks_llm_answer_set_text(ks_llm_answer *answer, const char *text, size_t length);
/* Token counts and cost (finite, >= 0); they count against budget.max_cost_usd. */
KS_API ks_status ks_llm_answer_set_usage(ks_llm_answer *answer, int64_t input_tokens, int64_t output_tokens,
                                         double cost_usd);
/* Marks the answer failed with a reason the run journals (the search goes on). */
KS_API ks_status ks_llm_answer_set_error(ks_llm_answer *answer, const char *message);

/* Answers one prompt. Return 0; anything else is a failed generation the
 * search survives, except KS_E_USER, which stops the run (ks_search_run then
 * returns KS_E_CANCELLED and the run folder stays resumable). */
typedef int (*ks_llm_callback)(const ks_llm_request *request, ks_llm_answer *answer, void *user_data);

/* Answers `count` prompts: answers[i] belongs to requests[i]. The host may
 * answer them concurrently (its own threads may call ks_llm_answer_* on
 * distinct answers) but must have finished with all of them when it returns.
 * Return 0, or KS_E_USER to stop the run (no answer of this call is used);
 * any other value fails every prompt of the call. */
typedef int (*ks_llm_batch_callback)(const ks_llm_request *requests, ks_llm_answer *const *answers, size_t count,
                                     void *user_data);

#define KS_LLM_OPTIONS_VERSION 1

/* The model. Defaults in comments are what ks_llm_options_init sets; the
 * CLI option each field mirrors is in brackets. */
typedef struct ks_llm_options {
  uint32_t version;             /* KS_LLM_OPTIONS_VERSION */
  ks_llm_source source;         /* KS_LLM_OPENAI [--llm] */
  const char *model;            /* NULL; required for KS_LLM_OPENAI, else a label for the run [--model] */

  /* KS_LLM_OPENAI */
  const char *base_url;         /* NULL: https://api.openai.com/v1 [--base-url] */
  ks_api_kind api;              /* KS_API_CHAT [--api] */
  const char *reasoning_effort; /* NULL: the server's default; "low", "medium", "high", ... [--reasoning-effort] */
  double temperature;           /* -1: not sent (reasoning models reject it) [--temperature] */
  int64_t max_output_tokens;    /* 0: the server's default [--max-output-tokens] */
  const char *api_key_env;      /* NULL: OPENAI_API_KEY; KSEARCH_API_KEY is tried next [--api-key-env] */
  const char *api_key;          /* NULL; a key given directly wins over the environment; never recorded */
  const char *const *headers;   /* header_count extra HTTP headers, "Name: value" (secrets) [--header] */
  size_t header_count;
  double request_timeout_s;     /* 900, per HTTP attempt [--request-timeout] */
  double connect_timeout_s;     /* 15 [--connect-timeout] */
  const char *proxy;            /* NULL: libcurl's (https_proxy, ...) [--proxy] */
  int max_retries;              /* 8: on 429, 5xx, timeouts, dropped connections [--max-retries] */
  int max_concurrency;          /* 4: requests in flight at once [--max-concurrency] */
  const char *price_file;       /* NULL: the built-in prices [--price-file] */
  const char *extra_body_json;  /* NULL; a JSON object merged into every request body */

  /* KS_LLM_REPLAY */
  const char *replay_path;      /* a transcript.jsonl [--llm replay:PATH] */
  ks_replay_divergence replay_on_divergence; /* KS_REPLAY_STOP [--on-divergence] */

  /* KS_LLM_COMMAND: argv[0] is looked up in PATH; no shell, no splitting [--llm command:...] */
  const char *const *command_argv;
  size_t command_argc;
  double command_timeout_s;     /* 600 */
  ks_command_input command_input; /* KS_COMMAND_INPUT_PLAIN */

  /* KS_LLM_CALLBACK and KS_LLM_BATCH_CALLBACK */
  ks_llm_callback callback;
  ks_llm_batch_callback batch_callback;
  void *user_data;              /* passed to either callback */
} ks_llm_options;

/* Fills *options with the defaults above for `version` (pass KS_LLM_OPTIONS_VERSION). */
KS_API ks_status ks_llm_options_init(ks_llm_options *options, uint32_t version);

#ifdef __cplusplus
}
#endif

#endif /* KSEARCH_KS_LLM_H */
