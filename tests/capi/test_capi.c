/* The C ABI from C: compiled as C99 with -Wall -Wextra -pedantic -Werror.
 * Runs a real search on a host task through ks_search_run with a C LLM
 * callback, and checks the error paths of the ABI. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/ksearch.h"

static int failures = 0;

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                          \
    }                                                                      \
  } while (0)

static const char kGood[] =
    "```cpp kernel.cpp\n"
    "#include <cstdint>\n"
    "void scale3(const float* x, float* y, std::int64_t n) {\n"
    "  for (std::int64_t i = 0; i < n; ++i) y[i] = 3.0f * x[i];\n"
    "}\n"
    "```\n"
    "```json launch_plan\n"
    "{\"calls\": [{\"fn\": \"scale3\", \"args\": [\"x\", \"y\", \"N\"]}]}\n"
    "```\n";

static const char kWrong[] =
    "```cpp kernel.cpp\n"
    "#include <cstdint>\n"
    "void scale3(const float* x, float* y, std::int64_t n) {\n"
    "  for (std::int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i];\n"
    "}\n"
    "```\n"
    "```json launch_plan\n"
    "{\"calls\": [{\"fn\": \"scale3\", \"args\": [\"x\", \"y\", \"N\"]}]}\n"
    "```\n";

/* The whole of a small text file, or NULL; free() it. */
static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  char *buf;
  long n;
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  buf = (char *)malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  if (buf) buf[n] = '\0';
  fclose(f);
  return buf;
}

/* Whether the run folder's manifest holds `text`. */
static int manifest_has(const char *run_dir, const char *text) {
  char path[4096];
  char *m;
  int found;
  snprintf(path, sizeof path, "%s/manifest.json", run_dir);
  m = read_text(path);
  found = m != NULL && strstr(m, text) != NULL;
  free(m);
  return found;
}

struct model {
  int calls;
  int kinds_seen[7];
  int stop_after; /* return KS_E_USER on this call (0: never) */
};

/* Answers wrong first, then right: the search must pass the failure back and go on. */
static int model_answer(const ks_llm_request *req, ks_llm_answer *answer, void *user) {
  struct model *m = (struct model *)user;
  const char *text;
  m->calls++;
  if ((int)req->kind >= 0 && (int)req->kind < 7) m->kinds_seen[req->kind]++;
  if (m->stop_after && m->calls == m->stop_after) return KS_E_USER;
  if (req->prompt == NULL || strstr(req->prompt, "3 * x") == NULL) return 1; /* the task text must reach us */
  text = m->calls == 1 ? kWrong : kGood;
  /* A NaN or infinite cost is refused: NaN passes `< 0` and would switch max_cost_usd off. */
  CHECK(ks_llm_answer_set_usage(answer, 1, 1, NAN) == KS_E_INVALID_ARGUMENT);
  CHECK(ks_llm_answer_set_usage(answer, 1, 1, HUGE_VAL) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "cost_usd") != NULL);
  if (ks_llm_answer_set_usage(answer, 100, 50, 0.001) != KS_OK) return 1;
  return ks_llm_answer_set_text(answer, text, strlen(text)) == KS_OK ? 0 : 1;
}

struct progress {
  int rounds;
  int saw_incorrect;
  int stop_at;
};

static int on_round(const ks_round_report *r, void *user) {
  struct progress *p = (struct progress *)user;
  p->rounds++;
  if (r->status == KS_EVAL_INCORRECT) p->saw_incorrect = 1;
  return p->stop_at && r->round >= p->stop_at;
}

/* The options of the small greedy runs below: the host task, a C callback
 * model. */
#define SET_GREEDY_FIELDS(o, task_, run_dir_, model_) \
  do {                                                \
    (o).task = (task_);                               \
    (o).language = KS_LANGUAGE_CPP;                   \
    (o).strategy = KS_STRATEGY_GREEDY;                \
    (o).eval.backend = KS_BACKEND_HOST;               \
    (o).eval.timing_cap_s = 0.2;                      \
    (o).run_dir = (run_dir_);                         \
    (o).llm.source = KS_LLM_CALLBACK;                 \
    (o).llm.callback = model_answer;                  \
    (o).llm.user_data = (model_);                     \
  } while (0)

static void greedy_options(ks_search_options *o, const char *task, const char *run_dir, struct model *m) {
  CHECK(ks_search_options_init(o, KS_SEARCH_OPTIONS_VERSION) == KS_OK);
  SET_GREEDY_FIELDS(*o, task, run_dir, m);
}

static void test_replay(const char *work, const char *best_id);

/* The feedback fields: the pinned workload is the only one each
 * round evaluates (the manifest says which were feedback), and an unknown
 * one is an error naming it. */
static void test_feedback_options(const char *task, const char *work) {
  ks_search_options o;
  ks_result *result = NULL;
  struct model m;
  char run_dir[4096];
  const char *pinned[] = {"large"};
  const char *unknown[] = {"huge"};
  ks_status s;

  CHECK(ks_search_options_init(&o, KS_SEARCH_OPTIONS_VERSION) == KS_OK);
  CHECK(o.feedback_count == 5 && o.feedback_workloads == NULL && o.dataset == NULL && o.measure_baseline == 0);
  memset(&m, 0, sizeof m);
  snprintf(run_dir, sizeof run_dir, "%s/feedback", work);
  greedy_options(&o, task, run_dir, &m);
  o.budget.max_rounds = 1;
  o.weak_check = 0;
  o.feedback_workloads = unknown;
  o.feedback_workload_count = 1;
  CHECK(ks_search_run(&o, &result) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "has no workload \"huge\"") != NULL);
  o.feedback_workloads = pinned;
  s = ks_search_run(&o, &result);
  if (s != KS_OK) fprintf(stderr, "ks_search_run: %s: %s\n", ks_status_string(s), ks_last_error_message());
  CHECK(s == KS_OK);
  CHECK(manifest_has(run_dir, "\"chosen_by\": \"pinned\""));
  ks_result_destroy(result);
}

/* world_model.lenient_edits reaches the run's configuration. The promise
 * (docs/api.md, "The C ABI's promise"): one layout per minor release, so a
 * struct of an older header's version, or a nested struct of another
 * version, is refused by name before a field is read, and nothing runs. */
static void test_world_model_options(const char *task, const char *work) {
  ks_search_options o;
  ks_result *result = NULL;
  struct model m;
  char run_dir[4096];
  ks_status s;

  memset(&m, 0, sizeof m);
  snprintf(run_dir, sizeof run_dir, "%s/lenient", work);
  greedy_options(&o, task, run_dir, &m);
  o.budget.max_rounds = 1;
  o.weak_check = 0;
  o.world_model.lenient_edits = 1;
  s = ks_search_run(&o, &result);
  if (s != KS_OK) fprintf(stderr, "ks_search_run: %s: %s\n", ks_status_string(s), ks_last_error_message());
  CHECK(s == KS_OK);
  CHECK(manifest_has(run_dir, "\"wm_lenient_edits\": true"));
  ks_result_destroy(result);
  result = NULL;

  memset(&m, 0, sizeof m);
  o.world_model.version = 1; /* an older header's */
  CHECK(ks_search_run(&o, &result) == KS_E_VERSION);
  CHECK(strstr(ks_last_error_message(), "options.world_model version 1 is not this library's (2)") != NULL);
  CHECK(result == NULL && m.calls == 0);
  o.world_model.version = KS_WORLD_MODEL_OPTIONS_VERSION;
  o.version = KS_SEARCH_OPTIONS_VERSION - 1; /* a program built with the 0.3.0 header */
  CHECK(ks_search_run(&o, &result) == KS_E_VERSION);
  CHECK(strstr(ks_last_error_message(), "ks_search_options version 6 is not this library's (7)") != NULL);
  CHECK(result == NULL && m.calls == 0);
}

