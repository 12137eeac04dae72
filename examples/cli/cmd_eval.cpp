// ksearch eval: evaluate one solution file on a task and print per-workload
// status and timings.
#include <fmt/format.h>

#include <cstdio>

#include "args.hpp"
#include "commands.hpp"
#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/tasks.hpp"
#include "report.hpp"

namespace ks::cli {

int cmd_eval(int argc, char** argv) {
  Args a("eval", "ksearch eval --task TASK --solution FILE [options]",
         "Compiles, checks and times one solution on a task's workloads, in an isolated worker process. "
         "FILE is a solution JSON (as stored in a run folder) or an answer in the candidate format "
         "(fenced or tagged source blocks plus a plan; see docs/candidate-format.md). Exit status: 0 when "
         "the solution passes, 1 when it does not, 2 for a usage error.",
         {{"task", "NAME|PATH", "Built-in task, example task name (see `ksearch tasks`), or a task file / folder.",
           "", false},
          {"solution", "FILE", "The solution to evaluate.", "", false},
          {"json", "", "Print the evaluation result as JSON.", "", false},
          {"backend", "auto|cuda|host", "Evaluation backend.", "auto", false},
          {"workload", "NAME", "Evaluate only this workload (repeatable).", "all", true},
          {"workloads", "feedback|all", "feedback: only the few workloads the task's search evaluates each round; "
                                        "all: every workload.", "all", false},
          {"baseline-latencies", "FILE", "Baseline latencies per card, {\"<device>\": {\"<workload>\": ms}}, for "
                                         "tasks scored against a baseline (instead of measuring its baseline "
                                         "solution).", "", false},
          {"seeds", "N", "Input seeds checked per workload before timing (2 to 64).", "2", false},
          {"no-tests", "", "Skip the correctness-only workloads.", "", false},
          {"no-benchmarks", "", "Skip the timed workloads.", "", false},
          {"max-time", "S", "Timing cap per benchmark workload, in seconds.", "2", false},
          {"run-timeout", "S", "Time limit per workload (checks and timing); a hang past it is killed.", "60",
           false},
          {"compile-timeout", "S", "Time limit for compiling the solution.", "120", false},
          {"no-flush", "", "Do not flush the cache between timed repetitions.", "", false},
          {"no-reference-timing", "", "Do not time the task's reference (no speedup is reported).", "", false},
          {"device", "N", "GPU ordinal to evaluate on.", "all visible", true},
          {"in-process", "", "Run the kernel in this process instead of a worker (trusted code only).", "",
           false},
          {"cache-dir", "DIR", "Compiled kernels and reference outputs.", "~/.cache/ksearch", false},
          {"cuda-arch", "ARCH", "NVRTC target, e.g. sm_90a.", "the device's", false}});
  if (!a.parse(argc, argv)) {
    std::fprintf(stderr, "ksearch eval: %s\n", a.error().c_str());
    return 2;
  }
  if (a.help_requested()) {
    std::printf("%s", a.help_text().c_str());
    return 0;
  }
  if (!a.has("task") || !a.has("solution") || !a.positional().empty()) {
    std::fprintf(stderr, "ksearch eval: give --task and --solution (see ksearch eval --help)\n");
    return 2;
  }

  auto task = load_task(a.get("task"));
  Solution solution = load_solution_file(a.get("solution"), task->spec());

  EvaluatorConfig cfg;
  cfg.backend = a.get("backend", "auto");
  cfg.devices = a.get_int_all("device");
  cfg.in_process = a.has("in-process");
  cfg.cache_dir = a.get("cache-dir");
  cfg.cuda_arch = a.get("cuda-arch");
  EvalOptions& o = cfg.options;
  o.only_workloads = a.get_all("workload");
  const std::string set = a.get("workloads", "all");
  if (set != "all" && set != "feedback")
    throw Error(Status::invalid_argument, fmt::format("--workloads must be feedback or all, found \"{}\"", set));
  if (set == "feedback") {
    if (!o.only_workloads.empty())
      throw Error(Status::invalid_argument, "--workloads feedback and --workload cannot be combined");
    o.only_workloads = task->spec().feedback_workloads;
    if (o.only_workloads.empty()) fmt::print(stderr, "ksearch eval: task {} names no feedback workloads; evaluating all\n", task->name());
  }
  if (a.has("baseline-latencies")) o.baseline_latencies = read_baseline_latencies(a.get("baseline-latencies"));
  o.seeds_per_workload = a.get_int("seeds", o.seeds_per_workload);
  o.run_tests = !a.has("no-tests");
  o.run_benchmarks = !a.has("no-benchmarks");
  o.max_time_per_workload_s = a.get_double("max-time", o.max_time_per_workload_s);
  o.run_timeout_s = a.get_double("run-timeout", o.run_timeout_s);
  o.compile_timeout_s = a.get_double("compile-timeout", o.compile_timeout_s);
  o.flush_l2 = !a.has("no-flush");
  o.time_reference = !a.has("no-reference-timing");

  auto evaluator = make_evaluator(cfg);
  EvalResult r = evaluator->evaluate(*task, solution);

  if (a.has("json")) {
    Json j = r.to_json();
    j["task"] = task->name();
    j["solution_name"] = solution.name;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    fmt::print("{} on {} ({}): {}\n", solution.name.empty() ? solution.id : solution.name, task->name(),
               r.device.empty() ? cfg.backend : r.device, r.passed() && r.latency_ms > 0 ? "passed, " + eval_headline(r) : r.summary());
    if (!r.workloads.empty()) print_eval_table(stdout, r);
    if (r.status == EvalStatus::compile_error || (!r.passed() && r.workloads.empty() && !r.log.empty()))
      fmt::print("\n{}\n", r.log);
    else if (r.passed() && !r.log.empty())
      fmt::print("\n{}\n", r.log);  // compiler warnings
  }
  return r.passed() ? 0 : 1;
}

}  // namespace ks::cli
