/* A C program that runs a kernel search with its own "model".
 *
 * The LLM callback below stands in for whatever model a host program has (a
 * local inference engine, a company endpoint): it receives each prompt and
 * answers with a candidate kernel. Here it answers from a fixed list of
 * host C++ matrix-multiply kernels, so the example runs anywhere, without a
 * GPU or a network.
 *
 *   search_with_callback [TASK_DIR] [RUN_DIR]
 *
 * TASK_DIR defaults to the matmul example task (examples/tasks/matmul).
 */
#include <stdio.h>
#include <string.h>

#include "ksearch/ksearch.h"

static const char *const kAnswers[] = {
    /* 1: a straightforward triple loop */
    "A simple kernel first.\n"
    "```cpp kernel.cpp\n"
    "#include <cstdint>\n"
    "void matmul(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {\n"
    "  for (int64_t i = 0; i < M; ++i)\n"
    "    for (int64_t j = 0; j < N; ++j) {\n"
    "      float acc = 0.f;\n"
    "      for (int64_t k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];\n"
    "      C[i * N + j] = acc;\n"
    "    }\n"
    "}\n"
    "```\n"
    "```json launch_plan\n"
    "{\"calls\": [{\"fn\": \"matmul\", \"args\": [\"A\", \"B\", \"C\", \"M\", \"N\", \"K\"]}]}\n"
    "```\n",
    /* 2: loop order i-k-j so the inner loop streams rows of B and C */
    "Reorder the loops so the innermost loop is contiguous.\n"
    "```cpp kernel.cpp\n"
    "#include <cstdint>\n"
    "void matmul(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {\n"
    "  for (int64_t i = 0; i < M; ++i) {\n"
    "    float* c = C + i * N;\n"
    "    for (int64_t j = 0; j < N; ++j) c[j] = 0.f;\n"
    "    for (int64_t k = 0; k < K; ++k) {\n"
    "      const float a = A[i * K + k];\n"
    "      const float* b = B + k * N;\n"
    "      for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];\n"
    "    }\n"
    "  }\n"
    "}\n"
    "```\n"
    "```json launch_plan\n"
    "{\"calls\": [{\"fn\": \"matmul\", \"args\": [\"A\", \"B\", \"C\", \"M\", \"N\", \"K\"]}]}\n"
    "```\n",
};

struct model_state {
  int answered;
};

/* The model: answers code prompts from the list, in turn. */
static int answer_prompt(const ks_llm_request *request, ks_llm_answer *answer, void *user_data) {
  struct model_state *state = (struct model_state *)user_data;
  const size_t n = sizeof kAnswers / sizeof kAnswers[0];
  const char *text;
  if (request->kind != KS_PROMPT_GENERATE && request->kind != KS_PROMPT_IMPROVE &&
      request->kind != KS_PROMPT_DEBUG)
    return 1; /* this model only writes code: use the greedy strategy */
  text = kAnswers[(size_t)state->answered % n];
  state->answered++;
  ks_llm_answer_set_usage(answer, (int64_t)strlen(request->prompt) / 4, (int64_t)strlen(text) / 4, 0.0);
  return ks_llm_answer_set_text(answer, text, strlen(text)) == KS_OK ? 0 : 1;
}

static int print_round(const ks_round_report *r, void *user_data) {
  (void)user_data;
  printf("round %d/%d: %-14s %8.4f ms   best %8.4f ms\n", r->round, r->max_rounds, ks_eval_status_name(r->status),
         r->latency_ms, r->best_latency_ms);
  return 0; /* keep going */
}

int main(int argc, char **argv) {
  ks_search_options options;
  ks_result *result = NULL;
  struct model_state state = {0};
  ks_status status;
  size_t i;

  if (ks_search_options_init(&options, KS_SEARCH_OPTIONS_VERSION) != KS_OK) {
    fprintf(stderr, "init: %s\n", ks_last_error_message());
    return 1;
  }
  options.task = argc > 1 ? argv[1] : KS_EXAMPLE_TASK_DIR;
  options.run_dir = argc > 2 ? argv[2] : NULL;
  options.language = KS_LANGUAGE_CPP;
  options.strategy = KS_STRATEGY_GREEDY;
  options.budget.max_rounds = 4;
  options.llm.source = KS_LLM_CALLBACK;
  options.llm.callback = answer_prompt;
  options.llm.user_data = &state;
  options.llm.model = "fixed-answers"; /* a label for the run folder */
  options.progress = print_round;
  options.eval.backend = KS_BACKEND_HOST;
  /* Any setting of the search's table by name (docs/options.md). */
  options.config_json = "{\"seed\": 7}";

  status = ks_search_run(&options, &result);
  if (status != KS_OK) {
    fprintf(stderr, "search failed: %s (%s)\n", ks_status_string(status), ks_last_error_message());
    ks_result_destroy(result);
    return 1;
  }
  printf("run folder: %s\n", ks_result_run_dir(result));
  if (ks_result_has_best(result)) {
    printf("best: %s, %.4f ms (%.2fx the reference)\n", ks_result_best_solution_id(result),
           ks_result_best_latency_ms(result), ks_result_best_speedup(result));
    for (i = 0; i < ks_result_source_count(result); ++i)
      printf("--- %s ---\n%s\n", ks_result_source_path(result, i), ks_result_source_content(result, i));
    printf("--- launch plan ---\n%s\n", ks_result_launch_plan_json(result));
  } else {
    printf("no candidate passed\n");
  }
  ks_result_destroy(result);
  return 0;
}