/* config_json: settings by name from the library's table (docs/options.md),
 * applied after the fields; an unknown name, a wrong type or a value out of
 * bounds is refused by name before anything runs. The table itself, with
 * bounds, through the ks_search_setting_* queries. */
static void test_settings_by_name(const char *task, const char *work) {
  ks_search_options o;
  ks_result *result = NULL;
  struct model m;
  char run_dir[4096];
  ks_setting_bounds b;
  size_t i, n;
  int saw_propose = 0;
  ks_status s;

  n = ks_search_setting_count();
  CHECK(n > 20);
  for (i = 0; i < n; ++i) {
    const char *name = ks_search_setting_name(i);
    CHECK(name[0] != '\0');
    CHECK(ks_search_setting_bounds(name, &b) == KS_OK);
    CHECK(b.min <= b.default_value && b.default_value <= b.max);
    if (strcmp(name, "wm_propose_every") == 0) saw_propose = 1;
  }
  CHECK(saw_propose);
  CHECK(strcmp(ks_search_setting_name(n), "") == 0);
  CHECK(ks_search_setting_bounds("evolve_islands", &b) == KS_OK);
  CHECK(b.type == KS_SETTING_INTEGER && b.min == 1 && b.max == 64 && b.default_value == 3);
  CHECK(ks_search_setting_bounds("evolve_exploit_ratio", &b) == KS_OK);
  CHECK(b.type == KS_SETTING_NUMBER && b.min == 0 && b.max == 1 && b.default_value == 0.7);
  CHECK(ks_search_setting_bounds("wm_lenient_edits", &b) == KS_OK);
  CHECK(b.type == KS_SETTING_BOOLEAN && b.default_value == 0);
  CHECK(ks_search_setting_bounds("max_answer_bytes", &b) == KS_OK);
  CHECK(b.type == KS_SETTING_BYTES && b.min == 1 && b.max == HUGE_VAL);
  CHECK(ks_search_setting_bounds("wm_loop_rules", &b) == KS_E_NOT_FOUND); /* the manifest's only */
  CHECK(ks_search_setting_bounds("no_such_setting", &b) == KS_E_NOT_FOUND);
  CHECK(strstr(ks_last_error_message(), "\"no_such_setting\" is not a search setting") != NULL);
  CHECK(strstr(ks_search_settings_json(), "\"key\": \"tune_batch\"") != NULL);

  memset(&m, 0, sizeof m);
  snprintf(run_dir, sizeof run_dir, "%s/by-name", work);
  greedy_options(&o, task, run_dir, &m);
  o.budget.max_rounds = 1;
  o.weak_check = 0;
  o.config_json = "{\"wm_propose_every\": 7}";
  CHECK(ks_search_run(&o, &result) == KS_OK);
  CHECK(manifest_has(run_dir, "\"wm_propose_every\": 7"));
  ks_result_destroy(result);
  result = NULL;
  o.config_json = "{\"wm_propose_evry\": 0}";
  CHECK(ks_search_run(&o, &result) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "options.config_json: \"wm_propose_evry\" is not a search setting") != NULL);
  o.config_json = "{\"tune_batch\": 65}";
  CHECK(ks_search_run(&o, &result) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "tune_batch must be between 0 (automatic) and 64, is 65") != NULL);
  o.config_json = "{\"wm_lenient_edits\": 1}";
  CHECK(ks_search_run(&o, &result) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "wm_lenient_edits must be true or false") != NULL);
  o.config_json = "[1]";
  CHECK(ks_search_run(&o, &result) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "options.config_json must be a JSON object") != NULL);
  /* A setting by name wins over its field. */
  o.budget.max_rounds = 5;
  o.config_json = "{\"max_rounds\": 1}";
  s = ks_search_run(&o, &result);
  CHECK(s == KS_E_INVALID_ARGUMENT); /* the folder holds a run now */
  CHECK(result == NULL && m.calls == 1);
  snprintf(run_dir, sizeof run_dir, "%s/by-name-wins", work);
  o.run_dir = run_dir;
  s = ks_search_run(&o, &result);
  if (s != KS_OK) fprintf(stderr, "ks_search_run (by name): %s: %s\n", ks_status_string(s), ks_last_error_message());
  CHECK(s == KS_OK);
  CHECK(ks_result_rounds(result) == 1);
  ks_result_destroy(result);
  result = NULL;

  /* greedy_parallel, a setting with no struct field: greedy asks for two
   * candidates in its first step whatever `parallel` says. */
  {
    char path[4200];
    char *events;
    memset(&m, 0, sizeof m);
    snprintf(run_dir, sizeof run_dir, "%s/greedy-parallel", work);
    o.run_dir = run_dir;
    o.budget.max_rounds = 2;
    o.parallel = 1;
    o.config_json = "{\"greedy_parallel\": 2}";
    s = ks_search_run(&o, &result);
    if (s != KS_OK) fprintf(stderr, "ks_search_run (greedy_parallel): %s: %s\n", ks_status_string(s), ks_last_error_message());
    CHECK(s == KS_OK);
    CHECK(m.calls == 2 && ks_result_rounds(result) == 2);
    CHECK(manifest_has(run_dir, "\"greedy_parallel\": 2"));
    snprintf(path, sizeof path, "%s/events.jsonl", run_dir);
    events = read_text(path);
    CHECK(events != NULL && strstr(events, "\"decision\":\"step\"") != NULL);
    CHECK(events != NULL && strstr(events, "\"parallel\":2") != NULL);
    free(events);
    ks_result_destroy(result);
  }
}

/* The evolve options reach the evolve strategy's configuration; a
 * bad value is refused by name, as is an evolve struct of another version. */
