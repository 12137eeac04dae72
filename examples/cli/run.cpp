// ksearch run / ksearch resume.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "args.hpp"
#include "commands.hpp"
#include "exit_codes.hpp"
#include "interrupt.hpp"
#include "search_cli.hpp"
#include "ksearch/error.hpp"
#include "ksearch/search.hpp"
#include "ksearch/tasks.hpp"
#include "report.hpp"

namespace ks::cli {

namespace {

std::vector<OptionSpec> search_options() {
  std::vector<OptionSpec> out = {
      {"task", "NAME|PATH", "Built-in task (see `ksearch tasks`) or a task file / folder.", "", false},
      {"kernelbench", "DIR", "A KernelBench checkout: kernelbench/levelN/... tasks are its problems, run by a PyTorch "
                             "reference oracle (sets $KSEARCH_KERNELBENCH).", "$KSEARCH_KERNELBENCH", false},
      {"model", "NAME", "Model name sent to the endpoint (e.g. gpt-5.2, gemini-3-pro-preview).", "", false},
      {"base-url", "URL", "OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 for a local server.",
       "https://api.openai.com/v1", false},
      {"llm", "SPEC", "Who answers prompts: openai (an HTTP endpoint), replay:TRANSCRIPT (recorded answers; the "
                      "candidates are measured again, see --on-divergence; `ksearch replay` reproduces a run "
                      "folder exactly), command:PROGRAM ARGS (prompt on stdin, answer on stdout) or offline (no "
                      "model; with --strategy tune).", "openai", false},
      {"on-divergence", "stop|skip", "With --llm replay: where the search asks for another kind of answer than the "
                                     "transcript holds next (a decision went another way on this machine's "
                                     "timings): stop says where and why and stops the run (exit 5); skip answers "
                                     "each request with the next recorded answer of the kind asked, never using "
                                     "the ones passed over, and stops when none is left.", "stop", false},
      {"language", "cuda|cpp|triton|python",
       "Kernel language: cuda (NVRTC + launch plan, needs a GPU), cpp (host C++ kernels, runs anywhere), triton "
       "(a Python module with Triton kernels, needs a GPU) or python (PyTorch operations, on the GPU or the CPU); "
       "Python candidates run under $KSEARCH_PYTHON (docs/python-candidates.md).",
       "the task's only language; cuda for a task with several", false},
      {"strategy", "NAME", "world_model (K-Search), greedy (refine the best kernel), evolve (islands, migration "
                           "and an elite archive, as OpenEvolve and ShinkaEvolve) or tune (parameter search without "
                           "an LLM).", "world_model", false},
      {"continue-from-solution", "SOLUTION|RUN",
       "Start the world-model search from this kernel (a solution file, an answer, an attempt folder or a run "
       "folder's best): where a run folder recorded its evaluation for this task on this device, that evaluation "
       "is used, else the kernel is evaluated again in round 1; when it passes it is attached to the world model's "
       "root and is the best so far (K-Search's flag).", "", false},
      {"continue-from-world-model", "FILE|RUN|auto",
       "Start the world-model search from another run's tree instead of asking for a new one: a run folder (its "
       "latest tree and the kernels in it), a snapshot (RUN/world_model/vNNNNNN.json), K-Search's "
       "world_model.json (with the solution_db.jsonl beside it), or auto: the latest run of the same task beside "
       "this run's folder (K-Search's flag).", "", false},
      {"run-dir", "DIR", "Run folder (must not hold a run).", "runs/<task>-<UTC time>", false},
      {"api", "chat|responses", "OpenAI API: chat (Chat Completions, every compatible server) or responses "
                                "(Responses API, for reasoning models).", "chat", false},
      {"reasoning-effort", "LEVEL", "Reasoning effort for the Responses API (low, medium, high).", "", false},
      {"api-key-env", "NAME", "Environment variable holding the API key (KSEARCH_API_KEY is tried next).",
       "OPENAI_API_KEY", false},
      {"temperature", "T", "Sampling temperature (not sent when unset).", "", false},
      {"max-output-tokens", "N", "Cap on output tokens per answer.", "the server's", false},
      {"header", "'NAME: VALUE'", "Extra HTTP header for every request.", "", true},
      {"request-timeout", "S", "Seconds per HTTP attempt.", "900", false},
      {"llm-timeout", "S", "With --llm command: seconds the program may take for one answer; past them it is "
                           "killed and the answer is a failed generation.", "600", false},
      {"connect-timeout", "S", "Seconds to connect.", "15", false},
      {"proxy", "URL", "HTTP(S) proxy.", "libcurl's (https_proxy)", false},
      {"max-retries", "N", "Retries on 429, 5xx, timeouts and dropped connections.", "8", false},
      {"max-concurrency", "N", "LLM requests in flight at once (with --llm command: programs running at once, "
                               "default 1).", "4", false},
      {"price-file", "FILE", "JSON price table overriding the built-in one.", "", false},
      {"backend", "auto|cuda|host", "Evaluation backend.", "auto", false},
      {"device", "N", "GPU ordinal to evaluate on.", "all visible", true},
      {"in-process", "", "Run kernels in this process instead of isolated workers (trusted code only).", "", false},
      {"cache-dir", "DIR", "Compiled kernels and reference outputs.", "~/.cache/ksearch", false},
      {"cuda-arch", "ARCH", "NVRTC target, e.g. sm_90a.", "the device's", false},
      {"sandbox", "auto|on|off", "Confine candidates and their compilers with bubblewrap (see docs/security.md): "
                                 "auto uses it where it works and warns where not; on refuses to run without it.",
       "auto", false},
      {"memory-limit", "SIZE", "Address-space limit of the worker that runs host (cpp) candidates, e.g. 8G; a "
                               "candidate that reaches it ends as memory_limit.", "half the RAM", false},
      {"timing-cap", "S", "Longest time spent timing one benchmark workload; repetitions stop earlier once the "
                          "standard error of the mean is below 0.1 %.", "2", false},
      {"seeds", "N", "Input seeds checked per workload before timing (2 to 64).", "2", false},
      {"baseline-latencies", "FILE", "Baseline latencies per card, {\"<device>\": {\"<workload>\": ms}}, for tasks "
                                     "scored against a baseline (instead of measuring its baseline solution).", "",
       false},
      {"no-weak-check", "", "Skip the weak-check detection: before the first LLM request, a few candidates that "
                            "do not compute the task (zeros, ones, an input echoed, the task's weakened references) "
                            "are checked on the feedback workloads, and one that passes is a warning and a "
                            "\"weak_check\" record in manifest.json (see `ksearch tasks --check`).", "", false},
      {"quiet", "", "Print only the final summary (with --json: nothing but the JSON).", "", false},
      {"json", "", "Print the outcome as one JSON document on stdout, errors too; the start line and the line per "
                   "round go to stderr.", "", false},
  };
  auto sources = task_source_options();
  out.insert(out.begin() + 2, sources.begin(), sources.end());  // after --task and --kernelbench
  // The settings table's flags (--max-rounds, --wm-*, --evolve-*, ...) after --strategy.
  auto settings = setting_options(false);
  auto after_strategy = std::find_if(out.begin(), out.end(), [](const OptionSpec& o) { return o.name == "strategy"; });
  out.insert(after_strategy + 1, settings.begin(), settings.end());
  return out;
}

}  // namespace

// The endpoint's settings, read and checked whatever --llm says: a bad value
// (--temperature abc, --max-output-tokens -5) is refused at once, also where
// no endpoint is asked (--llm offline, command:, replay:).
OpenAiConfig openai_config_from_args(const Args& a) {
  auto positive = [&](const char* name, double v) {
    if (a.has(name) && !(v > 0)) throw Error(Status::invalid_argument, fmt::format("--{} must be positive", name));
  };
  OpenAiConfig o;
  o.model = a.get("model");
  if (a.has("base-url")) o.base_url = a.get("base-url");
  if (a.has("api")) {
    auto api = openai_api_from_string(a.get("api"));
    if (!api) throw Error(Status::invalid_argument, "--api must be chat or responses");
    o.api = *api;
  }
  o.reasoning_effort = a.get("reasoning-effort");
  if (a.has("api-key-env")) o.api_key_env = a.get("api-key-env");
  if (a.has("temperature")) {
    o.temperature = a.get_double("temperature", 0);
    if (*o.temperature < 0) throw Error(Status::invalid_argument, "--temperature must not be negative");
  }
  o.max_output_tokens = a.get_int("max-output-tokens", 0);
  positive("max-output-tokens", static_cast<double>(o.max_output_tokens));
  for (const auto& h : a.get_all("header")) {
    auto colon = h.find(':');
    if (colon == std::string::npos || colon == 0)
      throw Error(Status::invalid_argument, fmt::format("--header \"{}\" must look like 'Name: value'", h));
    std::string value = h.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    o.extra_headers[h.substr(0, colon)] = value;
  }
  o.request_timeout_s = a.get_double("request-timeout", o.request_timeout_s);
  positive("request-timeout", o.request_timeout_s);
  o.connect_timeout_s = a.get_double("connect-timeout", o.connect_timeout_s);
  positive("connect-timeout", o.connect_timeout_s);
  o.proxy = a.get("proxy");
  o.max_retries = a.get_int("max-retries", o.max_retries);
  if (o.max_retries < 0) throw Error(Status::invalid_argument, "--max-retries must not be negative");
  o.max_concurrency = a.get_int("max-concurrency", o.max_concurrency);
  positive("max-concurrency", o.max_concurrency);
  o.max_cost_usd = a.get_double("max-cost", 0);
  if (o.max_cost_usd < 0) throw Error(Status::invalid_argument, "--max-cost must not be negative");
  o.price_file = a.get("price-file");
  return o;
}

LlmChoice llm_choice_from_args(const Args& a) {
  LlmChoice c = LlmChoice::parse(a.get("llm", "openai"));
  if (a.has("on-divergence")) {
    if (c.kind != ks::LlmSource::replay)
      throw Error(Status::invalid_argument, "--on-divergence applies to --llm replay:TRANSCRIPT only");
    auto d = ks::replay_divergence_from_string(a.get("on-divergence"));
    if (!d || *d == ks::ReplayDivergence::live)
      throw Error(Status::invalid_argument, "--on-divergence must be stop or skip with --llm replay:");
    c.on_divergence = *d;
  }
  OpenAiConfig o = openai_config_from_args(a);
  if (c.kind == ks::LlmSource::command && a.has("max-concurrency")) c.command.max_concurrency = o.max_concurrency;
  if (a.has("llm-timeout")) {
    if (c.kind != ks::LlmSource::command)
      throw Error(Status::invalid_argument, "--llm-timeout applies to --llm command: (an endpoint's is --request-timeout)");
    c.command.timeout_s = a.get_double("llm-timeout", c.command.timeout_s);
    if (!(c.command.timeout_s > 0)) throw Error(Status::invalid_argument, "--llm-timeout must be positive");
  }
  if (c.kind == ks::LlmSource::openai) {
    if (o.model.empty())
      throw Error(Status::invalid_argument,
                  "--model is required with --llm openai (or use --llm offline --strategy tune, or --llm replay:FILE)");
    c.openai = std::move(o);
  }
  // Otherwise --model only labels the run.
  return c;
}

int finish(const SearchOutcome& out, Json extra) {
  const int code = out.stop_reason == ks::StopReason::cancelled         ? kExitInterrupted
                   : out.stop_reason == ks::StopReason::replay_diverged ? kExitReplayDiverged
                   : out.best                             ? kExitOk
                                                          : kExitNoPassingKernel;
  if (json_output()) {
    Json j = out.to_json();
    j["exit_code"] = code;
    if (extra.is_object())
      for (auto& [k, v] : extra.as_object()) j[k] = std::move(v);
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    print_summary(stdout, out);
  }
  print_divergence(stderr, out);
  return code;
}

std::FILE* progress_stream() { return json_output() ? stderr : stdout; }

ProgressCallback progress_printer(bool quiet, const Interrupts& interrupts) {
  return [quiet, &interrupts](const RoundReport& r) {
    if (!quiet) print_round(progress_stream(), r);
    return !interrupts.requested();
  };
}

StartCallback start_printer(bool quiet, Interrupts& interrupts, std::string llm) {
  return [quiet, &interrupts, llm](const SearchStart& s) {
    interrupts.set_run_dir(s.run_dir);
    if (!quiet) print_start(progress_stream(), s, llm);
    // Said even when quiet: a recorded evaluation is taken on trust.
    if (s.rounds_done == 0 && s.config.strategy == ks::StrategyKind::world_model) print_warm_start(stderr, s.config);
  };
}

EventCallback warning_printer() {
  return [](const Json& e) {
    if (e.get_string("type") != "world_model_fallback") return;
    // A model's words may reach the reason: terminal_text keeps escapes off the terminal.
    const std::string why = e.get_string("why", "no edit was accepted; a fallback stood in");
    std::fprintf(stderr, "ksearch: warning: world model (%s): %s\n", ks::terminal_text(e.get_string("kind")).c_str(),
                 ks::terminal_text(why).c_str());
  };
}

std::string llm_text(const LlmChoice& c) {
  if (c.kind == ks::LlmSource::openai) return fmt::format("openai:{} at {}", c.openai.model, c.openai.base_url);
  if (c.kind == ks::LlmSource::replay) return "replay:" + c.replay_path.string();
  return to_string(c.kind);
}

int cmd_run(int argc, char** argv) {
  Args a("run", "ksearch run --task TASK [options]",
         "Searches for a fast kernel: the LLM proposes and writes candidates, each is compiled, checked against "
         "the task's reference and timed, and the world model decides what to try next. Everything goes to a run "
         "folder that `ksearch resume` can continue and `ksearch show` can print. Before the first LLM call the "
         "task is loaded, the backend it needs is checked (a CUDA task without a GPU stops here), the endpoint "
         "is asked once (GET /models), and the task's check is tried on candidates that compute nothing (a "
         "warning when one passes; --no-weak-check skips this). Ctrl-C or SIGTERM stops after the current round; a second one stops at once. "
         "\n\n" + std::string(kExitCodesHelp),
         with_wandb_options(search_options()));
  if (!a.parse(argc, argv)) throw UsageError(a.error());
  if (a.help_requested()) {
    std::printf("%s", a.help_text().c_str());
    return 0;
  }
  if (!a.positional().empty()) throw UsageError(fmt::format("unexpected argument \"{}\"", a.positional()[0]));
  if (a.has("kernelbench")) ::setenv("KSEARCH_KERNELBENCH", a.get("kernelbench").c_str(), 1);
  SearchOptions o;
  o.task = a.get("task");
  if (o.task.empty()) throw UsageError("--task is required (see `ksearch tasks`)");
  SearchConfig& c = o.config;
  if (a.has("strategy")) c.strategy = ks::parse_strategy_kind(a.get("strategy"), "strategy");
  auto lang = language_from_string(a.get("language", "cuda"));
  if (!lang) throw Error(Status::invalid_argument, "--language must be cuda, cpp, triton or python");
  c.language = *lang;
  o.infer_language = !a.has("language");
  // A run of no rounds would end "no passing kernel" (exit 3) having tried nothing: a usage error.
  if (a.has("max-rounds") && a.get_int("max-rounds", 1) < 1)
    throw UsageError(fmt::format("--max-rounds must be at least 1, not {}", a.get_int("max-rounds", 1)));
  apply_setting_flags(a, c);
  c.model = a.get("model");
  o.task_sources = task_sources_from_args(a, c.seed);
  if (a.has("continue-from-solution")) {
    c.continue_from_solution = load_solution(a.get("continue-from-solution"), load_task(o.task, o.task_sources)->spec(),
                                             o.infer_language ? "" : std::string(to_string(c.language)));
    if (o.infer_language) {  // the kernel's language is the run's
      c.language = c.continue_from_solution->language;
      o.infer_language = false;
    }
    c.continue_from_solution_eval = load_recorded_evaluation(a.get("continue-from-solution"));
  }
  o.continue_from_world_model = a.get("continue-from-world-model");
  if (a.has("continue-from-world-model") && o.continue_from_world_model.empty())
    throw UsageError("--continue-from-world-model needs FILE, RUN or auto");
  o.llm = llm_choice_from_args(a);
  if (o.llm.kind == ks::LlmSource::offline && !a.has("strategy")) c.strategy = ks::StrategyKind::tune;
  o.evaluator.backend = ks::parse_backend(a.get("backend", "auto"), "--backend");
  o.evaluator.devices = a.get_int_all("device");
  o.evaluator.in_process = a.has("in-process");
  o.evaluator.cache_dir = a.get("cache-dir");
  o.evaluator.cuda_arch = a.get("cuda-arch");
  o.evaluator.sandbox = ks::parse_sandbox_mode(a.get("sandbox", "auto"), "--sandbox");
  o.evaluator.memory_limit_bytes = a.get_size("memory-limit", 0);
  o.evaluator.options.max_time_per_workload_s = a.get_double("timing-cap", o.evaluator.options.max_time_per_workload_s);
  o.evaluator.options.seeds_per_workload = a.get_int("seeds", o.evaluator.options.seeds_per_workload);
  if (a.has("baseline-latencies"))
    o.evaluator.options.baseline_latencies = read_baseline_latencies(a.get("baseline-latencies"));
  if (o.evaluator.options.seeds_per_workload < 2)
    throw Error(Status::invalid_argument, "--seeds must be at least 2 (two input sets are checked per workload)");
  if (o.evaluator.options.max_time_per_workload_s <= 0)
    throw Error(Status::invalid_argument, "--timing-cap must be positive");
  o.run_dir = a.get("run-dir");
  o.weak_check = !a.has("no-weak-check");
  o.wandb = wandb_from_args(a);
  bool quiet = a.has("quiet");
  Interrupts interrupts;
  o.progress = progress_printer(quiet, interrupts);
  o.on_start = start_printer(quiet, interrupts, llm_text(o.llm));
  o.on_event = warning_printer();
  if (o.llm.kind == ks::LlmSource::replay) print_replay_notice(stderr, o.llm);
  return finish(run_search(o));
}

int cmd_resume(int argc, char** argv) {
  Args a("resume", "ksearch resume RUN_DIR [--max-rounds N]",
         "Continues a run folder: the recorded LLM answers and evaluations are replayed (nothing is asked or "
         "measured twice) and the search goes on with the run's recorded configuration. A replay goes on following "
         "its recording; a reproduction (`ksearch replay`) that stopped where it left its recording continues "
         "live from there when given a model (--llm ...).\n\n" + std::string(kExitCodesHelp),
         with_wandb_options({{"max-rounds", "N", "The run's total round budget, the rounds already done included: 30 on a run that "
                              "did 20 runs 10 more. Larger or smaller than the recorded budget; below the rounds "
                              "done is refused, and so is a tune run's above the budget its tuner planned for "
                              "(a refused resume changes nothing in the run folder).", "as recorded", false},
          {"llm", "SPEC", "Answer new prompts with another policy (e.g. replay:FILE); kept for later resumes.",
           "as recorded", false},
          {"on-divergence", "stop|skip", "With --llm replay: (see `ksearch run --help`); e.g. resume a replay that "
                                         "stopped where it diverged with --on-divergence skip.", "stop", false},
          {"model", "NAME", "With --llm openai: the model.", "", false},
          {"llm-timeout", "S", "With --llm command: seconds the program may take for one answer.", "600", false},
          {"base-url", "URL", "With --llm openai: the endpoint.", "", false},
          {"api", "chat|responses", "With --llm openai: the API.", "chat", false},
          {"api-key-env", "NAME", "With --llm openai: the key's environment variable.", "OPENAI_API_KEY", false},
          {"quiet", "", "Print only the final summary (with --json: nothing but the JSON).", "", false},
          {"json", "", "Print the outcome as one JSON document on stdout, errors too; progress goes to stderr.", "",
           false}}));
  if (!a.parse(argc, argv)) throw UsageError(a.error());
  if (a.help_requested()) {
    std::printf("%s", a.help_text().c_str());
    return 0;
  }
  if (a.positional().size() != 1) throw UsageError("give exactly one run folder");
  ResumeOptions r;
  r.max_rounds = a.get_int("max-rounds", 0);
  if (a.has("max-rounds") && r.max_rounds < 1)
    throw UsageError(fmt::format("--max-rounds must be at least 1, not {} (leave it out to keep the recorded budget)",
                                 r.max_rounds));
  if (a.has("llm")) r.llm = llm_choice_from_args(a);
  else (void)openai_config_from_args(a);  // checked even when unused
  r.wandb = wandb_from_args(a);
  bool quiet = a.has("quiet");
  Interrupts interrupts;
  r.progress = progress_printer(quiet, interrupts);
  r.on_start = start_printer(quiet, interrupts, r.llm ? llm_text(*r.llm) : "as recorded");
  r.on_event = warning_printer();
  return finish(resume_search(a.positional()[0], r));
}

}  // namespace ks::cli
