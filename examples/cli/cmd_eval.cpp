// ksearch eval: evaluate one solution file on a task and print per-workload
// status and timings.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "args.hpp"
#include "commands.hpp"
#include "exit_codes.hpp"
#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/io.hpp"
#include "ksearch/metrics.hpp"
#include "ksearch/run_store.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "report.hpp"
#include "search_cli.hpp"
#include "term.hpp"

namespace ks::cli {

namespace {

// The baselines of one result: an oracle task's measured ones, else a native
// task's published ones (its targets).
ProblemOutcome outcome_of(const Task& task, const EvalResult& r) {
  ProblemOutcome o;
  o.problem = task.name();
  o.correct = r.passed();
  o.kernel_ms = r.latency_ms;
  o.eager_ms = r.metrics.get_number("eager_ms");
  o.compile_ms = r.metrics.get_number("compile_ms");
  if (o.eager_ms <= 0) o.eager_ms = task.spec().targets.get_number("eager_ms");
  if (o.compile_ms <= 0) o.compile_ms = task.spec().targets.get_number("torch_compile_ms");
  return o;
}

std::string ms_text(double ms) { return ms > 0 ? fmt::format("{:.4g}", ms) : "-"; }
std::string x_text(double x) { return x > 0 ? fmt::format("{:.3g}x", x) : "-"; }

// TASK=FILE pairs from --problem and from the lines of --problems files
// ("TASK FILE", blank lines and # comments ignored).
std::vector<std::pair<std::string, std::string>> problem_pairs(const Args& a) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& p : a.get_all("problem")) {
    auto eq = p.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == p.size())
      throw Error(Status::invalid_argument, fmt::format("--problem \"{}\" must look like TASK=SOLUTION_FILE", p));
    out.push_back({p.substr(0, eq), p.substr(eq + 1)});
  }
  for (const auto& f : a.get_all("problems")) {
    std::istringstream in;
    try {
      in.str(read_file(f, std::size_t{64} << 20));
    } catch (const Error& e) {
      throw Error(e.status(), fmt::format("--problems: {}", e.what()));
    }
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      std::istringstream words(line);
      std::string task, file, extra;
      if (!(words >> task) || task[0] == '#') continue;
      if (!(words >> file) || (words >> extra))
        throw Error(Status::invalid_argument,
                    fmt::format("--problems {} line {}: expected \"TASK SOLUTION_FILE\", found \"{}\"", f, n, line));
      out.push_back({task, file});
    }
  }
  return out;
}

// The evaluator of this command: its own, or the evaluation server's (--server).
std::unique_ptr<Evaluator> make_cli_evaluator(const Args& a, const EvaluatorConfig& cfg) {
  if (!a.has("server")) return make_evaluator(cfg);
  const double idle = a.get_double("server-idle", 600);
  if (!(idle > 0)) throw UsageError("--server-idle must be a positive number of seconds");
  return make_served_evaluator(cfg, idle);
}

