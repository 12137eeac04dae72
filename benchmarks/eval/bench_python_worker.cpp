// What the long-lived Python worker saves: new Python candidates evaluated
// one after another, each forked from the worker's zygote (PyTorch and Triton
// imported once) or each started as a fresh interpreter
// ($KSEARCH_PYTHON_ZYGOTE=0), side by side in one run. Each round evaluates a
// new variant of the solution (a comment makes its hash new, so nothing is
// cached) in both modes, in alternating order, on warm workers with their
// reference outputs already made.
//
//   bench_python_worker [--task NAME] [--solution FILE] [--language triton|python (default triton)]
//                       [--backend auto|cuda|host] [--rounds N] [--benchmarks] [--cache DIR]
//
// Without --task: gpumode/trimul where a GPU is, else the matmul example
// task on the host. Without --solution it evaluates its own PyTorch code
// (TriMul's custom_kernel, or the matmul task's run). Workloads: the task's
// correctness ones only, unless
// --benchmarks. Prints per mode the median wall time of an evaluation and
// of its process start (process_start_s: the process, its imports and, on
// a GPU, its CUDA context), and their ratios.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/sys/evaluator.hpp"

namespace {

using namespace ks;
using Clock = std::chrono::steady_clock;

// TriMul in PyTorch, written from the math in GPUMode's reference: the
// default candidate, plain enough to run on the host backend too.
constexpr const char* kMatmul = "import torch\n\n\ndef run(A, B):\n    return A @ B\n";

constexpr const char* kTrimul = R"(import torch
import torch.nn.functional as F


def custom_kernel(data):
    x, mask, w, config = data
    dim, hidden = config["dim"], config["hidden_dim"]
    xn = F.layer_norm(x, (dim,), w["norm.weight"], w["norm.bias"])
    keep = mask.unsqueeze(-1).to(x.dtype)
    left = (xn @ w["left_proj.weight"].t()) * keep * torch.sigmoid(xn @ w["left_gate.weight"].t())
    right = (xn @ w["right_proj.weight"].t()) * keep * torch.sigmoid(xn @ w["right_gate.weight"].t())
    out = torch.einsum("bikd,bjkd->bijd", left, right)
    out = F.layer_norm(out, (hidden,), w["to_out_norm.weight"], w["to_out_norm.bias"])
    out = out * torch.sigmoid(xn @ w["out_gate.weight"].t())
    return out @ w["to_out.weight"].t()
)";

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Mode {
  const char* name;
  bool zygote;
  std::unique_ptr<Evaluator> evaluator;
  std::vector<double> wall_s, start_s;
  int passed = 0;
};

// The worker reads $KSEARCH_PYTHON_ZYGOTE when it starts a candidate's
// process; it gets the variable through $KSEARCH_WORKER_ENV.
void set_zygote(bool on) {
  ::setenv("KSEARCH_PYTHON_ZYGOTE", on ? "1" : "0", 1);
  const char* list = std::getenv("KSEARCH_WORKER_ENV");
  std::string names = list ? list : "";
  if (names.find("KSEARCH_PYTHON_ZYGOTE") == std::string::npos)
    ::setenv("KSEARCH_WORKER_ENV", (names.empty() ? std::string() : names + ",").append("KSEARCH_PYTHON_ZYGOTE").c_str(), 1);
}

Solution variant(const Solution& base, int round, const char* mode) {
  Solution s = base;
  s.name = fmt::format("{} ({} {})", base.name, mode, round);
  for (auto& src : s.sources)
    if (src.path.size() > 3 && src.path.compare(src.path.size() - 3, 3, ".py") == 0)
      src.content += fmt::format("\n# bench_python_worker: {} round {}\n", mode, round);
  return s.finalize();
}

}  // namespace