static void test_evolve_options(const char *task, const char *work) {
  ks_search_options o;
  ks_result *result = NULL;
  struct model m;
  char run_dir[4096];
  ks_status s;

  memset(&m, 0, sizeof m);
  snprintf(run_dir, sizeof run_dir, "%s/evolve", work);
  greedy_options(&o, task, run_dir, &m);
  o.strategy = KS_STRATEGY_EVOLVE;
  o.budget.max_rounds = 2;
  o.weak_check = 0;
  o.evolve.islands = 0;
  CHECK(ks_search_run(&o, &result) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "evolve_islands must be between 1 and 64, is 0") != NULL);
  CHECK(result == NULL && m.calls == 0);
  o.evolve.islands = 2;
  o.evolve.version = 2;
  CHECK(ks_search_run(&o, &result) == KS_E_VERSION);
  CHECK(strstr(ks_last_error_message(), "options.evolve version 2 is not this library's (1)") != NULL);
  o.evolve.version = KS_EVOLVE_OPTIONS_VERSION;
  o.evolve.exploit_ratio = 0.5;
  o.evolve.inspirations = 1;
  s = ks_search_run(&o, &result);
  if (s != KS_OK) fprintf(stderr, "ks_search_run (evolve): %s: %s\n", ks_status_string(s), ks_last_error_message());
  CHECK(s == KS_OK);
  CHECK(m.calls == 2);
  CHECK(ks_result_rounds(result) == 2);
  CHECK(manifest_has(run_dir, "\"strategy\": \"evolve\""));
  CHECK(manifest_has(run_dir, "\"evolve_islands\": 2"));
  CHECK(manifest_has(run_dir, "\"evolve_exploit_ratio\": 0.5"));
  CHECK(manifest_has(run_dir, "\"evolve_inspirations\": 1"));
  ks_result_destroy(result);
}

/* eval.timing reaches the run's evaluation settings; a bad value and an eval
 * struct of an older header's version are refused by name. */
static void test_eval_options(const char *task, const char *work) {
  ks_search_options o;
  ks_result *result = NULL;
  struct model m;
  char run_dir[4096];
  ks_status s;

  memset(&m, 0, sizeof m);
  snprintf(run_dir, sizeof run_dir, "%s/timing-upstream", work);
  greedy_options(&o, task, run_dir, &m);
  o.budget.max_rounds = 1;
  o.weak_check = 0;
  o.eval.timing = (ks_timing_mode)7;
  CHECK(ks_search_run(&o, &result) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "options.eval.timing is 7") != NULL);
  CHECK(result == NULL && m.calls == 0);
  o.eval.timing = KS_TIMING_UPSTREAM;
  o.eval.version = 1; /* an older header's */
  CHECK(ks_search_run(&o, &result) == KS_E_VERSION);
  CHECK(strstr(ks_last_error_message(), "options.eval version 1 is not this library's (2)") != NULL);
  o.eval.version = KS_EVAL_OPTIONS_VERSION;
  s = ks_search_run(&o, &result);
  if (s != KS_OK) fprintf(stderr, "ks_search_run (upstream): %s: %s\n", ks_status_string(s), ks_last_error_message());
  CHECK(s == KS_OK);
  CHECK(manifest_has(run_dir, "\"timing\": \"upstream\""));
  ks_result_destroy(result);
}

static void test_search(const char *task, const char *work) {
  ks_search_options params;
  ks_result *result = NULL;
  struct model m;
  struct progress p;
  char run_dir[4096];
  ks_status s;
  memset(&m, 0, sizeof m);
  memset(&p, 0, sizeof p);
  snprintf(run_dir, sizeof run_dir, "%s/greedy", work);

  greedy_options(&params, task, run_dir, &m);
  params.budget.max_rounds = 3;
  params.progress = on_round;
  params.progress_user_data = &p;
  s = ks_search_run(&params, &result);
  if (s != KS_OK) fprintf(stderr, "ks_search_run: %s: %s\n", ks_status_string(s), ks_last_error_message());
  CHECK(s == KS_OK);
  CHECK(result != NULL);
  CHECK(m.calls == 3);
  CHECK(m.kinds_seen[KS_PROMPT_GENERATE] == 1);
  CHECK(m.kinds_seen[KS_PROMPT_DEBUG] == 1);   /* after the wrong answer */
  CHECK(m.kinds_seen[KS_PROMPT_IMPROVE] == 1); /* after the right one */
  CHECK(p.rounds == 3);
  CHECK(p.saw_incorrect);
  CHECK(ks_result_has_best(result));
  CHECK(ks_result_best_latency_ms(result) > 0.0);
  CHECK(ks_result_rounds(result) == 3);
  CHECK(strcmp(ks_result_stop_reason(result), "max_rounds") == 0);
  CHECK(ks_result_stop_reason_code(result) == KS_STOP_MAX_ROUNDS);
  CHECK(ks_result_source_count(result) == 1);
  CHECK(strstr(ks_result_source_content(result, 0), "3.0f * x[i]") != NULL);
  CHECK(strstr(ks_result_launch_plan_json(result), "scale3") != NULL);
  CHECK(strstr(ks_result_best_solution_json(result), "\"sources\"") != NULL);
  CHECK(strcmp(ks_result_task(result), "tests/scale3") == 0);
  CHECK(ks_result_best_round(result) == 2);
  CHECK(strlen(ks_result_best_solution_id(result)) == 16);
  CHECK(strstr(ks_result_json(result), "\"best\"") != NULL);
  CHECK(strstr(ks_result_json(result), "\"weak_check\"") != NULL); /* the weak-check detection ran */
  CHECK(strstr(ks_result_json(result), "\"candidates\"") != NULL);
  CHECK(strcmp(ks_result_run_dir(result), run_dir) == 0);
  CHECK(ks_result_source_count(NULL) == 0);
  CHECK(strcmp(ks_result_source_path(result, 99), "") == 0);
  test_replay(work, ks_result_best_solution_id(result));
  ks_result_destroy(result);

  /* continue_from_solution reads the run folder's best kernel; greedy does
   * not take it, and says so before anything runs. */
  {
    char again[4096];
    snprintf(again, sizeof again, "%s/greedy-continued", work);
    greedy_options(&params, task, again, &m);
    params.continue_from_solution = run_dir;
    result = NULL;
    CHECK(ks_search_run(&params, &result) == KS_E_INVALID_ARGUMENT);
    CHECK(result == NULL);
    CHECK(strstr(ks_last_error_message(), "continue_from_solution is read by the world_model strategy") != NULL);
    params.continue_from_solution = "/nonexistent/solution.json";
    CHECK(ks_search_run(&params, &result) != KS_OK);
    CHECK(strstr(ks_last_error_message(), "options.continue_from_solution") != NULL);
  }
}

/* Answers every request with kGood and notes what the prompts held: a
 * world model built by the model (wm_init) or imported, and the imported
 * kernel shown as the base to build on. */
struct import_model {
  int calls;
  int kinds_seen[7];
  int saw_imported_code;
};

static int import_answer(const ks_llm_request *req, ks_llm_answer *answer, void *user) {
  struct import_model *m = (struct import_model *)user;
  m->calls++;
  if ((int)req->kind >= 0 && (int)req->kind < 7) m->kinds_seen[req->kind]++;
  if (req->prompt && strstr(req->prompt, "imported from K-Search") != NULL) m->saw_imported_code = 1;
  return ks_llm_answer_set_text(answer, kGood, strlen(kGood)) == KS_OK ? 0 : 1;
}

/* Writes `text` to `path`; 1 when it did. */
static int write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  int ok;
  if (!f) return 0;
  ok = fputs(text, f) >= 0;
  return fclose(f) == 0 && ok;
}

/* Whether the file holds `needle`. */
static int file_contains(const char *path, const char *needle) {
  static char buf[1 << 20];
  size_t n;
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return strstr(buf, needle) != NULL;
}

