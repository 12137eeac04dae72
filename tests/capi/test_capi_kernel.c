/* Loading found kernels through the C ABI, compiled as C99, without a GPU:
 * NVRTC compiles every parameter set of a solution (tests/fixtures/kernels/
 * softmax_variants.json: three plan shapes by row width, per-shape BLOCK
 * values) and ks_kernel_resolve shows what a launch would do for given
 * dimensions. Launching is tested on a GPU (test_kernel_gpu) and against
 * the fake driver (test_host_kernel).
 *
 *   test_capi_kernel SOURCE_DIR CACHE_DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ksearch/ksearch.h"

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                              \
    }                                                                          \
  } while (0)

static char g_task[4096], g_solution[4096];
static const char *g_cache;

/* The plan for R x C (and, when not NULL, the workload whose values to use), as JSON; NULL on failure. */
static char *resolve(ks_kernel *k, long long rows, long long cols, const char *workload) {
  ks_kernel_dim dims[2];
  ks_kernel_launch_args a;
  char *json = NULL;
  dims[0].name = "R";
  dims[0].value = rows;
  dims[1].name = "C";
  dims[1].value = cols;
  CHECK(ks_kernel_launch_args_init(&a, KS_KERNEL_LAUNCH_ARGS_VERSION) == KS_OK);
  a.dims = dims;
  a.dim_count = 2;
  a.workload = workload;
  if (ks_kernel_resolve(k, &a, &json) != KS_OK) {
    fprintf(stderr, "resolve %lld x %lld: %s\n", rows, cols, ks_last_error_message());
    return NULL;
  }
  return json;
}

static int has(const char *json, const char *needle) {
  if (json && strstr(json, needle)) return 1;
  fprintf(stderr, "missing %s in %s\n", needle, json ? json : "(null)");
  return 0;
}

static void load_options(ks_kernel_load_options *o) {
  CHECK(ks_kernel_load_options_init(o, KS_KERNEL_LOAD_OPTIONS_VERSION) == KS_OK);
  CHECK(o->load_module == 1);
  o->load_module = 0; /* no GPU here: compile and resolve only */
  o->cuda_arch = "sm_90a";
  o->cache_dir = g_cache;
  o->task = g_task;
}

static void test_resolve(void) {
  ks_kernel_load_options o;
  ks_kernel *k = NULL;
  char *p;
  load_options(&o);
  o.solution_path = g_solution;
  CHECK(ks_kernel_load(&o, &k) == KS_OK);
  if (!k) {
    fprintf(stderr, "ks_kernel_load: %s\n", ks_last_error_message());
    return;
  }
  CHECK(ks_kernel_module_count(k) == 3); /* BLOCK 256 (values), 512 and 128 (per workload) */
  CHECK(strcmp(ks_kernel_arch(k), "sm_90a") == 0);
  CHECK(strcmp(ks_kernel_task(k), "examples/softmax") == 0);
  CHECK(strlen(ks_kernel_solution_id(k)) == 16);
  CHECK(ks_kernel_dim_count(k) == 2 && strcmp(ks_kernel_dim_name(k, 1), "C") == 0);
  CHECK(ks_kernel_tensor_count(k) == 2);
  CHECK(strcmp(ks_kernel_tensor_name(k, 0), "x") == 0 && !ks_kernel_tensor_is_output(k, 0));
  CHECK(strcmp(ks_kernel_tensor_name(k, 1), "y") == 0 && ks_kernel_tensor_is_output(k, 1));
  CHECK(strcmp(ks_kernel_tensor_dtype(k, 1), "f32") == 0);
  CHECK(strstr(ks_kernel_launch_plan_json(k), "softmax_given_max") != NULL);
  CHECK(strstr(ks_kernel_params_json(k), "per_workload") != NULL);

  /* Narrow rows: the first variant, one warp per row. */
  p = resolve(k, 4096, 1024, NULL);
  CHECK(has(p, "\"variant\":0"));
  CHECK(has(p, "\"workload\":null")); /* r4096_c1024 has no values of its own */
  CHECK(has(p, "\"params\":{\"BLOCK\":256}"));
  CHECK(has(p, "\"kernel\":\"softmax_warp\""));
  CHECK(has(p, "\"grid\":[512,1,1]"));
  CHECK(has(p, "\"block\":[256,1,1]"));
  ks_string_free(p);

  /* Wide rows: the second variant, two kernels and a scratch buffer, BLOCK
   * from the workload of this shape (r256_c32768). */
  p = resolve(k, 256, 32768, NULL);
  CHECK(has(p, "\"variant\":1"));
  CHECK(has(p, "\"workload\":\"r256_c32768\""));
  CHECK(has(p, "\"params\":{\"BLOCK\":512}"));
  CHECK(has(p, "\"kernel\":\"row_max\""));
  CHECK(has(p, "\"kernel\":\"softmax_given_max\""));
  CHECK(has(p, "\"block\":[512,1,1]"));
  CHECK(has(p, "\"scratch\":[{\"name\":\"rmax\",\"bytes\":1024}]"));
  ks_string_free(p);

  /* The top-level plan, with the values tuned for r1024_c8192. */
  p = resolve(k, 1024, 8192, NULL);
  CHECK(has(p, "\"variant\":-1"));
  CHECK(has(p, "\"workload\":\"r1024_c8192\""));
  CHECK(has(p, "\"grid\":[1024,1,1]"));
  CHECK(has(p, "\"block\":[128,1,1]"));
  ks_string_free(p);

  /* A shape no workload has: the solution's own values. */
  p = resolve(k, 7, 3000, NULL);
  CHECK(has(p, "\"variant\":-1"));
  CHECK(has(p, "\"workload\":null"));
  CHECK(has(p, "\"block\":[256,1,1]"));
  ks_string_free(p);

  /* A workload named explicitly: its values at any shape. */
  p = resolve(k, 7, 3000, "r1024_c8192");
  CHECK(has(p, "\"block\":[128,1,1]"));
  CHECK(has(p, "\"grid\":[7,1,1]"));
  ks_string_free(p);

  /* What does not fit is named. */
  CHECK(resolve(k, 7, 3000, "no_such_workload") == NULL);
  CHECK(strstr(ks_last_error_message(), "no workload \"no_such_workload\"") != NULL);
  {
    ks_kernel_dim dims[1];
    ks_kernel_dim twice[3];
    ks_kernel_launch_args a;
    char *json = NULL;
    ks_kernel_launch_args_init(&a, KS_KERNEL_LAUNCH_ARGS_VERSION);
    dims[0].name = "R";
    dims[0].value = 4;
    a.dims = dims;
    a.dim_count = 1;
    CHECK(ks_kernel_resolve(k, &a, &json) == KS_E_INVALID_ARGUMENT);
    CHECK(strstr(ks_last_error_message(), "dimension \"C\" is missing") != NULL);
    twice[0] = dims[0];
    twice[1].name = "C";
    twice[1].value = 3;
    twice[2].name = "N";
    twice[2].value = 3;
    a.dims = twice;
    a.dim_count = 3;
    CHECK(ks_kernel_resolve(k, &a, &json) == KS_E_INVALID_ARGUMENT);
    CHECK(strstr(ks_last_error_message(), "no dimension \"N\"") != NULL);
    a.dim_count = 2;
    CHECK(ks_kernel_launch(k, &a) == KS_E_STATE); /* compiled only: nothing to launch */
    CHECK(strstr(ks_last_error_message(), "load_module") != NULL);
    a.version = 5;
    CHECK(ks_kernel_resolve(k, &a, &json) == KS_E_VERSION);
    CHECK(json == NULL);
  }
  ks_kernel_destroy(k);
}

