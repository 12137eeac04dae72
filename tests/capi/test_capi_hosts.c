/* Hosts that bring their own parts, through the C ABI, compiled as strict C99:
 * - N prompts at once with parallel = N: the built-in OpenAI policy against
 *   the local test server (the server counts the requests in flight), and a
 *   batch callback that answers its N prompts on N threads of its own;
 * - the event callback: every event of events.jsonl, in order, as journalled;
 * - cancellation from another thread mid-request (an HTTP request the server
 *   never answers, and a command that would sleep an hour) and mid-evaluation
 *   (a kernel that never returns, with a run timeout of 150 s): each run ends
 *   well before its own limits, KS_E_CANCELLED, nothing of the cut call
 *   journalled, and the run resumes. The cancel comes once the call is seen
 *   under way (the request at the server, the command's mark, the worker
 *   spinning), not after a guessed time;
 * - evaluator callbacks: the host evaluates every candidate (single and batch).
 *
 *   test_capi_hosts TEST_SERVER TASK_DIR WORK_DIR
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ksearch/ksearch.h"

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                              \
    }                                                                          \
  } while (0)

static const char *g_server_program;
static const char *g_task;
static const char *g_work;

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

/* Never returns: only a kill ends the worker that runs it. */
static const char kHang[] =
    "```cpp kernel.cpp\n"
    "#include <cstdint>\n"
    "void scale3(const float* x, float* y, std::int64_t n) {\n"
    "  volatile int spin = 1;\n"
    "  while (spin) {}\n"
    "  for (std::int64_t i = 0; i < n; ++i) y[i] = 3.0f * x[i];\n"
    "}\n"
    "```\n"
    "```json launch_plan\n"
    "{\"calls\": [{\"fn\": \"scale3\", \"args\": [\"x\", \"y\", \"N\"]}]}\n"
    "```\n";

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void sleep_s(double s) {
  struct timespec t;
  t.tv_sec = (time_t)s;
  t.tv_nsec = (long)((s - (double)t.tv_sec) * 1e9);
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

static void path_join(char *out, size_t size, const char *dir, const char *name) {
  snprintf(out, size, "%s/%s", dir, name);
}

/* Lines in a file, 0 when it does not exist. */
static int count_lines(const char *path) {
  FILE *f = fopen(path, "r");
  int c, n = 0;
  if (!f) return 0;
  while ((c = fgetc(f)) != EOF)
    if (c == '\n') n++;
  fclose(f);
  return n;
}

/* Lines holding `needle`. */
static int count_lines_with(const char *path, const char *needle) {
  char line[1 << 16];
  int n = 0;
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  while (fgets(line, sizeof line, f))
    if (strstr(line, needle)) n++;
  fclose(f);
  return n;
}

static int file_contains(const char *path, const char *needle) {
  static char buf[1 << 20];
  size_t n;
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return strstr(buf, needle) != NULL;
}

/* ---- The local test server ---------------------------------------------- */

struct server {
  pid_t pid;
  FILE *out;
  char base_url[512];
  char log[1024];
};

/* Starts the OpenAI-compatible test server answering `default_json`. */
static int server_start(struct server *s, const char *default_json, const char *name) {
  int fds[2];
  char line[512];
  path_join(s->log, sizeof s->log, g_work, name);
  remove(s->log);
  if (pipe(fds) != 0) return 0;
  s->pid = fork();
  if (s->pid < 0) return 0;
  if (s->pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl(g_server_program, g_server_program, "--default", default_json, "--log", s->log, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  s->out = fdopen(fds[0], "r");
  if (!s->out || !fgets(line, sizeof line, s->out)) return 0;
  line[strcspn(line, "\n")] = 0;
  if (strncmp(line, "listening on ", 13) != 0) return 0;
  snprintf(s->base_url, sizeof s->base_url, "%s", line + 13);
  return 1;
}

/* Stops it; returns the most requests it had in flight at once (-1: unknown). */
static int server_stop(struct server *s) {
  char line[512];
  int served = -1, most = -1;
  kill(s->pid, SIGTERM);
  while (fgets(line, sizeof line, s->out))
    if (sscanf(line, "served %d requests, at most %d at once", &served, &most) == 2) break;
  fclose(s->out);
  waitpid(s->pid, NULL, 0);
  return most;
}

/* The server's default answer as --default JSON: `text`, held until `in_flight`
 * requests are in flight together (0: not held), or never sent if `never`. */
static void answer_json(char *out, size_t size, const char *text, int in_flight, int never) {
  size_t i, n = 0;
  n += (size_t)snprintf(out + n, size - n, "{\"wait_in_flight\": %d, %s\"text\": \"", in_flight,
                        never ? "\"wait_file\": \"/nonexistent/ks-test-never-created\", " : "");
  for (i = 0; text[i] && n + 8 < size; ++i) {
    if (text[i] == '"' || text[i] == '\\') {
      out[n++] = '\\';
      out[n++] = text[i];
    } else if (text[i] == '\n') {
      out[n++] = '\\';
      out[n++] = 'n';
    } else {
      out[n++] = text[i];
    }
  }
  snprintf(out + n, size - n, "\"}");
}

/* ---- Shared options ------------------------------------------------------------ */

static void base_options(ks_search_options *o, const char *run_name, char *run_dir, size_t size) {
  path_join(run_dir, size, g_work, run_name);
  CHECK(ks_search_options_init(o, KS_SEARCH_OPTIONS_VERSION) == KS_OK);
  o->task = g_task;
  o->run_dir = run_dir;
  o->language = KS_LANGUAGE_CPP;
  o->strategy = KS_STRATEGY_GREEDY;
  o->eval.backend = KS_BACKEND_HOST;
  o->eval.timing_cap_s = 0.2;
}

/* ---- N prompts at once --------------------------------------------------------- */

static void test_parallel_openai(void) {
  struct server srv;
  char def[4096], run_dir[1024];
  ks_search_options o;
  ks_result *r = NULL;
  ks_status s;
  int most;
  answer_json(def, sizeof def, kGood, 4, 0); /* each answer waits until all four are in flight */
  if (!server_start(&srv, def, "parallel-server.jsonl")) {
    CHECK(!"the test server did not start");
    return;
  }
  base_options(&o, "parallel_openai", run_dir, sizeof run_dir);
  o.parallel = 4;
  o.budget.max_rounds = 4;
  o.llm.source = KS_LLM_OPENAI;
  o.llm.model = "test-model";
  o.llm.base_url = srv.base_url;
  o.llm.max_concurrency = 4;
  o.llm.request_timeout_s = 120; /* fewer than four at once: held answers time out, the check below fails */
  o.llm.max_retries = 0;
  s = ks_search_run(&o, &r);
  if (s != KS_OK) fprintf(stderr, "parallel openai: %s\n", ks_last_error_message());
  CHECK(s == KS_OK);
  CHECK(ks_result_rounds(r) == 4);
  CHECK(ks_result_has_best(r));
  ks_result_destroy(r);
  most = server_stop(&srv);
  CHECK(count_lines_with(srv.log, "\"method\":\"POST\"") == 4); /* beside the GET /models before the first */
  CHECK(most == 4); /* all four prompts of the step were in flight together */
}

struct batch_state {
  int calls;
  int largest;
  pthread_barrier_t barrier; /* passed only when all four answering threads are alive */
  int barrier_ready;
};

struct answer_job {
  struct batch_state *state;
  ks_llm_answer *answer;
  int ok;
};

static void *answer_on_thread(void *arg) {
  struct answer_job *job = (struct answer_job *)arg;
  pthread_barrier_wait(&job->state->barrier);
  ks_llm_answer_set_usage(job->answer, 10, 20, 0.0);
  job->ok = ks_llm_answer_set_text(job->answer, kGood, strlen(kGood)) == KS_OK;
  return NULL;
}

static int batch_model(const ks_llm_request *requests, ks_llm_answer *const *answers, size_t count, void *user) {
  struct batch_state *st = (struct batch_state *)user;
  pthread_t threads[8];
  struct answer_job jobs[8];
  size_t i;
  st->calls++;
  if ((int)count > st->largest) st->largest = (int)count;
  if (count != 4) {
    for (i = 0; i < count; ++i) ks_llm_answer_set_text(answers[i], kGood, strlen(kGood));
    return 0;
  }
  for (i = 0; i < count; ++i) CHECK(requests[i].kind == KS_PROMPT_GENERATE || requests[i].kind == KS_PROMPT_IMPROVE);
  /* One thread per prompt: the answers are set concurrently, as a host with
   * an asynchronous client would. */
  for (i = 0; i < count; ++i) {
    jobs[i].state = st;
    jobs[i].answer = answers[i];
    jobs[i].ok = 0;
    pthread_create(&threads[i], NULL, answer_on_thread, &jobs[i]);
  }
  for (i = 0; i < count; ++i) pthread_join(threads[i], NULL);
  for (i = 0; i < count; ++i) CHECK(jobs[i].ok);
  return 0;
}

static void test_batch_callback(void) {
  char run_dir[1024];
  ks_search_options o;
  ks_result *r = NULL;
  ks_status s;
  struct batch_state st;
  memset(&st, 0, sizeof st);
  pthread_barrier_init(&st.barrier, NULL, 4);
  base_options(&o, "batch_callback", run_dir, sizeof run_dir);
  o.parallel = 4;
  o.budget.max_rounds = 8;
  o.llm.source = KS_LLM_BATCH_CALLBACK;
  o.llm.batch_callback = batch_model;
  o.llm.user_data = &st;
  s = ks_search_run(&o, &r);
  if (s != KS_OK) fprintf(stderr, "batch callback: %s\n", ks_last_error_message());
  CHECK(s == KS_OK);
  CHECK(st.calls == 2);   /* two steps of four */
  CHECK(st.largest == 4); /* parallel = 4: four prompts per call */
  CHECK(ks_result_rounds(r) == 8);
  CHECK(ks_result_has_best(r));
  ks_result_destroy(r);
  pthread_barrier_destroy(&st.barrier);
}

static int stop_batch(const ks_llm_request *requests, ks_llm_answer *const *answers, size_t count, void *user) {
  (void)requests;
  (void)answers;
  (void)count;
  (void)user;
  return KS_E_USER;
}

static void test_batch_stop(void) {
  char run_dir[1024];
  ks_search_options o;
  ks_result *r = NULL;
  base_options(&o, "batch_stop", run_dir, sizeof run_dir);
  o.parallel = 2;
  o.llm.source = KS_LLM_BATCH_CALLBACK;
  o.llm.batch_callback = stop_batch;
  CHECK(ks_search_run(&o, &r) == KS_E_CANCELLED);
  CHECK(r != NULL && ks_result_rounds(r) == 0);
  CHECK(strcmp(ks_result_stop_reason(r), "cancelled") == 0);
  ks_result_destroy(r);
}

/* ---- Events ------------------------------------------------------------------------- */

struct events {
  int count;
  int64_t next_seq;
  int in_order;
  int saw_started, saw_round, saw_evaluated, saw_finished, saw_llm;
  int json_ok;
};

static void on_event(const ks_event *e, void *user) {
  struct events *ev = (struct events *)user;
  char needle[64];
  ev->count++;
  if (e->seq != ev->next_seq) ev->in_order = 0;
  ev->next_seq = e->seq + 1;
  snprintf(needle, sizeof needle, "\"type\":\"%s\"", e->type);
  if (!strstr(e->json, needle) || e->json[0] != '{') ev->json_ok = 0;
  if (strcmp(e->type, "run_started") == 0) ev->saw_started = 1;
  if (strcmp(e->type, "round_started") == 0) ev->saw_round = 1;
  if (strcmp(e->type, "evaluated") == 0) ev->saw_evaluated = 1;
  if (strcmp(e->type, "run_finished") == 0) ev->saw_finished = 1;
  if (strcmp(e->type, "llm_call") == 0) ev->saw_llm = 1;
}

static int good_model(const ks_llm_request *req, ks_llm_answer *answer, void *user) {
  (void)req;
  (void)user;
  return ks_llm_answer_set_text(answer, kGood, strlen(kGood)) == KS_OK ? 0 : 1;
}

/* The good kernel with a comment that makes every answer a distinct candidate. */
static int varied_model(const ks_llm_request *req, ks_llm_answer *answer, void *user) {
  static int n = 0;
  char text[2048];
  const char *body = strstr(kGood, "#include");
  (void)req;
  (void)user;
  snprintf(text, sizeof text, "```cpp kernel.cpp\n// variant %d\n%s", ++n, body);
  return ks_llm_answer_set_text(answer, text, strlen(text)) == KS_OK ? 0 : 1;
}

static void test_events(void) {
  char run_dir[1024], events_file[1100];
  ks_search_options o;
  ks_result *r = NULL;
  struct events ev;
  memset(&ev, 0, sizeof ev);
  ev.in_order = 1;
  ev.json_ok = 1;
  base_options(&o, "events", run_dir, sizeof run_dir);
  o.budget.max_rounds = 2;
  o.llm.source = KS_LLM_CALLBACK;
  o.llm.callback = good_model;
  o.event = on_event;
  o.event_user_data = &ev;
  CHECK(ks_search_run(&o, &r) == KS_OK);
  ks_result_destroy(r);
  path_join(events_file, sizeof events_file, run_dir, "events.jsonl");
  CHECK(ev.count > 0);
  CHECK(ev.count == count_lines(events_file)); /* every journalled event, no other */
  CHECK(ev.in_order);
  CHECK(ev.json_ok);
  CHECK(ev.saw_started && ev.saw_llm && ev.saw_round && ev.saw_evaluated && ev.saw_finished);
}

/* ---- Cancellation ------------------------------------------------------------------- */

struct canceller {
  ks_cancel_token *token;
  const char *wait_for_file;   /* cancel once this file has a line (NULL: do not wait for it) */
  int (*ready)(void *);        /* or once this says so */
  void *ready_arg;
  double delay_s;              /* then wait this long */
  double cancelled_at;
  int gave_up;                 /* the condition never came (a safety net, checked by the tests) */
};

static void *cancel_later(void *arg) {
  struct canceller *c = (struct canceller *)arg;
  double give_up = now_s() + 240;
  for (;;) {
    if (c->wait_for_file && count_lines(c->wait_for_file) > 0) break;
    if (c->ready && c->ready(c->ready_arg)) break;
    if (!c->wait_for_file && !c->ready) break;
    if (now_s() > give_up) {
      c->gave_up = 1;
      break;
    }
    sleep_s(0.02);
  }
  sleep_s(c->delay_s);
  c->cancelled_at = now_s();
  ks_cancel_token_cancel(c->token);
  return NULL;
}

/* Runs `o` while `c` cancels it from another thread; returns the seconds
 * from the cancel to ks_search_run's return. */
static double run_cancelled(ks_search_options *o, struct canceller *c, ks_result **r, ks_status *status) {
  pthread_t t;
  CHECK(ks_cancel_token_create(&c->token) == KS_OK);
  o->cancel = c->token;
  pthread_create(&t, NULL, cancel_later, c);
  *status = ks_search_run(o, r);
  {
    double returned = now_s();
    pthread_join(t, NULL);
    CHECK(ks_cancel_token_is_cancelled(c->token));
    ks_cancel_token_destroy(c->token);
    o->cancel = NULL;
    return returned - c->cancelled_at;
  }
}

static void test_cancel_http(void) {
  struct server srv;
  char def[4096], run_dir[1024], path[1100];
  ks_search_options o;
  ks_resume_options ro;
  ks_result *r = NULL;
  ks_status s;
  struct canceller c;
  double took;
  answer_json(def, sizeof def, kGood, 0, 1); /* never answered */
  if (!server_start(&srv, def, "cancel-server.jsonl")) {
    CHECK(!"the test server did not start");
    return;
  }
  base_options(&o, "cancel_http", run_dir, sizeof run_dir);
  o.budget.max_rounds = 3;
  /* The cancel must meet the round's request, not the weak-check detection
   * that runs between the endpoint's check and the first round. */
  o.weak_check = 0;
  o.llm.source = KS_LLM_OPENAI;
  o.llm.model = "test-model";
  o.llm.base_url = srv.base_url;
  o.llm.request_timeout_s = 120; /* without the cancel: a failed round after 120 s */
  o.llm.max_retries = 0;
  memset(&c, 0, sizeof c);
  c.wait_for_file = srv.log; /* the request reached the server */
  c.delay_s = 0.2;
  took = run_cancelled(&o, &c, &r, &s);
  fprintf(stderr, "cancel mid-request (HTTP): returned %.2f s after the cancel\n", took);
  CHECK(!c.gave_up);
  CHECK(s == KS_E_CANCELLED);
  CHECK(took < 60); /* the cancel cut the request: the timeout would take 120 s */
  CHECK(r != NULL && ks_result_rounds(r) == 0);
  CHECK(strcmp(ks_result_stop_reason(r), "cancelled") == 0);
  ks_result_destroy(r);
  server_stop(&srv);
  path_join(path, sizeof path, run_dir, "transcript.jsonl");
  CHECK(count_lines(path) == 0); /* the cut request is not journalled */
  path_join(path, sizeof path, run_dir, "events.jsonl");
  CHECK(file_contains(path, "cancel_requested"));

  /* The run folder resumes, with another model. */
  CHECK(ks_resume_options_init(&ro, KS_RESUME_OPTIONS_VERSION) == KS_OK);
  o.llm.source = KS_LLM_CALLBACK;
  o.llm.callback = good_model;
  ro.llm = &o.llm;
  r = NULL;
  s = ks_search_resume(run_dir, &ro, &r);
  if (s != KS_OK) fprintf(stderr, "resume after cancel: %s\n", ks_last_error_message());
  CHECK(s == KS_OK);
  CHECK(ks_result_rounds(r) == 3);
  ks_result_destroy(r);
}

static void test_cancel_command(void) {
  char run_dir[1024], mark[1100], script[1300];
  const char *argv[] = {"sh", "-c", script};
  ks_search_options o;
  ks_result *r = NULL;
  ks_status s;
  struct canceller c;
  double took;
  base_options(&o, "cancel_command", run_dir, sizeof run_dir);
  path_join(mark, sizeof mark, g_work, "cancel-command-started");
  remove(mark);
  /* Marks that it runs, then would sleep an hour. */
  snprintf(script, sizeof script, "echo started > '%s'; exec sleep 3600", mark);
  o.budget.max_rounds = 1;
  o.llm.source = KS_LLM_COMMAND;
  o.llm.command_argv = argv;
  o.llm.command_argc = 3;
  o.llm.command_timeout_s = 120; /* without the cancel: a failed round after 120 s */
  memset(&c, 0, sizeof c);
  c.wait_for_file = mark; /* the command is running */
  c.delay_s = 0.2;
  took = run_cancelled(&o, &c, &r, &s);
  fprintf(stderr, "cancel mid-request (command): returned %.2f s after the cancel\n", took);
  CHECK(!c.gave_up);
  CHECK(s == KS_E_CANCELLED);
  CHECK(count_lines(mark) == 1); /* cancelled while the command ran, not before it started */
  CHECK(took < 60);
  CHECK(r != NULL && ks_result_rounds(r) == 0);
  ks_result_destroy(r);
}

struct hang_state {
  volatile int answered; /* the LLM call is journalled: the evaluation comes next */
};

static int hang_model(const ks_llm_request *req, ks_llm_answer *answer, void *user) {
  (void)req;
  (void)user;
  return ks_llm_answer_set_text(answer, kHang, strlen(kHang)) == KS_OK ? 0 : 1;
}

static void on_hang_event(const ks_event *e, void *user) {
  struct hang_state *h = (struct hang_state *)user;
  if (strcmp(e->type, "llm_call") == 0) h->answered = 1;
}

/* CPU time, in clock ticks, of the live processes below this one whose command
 * line holds "--role" "run" or "candidate": the evaluator's run worker and the
 * process a host candidate runs in, sandboxed or not. */
static long run_worker_ticks(void) {
  enum { kMax = 8192 };
  static int pid[kMax], ppid[kMax], worker[kMax];
  static long ticks[kMax];
  int n = 0, i, p, hops;
  long total = 0;
  DIR *d = opendir("/proc");
  struct dirent *e;
  if (!d) return 0;
  while ((e = readdir(d)) != NULL && n < kMax) {
    char path[300], buf[4096], state;
    const char *close;
    unsigned long ut = 0, st = 0;
    size_t len, k;
    FILE *f;
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    if (!(f = fopen(path, "r"))) continue;
    len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    close = strrchr(buf, ')');
    if (!close || sscanf(close + 2, "%c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &state, &ppid[n], &ut, &st) != 4 ||
        state == 'Z')
      continue;
    pid[n] = atoi(e->d_name);
    ticks[n] = (long)(ut + st);
    worker[n] = 0;
    snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
    if ((f = fopen(path, "r")) != NULL) {
      len = fread(buf, 1, sizeof buf - 1, f);
      fclose(f);
      for (k = 0; k + 1 < len; k += strlen(buf + k) + 1)
        if (strcmp(buf + k, "--role") == 0 && k + 7 < len &&
            (strcmp(buf + k + 7, "run") == 0 || strcmp(buf + k + 7, "candidate") == 0))
          worker[n] = 1;
    }
    n++;
  }
  closedir(d);
  for (i = 0; i < n; ++i) {
    if (!worker[i]) continue;
    for (p = ppid[i], hops = 0; p > 1 && hops < 64; ++hops) { /* up the parents to this process */
      int j;
      if (p == (int)getpid()) {
        total += ticks[i];
        break;
      }
      for (j = 0; j < n && pid[j] != p; ++j) {
      }
      if (j == n) break;
      p = ppid[j];
    }
  }
  return total;
}

/* The hanging candidate is running: its LLM call is journalled and the run
 * worker has spent half a second of CPU (loading it takes a fraction of that). */
static int hang_spinning(void *arg) {
  struct hang_state *h = (struct hang_state *)arg;
  return h->answered && run_worker_ticks() >= sysconf(_SC_CLK_TCK) / 2;
}

static void test_cancel_evaluation(void) {
  char run_dir[1024], path[1100];
  ks_search_options o;
  ks_result *r = NULL;
  ks_status s;
  struct canceller c;
  struct hang_state h;
  double took;

  /* First the hanging kernel times out after a second: this compiles it,
   * so in the run below the worker is running it, not compiling. */
  base_options(&o, "hang_warmup", run_dir, sizeof run_dir);
  o.budget.max_rounds = 1;
  o.eval.run_timeout_s = 1;
  o.llm.source = KS_LLM_CALLBACK;
  o.llm.callback = hang_model;
  CHECK(ks_search_run(&o, &r) == KS_OK);
  CHECK(r != NULL && !ks_result_has_best(r));
  ks_result_destroy(r);
  r = NULL;

  memset(&h, 0, sizeof h);
  base_options(&o, "cancel_evaluation", run_dir, sizeof run_dir);
  o.budget.max_rounds = 2;
  o.eval.run_timeout_s = 150; /* only a kill ends it early */
  o.llm.source = KS_LLM_CALLBACK;
  o.llm.callback = hang_model;
  o.event = on_hang_event;
  o.event_user_data = &h;
  memset(&c, 0, sizeof c);
  c.ready = hang_spinning;
  c.ready_arg = &h;
  took = run_cancelled(&o, &c, &r, &s);
  fprintf(stderr, "cancel mid-evaluation: returned %.2f s after the cancel\n", took);
  CHECK(!c.gave_up); /* cancelled while the kernel spun */
  CHECK(s == KS_E_CANCELLED);
  CHECK(took < 60); /* a kill, not the run timeout (150 s) */
  CHECK(r != NULL && ks_result_rounds(r) == 0); /* the cut evaluation is not a round */
  ks_result_destroy(r);
  path_join(path, sizeof path, run_dir, "attempts.jsonl");
  CHECK(count_lines(path) == 0); /* nor journalled */
}

/* ---- Evaluator callbacks ------------------------------------------------------------ */

struct host_eval {
  ks_evaluator *evaluator;
  ks_task *task;
  int calls;
  int batch_calls;
  int largest_batch;
  double last_latency;
  const ks_eval_request *stale; /* a request kept past its callback */
};

/* Evaluates with an evaluator of the host's own (here: another libksearch
 * evaluator; a multi-machine host would send the request elsewhere). */
static int evaluate_here(const ks_eval_request *req, ks_eval_answer *answer, void *user) {
  struct host_eval *h = (struct host_eval *)user;
  char *json = NULL;
  const char *lat;
  h->calls++;
  CHECK(strcmp(req->task_name, "tests/scale3") == 0);
  CHECK(strstr(req->task_json, "\"workloads\"") != NULL);
  CHECK(strstr(req->solution_json, "scale3") != NULL);
  CHECK(req->language == KS_LANGUAGE_CPP);
  /* What the library wants of this evaluation: the workloads and the rest. */
  CHECK(ks_eval_request_options_json(req) != NULL);
  CHECK(strstr(ks_eval_request_options_json(req), "\"only_workloads\"") != NULL);
  CHECK(strstr(ks_eval_request_options_json(req), "\"seeds_per_workload\"") != NULL);
  CHECK(strstr(ks_eval_request_options_json(req), "\"timing\":\"default\"") != NULL); /* by name, as before */
  h->stale = req;
  if (ks_evaluate(h->evaluator, h->task, req->solution_json, &json) != KS_OK) return 1;
  lat = strstr(json, "\"latency_ms\": ");
  if (lat) h->last_latency = atof(lat + 14);
  CHECK(ks_eval_answer_set_json(answer, json) == KS_OK);
  ks_string_free(json);
  return 0;
}

/* A "remote" verdict: every candidate passes at 2.5 ms (the reference: 5 ms). */
static int evaluate_remote(const ks_eval_request *requests, ks_eval_answer *const *answers, size_t count,
                           void *user) {
  struct host_eval *h = (struct host_eval *)user;
  size_t i;
  h->batch_calls++;
  if ((int)count > h->largest_batch) h->largest_batch = (int)count;
  for (i = 0; i < count; ++i) {
    CHECK(strlen(requests[i].solution_id) == 16);
    CHECK(ks_eval_request_options_json(&requests[i]) != NULL);
    CHECK(ks_eval_answer_set_result(answers[i], KS_EVAL_PASSED, 0, 0, NULL) == KS_E_INVALID_ARGUMENT);
    CHECK(ks_eval_answer_set_result(answers[i], KS_EVAL_PASSED, 2.5, 5.0, NULL) == KS_OK);
  }
  return 0;
}

static int evaluate_stop(const ks_eval_request *req, ks_eval_answer *answer, void *user) {
  (void)req;
  (void)answer;
  (void)user;
  return KS_E_USER;
}

static int evaluate_broken(const ks_eval_request *req, ks_eval_answer *answer, void *user) {
  (void)req;
  (void)answer;
  (void)user;
  return 3;
}

static void test_evaluator_callbacks(void) {
  char run_dir[1024];
  ks_search_options o;
  ks_eval_options eo;
  ks_result *r = NULL;
  ks_status s;
  struct host_eval h;
  memset(&h, 0, sizeof h);
  CHECK(ks_task_load(g_task, &h.task) == KS_OK);
  CHECK(ks_eval_options_init(&eo, KS_EVAL_OPTIONS_VERSION) == KS_OK);
  eo.backend = KS_BACKEND_HOST;
  eo.timing_cap_s = 0.2;
  CHECK(ks_evaluator_create(&eo, &h.evaluator) == KS_OK);

  base_options(&o, "eval_callback", run_dir, sizeof run_dir);
  o.budget.max_rounds = 2;
  o.llm.source = KS_LLM_CALLBACK;
  o.llm.callback = good_model;
  o.eval.callback = evaluate_here;
  o.eval.user_data = &h;
  o.eval.callback_device_json = "{\"backend\": \"host\", \"name\": \"the host's own evaluator\"}";
  s = ks_search_run(&o, &r);
  if (s != KS_OK) fprintf(stderr, "evaluator callback: %s\n", ks_last_error_message());
  CHECK(s == KS_OK);
  CHECK(h.calls == 1); /* the same code twice is evaluated once */
  CHECK(h.stale != NULL && ks_eval_request_options_json(h.stale) == NULL); /* only during the callback */
  CHECK(ks_eval_request_options_json(NULL) == NULL);
  CHECK(ks_result_has_best(r));
  CHECK(ks_result_best_latency_ms(r) == h.last_latency);
  CHECK(strstr(ks_result_json(r), "the host's own evaluator") != NULL);
  ks_result_destroy(r);
  r = NULL;

  base_options(&o, "eval_batch_callback", run_dir, sizeof run_dir);
  o.parallel = 3;
  o.budget.max_rounds = 3;
  o.llm.source = KS_LLM_CALLBACK;
  o.llm.callback = varied_model;
  o.eval.batch_callback = evaluate_remote;
  o.eval.user_data = &h;
  s = ks_search_run(&o, &r);
  if (s != KS_OK) fprintf(stderr, "evaluator batch callback: %s\n", ks_last_error_message());
  CHECK(s == KS_OK);
  CHECK(h.batch_calls == 1);
  CHECK(h.largest_batch == 3); /* parallel = 3: the three candidates of the step in one call */
  CHECK(ks_result_best_latency_ms(r) == 2.5);
  CHECK(ks_result_best_speedup(r) == 2.0);
  ks_result_destroy(r);
  r = NULL;

  base_options(&o, "eval_callback_stop", run_dir, sizeof run_dir);
  o.llm.source = KS_LLM_CALLBACK;
  o.llm.callback = good_model;
  o.eval.callback = evaluate_stop;
  CHECK(ks_search_run(&o, &r) == KS_E_CANCELLED);
  CHECK(r != NULL && ks_result_rounds(r) == 0);
  ks_result_destroy(r);
  r = NULL;

  base_options(&o, "eval_callback_broken", run_dir, sizeof run_dir);
  o.llm.source = KS_LLM_CALLBACK;
  o.llm.callback = good_model;
  o.eval.callback = evaluate_broken;
  CHECK(ks_search_run(&o, &r) == KS_E_SUBPROCESS);
  CHECK(r == NULL);
  CHECK(strstr(ks_last_error_message(), "evaluator callback failed (it returned 3)") != NULL);

  ks_evaluator_destroy(h.evaluator);
  ks_task_destroy(h.task);
}

static void timed(const char *name, void (*test)(void)) {
  double start = now_s();
  test();
  fprintf(stderr, "%-40s %6.2f s\n", name, now_s() - start);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: test_capi_hosts TEST_SERVER TASK_DIR WORK_DIR\n");
    return 2;
  }
  g_server_program = argv[1];
  g_task = argv[2];
  g_work = argv[3];
  mkdir(g_work, 0755);
  signal(SIGPIPE, SIG_IGN);
  timed("parallel requests (OpenAI policy)", test_parallel_openai);
  timed("batch callback", test_batch_callback);
  timed("batch callback stops the run", test_batch_stop);
  timed("events", test_events);
  timed("cancel mid-request (HTTP)", test_cancel_http);
  timed("cancel mid-request (command)", test_cancel_command);
  timed("cancel mid-evaluation", test_cancel_evaluation);
  timed("evaluator callbacks", test_evaluator_callbacks);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("C ABI host tests passed\n");
  return 0;
}