/* continue_from_world_model from C: K-Search's world_model.json and the
 * solution_db.jsonl beside it, written here; the search starts from that
 * tree (no wm_init), its first prompt builds on the imported kernel. */
static void test_world_model_import(const char *task, const char *work) {
  ks_search_options o;
  ks_result *result = NULL;
  struct import_model m;
  char dir[2048], wm_path[4096], db_path[4096], run_dir[2048], events[4096];
  int written;
  ks_status s;
  memset(&m, 0, sizeof m);
  snprintf(dir, sizeof dir, "%s/ksearch-artifacts", work);
  snprintf(wm_path, sizeof wm_path, "%s/world_model.json", dir);
  snprintf(db_path, sizeof db_path, "%s/solution_db.jsonl", dir);
  snprintf(run_dir, sizeof run_dir, "%s/imported", work);
  snprintf(events, sizeof events, "%s/events.jsonl", run_dir);
  {
    char mkdir_cmd[4200];
    snprintf(mkdir_cmd, sizeof mkdir_cmd, "mkdir -p '%s'", dir);
    CHECK(system(mkdir_cmd) == 0);
  }
  written = write_text(wm_path,
                       "{\"kernel_summary\": \"scale by three\", \"open_questions\": [],\n"
        " \"decision_tree\": {\"root_id\": \"root\", \"active_leaf_id\": \"root\", \"nodes\": [\n"
        "  {\"node_id\": \"root\", \"node_type\": \"root\", \"parent_id\": null},\n"
        "  {\"node_id\": \"loop\", \"parent_id\": \"root\", \"node_type\": \"decision\",\n"
        "   \"action\": {\"title\": \"Plain loop\", \"difficulty_1_to_5\": 1, \"score_0_to_1\": 0.4},\n"
        "   \"solution_ref\": {\"solution_id\": \"ks-0001\", \"parent_solution_id\": null,\n"
        "                    \"eval\": {\"status\": \"PASSED\", \"latency_ms\": 0.2, \"metrics\": {\"score\": 5}}}},\n"
        "  {\"node_id\": \"unroll\", \"parent_id\": \"loop\", \"node_type\": \"decision\",\n"
        "   \"action\": {\"title\": \"Unroll by four\", \"difficulty_0_to_3\": 1, \"score_0_to_1\": 0.9}},\n"
        "  {\"node_id\": \"simd\", \"parent_id\": \"root\",\n"
        "   \"action\": {\"title\": \"SIMD\", \"score_0_to_1\": 0.6}},\n"
        "  {\"node_id\": \"threads\", \"parent_id\": \"root\",\n"
        "   \"action\": {\"title\": \"Threads\", \"score_0_to_1\": 0.5}}\n"
        " ]}}\n");
  CHECK(written);
  if (!written) return;
  written = write_text(db_path,
                       "{\"solution_id\": \"ks-0001\", \"solution_name\": \"loop\", \"definition\": \"scale3\", "
        "\"parent_solution_id\": null, \"eval_result\": {\"status\": \"PASSED\"}, \"code\": "
        "\"```cpp kernel.cpp\\n// imported from K-Search\\n#include <cstdint>\\nvoid scale3(const float* x, float* y, "
        "std::int64_t n) {\\n  for (std::int64_t i = 0; i < n; ++i) y[i] = 3.0f * x[i];\\n}\\n```\\n```json "
        "launch_plan\\n{\\\"calls\\\": [{\\\"fn\\\": \\\"scale3\\\", \\\"args\\\": [\\\"x\\\", \\\"y\\\", "
        "\\\"N\\\"]}]}\\n```\\n\"}\n");
  CHECK(written);
  if (!written) return;

  CHECK(ks_search_options_init(&o, KS_SEARCH_OPTIONS_VERSION) == KS_OK);
  o.task = task;
  o.language = KS_LANGUAGE_CPP;
  o.strategy = KS_STRATEGY_WORLD_MODEL;
  o.eval.backend = KS_BACKEND_HOST;
  o.eval.timing_cap_s = 0.2;
  o.run_dir = run_dir;
  o.budget.max_rounds = 1;
  o.weak_check = 0;
  o.llm.source = KS_LLM_CALLBACK;
  o.llm.callback = import_answer;
  o.llm.user_data = &m;
  o.continue_from_world_model = wm_path;
  s = ks_search_run(&o, &result);
  if (s != KS_OK) fprintf(stderr, "ks_search_run (import): %s: %s\n", ks_status_string(s), ks_last_error_message());
  CHECK(s == KS_OK);
  CHECK(m.kinds_seen[KS_PROMPT_WM_INIT] == 0);   /* the tree came from the file */
  CHECK(m.kinds_seen[KS_PROMPT_GENERATE] == 1);  /* "Unroll by four", under the imported kernel */
  CHECK(m.saw_imported_code);
  CHECK(ks_result_rounds(result) == 1);
  CHECK(file_contains(events, "\"world_model_imported\""));
  CHECK(file_contains(events, "difficulty_0_to_3 1 read as difficulty_1_to_5 2"));
  ks_result_destroy(result);

  /* Only the world-model strategy reads it; a file that is not there is named. */
  {
    char again[4096];
    snprintf(again, sizeof again, "%s/imported-greedy", work);
    o.run_dir = again;
    o.strategy = KS_STRATEGY_GREEDY;
    result = NULL;
    CHECK(ks_search_run(&o, &result) == KS_E_INVALID_ARGUMENT);
    CHECK(strstr(ks_last_error_message(), "continue_from_world_model is read by the world_model strategy") != NULL);
    o.strategy = KS_STRATEGY_WORLD_MODEL;
    o.continue_from_world_model = "/nonexistent/world_model.json";
    CHECK(ks_search_run(&o, &result) != KS_OK);
    CHECK(strstr(ks_last_error_message(), "continue_from_world_model") != NULL);
    CHECK(strstr(ks_last_error_message(), "/nonexistent/world_model.json") != NULL);
    CHECK(result == NULL);
  }
}

/* `ksearch replay` from C: the greedy run above reproduced into a new folder
 * from its recording (no model, nothing measured), with the same best. */
