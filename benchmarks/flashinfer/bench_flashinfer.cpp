// The flashinfer tasks on a GPU, measured in one run, per task:
//
//   1. the wall time of a full evaluation of a kernel on the task's feedback
//      workloads (what a search round costs: compile, checks on every seed,
//      timing, re-check): cold (empty cache: reference outputs computed, the
//      reference and the baseline timed), then a new kernel with the
//      reference outputs and baseline latencies cached (its compile
//      included), then the same kernel again (everything cached);
//   2. per workload: the kernel's latency beside the FP32 reference's and
//      the baseline's, with vs_baseline (K-Search's score) and the speedup.
//
//   bench_flashinfer [--task NAME]... [--kernel start|baseline] [--cache DIR] [--json FILE]
//
// The target of issue 11: under 2 s per full evaluation of the decode tasks
// on their feedback workloads once references are cached. Without a GPU the
// program says so and exits 0.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/io.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "tasks/flashinfer/flashinfer.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace ks;

struct Timed {
  EvalResult result;
  double wall_s = 0;
};

Timed timed_evaluate(Evaluator& ev, const Task& task, const Solution& s) {
  const auto t0 = Clock::now();
  Timed t;
  t.result = ev.evaluate(task, s);
  t.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return t;
}

int usage(const std::string& why) {
  fmt::print(stderr, "bench_flashinfer: {}\nusage: bench_flashinfer [--task NAME]... [--kernel start|baseline] "
                     "[--cache DIR] [--json FILE]\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> tasks;
  std::string kernel = "start";
  fs::path cache_dir, json;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) return usage("missing value after " + k);
    if (k == "--task") tasks.push_back(argv[++i]);
    else if (k == "--kernel") kernel = argv[++i];
    else if (k == "--cache") cache_dir = argv[++i];
    else if (k == "--json") json = argv[++i];
    else return usage("unknown option " + k);
  }
  if (kernel != "start" && kernel != "baseline") return usage("--kernel must be start or baseline");
  if (tasks.empty())
    for (const auto& n : tasks::flashinfer::definition_names()) tasks.push_back(std::string(tasks::flashinfer::kPrefix) + n);

  std::string why;
  if (!cuda_available(&why)) {
    fmt::print("bench_flashinfer: no usable GPU ({}); nothing to measure on this machine.\n", why);
    return 0;
  }
  bool temporary = false;
  if (cache_dir.empty()) {
    cache_dir = fs::temp_directory_path() / fmt::format("bench_flashinfer-{}", ::getpid());
    temporary = true;
  }
  struct RemoveOnExit {
    fs::path dir;
    ~RemoveOnExit() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } cleanup{temporary ? cache_dir : fs::path()};

  Json report = Json::array();
  try {
    EvaluatorConfig cfg;
    cfg.backend = ks::EvalBackend::cuda;
    cfg.cache_dir = cache_dir;
    auto ev = make_evaluator(cfg);
    const DeviceInfo dev = ev->device();
    fmt::print("flashinfer tasks on {} ({}), kernel: {}, cache {}{}\n", dev.name, dev.arch, kernel, cache_dir.string(),
               temporary ? " (fresh)" : "");
    for (const auto& name : tasks) {
      const auto task = load_task(name);
      const TaskSpec& spec = task->spec();
      const Solution s = kernel == "start" ? spec.starting_points.at(0) : spec.baselines.at(Language::cuda);
      Solution fresh = s;
      fresh.sources.front().content += fmt::format("\n// bench_flashinfer {}\n", ::getpid());
      fresh.finalize();
      ev->options().only_workloads = spec.feedback_workloads;
      fmt::print("\n{}: {} on the {} feedback workloads\n", spec.name, s.name, spec.feedback_workloads.size());
      const Timed cold = timed_evaluate(*ev, *task, s);
      const Timed refs_cached = timed_evaluate(*ev, *task, fresh);
      const Timed all_cached = timed_evaluate(*ev, *task, s);
      auto row = [](const char* what, const Timed& t) {
        fmt::print("  {:<44} {:>7.2f} s   {}\n", what, t.wall_s, t.result.summary());
      };
      row("cold (empty cache)", cold);
      row("new kernel, references and baseline cached", refs_cached);
      row("same kernel, everything cached", all_cached);
      fmt::print("  {:<28} {:>12} {:>12} {:>12} {:>9} {:>9}\n", "workload", "kernel ms", "reference ms", "baseline ms",
                 "speedup", "vs base");
      Json rows = Json::array();
      for (const auto& w : refs_cached.result.workloads) {
        if (!w.benchmark || w.timing.count == 0) continue;
        double ref = w.reference_ms;
        for (const auto& cw : cold.result.workloads)
          if (ref <= 0 && cw.name == w.name) ref = cw.reference_ms;
        fmt::print("  {:<28} {:>12.4f} {:>12.4f} {:>12.4f} {:>8.2f}x {:>8.3f}\n", w.name, w.timing.mean_ms, ref,
                   w.baseline_ms, ref > 0 ? ref / w.timing.mean_ms : 0.0,
                   w.baseline_ms > 0 ? w.baseline_ms / w.timing.mean_ms : 0.0);
        rows.push_back(Json::obj({{"workload", w.name}, {"kernel_ms", w.timing.mean_ms}, {"reference_ms", ref},
                                  {"baseline_ms", w.baseline_ms}}));
      }
      fmt::print("  vs_baseline {:.3f} (x100 = {:.1f}), speedup over the reference {:.2f}x\n",
                 refs_cached.result.vs_baseline, 100 * refs_cached.result.vs_baseline, refs_cached.result.speedup);
      report.push_back(Json::obj({{"task", spec.name},
                                  {"kernel", s.name},
                                  {"feedback_workloads", static_cast<std::int64_t>(spec.feedback_workloads.size())},
                                  {"cold_s", cold.wall_s},
                                  {"references_cached_s", refs_cached.wall_s},
                                  {"all_cached_s", all_cached.wall_s},
                                  {"vs_baseline", refs_cached.result.vs_baseline},
                                  {"speedup", refs_cached.result.speedup},
                                  {"status", to_string(refs_cached.result.status)},
                                  {"workloads", rows}}));
    }
    fmt::print("\ntarget (issue 11): under 2 s for a full evaluation of the decode tasks on their feedback workloads "
               "with references cached\n");
    for (const auto& r : report.as_array())
      fmt::print("  {:<70} {:.2f} s\n", r.get_string("task"), r.get_number("references_cached_s"));
    if (!json.empty()) ks::write_file_atomic(json, Json::obj({{"device", dev.to_json()}, {"tasks", report}}).dump(1));
  } catch (const Error& e) {
    fmt::print(stderr, "bench_flashinfer: {}\n", e.what());
    return 1;
  }
  return 0;
}