int eval_problems(const Args& a, const EvaluatorConfig& cfg) {
  auto pairs = problem_pairs(a);
  auto evaluator = make_cli_evaluator(a, cfg);
  std::vector<ProblemOutcome> outcomes;
  Json rows = Json::array();
  const bool json = a.has("json");
  if (!json)
    say("{:<58} {:<14} {:>10} {:>10} {:>10} {:>9} {:>9}\n", "problem", "status", "kernel ms", "eager ms",
        "compile ms", "vs eager", "vs comp.");
  for (const auto& [task_name, file] : pairs) {
    auto task = load_task(task_name);
    EvalResult r;
    try {
      Solution solution = load_solution_file(file, task->spec());
      r = evaluator->evaluate(*task, solution);
    } catch (const Error& e) {
      if (e.status() != Status::parse && e.status() != Status::not_found) throw;
      r.status = EvalStatus::generation_failed;  // no usable solution: a failure, as KernelBench counts a missing one
      r.log = e.what();
    }
    ProblemOutcome o = outcome_of(*task, r);
    outcomes.push_back(o);
    Json row = r.to_json();
    row["task"] = task->name();
    row["solution_file"] = file;
    row["eager_ms"] = o.eager_ms;
    row["compile_ms"] = o.compile_ms;
    row["speedup_over_eager"] = o.speedup_over_eager();
    row["speedup_over_compile"] = o.speedup_over_compile();
    rows.push_back(row);
    if (!json) {
      std::string status = to_string(r.status);
      say("{:<58} {:<14} {:>10} {:>10} {:>10} {:>9} {:>9}\n", task->name(), status,
          ms_text(r.passed() ? r.latency_ms : 0), ms_text(o.eager_ms), ms_text(o.compile_ms),
          x_text(o.speedup_over_eager()), x_text(o.speedup_over_compile()));
      if (!r.passed()) {
        std::string why = r.workloads.empty() ? r.log : r.workloads.back().message;
        if (why.size() > 300) why = why.substr(0, 297) + "...";
        if (!why.empty()) say("    {}\n", why);
      }
    }
  }
  FastPTable t = fast_p_table(outcomes);
  if (json) {
    std::printf("%s\n", Json::obj({{"problems", rows}, {"summary", t.to_json()}}).dump(2).c_str());
  } else {
    say("\n{} problems, {} correct\n{:<24}", t.n_total, t.n_correct, "fast_p");
    for (double p : t.p) say(" {:>8}", fmt::format("p={:g}", p));
    say("\n{:<24}", "over PyTorch eager");
    for (double v : t.fast_p_eager) say(" {:>8.3f}", v);
    say("\n{:<24}", "over torch.compile");
    for (double v : t.fast_p_compile) say(" {:>8.3f}", v);
    say("\ngeometric-mean speedup over eager {} ({} correct problems with a baseline), over torch.compile {} "
        "({})\n",
        x_text(t.geomean_speedup_eager), t.n_eager, x_text(t.geomean_speedup_compile), t.n_compile);
  }
  return t.n_correct == t.n_total ? kExitOk : kExitCandidateFailed;
}


// The command's options with the task-source ones after --task and --solution.
std::vector<OptionSpec> with_task_sources(std::vector<OptionSpec> options) {
  auto sources = task_source_options();
  options.insert(options.begin() + 2, sources.begin(), sources.end());
  return options;
}

// One line on where the baseline latencies of an evaluation came from.
std::string baseline_line(const Json& b) {
  if (b.is_null() || !b["counts"].is_object()) return {};
  std::string out;
  for (const auto& [source, n] : b["counts"].as_object()) {
    std::string what = source;
    if (source == "traces")
      what = fmt::format("from traces of {} ({})", b["origin"].get_string("solution"),
                         b["origin"].get_string("dataset"));
    else if (source == "imported") what = "from --baseline-latencies";
    else if (source == "measured") what = "measured here";  // the per-workload "solution" says which
    else if (source == "none") what = "unknown";
    out += fmt::format("{}{} workload{} {}", out.empty() ? "" : "; ", n.as_int(), n.as_int() == 1 ? "" : "s", what);
  }
  return out;
}

}  // namespace

// A solution named by what a run folder holds: a solution file
// (attempts/*/solution.json, best/solution.json, or one written by hand), the
// best record (best.json), an attempt folder, the best/ folder, or a run
// folder (its best solution). Inside a folder nothing is read through a link
// (load_solution_file, RunStore).
Solution load_solution(const std::string& arg, const TaskSpec& given, const std::string& language) {
  // --language: the file is read as that language only (the task must accept it).
  TaskSpec spec_copy;
  const TaskSpec* spec_ptr = &given;
  if (!language.empty()) {
    const auto lang = language_from_string(language);
    if (!lang)
      throw Error(Status::invalid_argument,
                  fmt::format("--language \"{}\" is not one of cuda, cpp, triton, python", language));
    if (std::find(given.languages.begin(), given.languages.end(), *lang) == given.languages.end()) {
      std::string accepted;
      for (auto l : given.languages) accepted += (accepted.empty() ? "" : ", ") + std::string(to_string(l));
      throw Error(Status::invalid_argument, fmt::format("task {} does not take {} solutions (it takes: {})", given.name,
                                                        to_string(*lang), accepted));
    }
    spec_copy = given;
    spec_copy.languages = {*lang};
    spec_ptr = &spec_copy;
  }
  const TaskSpec& spec = *spec_ptr;
  namespace fs = std::filesystem;
  fs::path p = arg;
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    if (fs::exists(fs::symlink_status(p / "solution.json", ec))) return load_solution_file(p, spec);
    if (RunStore::exists(p)) {
      auto best = RunStore::open_read_only(p).best();
      if (!best)
        throw Error(Status::not_found, fmt::format("{} is a run folder without a passing solution yet", arg));
      return best->solution;
    }
    throw Error(Status::not_found, fmt::format("{} is a folder, not a file, and holds neither solution.json nor a run "
                                               "(give a solution file, an attempt folder or a run folder)", arg));
  }
  if (p.filename() == "best.json" && RunStore::exists(p.parent_path().empty() ? "." : p.parent_path())) {
    auto best = RunStore::open_read_only(p.parent_path().empty() ? "." : p.parent_path()).best();
    if (best) return best->solution;
  }
  return load_solution_file(p, spec);
}