static void test_replay(const char *work, const char *best_id) {
  ks_replay_options ro;
  ks_result *r = NULL;
  char source[4096], again[4096], bad[4096];
  ks_status s;
  snprintf(source, sizeof source, "%s/greedy", work);
  snprintf(again, sizeof again, "%s/greedy_replayed", work);
  snprintf(bad, sizeof bad, "%s/greedy_replay_refused", work);
  memset(&ro, 0x5a, sizeof ro);
  CHECK(ks_replay_options_init(&ro, KS_REPLAY_OPTIONS_VERSION) == KS_OK);
  CHECK(ro.version == KS_REPLAY_OPTIONS_VERSION && ro.run_dir == NULL && ro.config_changes_json == NULL);
  CHECK(ro.on_divergence == KS_REPLAY_STOP && ro.allow_prompt_changes == 0 && ro.llm == NULL);
  CHECK(ro.eval_callback == NULL && ro.progress == NULL && ro.event == NULL && ro.cancel == NULL);
  CHECK(ks_replay_options_init(&ro, 99) == KS_E_VERSION);
  CHECK(ks_replay_options_init(&ro, KS_REPLAY_OPTIONS_VERSION) == KS_OK);
  ro.run_dir = again;
  s = ks_search_replay(source, &ro, &r);
  if (s != KS_OK) fprintf(stderr, "ks_search_replay: %s\n", ks_last_error_message());
  CHECK(s == KS_OK);
  CHECK(ks_result_rounds(r) == 3);
  CHECK(ks_result_has_best(r) && ks_result_best_round(r) == 2);
  CHECK(strcmp(ks_result_best_solution_id(r), best_id) == 0);
  CHECK(strcmp(ks_result_run_dir(r), again) == 0);
  ks_result_destroy(r);
  r = NULL;

  /* Settings are checked by name before anything runs. */
  ro.run_dir = bad;
  ro.config_changes_json = "{\"no_such_setting\": 1}";
  CHECK(ks_search_replay(source, &ro, &r) == KS_E_INVALID_ARGUMENT);
  CHECK(r == NULL);
  CHECK(strstr(ks_last_error_message(), "no_such_setting") != NULL);
  ro.config_changes_json = "[1]";
  CHECK(ks_search_replay(source, &ro, &r) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "options.config_changes_json") != NULL);
  ro.config_changes_json = NULL;
  ro.on_divergence = (ks_replay_divergence)7;
  CHECK(ks_search_replay(source, &ro, &r) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "options.on_divergence") != NULL);
  CHECK(ks_search_replay(NULL, &ro, &r) == KS_E_INVALID_ARGUMENT);
}

static void test_stops(const char *task, const char *work) {
  ks_search_options params;
  ks_resume_options resume;
  ks_result *result = NULL;
  struct model m;
  struct progress p;
  char run_dir[4096];
  ks_status s;

  /* The progress callback stops the run after round 1: KS_E_CANCELLED with a result. */
  memset(&m, 0, sizeof m);
  memset(&p, 0, sizeof p);
  p.stop_at = 1;
  snprintf(run_dir, sizeof run_dir, "%s/stopped", work);
  greedy_options(&params, task, run_dir, &m);
  params.budget.max_rounds = 5;
  params.progress = on_round;
  params.progress_user_data = &p;
  s = ks_search_run(&params, &result);
  CHECK(s == KS_E_CANCELLED);
  CHECK(result != NULL);
  CHECK(ks_result_rounds(result) == 1);
  ks_result_destroy(result);
  result = NULL;

  /* Resuming it replays round 1 from the journal and finishes the budget. */
  memset(&p, 0, sizeof p);
  CHECK(ks_resume_options_init(&resume, KS_RESUME_OPTIONS_VERSION) == KS_OK);
  CHECK(resume.max_rounds == 0); /* 0 keeps the recorded budget */
  resume.llm = &params.llm;      /* a callback cannot be recorded: give it again */
  resume.progress = on_round;
  resume.progress_user_data = &p;
  s = ks_search_resume(run_dir, &resume, &result);
  if (s != KS_OK) fprintf(stderr, "ks_search_resume: %s\n", ks_last_error_message());
  CHECK(s == KS_OK);
  CHECK(ks_result_rounds(result) == 5);
  CHECK(m.calls == 5); /* the first answer came from the journal, not the callback */
  ks_result_destroy(result);
  result = NULL;

  /* The LLM callback returns KS_E_USER: the run stops. */
  memset(&m, 0, sizeof m);
  memset(&p, 0, sizeof p);
  m.stop_after = 2;
  snprintf(run_dir, sizeof run_dir, "%s/user_stop", work);
  params.run_dir = run_dir;
  params.budget.max_rounds = 5;
  params.progress = NULL;
  s = ks_search_run(&params, &result);
  CHECK(s == KS_E_CANCELLED);
  CHECK(result != NULL);
  CHECK(ks_result_rounds(result) == 1); /* the stopping call is not a round */
  CHECK(strcmp(ks_result_stop_reason(result), "cancelled") == 0);
  CHECK(ks_result_stop_reason_code(result) == KS_STOP_CANCELLED);
  ks_result_destroy(result);
}

static void test_errors(void) {
  ks_search_options params;
  ks_result *result = (ks_result *)&params; /* must be reset to NULL on failure */
  ks_task *task = NULL;
  int major = -1, minor = -1, patch = -1;

  CHECK(strcmp(ks_version_string(), KS_VERSION_STRING) == 0);
  ks_version(&major, &minor, &patch);
  CHECK(major == KS_VERSION_MAJOR && minor == KS_VERSION_MINOR && patch == KS_VERSION_PATCH);
  CHECK(strcmp(ks_status_string(KS_OK), "ok") == 0);
  CHECK(strcmp(ks_status_string(KS_E_NO_DEVICE), "no CUDA device") == 0);
  CHECK(strcmp(ks_status_string(KS_E_CUDA), "CUDA driver error") == 0);
  CHECK(strcmp(ks_status_string((ks_status)12345), "unknown status") == 0);

  CHECK(ks_search_options_init(NULL, KS_SEARCH_OPTIONS_VERSION) == KS_E_INVALID_ARGUMENT);
  CHECK(ks_search_options_init(&params, 99) == KS_E_VERSION);
  CHECK(strstr(ks_last_error_message(), "99") != NULL);

  CHECK(ks_search_options_init(&params, KS_SEARCH_OPTIONS_VERSION) == KS_OK);
  CHECK(ks_search_run(&params, &result) == KS_E_INVALID_ARGUMENT); /* no task */
  CHECK(result == NULL);
  CHECK(strstr(ks_last_error_message(), "task") != NULL);

  params.task = "no/such/task";
  params.llm.source = KS_LLM_OFFLINE;
  params.strategy = KS_STRATEGY_TUNE;
  CHECK(ks_search_run(&params, &result) == KS_E_NOT_FOUND);
  CHECK(strstr(ks_last_error_message(), "no/such/task") != NULL);

  /* NaN limits are refused by name, not taken as "unlimited" or "default". */
  params.task = "examples/tasks/matmul";
  params.language = KS_LANGUAGE_CPP;
  params.budget.max_cost_usd = NAN;
  CHECK(ks_search_run(&params, &result) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "max_cost_usd") != NULL);
  params.budget.max_cost_usd = 0;
  params.budget.max_wall_s = NAN;
  CHECK(ks_search_run(&params, &result) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "max_wall_s") != NULL);
  params.budget.max_wall_s = 0;
  params.eval.timing_cap_s = NAN;
  CHECK(ks_search_run(&params, &result) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "options.eval.timing_cap_s") != NULL);
  CHECK(result == NULL);
  params.eval.timing_cap_s = 2;

  /* A callback set while the source names another policy: refused, not silently ignored. */
  params.llm.callback = model_answer;
  CHECK(ks_search_run(&params, &result) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "options.llm.source") != NULL);
  params.llm.source = KS_LLM_CALLBACK;
  params.llm.callback = NULL;
  CHECK(ks_search_run(&params, &result) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "options.llm.callback is NULL") != NULL);
  params.llm.source = KS_LLM_OPENAI; /* without a model */
  CHECK(ks_search_run(&params, &result) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "options.llm.model is required") != NULL);
  params.llm.source = (ks_llm_source)42;
  CHECK(ks_search_run(&params, &result) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "options.llm.source is 42") != NULL);
  params.llm.source = KS_LLM_OFFLINE;

  params.version = KS_SEARCH_OPTIONS_VERSION + 1;
  CHECK(ks_search_run(&params, &result) == KS_E_VERSION);
  params.version = KS_SEARCH_OPTIONS_VERSION;
  params.eval.version = 0; /* a nested struct left uninitialised */
  CHECK(ks_search_run(&params, &result) == KS_E_VERSION);
  CHECK(strstr(ks_last_error_message(), "options.eval version 0 is not this library's") != NULL);

  CHECK(ks_task_load("no/such/task", &task) == KS_E_NOT_FOUND);
  CHECK(task == NULL);
  CHECK(ks_search_resume("/nonexistent/run", NULL, &result) == KS_E_NOT_FOUND);
  CHECK(ks_llm_answer_set_text(NULL, "x", 1) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "answer is NULL") != NULL);

  /* A NULL or empty argument is named in the message. */
  CHECK(ks_search_run(NULL, &result) == KS_E_INVALID_ARGUMENT);
  CHECK(strcmp(ks_last_error_message(), "ks_search_run: options is NULL") == 0);
  CHECK(ks_search_resume("", NULL, &result) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "run_dir is empty") != NULL);
  CHECK(ks_search_resume(NULL, NULL, &result) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "run_dir is NULL") != NULL);
  CHECK(ks_task_load(NULL, &task) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "name_or_path is NULL") != NULL);
  {
    char *json = (char *)"not reset";
    CHECK(ks_evaluate(NULL, NULL, NULL, &json) == KS_E_INVALID_ARGUMENT);
    CHECK(json == NULL);
    CHECK(strstr(ks_last_error_message(), "evaluator is NULL") != NULL);
  }

  ks_result_destroy(NULL); /* destroy accepts NULL */
  ks_task_destroy(NULL);
  ks_evaluator_destroy(NULL);
  ks_cancel_token_destroy(NULL);
}

