// gpumode/trimul on a GPU, measured in one run:
//
//   1. the wall time of one full evaluation of a candidate (18 test and 7
//      benchmark workloads: compile, correctness on every seed, timing,
//      re-check): cold (empty cache: reference outputs computed, reference
//      timed), then a new candidate with the reference outputs cached (its
//      compile included), then the same candidate again (everything cached);
//   2. the latency of the task's FP32 reference per benchmark workload, beside
//      the candidate's, with geometric means and the speedup.
//
//   bench_trimul [--candidate FILE] [--cache DIR] [--json FILE]
//
// FILE is an answer or a solution JSON (default: the v4 demonstration
// candidate); DIR the evaluator's cache (default: a fresh temporary folder, so
// the first evaluation is cold). The target of issue 5: a full evaluation of a
// candidate near 1 ms geometric mean in under 2 s once references are cached.
// Without a GPU the program says so and exits 0.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/io.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/sys/evaluator.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace ks;

struct Args {
  fs::path candidate = fs::path(KS_SOURCE_DIR) / "examples/trimul/candidates/v4_pipelined_fp16.md";
  fs::path cache_dir;
  fs::path json;
};

int usage(const char* why) {
  fmt::print(stderr, "bench_trimul: {}\nusage: bench_trimul [--candidate FILE] [--cache DIR] [--json FILE]\n", why);
  return 2;
}

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

double geomean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::log(x);
  return v.empty() ? 0 : std::exp(s / static_cast<double>(v.size()));
}

std::string metric(const EvalResult& r, const char* key) {
  const Json* v = r.metrics.find(key);
  return v && v->is_number() ? fmt::format("{:.3g}", v->as_number()) : "-";
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) return usage(("missing value after " + k).c_str());
    if (k == "--candidate") a.candidate = argv[++i];
    else if (k == "--cache") a.cache_dir = argv[++i];
    else if (k == "--json") a.json = argv[++i];
    else return usage(("unknown option " + k).c_str());
  }

  std::string why;
  if (!cuda_available(&why)) {
    fmt::print("bench_trimul: no usable GPU ({}); nothing to measure on this machine.\n", why);
    return 0;
  }

  try {
    const auto task = load_task("gpumode/trimul");
    const Solution candidate = load_solution_file(a.candidate, task->spec());
    // A new module: an unused kernel appended changes the PTX, so neither the
    // cubin cache nor the driver's JIT cache serves it (a comment-only change
    // would hit the latter) while the reference outputs stay cached.
    Solution fresh = candidate;
    fresh.sources.front().content +=
        fmt::format("\nextern \"C\" __global__ void bench_trimul_new_{}(int* p) {{ if (p) *p = 1; }}\n", ::getpid());
    fresh.finalize();

    bool temporary = false;
    if (a.cache_dir.empty()) {
      a.cache_dir = fs::temp_directory_path() / fmt::format("bench_trimul-{}", ::getpid());
      temporary = true;
    }
    // A fresh cache is ours to remove, however the run ends.
    struct RemoveOnExit {
      fs::path dir;
      ~RemoveOnExit() {
        std::error_code ec;
        if (!dir.empty()) fs::remove_all(dir, ec);
      }
    } cleanup{temporary ? a.cache_dir : fs::path()};
    EvaluatorConfig cfg;
    cfg.backend = ks::EvalBackend::cuda;
    cfg.cache_dir = a.cache_dir;
    auto ev = make_evaluator(cfg);
    const DeviceInfo dev = ev->device();

    fmt::print("gpumode/trimul on {} ({}), candidate {}\n", dev.name, dev.arch, a.candidate.string());
    fmt::print("cache {}{}\n\n", a.cache_dir.string(), temporary ? " (fresh)" : "");

    const Timed cold = timed_evaluate(*ev, *task, candidate);
    const Timed refs_cached = timed_evaluate(*ev, *task, fresh);
    const Timed all_cached = timed_evaluate(*ev, *task, candidate);

    fmt::print("full evaluation, {} workloads                 wall s   compile s  reference runs\n",
               task->spec().workloads.size());
    auto row = [&](const char* what, const Timed& t) {
      fmt::print("  {:<44} {:>7.2f}   {:>9}  {:>14}   {}\n", what, t.wall_s, metric(t.result, "compile_s"),
                 metric(t.result, "reference_runs"), t.result.summary());
    };
    row("cold (empty cache)", cold);
    row("new candidate, reference outputs cached", refs_cached);
    row("same candidate, everything cached", all_cached);
    if (!cold.result.passed()) {
      fmt::print("\nthe candidate did not pass: {}\n{}\n", cold.result.summary(), cold.result.log);
      return 1;
    }

    fmt::print("\nper benchmark workload                     reference ms  candidate ms  speedup\n");
    std::vector<double> ref_ms, cand_ms;
    Json rows = Json::array();
    for (const auto& w : cold.result.workloads) {
      if (!w.benchmark) continue;
      // The reference is timed once per evaluator run: take it where present.
      double r = w.reference_ms;
      for (const auto* other : {&refs_cached.result, &all_cached.result})
        for (const auto& ow : other->workloads)
          if (r <= 0 && ow.name == w.name) r = ow.reference_ms;
      fmt::print("  {:<40} {:>12.3f}  {:>12.3f}  {:>7.2f}\n", w.name, r, w.timing.mean_ms,
                 r > 0 ? r / w.timing.mean_ms : 0.0);
      if (r > 0) ref_ms.push_back(r);
      cand_ms.push_back(w.timing.mean_ms);
      rows.push_back(Json::obj({{"workload", w.name}, {"reference_ms", r}, {"candidate_ms", w.timing.mean_ms}}));
    }
    const double ref_g = geomean(ref_ms), cand_g = geomean(cand_ms);
    fmt::print("  {:<40} {:>12.3f}  {:>12.3f}  {:>7.2f}\n", "geometric mean", ref_g, cand_g,
               cand_g > 0 && ref_ms.size() == cand_ms.size() ? ref_g / cand_g : 0.0);
    fmt::print("\ntarget (issue 5): a full evaluation in under 2 s with references cached for a candidate\n"
               "near 1 ms; measured {:.2f} s for a {:.3f} ms candidate.\n",
               refs_cached.wall_s, cand_g);

    if (!a.json.empty()) {
      Json out = Json::obj({{"device", dev.to_json()},
                            {"candidate", a.candidate.string()},
                            {"cold_s", cold.wall_s},
                            {"references_cached_s", refs_cached.wall_s},
                            {"all_cached_s", all_cached.wall_s},
                            {"reference_geomean_ms", ref_g},
                            {"candidate_geomean_ms", cand_g},
                            {"benchmarks", rows},
                            {"cold", cold.result.to_json()},
                            {"references_cached", refs_cached.result.to_json()}});
      ks::write_file_atomic(a.json, out.dump(1));
    }
  } catch (const Error& e) {
    fmt::print(stderr, "bench_trimul: {}\n", e.what());
    return 1;
  }
  return 0;
}