int cmd_eval(int argc, char** argv) {
  Args a("eval", "ksearch eval --task TASK --solution FILE [options]\n       ksearch eval --problem TASK=FILE [--problem ...] [--problems LIST] [options]",
         "Compiles, checks and times one solution on a task's workloads, in an isolated worker process. "
         "FILE is a solution JSON, an answer in the candidate format (fenced or tagged source blocks plus a plan; see "
         "docs/candidate-format.md), or anything a run folder holds: attempts/NNNN-ID/solution.json, "
         "best/solution.json, best.json, an attempt folder, or the run folder itself (its best solution). With "
         "--problem/--problems, evaluates a set of problems, each with its solution, and prints KernelBench's "
         "metrics: per problem the speedup over PyTorch eager and torch.compile, then fast_p for p in {0, 0.5, 0.8, "
         "1, 1.5, 2} and the geometric-mean speedup (exit 0 only when every problem is correct, else 4).\n\n" +
             std::string(kExitCodesHelp),
         with_task_sources({{"task", "NAME|PATH",
                             "Built-in task, example task name (see `ksearch tasks`), or a task file / folder.", "",
                             false},
          {"solution", "FILE|DIR", "The solution to evaluate (see above for what a run folder offers).", "", false},
          {"problem", "TASK=FILE", "A problem and its solution, for a fast_p table (repeatable).", "", true},
          {"problems", "LIST", "A file of \"TASK SOLUTION_FILE\" lines, for a fast_p table (repeatable).", "", true},
          {"kernelbench", "DIR", "A KernelBench checkout: kernelbench/levelN/... tasks are its problems, run by a "
                                 "PyTorch reference oracle (sets $KSEARCH_KERNELBENCH).", "$KSEARCH_KERNELBENCH", false},
          {"kernelbench-version", "head|v0.1|v0", "KernelBench's fp32 tolerance: 1e-4 (head) or 1e-2 (v0, v0.1).",
           "head", false},
          {"json", "", "Print the evaluation result as one JSON document on stdout, errors too.", "", false},
          {"phases", "", "Print where the evaluation's time went as a table, one line per phase (metrics.phases; "
                         "docs/evaluation.md), instead of the one-line breakdown.", "", false},
          {"backend", "auto|cuda|host", "Evaluation backend.", "auto", false},
          {"language", "cuda|cpp|triton|python",
           "What the solution file is written in, when it is not solution JSON (a .py file could be triton or "
           "python).", "tried in the task's order", false},
          {"workload", "NAME", "Evaluate only this workload (repeatable).", "all", true},
          {"workloads", "feedback|all", "feedback: only the few workloads the task's search evaluates each round; "
                                        "all: every workload.", "all", false},
          {"baseline-latencies", "FILE", "Baseline latencies per card, {\"<device>\": {\"<workload>\": ms}}, for "
                                         "tasks scored against a baseline (instead of measuring its baseline "
                                         "solution).", "", false},
          {"seeds", "N", "Input seeds checked per workload before timing (2 to 64).", "2", false},
          {"no-tests", "", "Skip the correctness-only workloads.", "", false},
          {"no-benchmarks", "", "Skip the timed workloads.", "", false},
          {"timing-cap", "S", "Longest time spent timing one benchmark workload, in seconds (as `ksearch run "
                                "--timing-cap`).", "2", false},
          {"run-timeout", "S", "Time limit per workload (checks and timing); a hang past it is killed.", "60",
           false},
          {"compile-timeout", "S", "Time limit for compiling the solution.", "120", false},
          {"no-flush", "", "Do not flush the cache between timed repetitions.", "", false},
          {"timing", "default|upstream",
           "upstream: GPUMode eval.py's timing rules, for side-by-side figures (no cache flush, one untimed call, "
           "then 3 to 100 calls until SE(mean)/mean < 0.1 % or --timing-cap, default 10 s there); a comparison aid, "
           "not libksearch's measure (docs/evaluation.md).",
           "default", false},
          {"no-reference-timing", "", "Do not time the task's reference (no speedup is reported).", "", false},
          {"unpaired-reference", "",
           "Time the task's reference alone, once per device, and reuse that latency (as before issue 43), instead of "
           "beside the candidate in every evaluation (docs/evaluation.md, \"Timing\").",
           "", false},
          {"device", "N", "GPU ordinal to evaluate on.", "all visible", true},
          {"in-process", "", "Run the kernel in this process instead of a worker (trusted code only).", "",
           false},
          {"cache-dir", "DIR", "Compiled kernels and reference outputs.", "~/.cache/ksearch", false},
          {"cuda-arch", "ARCH", "NVRTC target, e.g. sm_90a.", "the device's", false},
          {"sandbox", "auto|on|off", "Confine the candidate and its compiler with bubblewrap (docs/security.md).",
           "auto", false},
          {"memory-limit", "SIZE", "Address-space limit of a host (cpp, python) candidate's process, and the resident host memory a GPU Python candidate may hold, e.g. 8G.",
           "half the RAM", false},
          {"server", "", "Evaluate in this user's evaluation server for these settings, started in the background "
                         "when none runs: it keeps its workers, compiled references, reference outputs (in GPU "
                         "memory) and measured latencies between calls, so an agent that calls ksearch eval once "
                         "per candidate pays for them once (docs/evaluation.md).",
           "", false},
          {"server-idle", "S", "With --server: a server started now exits after S seconds without a request, "
                               "ending its workers.",
           "600", false},
          {"stop-server", "", "Stop the evaluation server for these settings (if one runs) and exit.", "", false}}));
  a.alias("max-time", "timing-cap");  // eval's name before one vocabulary
  if (!a.parse(argc, argv)) {
    throw UsageError(a.error());
  }
  if (a.help_requested()) {
    std::printf("%s", a.help_text().c_str());
    return 0;
  }
  if (a.has("kernelbench")) ::setenv("KSEARCH_KERNELBENCH", a.get("kernelbench").c_str(), 1);
  if (a.has("kernelbench-version")) ::setenv("KSEARCH_KERNELBENCH_VERSION", a.get("kernelbench-version").c_str(), 1);
  const bool many = a.has("problem") || a.has("problems");
  if (many && (a.has("task") || a.has("solution"))) {
    throw UsageError("give either --task and --solution, or --problem/--problems");
  }
  if (a.has("server") && a.has("in-process")) throw UsageError("--server and --in-process cannot be combined");
  if (!many && !a.has("stop-server") && (!a.has("task") || !a.has("solution") || !a.positional().empty())) {
    throw UsageError("give --task and --solution (see ksearch eval --help)");
  }

  EvaluatorConfig cfg;
  cfg.backend = ks::parse_backend(a.get("backend", "auto"), "--backend");
  cfg.devices = a.get_int_all("device");
  cfg.in_process = a.has("in-process");
  cfg.cache_dir = a.get("cache-dir");
  cfg.cuda_arch = a.get("cuda-arch");
  cfg.sandbox = ks::parse_sandbox_mode(a.get("sandbox", "auto"), "--sandbox");
  cfg.memory_limit_bytes = a.get_size("memory-limit", 0);
  EvalOptions& o = cfg.options;
  o.only_workloads = a.get_all("workload");
  const std::string set = a.get("workloads", "all");
  if (set != "all" && set != "feedback")
    throw Error(Status::invalid_argument, fmt::format("--workloads must be feedback or all, found \"{}\"", set));
  if (set == "feedback" && !o.only_workloads.empty())
    throw Error(Status::invalid_argument, "--workloads feedback and --workload cannot be combined");
  if (set == "feedback" && many)
    throw Error(Status::invalid_argument, "--workloads feedback selects one task's workloads; use it with --task");
  if (a.has("baseline-latencies")) o.baseline_latencies = read_baseline_latencies(a.get("baseline-latencies"));
  o.seeds_per_workload = a.get_int("seeds", o.seeds_per_workload);
  o.run_tests = !a.has("no-tests");
  o.run_benchmarks = !a.has("no-benchmarks");
  o.max_time_per_workload_s = a.get_double("timing-cap", o.max_time_per_workload_s);
  if (o.max_time_per_workload_s <= 0) throw UsageError("--" + a.spelled("timing-cap") + " must be positive");
  o.run_timeout_s = a.get_double("run-timeout", o.run_timeout_s);
  o.compile_timeout_s = a.get_double("compile-timeout", o.compile_timeout_s);
  o.flush_l2 = !a.has("no-flush");
  o.timing = ks::parse_timing_mode(a.get("timing", ks::to_string(o.timing)), "--timing");
  const bool upstream = o.timing == ks::TimingMode::upstream;
  if (upstream && !a.has("timing-cap")) o.max_time_per_workload_s = 10.0;  // eval.py benchmark mode
  if (upstream && !a.has("run-timeout")) o.run_timeout_s = 300.0;        // room for eval.py's caps
  o.time_reference = !a.has("no-reference-timing");
  o.pair_reference = !a.has("unpaired-reference");
  if (a.has("stop-server")) {
    const bool stopped = stop_evaluation_server(cfg);
    say(stderr, "ksearch eval: {}\n", stopped ? "the evaluation server stopped" : "no evaluation server runs for these settings");
    return kExitOk;
  }
  if (many) return eval_problems(a, cfg);

  auto task = load_task(a.get("task"), task_sources_from_args(a, 0));
  if (set == "feedback") {
    o.only_workloads = task->spec().feedback_workloads;
    if (o.only_workloads.empty())
      say(stderr, "ksearch eval: task {} names no feedback workloads; evaluating all\n", task->name());
  }
  Solution solution = load_solution(a.get("solution"), task->spec(), a.get("language", ""));
  if (a.has("language") && solution.language != *language_from_string(a.get("language")))
    throw Error(Status::invalid_argument, fmt::format("--language {}: {} holds a {} solution", a.get("language"),
                                                      a.get("solution"), to_string(solution.language)));
  auto evaluator = make_cli_evaluator(a, cfg);
  EvalResult r = evaluator->evaluate(*task, solution);
  const Json baseline = baseline_sources(task->spec(), o, r.device, solution.language);

  const int code = r.passed() ? kExitOk : kExitCandidateFailed;
  if (a.has("json")) {
    Json j = r.to_json();
    j["task"] = task->name();
    j["solution_name"] = solution.name;
    if (!baseline.is_null()) j["baseline"] = baseline;
    j["exit_code"] = code;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    say("{} on {} ({}): {}\n", solution.name.empty() ? solution.id : solution.name, task->name(),
        r.device.empty() ? ks::to_string(cfg.backend) : r.device,
        r.passed() && r.latency_ms > 0 ? "passed, " + eval_headline(r) : r.summary());
    if (!r.workloads.empty()) print_eval_table(stdout, r);
    if (const std::string line = baseline_line(baseline); !line.empty()) say("baseline: {}\n", line);
    if (r.status == EvalStatus::compile_error || (!r.passed() && r.workloads.empty() && !r.log.empty()))
      say("\n{}\n", r.log);
    else if (r.passed() && !r.log.empty())
      say("\n{}\n", r.log);  // compiler warnings
    if (a.has("phases")) {
      say("\nwhere the time went:\n");
      print_phases_table(stdout, r);
    } else if (const std::string line = phases_line(r); !line.empty()) {
      say("\ntime {}\n", line);
    }
  }
  return code;
}

}  // namespace ks::cli