/* The option structs: versions, the documented defaults, nested inits, refusals. */
static void test_options(void) {
  ks_search_options o;
  ks_llm_options l;
  ks_eval_options e;
  ks_budget_options b;
  ks_resume_options r;
  memset(&o, 0x5a, sizeof o); /* init must overwrite every byte it owns */
  CHECK(ks_search_options_init(&o, KS_SEARCH_OPTIONS_VERSION) == KS_OK);
  CHECK(o.version == KS_SEARCH_OPTIONS_VERSION);
  CHECK(o.task == NULL && o.run_dir == NULL && o.kernelbench_dir == NULL);
  CHECK(o.strategy == KS_STRATEGY_AUTO && o.language == KS_LANGUAGE_CUDA && o.language_from_task == 1);
  CHECK(o.parallel == 1 && o.seed == 0);
  CHECK(o.budget.version == KS_BUDGET_OPTIONS_VERSION && o.budget.max_rounds == 20);
  CHECK(o.budget.max_cost_usd == 0 && o.budget.max_wall_s == 0 && o.budget.max_answer_bytes == 4u << 20);
  CHECK(o.world_model.version == KS_WORLD_MODEL_OPTIONS_VERSION && o.world_model.stagnation_window == 5);
  CHECK(o.world_model.max_difficulty == 4 && o.world_model.edit_retries == 3 && o.world_model.max_chars == 50000);
  CHECK(o.tune.version == KS_TUNE_OPTIONS_VERSION && o.tune.rounds == 0);
  CHECK(o.eval.version == KS_EVAL_OPTIONS_VERSION && o.eval.backend == KS_BACKEND_AUTO);
  CHECK(o.eval.devices == NULL && o.eval.device_count == 0 && o.eval.in_process == 0);
  CHECK(o.eval.sandbox == KS_SANDBOX_AUTO && o.eval.memory_limit_bytes == 0);
  CHECK(o.eval.timing_cap_s == 2 && o.eval.seeds == 2 && o.eval.compile_timeout_s == 120 && o.eval.run_timeout_s == 60);
  CHECK(o.eval.callback == NULL && o.eval.batch_callback == NULL && o.eval.options_json == NULL);
  CHECK(o.llm.version == KS_LLM_OPTIONS_VERSION && o.llm.source == KS_LLM_OPENAI && o.llm.model == NULL);
  CHECK(o.llm.api == KS_API_CHAT && o.llm.temperature < 0 && o.llm.max_output_tokens == 0);
  CHECK(o.llm.request_timeout_s == 900 && o.llm.connect_timeout_s == 15);
  CHECK(o.llm.max_retries == 8 && o.llm.max_concurrency == 4);
  CHECK(o.llm.command_timeout_s == 600 && o.llm.command_input == KS_COMMAND_INPUT_PLAIN);
  CHECK(o.llm.replay_path == NULL && o.llm.replay_on_divergence == KS_REPLAY_STOP);
  CHECK(o.eval.baseline_latencies_path == NULL);
  CHECK(o.progress == NULL && o.event == NULL && o.cancel == NULL);
  CHECK(o.weak_check == 1);
  CHECK(o.continue_from_solution == NULL);
  CHECK(o.continue_from_world_model == NULL);
  CHECK(o.start_from_starting_point == 1 && o.remeasure == 0);

  CHECK(o.world_model.lenient_edits == 0);

  CHECK(o.config_json == NULL);

  /* One layout per minor release: init refuses any other version, an older
   * header's too, and writes nothing then. */
  {
    unsigned char before[sizeof(ks_search_options)];
    memset(&o, 0x5a, sizeof o);
    memcpy(before, &o, sizeof o);
    CHECK(ks_search_options_init(&o, KS_SEARCH_OPTIONS_VERSION - 1) == KS_E_VERSION);
    CHECK(strstr(ks_last_error_message(), "version 6 is not this library's (7)") != NULL);
    CHECK(memcmp(before, &o, sizeof o) == 0);
    CHECK(ks_eval_options_init(&e, 1) == KS_E_VERSION);
    CHECK(ks_world_model_options_init(&o.world_model, 1) == KS_E_VERSION);
  }
  CHECK(ks_search_options_init(&o, KS_SEARCH_OPTIONS_VERSION + 1) == KS_E_VERSION);
  CHECK(strstr(ks_last_error_message(), "is not this library's") != NULL);
  CHECK(ks_search_options_init(&o, KS_SEARCH_OPTIONS_VERSION) == KS_OK);
  CHECK(o.eval.timing == KS_TIMING_DEFAULT);
  CHECK(o.evolve.version == KS_EVOLVE_OPTIONS_VERSION && o.evolve.islands == 3 && o.evolve.island_size == 8);
  CHECK(o.evolve.migration_interval == 4 && o.evolve.migration_size == 1 && o.evolve.archive_size == 12);
  CHECK(o.evolve.inspirations == 2 && o.evolve.exploit_ratio == 0.7);
  {
    ks_evolve_options ev;
    memset(&ev, 0x5a, sizeof ev);
    CHECK(ks_evolve_options_init(&ev, KS_EVOLVE_OPTIONS_VERSION) == KS_OK);
    CHECK(memcmp(&ev, &o.evolve, sizeof ev) == 0);
    CHECK(ks_evolve_options_init(&ev, 2) == KS_E_VERSION);
  }

  /* ks_world_model_options on its own. */
  {
    ks_world_model_options w;
    memset(&w, 0x5a, sizeof w);
    CHECK(ks_world_model_options_init(&w, KS_WORLD_MODEL_OPTIONS_VERSION) == KS_OK);
    CHECK(memcmp(&w, &o.world_model, sizeof w) == 0);
    CHECK(ks_world_model_options_init(&w, KS_WORLD_MODEL_OPTIONS_VERSION + 1) == KS_E_VERSION);
    CHECK(strstr(ks_last_error_message(), "is not this library's (2)") != NULL);
  }

  /* Each nested struct has its own init, with the same defaults. */
  CHECK(ks_llm_options_init(&l, KS_LLM_OPTIONS_VERSION) == KS_OK);
  CHECK(memcmp(&l, &o.llm, sizeof l) == 0);
  CHECK(ks_eval_options_init(&e, KS_EVAL_OPTIONS_VERSION) == KS_OK);
  CHECK(memcmp(&e, &o.eval, sizeof e) == 0);
  CHECK(ks_budget_options_init(&b, KS_BUDGET_OPTIONS_VERSION) == KS_OK);
  CHECK(memcmp(&b, &o.budget, sizeof b) == 0);
  CHECK(ks_resume_options_init(&r, KS_RESUME_OPTIONS_VERSION) == KS_OK);
  CHECK(r.max_rounds == 0 && r.llm == NULL && r.cancel == NULL);

  /* Unknown versions, both ways. */
  CHECK(ks_llm_options_init(&l, 0) == KS_E_VERSION);
  CHECK(ks_eval_options_init(&e, 3) == KS_E_VERSION);
  CHECK(strstr(ks_last_error_message(), "ks_eval_options_init: version 3 is not this library's (2)") != NULL);
  CHECK(ks_tune_options_init(NULL, KS_TUNE_OPTIONS_VERSION) == KS_E_INVALID_ARGUMENT);

  /* Enums: names, parsing, counts. */
  CHECK(strcmp(ks_strategy_name(KS_STRATEGY_WORLD_MODEL), "world_model") == 0);
  CHECK(strcmp(ks_strategy_name((ks_strategy)KS_STRATEGY_COUNT), "") == 0);
  CHECK(strcmp(ks_language_name(KS_LANGUAGE_CPP), "cpp") == 0);
  CHECK(strcmp(ks_backend_name(KS_BACKEND_HOST), "host") == 0);
  CHECK(strcmp(ks_sandbox_mode_name(KS_SANDBOX_OFF), "off") == 0);
  CHECK(strcmp(ks_timing_mode_name(KS_TIMING_UPSTREAM), "upstream") == 0);
  CHECK(strcmp(ks_timing_mode_name((ks_timing_mode)KS_TIMING_MODE_COUNT), "") == 0);
  CHECK(strcmp(ks_llm_source_name(KS_LLM_BATCH_CALLBACK), "batch_callback") == 0);
  CHECK(strcmp(ks_api_kind_name(KS_API_RESPONSES), "responses") == 0);
  CHECK(strcmp(ks_command_input_name(KS_COMMAND_INPUT_JSON), "json") == 0);
  CHECK(strcmp(ks_replay_divergence_name(KS_REPLAY_SKIP), "skip") == 0);
  CHECK(strcmp(ks_prompt_kind_name(KS_PROMPT_WM_TOO_HARD), "wm_too_hard") == 0);
  CHECK(strcmp(ks_eval_status_name(KS_EVAL_MEMORY_LIMIT), "memory_limit") == 0);
  CHECK(strcmp(ks_eval_status_name((ks_eval_status)-1), "") == 0);
  CHECK(strcmp(ks_stop_reason_name(KS_STOP_RECORDING_ENDED), "recording_ended") == 0);
  {
    ks_strategy st = KS_STRATEGY_AUTO;
    ks_eval_status es = KS_EVAL_PASSED;
    ks_llm_source src = KS_LLM_OPENAI;
    int i;
    CHECK(ks_strategy_parse("tune", &st) == KS_OK && st == KS_STRATEGY_TUNE);
    CHECK(ks_strategy_parse("beam", &st) == KS_E_INVALID_ARGUMENT);
    CHECK(strstr(ks_last_error_message(), "world_model, greedy, tune") != NULL);
    CHECK(ks_llm_source_parse("replay", &src) == KS_OK && src == KS_LLM_REPLAY);
    {
      ks_timing_mode tm = KS_TIMING_DEFAULT;
      CHECK(ks_timing_mode_parse("upstream", &tm) == KS_OK && tm == KS_TIMING_UPSTREAM);
      CHECK(ks_timing_mode_parse("fast", &tm) == KS_E_INVALID_ARGUMENT);
      CHECK(strstr(ks_last_error_message(), "known: default, upstream") != NULL);
    }
    for (i = 0; i < KS_EVAL_STATUS_COUNT; ++i) {
      CHECK(ks_eval_status_parse(ks_eval_status_name((ks_eval_status)i), &es) == KS_OK);
      CHECK((int)es == i);
    }
  }

  /* Fields are checked by name before anything runs. */
  {
    ks_result *res = NULL;
    int devices[] = {0, -3};
    const char *headers[] = {"no colon here"};
    CHECK(ks_search_options_init(&o, KS_SEARCH_OPTIONS_VERSION) == KS_OK);
    o.task = "examples/tasks/matmul";
    o.language = KS_LANGUAGE_CPP;
    o.llm.source = KS_LLM_OFFLINE;
    o.eval.devices = devices;
    o.eval.device_count = 2;
    CHECK(ks_search_run(&o, &res) == KS_E_INVALID_ARGUMENT);
    CHECK(strstr(ks_last_error_message(), "options.eval.devices holds -3") != NULL);
    o.eval.device_count = 0;
    o.eval.seeds = 1;
    CHECK(ks_search_run(&o, &res) == KS_E_INVALID_ARGUMENT);
    CHECK(strstr(ks_last_error_message(), "options.eval.seeds") != NULL);
    o.eval.seeds = 2;
    o.run_name = "named";
    CHECK(ks_search_run(&o, &res) == KS_E_INVALID_ARGUMENT);
    CHECK(strstr(ks_last_error_message(), "options.run_name need options.wandb") != NULL);
    o.run_name = NULL;
    o.eval.options_json = "{\"min_reps\": 3, \"no_such_setting\": 1}";
    CHECK(ks_search_run(&o, &res) == KS_E_INVALID_ARGUMENT);
    CHECK(strstr(ks_last_error_message(), "unknown setting \"no_such_setting\"") != NULL);
    o.eval.options_json = "{\"timing\": \"fast\"}";
    CHECK(ks_search_run(&o, &res) == KS_E_INVALID_ARGUMENT);
    CHECK(strstr(ks_last_error_message(),
                 "options.eval.options_json: unknown timing \"fast\" (known: default, upstream)") != NULL);
    o.eval.options_json = NULL;
    o.eval.baseline_latencies_path = "/nonexistent/baselines.json";
    CHECK(ks_search_run(&o, &res) == KS_E_NOT_FOUND);
    CHECK(strstr(ks_last_error_message(), "options.eval.baseline_latencies_path") != NULL);
    o.eval.baseline_latencies_path = NULL;
    o.eval.sandbox = (ks_sandbox_mode)9;
    CHECK(ks_search_run(&o, &res) == KS_E_INVALID_ARGUMENT);
    CHECK(strstr(ks_last_error_message(), "options.eval.sandbox is 9") != NULL);
    o.eval.sandbox = KS_SANDBOX_AUTO;
    o.strategy = (ks_strategy)7;
    CHECK(ks_search_run(&o, &res) == KS_E_INVALID_ARGUMENT);
    CHECK(strstr(ks_last_error_message(), "options.strategy is 7") != NULL);
    o.strategy = KS_STRATEGY_AUTO;
    o.llm.source = KS_LLM_OPENAI;
    o.llm.model = "m";
    o.llm.headers = headers;
    o.llm.header_count = 1;
    CHECK(ks_search_run(&o, &res) == KS_E_INVALID_ARGUMENT);
    CHECK(strstr(ks_last_error_message(), "options.llm.headers: \"no colon here\"") != NULL);
    o.llm.header_count = 0;
    o.llm.temperature = NAN;
    CHECK(ks_search_run(&o, &res) == KS_E_INVALID_ARGUMENT);
    CHECK(strstr(ks_last_error_message(), "options.llm.temperature is NaN") != NULL);
    o.llm.source = KS_LLM_COMMAND;
    o.llm.command_argc = 1;
    CHECK(ks_search_run(&o, &res) == KS_E_INVALID_ARGUMENT);
    CHECK(strstr(ks_last_error_message(), "options.llm.command_argv is NULL") != NULL);
    o.llm.source = KS_LLM_REPLAY;
    CHECK(ks_search_run(&o, &res) == KS_E_INVALID_ARGUMENT);
    CHECK(strstr(ks_last_error_message(), "options.llm.replay_path is required") != NULL);
    o.llm.replay_path = "transcript.jsonl";
    o.llm.replay_on_divergence = (ks_replay_divergence)3;
    CHECK(ks_search_run(&o, &res) == KS_E_INVALID_ARGUMENT);
    CHECK(strstr(ks_last_error_message(), "options.llm.replay_on_divergence is 3") != NULL);
    CHECK(res == NULL);
  }
}