static void test_load_errors(void) {
  ks_kernel_load_options o;
  ks_kernel *k = (ks_kernel *)&o;
  load_options(&o);
  CHECK(ks_kernel_load(&o, &k) == KS_E_INVALID_ARGUMENT); /* no source */
  CHECK(k == NULL);
  CHECK(strstr(ks_last_error_message(), "exactly one") != NULL);
  o.solution_path = g_solution;
  o.run_dir = "/nonexistent";
  CHECK(ks_kernel_load(&o, &k) == KS_E_INVALID_ARGUMENT);
  o.run_dir = NULL;
  o.task = NULL;
  CHECK(ks_kernel_load(&o, &k) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "task") != NULL);
  o.task = g_task;
  o.cuda_arch = NULL; /* compile-only needs the architecture */
  CHECK(ks_kernel_load(&o, &k) == KS_E_INVALID_ARGUMENT);
  CHECK(strstr(ks_last_error_message(), "architecture") != NULL);
  o.cuda_arch = "sm_90a";

  /* A kernel that does not compile: NVRTC's words in the message. */
  o.solution_path = NULL;
  o.solution_json =
      "```cuda kernel.cu\n"
      "extern \"C\" __global__ void softmax_rows(const float* x, float* y, int R, int C) { y[0] = undeclared; }\n"
      "```\n"
      "```json launch_plan\n"
      "{\"kernels\": [{\"name\": \"softmax_rows\", \"grid\": [\"R\"], \"block\": [32], \"args\": [\"x\", \"y\", \"R\", \"C\"]}]}\n"
      "```\n";
  CHECK(ks_kernel_load(&o, &k) == KS_E_COMPILE);
  CHECK(strstr(ks_last_error_message(), "undeclared") != NULL);
  CHECK(k == NULL);

  /* A plan naming a kernel the module does not have. */
  o.solution_json =
      "```cuda kernel.cu\n"
      "extern \"C\" __global__ void softmax_rows(const float* x, float* y, int R, int C) {}\n"
      "```\n"
      "```json launch_plan\n"
      "{\"kernels\": [{\"name\": \"softmax_fast\", \"grid\": [\"R\"], \"block\": [32], \"args\": [\"x\", \"y\", \"R\", \"C\"]}]}\n"
      "```\n";
  CHECK(ks_kernel_load(&o, &k) == KS_E_COMPILE);
  CHECK(strstr(ks_last_error_message(), "softmax_fast") != NULL);
  ks_kernel_destroy(NULL);
}

int main(int argc, char **argv) {
  ks_kernel_load_options probe;
  ks_kernel *k = NULL;
  ks_status s;
  if (argc != 3) {
    fprintf(stderr, "usage: test_capi_kernel SOURCE_DIR CACHE_DIR\n");
    return 2;
  }
  snprintf(g_task, sizeof g_task, "%s/examples/tasks/softmax", argv[1]);
  snprintf(g_solution, sizeof g_solution, "%s/tests/fixtures/kernels/softmax_variants.json", argv[1]);
  g_cache = argv[2];
  /* Without NVRTC there is nothing to compile with: say so and skip. */
  load_options(&probe);
  probe.solution_path = g_solution;
  s = ks_kernel_load(&probe, &k);
  ks_kernel_destroy(k);
  if (s == KS_E_NO_DEVICE) {
    printf("skipped: %s\n", ks_last_error_message());
    return 0;
  }
  test_resolve();
  test_load_errors();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("C ABI kernel tests passed\n");
  return 0;
}