int main(int argc, char** argv) {
  std::string task_name, solution_file, language = "triton", backend_name = "auto";
  std::string cache = "/tmp/ksearch-bench-python-worker";
  int rounds = 5;
  bool benchmarks = false;
  for (int i = 1; i < argc; ++i) {
    auto next = [&](std::string& v) {
      if (i + 1 < argc) v = argv[++i];
    };
    if (std::strcmp(argv[i], "--task") == 0) next(task_name);
    else if (std::strcmp(argv[i], "--solution") == 0) next(solution_file);
    else if (std::strcmp(argv[i], "--language") == 0) next(language);
    else if (std::strcmp(argv[i], "--backend") == 0) next(backend_name);
    else if (std::strcmp(argv[i], "--cache") == 0) next(cache);
    else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--benchmarks") == 0) benchmarks = true;
    else {
      fmt::print(stderr, "bench_python_worker: unknown argument {}\n", argv[i]);
      return 2;
    }
  }
  try {
    const EvalBackend backend = parse_backend(backend_name, "--backend");
    if (task_name.empty())
      task_name = cuda_available() && backend != EvalBackend::host ? "gpumode/trimul"
                                                                   : std::string(KS_SOURCE_DIR) + "/examples/tasks/matmul";
    auto task = load_task(task_name);
    Solution base;
    if (solution_file.empty()) {
      const bool trimul = task->spec().name.rfind("gpumode/trimul", 0) == 0;
      base.name = trimul ? "PyTorch TriMul" : "PyTorch matmul";
      base.task = task->spec().name;
      base.language = Language::python;
      base.sources = {{trimul ? "submission.py" : "main.py", trimul ? kTrimul : kMatmul}};
      base = base.finalize();
    } else {
      TaskSpec spec = task->spec();
      const auto lang = language_from_string(language);
      if (!lang) throw Error(Status::invalid_argument, "unknown language " + language);
      spec.languages = {*lang};  // a .py file could be either Python language
      base = load_solution_file(solution_file, spec);
    }
    std::vector<Mode> modes;
    modes.push_back({"fresh interpreter", false, nullptr, {}, {}});
    modes.push_back({"forked by the zygote", true, nullptr, {}, {}});
    for (auto& m : modes) {
      set_zygote(m.zygote);
      EvaluatorConfig c;
      c.backend = backend;
      c.devices = {0};
      c.cache_dir = cache;
      c.options.run_benchmarks = benchmarks;
      m.evaluator = make_evaluator(c);
      // Warm: the worker, the reference outputs (and the zygote) exist before round 0.
      const EvalResult warm = m.evaluator->evaluate(*task, variant(base, -1, m.zygote ? "zygote" : "fresh"));
      if (!warm.passed())
        fmt::print("{}: the warm-up evaluation did not pass ({}): {}\n", m.name, to_string(warm.status),
                   warm.workloads.empty() ? warm.log : warm.workloads.front().message);
    }
    for (int r = 0; r < rounds; ++r)
      for (int k = 0; k < 2; ++k) {
        Mode& m = modes[(r + k) % 2];
        const auto t0 = Clock::now();
        const EvalResult res = m.evaluator->evaluate(*task, variant(base, r, m.zygote ? "zygote" : "fresh"));
        m.wall_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        if (const Json* start = res.metrics.find("process_start_s"); start && start->is_number())
          m.start_s.push_back(start->as_number());
        m.passed += res.passed() ? 1 : 0;
      }
    fmt::print("{} ({}), {} new candidates per mode, {} workloads\n", task->spec().name, base.name, rounds,
               benchmarks ? "all" : "correctness");
    for (const auto& m : modes)
      fmt::print("  {:<22} evaluation {:7.3f} s   process start {:7.3f} s   ({} of {} passed)\n", m.name,
                 median(m.wall_s), median(m.start_s), m.passed, rounds);
    const double wall = median(modes[1].wall_s), start = median(modes[1].start_s);
    fmt::print("  fresh / zygote: evaluation {:.2f}x, process start {:.2f}x\n",
               wall > 0 ? median(modes[0].wall_s) / wall : 0.0, start > 0 ? median(modes[0].start_s) / start : 0.0);
    return 0;
  } catch (const Error& e) {
    fmt::print(stderr, "bench_python_worker: {}\n", e.what());
    return 1;
  }
}