static void test_evaluate(const char *task_path) {
  ks_task *task = NULL;
  ks_evaluator *ev = NULL;
  char *json = NULL;
  CHECK(ks_task_load(task_path, &task) == KS_OK);
  CHECK(strcmp(ks_task_name(task), "tests/scale3") == 0);
  CHECK(strstr(ks_task_json(task), "\"workloads\"") != NULL);
  {
    /* A struct of an older header's version is refused before a byte past
     * its version is read: only the version is written here. */
    uint32_t old_version = 1;
    CHECK(ks_evaluator_create((const ks_eval_options *)&old_version, &ev) == KS_E_VERSION && ev == NULL);
    CHECK(strstr(ks_last_error_message(), "options version 1 is not this library's (2)") != NULL);
  }
  {
    ks_eval_options eo;
    CHECK(ks_eval_options_init(&eo, KS_EVAL_OPTIONS_VERSION) == KS_OK);
    eo.backend = KS_BACKEND_HOST;
    eo.timing = KS_TIMING_UPSTREAM;
    CHECK(ks_evaluator_create(&eo, &ev) == KS_OK);
    CHECK(ks_evaluate(ev, task, kGood, &json) == KS_OK);
    CHECK(json != NULL && strstr(json, "\"timing_upstream\": 1") != NULL);
    ks_string_free(json);
    json = NULL;
    ks_evaluator_destroy(ev);
    ev = NULL;
    eo.timing = KS_TIMING_DEFAULT;
    CHECK(ks_evaluator_create(&eo, &ev) == KS_OK);
  }
  CHECK(ks_evaluate(ev, task, kGood, &json) == KS_OK);
  CHECK(json != NULL && strstr(json, "\"status\": \"passed\"") != NULL);
  ks_string_free(json);
  json = NULL;
  CHECK(ks_evaluate(ev, task, kWrong, &json) == KS_OK); /* a failing kernel is a result, not an error */
  CHECK(json != NULL && strstr(json, "\"status\": \"incorrect\"") != NULL);
  ks_string_free(json);
  CHECK(ks_evaluate(ev, task, "no code at all", &json) == KS_E_PARSE);
  ks_evaluator_destroy(ev);
  ks_task_destroy(task);
}

