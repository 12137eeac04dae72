// What the sandbox costs per candidate, measured side by side in one run:
// the same candidates evaluated with `sandbox = SandboxMode::off` and
// `required` ("off" and "on"),
// alternating, each with a source no cache has seen (so every one is
// compiled). Host: the scale3 test task (compile with the system compiler,
// check, time). CUDA (on a GPU): the softmax example (NVRTC in a compile
// worker, check and time in a run worker). Also the start of a fresh run
// worker (bubblewrap's namespaces included) and the model-JSON depth check.
//
//   bench_sandbox [--reps N] [--cache DIR]
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/response/json_extract.hpp"
#include "eval/isolation/sandbox.hpp"
#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/sys/evaluator.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace ks;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Side {
  std::vector<double> first_s;     // the first evaluation: worker start included
  std::vector<double> per_cand_s;  // later candidates: compile + check + time
  std::vector<double> compile_s;
};

// Evaluates `reps` fresh variants of `base` with one evaluator per mode,
// alternating modes so machine noise falls on both alike.
void measure(const Task& task, const Solution& base, EvaluatorConfig cfg, int reps, Side& off, Side& on) {
  static int unique = 0;
  for (int round = 0; round < 2; ++round) {
    for (SandboxMode mode : {SandboxMode::off, SandboxMode::required}) {
      Side& side = mode == SandboxMode::required ? on : off;
      cfg.sandbox = mode;
      auto ev = make_evaluator(cfg);
      for (int i = 0; i < reps; ++i) {
        Solution s = base;
        s.sources[0].content += fmt::format("\n// variant {} {}\n", ++unique, ::getpid());
        s.finalize();
        const auto t0 = Clock::now();
        EvalResult r = ev->evaluate(task, s);
        const double dt = seconds_since(t0);
        if (!r.passed()) {
          fmt::print(stderr, "bench_sandbox: the candidate did not pass ({}): {}\n", to_string(r.status), r.log);
          std::exit(1);
        }
        (i == 0 ? side.first_s : side.per_cand_s).push_back(dt);
        side.compile_s.push_back(r.metrics.get_number("compile_s"));
      }
    }
  }
}

void report(const char* what, const Side& off, const Side& on) {
  auto row = [](const char* label, double a, double b) {
    fmt::print("  {:<44} {:>9.3f} s {:>9.3f} s   {:+.1f} %\n", label, a, b, a > 0 ? 100.0 * (b - a) / a : 0.0);
  };
  fmt::print("{}\n  {:<44} {:>11} {:>11}   on vs off\n", what, "", "off", "on");
  row("first evaluation (worker start included)", median(off.first_s), median(on.first_s));
  row("per candidate (compile, check, time)", median(off.per_cand_s), median(on.per_cand_s));
  row("  of which compile", median(off.compile_s), median(on.compile_s));
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 6;
  fs::path cache = fs::temp_directory_path() / "ksearch-bench-sandbox";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::max(2, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--cache") && i + 1 < argc) cache = argv[++i];
    else {
      fmt::print(stderr, "usage: bench_sandbox [--reps N] [--cache DIR]\n");
      return 2;
    }
  }
  const eval::isolation::SandboxStatus& st = eval::isolation::sandbox_status();
  fmt::print("sandbox: {}\n", st.available ? st.version + " (available)" : "unavailable: " + st.problem);
  if (!st.available) return 0;
  try {
    fs::remove_all(cache);
    EvaluatorConfig cfg;
    cfg.cache_dir = cache;
    cfg.options.max_time_per_workload_s = 0.1;

    auto host_task = load_task(fs::path(KS_SOURCE_DIR) / "tests/fixtures/tasks/scale3");
    Solution host = host_task->spec().references.at(Language::cpp);
    host.name = "candidate";
    cfg.backend = ks::EvalBackend::host;
    Side hoff, hon;
    measure(*host_task, host, cfg, reps, hoff, hon);
    report(fmt::format("host backend, scale3 ({} candidates per mode)", 2 * reps).c_str(), hoff, hon);

    std::string why;
    if (cuda_available(&why)) {
      auto cuda_task = load_task(fs::path(KS_SOURCE_DIR) / "examples/tasks/softmax");
      Solution start = cuda_task->spec().starting_points.at(0);
      cfg.backend = ks::EvalBackend::cuda;
      Side coff, con;
      measure(*cuda_task, start, cfg, reps, coff, con);
      report(fmt::format("CUDA backend, softmax ({} candidates per mode)", 2 * reps).c_str(), coff, con);
    } else {
      fmt::print("CUDA backend: not measured ({})\n", why);
    }

    // The depth check a hostile, deeply nested model answer meets first.
    std::string deep;
    for (int i = 0; i < 50000; ++i) deep += R"({"a": )";
    deep += "1" + std::string(50000, '}');
    const auto t0 = Clock::now();
    std::string error;
    auto parsed = core::extract_json_object(deep, &error);
    fmt::print("model JSON nested 50 000 levels deep: refused in {:.2f} ms ({})\n", 1e3 * seconds_since(t0),
               parsed ? "accepted?!" : error.substr(0, 40));
  } catch (const Error& e) {
    fmt::print(stderr, "bench_sandbox: {}\n", e.what());
    return 1;
  }
  return 0;
}
