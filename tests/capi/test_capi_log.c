/* The library's log through the C ABI (ks_log.h), from C compiled with
 * -Wall -Wextra -pedantic -Werror: the level and its names, a callback that
 * receives the library's warning about a weak task check (the fixture task
 * relu_bias_weak passes a kernel that writes zeros), the level that filters
 * it out, and NULL restoring standard error. */
#include <stdio.h>
#include <string.h>

#include "ksearch/ksearch.h"

static int failures = 0;

#define CHECK(cond)                                                             \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                               \
    }                                                                           \
  } while (0)

struct captured {
  int warnings;       /* KS_LOG_WARNING lines */
  int weak_warnings;  /* ... that say the check is weak */
  int below_level;    /* lines below the level set: must stay 0 */
  ks_log_level level; /* the level set when they came */
};

static void on_log(void *user, ks_log_level level, const char *message) {
  struct captured *c = (struct captured *)user;
  if (level < c->level) c->below_level++;
  if (level == KS_LOG_WARNING) {
    c->warnings++;
    if (strstr(message, "is weak") != NULL) c->weak_warnings++;
  }
  /* No prefix, no final newline: the host formats the line. */
  CHECK(strncmp(message, "ksearch:", 8) != 0);
  CHECK(message[0] != '\0' && message[strlen(message) - 1] != '\n');
}

/* A model that never answers usefully: the run ends after its round; the
 * weak-check warning comes before the first request. */
static int no_answer(const ks_llm_request *req, ks_llm_answer *answer, void *user) {
  (void)req;
  (void)user;
  return ks_llm_answer_set_error(answer, "this test's model does not answer") == KS_OK ? 0 : 1;
}

static void search(const char *task, const char *run_dir) {
  ks_search_options o;
  ks_result *result = NULL;
  CHECK(ks_search_options_init(&o, KS_SEARCH_OPTIONS_VERSION) == KS_OK);
  o.task = task;
  o.language = KS_LANGUAGE_CPP;
  o.strategy = KS_STRATEGY_GREEDY;
  o.eval.backend = KS_BACKEND_HOST;
  o.eval.timing_cap_s = 0.1;
  o.budget.max_rounds = 1;
  o.run_dir = run_dir;
  o.llm.source = KS_LLM_CALLBACK;
  o.llm.callback = no_answer;
  (void)ks_search_run(&o, &result); /* its outcome is not what this test checks */
  ks_result_destroy(result);
}

int main(int argc, char **argv) {
  struct captured c;
  ks_log_level parsed = KS_LOG_OFF;
  char run_dir[4096];
  if (argc != 3) {
    fprintf(stderr, "usage: %s WEAK_TASK_DIR WORK_DIR\n", argv[0]);
    return 2;
  }

  /* The level: warning by default, a value outside the set refused by name. */
  CHECK(ks_log_get_level() == KS_LOG_WARNING);
  CHECK(ks_log_set_level((ks_log_level)99) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "ks_log_level") != NULL);
  CHECK(ks_log_get_level() == KS_LOG_WARNING);
  CHECK(strcmp(ks_log_level_name(KS_LOG_INFO), "info") == 0);
  CHECK(strcmp(ks_log_level_name((ks_log_level)7), "") == 0);
  CHECK(ks_log_level_parse("debug", &parsed) == KS_OK && parsed == KS_LOG_DEBUG);
  CHECK(ks_log_level_parse("loud", &parsed) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "warning") != NULL); /* names the known levels */
  CHECK(ks_log_level_parse(NULL, &parsed) == KS_E_INVALID_ARGUMENT);
  CHECK(ks_log_level_parse("info", NULL) == KS_E_INVALID_ARGUMENT);

  /* The callback gets the weak-check warning, and nothing below the level. */
  memset(&c, 0, sizeof c);
  c.level = KS_LOG_INFO;
  CHECK(ks_log_set_level(KS_LOG_INFO) == KS_OK);
  CHECK(ks_log_set_callback(on_log, &c) == KS_OK);
  snprintf(run_dir, sizeof run_dir, "%s/warned", argv[2]);
  search(argv[1], run_dir);
  CHECK(c.weak_warnings == 1);
  CHECK(c.below_level == 0);

  /* At KS_LOG_ERROR the same warning is filtered out before the callback. */
  memset(&c, 0, sizeof c);
  c.level = KS_LOG_ERROR;
  CHECK(ks_log_set_level(KS_LOG_ERROR) == KS_OK);
  snprintf(run_dir, sizeof run_dir, "%s/filtered", argv[2]);
  search(argv[1], run_dir);
  CHECK(c.warnings == 0);
  CHECK(c.below_level == 0);

  /* NULL: back to standard error; the callback is not called again. */
  CHECK(ks_log_set_callback(NULL, NULL) == KS_OK);
  CHECK(ks_log_set_level(KS_LOG_WARNING) == KS_OK);
  memset(&c, 0, sizeof c);
  snprintf(run_dir, sizeof run_dir, "%s/default", argv[2]);
  search(argv[1], run_dir);
  CHECK(c.warnings == 0);

  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("ok: the library's log reaches a C callback, filtered by level\n");
  return 0;
}