/* A task written in C++ only: language_from_task runs it in C++ whatever
 * `language` says (the CLI without --language); without it, the language
 * must be the task's. */
static void test_language_from_task(const char *task, const char *work) {
  ks_search_options params;
  ks_result *result = NULL;
  struct model m;
  char run_dir[4096];
  ks_status s;
  memset(&m, 0, sizeof m);
  snprintf(run_dir, sizeof run_dir, "%s/language_from_task", work);
  greedy_options(&params, task, run_dir, &m);
  params.language = KS_LANGUAGE_CUDA;
  params.language_from_task = 0;
  params.budget.max_rounds = 1;
  CHECK(ks_search_run(&params, &result) == KS_E_INVALID_ARGUMENT);
  CHECK(result == NULL);
  CHECK(strstr(ks_last_error_message(), "has no \"cuda\" version (it supports: cpp, python)") != NULL);
  CHECK(m.calls == 0);
  params.language_from_task = 1;
  params.weak_check = 0; /* skipped, and the outcome says so */
  s = ks_search_run(&params, &result);
  if (s != KS_OK) fprintf(stderr, "language_from_task: %s\n", ks_last_error_message());
  CHECK(s == KS_OK);
  CHECK(ks_result_rounds(result) == 1);
  CHECK(m.calls == 1);
  CHECK(strstr(ks_result_json(result), "turned off (--no-weak-check)") != NULL);
  /* It ran in C++: in CUDA it would have ended with KS_E_NO_DEVICE here, before asking. */
  ks_result_destroy(result);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_capi TASK_DIR WORK_DIR\n");
    return 2;
  }
  test_options();
  test_errors();
  test_evaluate(argv[1]);
  test_search(argv[1], argv[2]);
  test_world_model_options(argv[1], argv[2]);
  test_settings_by_name(argv[1], argv[2]);
  test_eval_options(argv[1], argv[2]);
  test_evolve_options(argv[1], argv[2]);
  test_feedback_options(argv[1], argv[2]);
  test_stops(argv[1], argv[2]);
  test_language_from_task(argv[1], argv[2]);
  test_world_model_import(argv[1], argv[2]);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("C ABI tests passed\n");
  return 0;
}
