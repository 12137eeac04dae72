// Where an evaluation's time goes (issue 24): metrics.phases of one candidate
// per case, side by side in four situations of one run:
//
//   cold           an empty cache, a new evaluator: workers start, the
//                  candidate and the reference compile, reference outputs
//                  are computed, the reference is timed;
//   new candidate  the same evaluator, a candidate no cache has seen (a
//                  an unused kernel appended): it compiles, the references are cached,
//                  as in a search round;
//   cached         the same evaluator, the cold candidate again: everything cached;
//   new evaluator  a fresh evaluator on the warm cache (a new `ksearch eval`
//                  or a resumed run): workers start again.
//
// Host cases: examples/matmul (its tunable starting point), a Python
// candidate on it (when the interpreter of $KSEARCH_PYTHON or python3 has
// PyTorch), and the KernelBench oracle on the CPU (the test problem
// 1_Tiny_ReLU of tests/fixtures/kernelbench and its host candidate). GPU
// cases: gpumode/trimul (examples/trimul/candidates/v4_pipelined_fp16.md),
// examples/softmax (start.cu), flashinfer/gqa_paged_decode_h32_kv4_d128_ps1
// (its starting point) and kernelbench/level1/19_ReLU through the PyTorch
// oracle (its native starting kernel; needs a KernelBench checkout). Each on
// the task's feedback workloads, what a search round evaluates.
//
//   bench_phases [--host] [--gpu] [--case NAME]... [--solution CASE=FILE]... [--all-workloads]
//                [--max-time S] [--kernelbench DIR] [--cache DIR] [--json FILE]
//
// --cache DIR keeps the caches (one folder per case, emptied before its cold
// evaluation); without it they go to a temporary folder, removed at the end.
//
// It fails (exit 1) only when an evaluation throws, a candidate does not pass
// or a result lacks a phase: never on a time. CI runs the host part
// (tests/run_tests.sh), so a slowdown shows in the log of the commit that
// caused it.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "eval/host/host_device.hpp"
#include "eval/phases.hpp"
#include "eval/python/python_program.hpp"
#include "eval/isolation/sandbox.hpp"
#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/io.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/sys/evaluator.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace ks;

const fs::path kSource = KS_SOURCE_DIR;

struct Case {
  std::string name;   // for --case and --solution
  std::string title;  // what is evaluated
  bool gpu = false;
  std::string skip;   // why it cannot run here ("" when it can)
  std::function<std::unique_ptr<Task>()> task;
  std::function<Solution(const TaskSpec&)> solution;
};

struct Situation {
  const char* name;
  EvalResult result;
  double outer_s = 0;  // this program's clock around evaluate()
};

// A candidate no cache has seen. CUDA: an extra kernel changes the module's
// PTX, so neither the cubin cache nor the driver's JIT cache (which NVRTC
// uses, and which a comment-only change would hit: the PTX is the same) can
// serve it; NVVM and ptxas compile everything again, as for a new candidate
// of a search. Elsewhere a comment does that.
Solution variant(Solution s) {
  static int n = 0;
  ++n;
  std::string& text = s.sources.front().content;
  if (s.language == Language::cuda)
    text += fmt::format("\nextern \"C\" __global__ void bench_phases_variant_{}_{}(int* p) {{ if (p) *p = {}; }}\n", n,
                        ::getpid(), n);
  else
    text += fmt::format("\n{} bench_phases variant {} {}\n", language_is_python(s.language) ? "#" : "//", n, ::getpid());
  s.id.clear();
  return s.finalize();
}

std::string torch_missing() {
  const auto& f = eval::python::python_facts();
  if (!f.problem.empty()) return f.problem;
  if (f.torch.empty()) return fmt::format("{} has no PyTorch (set KSEARCH_PYTHON)", f.python);
  return "";
}

// The phase keys in their order (every result must carry each).
std::vector<std::string> phase_keys() {
  std::vector<std::string> keys;
  const Json j = eval::PhaseTimes{}.to_json();
  for (const auto& [k, v] : j.as_object()) keys.push_back(k);
  return keys;
}

// "" when the result's phases are whole; else what is wrong.
std::string phases_problem(const EvalResult& r, double outer_s) {
  const Json* p = r.metrics.find("phases");
  if (!p || !p->is_object()) return "no metrics.phases";
  double sum = 0;
  for (const auto& k : phase_keys()) {
    const Json* v = p->find(k);
    if (!v || !v->is_number()) return fmt::format("metrics.phases has no \"{}\"", k);
    if (v->as_number() < 0) return fmt::format("metrics.phases.{} is negative", k);
    if (k != "other_s" && k != "wall_s") sum += v->as_number();
  }
  const double wall = p->get_number("wall_s");
  if (sum > wall + 1e-6) return fmt::format("the phases add up to {:.6f} s, more than wall_s {:.6f} s", sum, wall);
  if (wall > outer_s + 1e-6) return fmt::format("wall_s {:.6f} s exceeds the caller's {:.6f} s", wall, outer_s);
  return "";
}

std::string compile_note(const EvalResult& r) {
  const auto builds = r.metrics.get_int("builds"), hits = r.metrics.get_int("compile_cache_hits");
  std::string s = hits == builds ? "hit" : hits == 0 ? "miss" : fmt::format("{}/{} hit", hits, builds);
  if (r.metrics.get_int("compile_pch_used") > 0) s += ", pch";
  else if (r.metrics.get_int("compile_pch_created") > 0) s += ", pch new";
  return s;
}

void print_table(const Case& c, const std::vector<Situation>& rows, std::size_t workloads) {
  fmt::print("\n{} ({}; {} workloads)\n", c.name, c.title, workloads);
  fmt::print("  {:<20}", "ms");
  for (const auto& s : rows) fmt::print(" {:>14}", s.name);
  fmt::print("\n");
  for (const auto& k : phase_keys()) {
    std::string label = k.substr(0, k.size() - 2);
    for (char& ch : label)
      if (ch == '_') ch = ' ';
    fmt::print("  {:<20}", label);
    for (const auto& s : rows) fmt::print(" {:>14.1f}", 1e3 * s.result.metrics.at("phases").get_number(k));
    fmt::print("\n");
  }
  fmt::print("  {:<20}", "compile cache");
  for (const auto& s : rows) fmt::print(" {:>14}", compile_note(s.result));
  fmt::print("\n  {:<20}", "refs run/mem/file");
  for (const auto& s : rows)
    fmt::print(" {:>14}", fmt::format("{}/{}/{}", s.result.metrics.get_int("reference_runs"),
                                      s.result.metrics.get_int("reference_memory_hits"),
                                      s.result.metrics.get_int("reference_file_hits")));
  fmt::print("\n");
}

// ns per phase entered and left: what measuring costs.
double clock_cost_ns() {
  eval::PhaseClock clock;
  constexpr int n = 200000;
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    auto outer = clock.enter(eval::Phase::checks);
    auto inner = clock.enter(eval::Phase::inputs);
  }
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / (2.0 * n);
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a.empty() ? "?" : a + " " + b + " " + c;
}

int usage(const std::string& why) {
  fmt::print(stderr,
             "bench_phases: {}\nusage: bench_phases [--host] [--gpu] [--case NAME]... [--solution CASE=FILE]... "
             "[--all-workloads] [--max-time S] [--kernelbench DIR] [--cache DIR] [--json FILE]\n",
             why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  bool host = false, gpu = false, all_workloads = false;
  double max_time = 0;  // 0: the library's default
  std::vector<std::string> only;
  std::map<std::string, fs::path> solution_files;
  fs::path cache;  // empty: a temporary folder, removed at the end
  fs::path json_out;
  std::string kernelbench = std::getenv("KSEARCH_KERNELBENCH") ? std::getenv("KSEARCH_KERNELBENCH") : "";
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("missing value after " + k);
      return argv[++i];
    };
    try {
      if (k == "--host") host = true;
      else if (k == "--gpu") gpu = true;
      else if (k == "--all-workloads") all_workloads = true;
      else if (k == "--case") only.push_back(value());
      else if (k == "--max-time") max_time = std::stod(value());
      else if (k == "--kernelbench") kernelbench = value();
      else if (k == "--cache") cache = value();
      else if (k == "--json") json_out = value();
      else if (k == "--solution") {
        const std::string v = value();
        const auto eq = v.find('=');
        if (eq == std::string::npos) return usage("--solution takes CASE=FILE");
        solution_files[v.substr(0, eq)] = v.substr(eq + 1);
      } else return usage("unknown option " + k);
    } catch (const std::exception& e) {
      return usage(e.what());
    }
  }
  if (!host && !gpu) host = gpu = true;
  const bool temporary = cache.empty();
  if (temporary) cache = fs::temp_directory_path() / fmt::format("ksearch-bench-phases-{}", ::getpid());

  // Candidates of Python and the oracle run under this interpreter.
  if (!std::getenv("KSEARCH_PYTHON")) ::setenv("KSEARCH_PYTHON", "python3", 1);
  const fs::path fixture_kb = kSource / "tests/fixtures/kernelbench";
  auto starting_point = [](const TaskSpec& spec) { return spec.starting_points.at(0); };
  auto file = [](fs::path f) { return [f](const TaskSpec& spec) { return load_solution_file(f, spec); }; };
  auto kernelbench_task = [](std::string dir, std::string name) {
    return [dir, name] {
      ::setenv("KSEARCH_KERNELBENCH", dir.c_str(), 1);
      return load_task(name);
    };
  };
  std::string why_no_gpu;
  const bool have_gpu = cuda_available(&why_no_gpu);
  const std::string no_torch = torch_missing();

  std::vector<Case> cases = {
      {"matmul", "examples/matmul, host C++, its starting point", false, "",
       [] { return load_task("examples/matmul"); }, starting_point},
      {"python", "examples/matmul, a python candidate (A @ B), PyTorch on the CPU", false, no_torch,
       [] { return load_task("examples/matmul"); },
       [](const TaskSpec&) {
         Solution s;
         s.name = "matmul-python";
         s.task = "examples/matmul";
         s.language = Language::python;
         s.sources = {{"main.py", "import torch\n\n\ndef run(A, B):\n    return A @ B\n"}};
         return s.finalize();
       }},
      {"kernelbench-host", "kernelbench/level1/1_Tiny_ReLU of tests/fixtures, PyTorch oracle on the CPU, host C++",
       false, no_torch, kernelbench_task(fixture_kb.string(), "kernelbench/level1/1_Tiny_ReLU"),
       file(fixture_kb / "candidates/relu_ok.md")},
      {"trimul", "gpumode/trimul, examples/trimul/candidates/v4_pipelined_fp16.md", true, "",
       [] { return load_task("gpumode/trimul"); }, file(kSource / "examples/trimul/candidates/v4_pipelined_fp16.md")},
      {"softmax", "examples/softmax, start.cu", true, "", [] { return load_task("examples/softmax"); }, starting_point},
      {"flashinfer", "flashinfer/gqa_paged_decode_h32_kv4_d128_ps1, its starting point", true, "",
       [] { return load_task("flashinfer/gqa_paged_decode_h32_kv4_d128_ps1"); }, starting_point},
      {"kernelbench", "kernelbench/level1/19_ReLU, PyTorch oracle on the GPU, its native starting kernel", true,
       kernelbench.empty() || (!fs::exists(fs::path(kernelbench) / "KernelBench/level1/19_ReLU.py") &&
                              !fs::exists(fs::path(kernelbench) / "level1/19_ReLU.py"))
           ? "no KernelBench checkout (--kernelbench DIR or $KSEARCH_KERNELBENCH)"
           : no_torch,
       kernelbench_task(kernelbench, "kernelbench/level1/19_ReLU"), starting_point},
  };
  for (auto& c : cases)
    if (auto it = solution_files.find(c.name); it != solution_files.end()) c.solution = file(it->second);

  fmt::print("bench_phases: where an evaluation's time goes (metrics.phases, docs/evaluation.md)\n");
  fmt::print("host: {} ({} hardware threads, load average {}); sandbox: {}\n", eval::host::host_device_info().name,
             std::thread::hardware_concurrency(), load_average(), sandbox_description());
  fmt::print("python: {}\n", python_description());
  fmt::print("gpu: {}\n", have_gpu ? "present" : "none (" + why_no_gpu + ")");
  fmt::print("phase clock: {:.0f} ns per phase entered and left\n", clock_cost_ns());

  Json report = Json::array();
  std::vector<std::pair<std::string, std::vector<Situation>>> done;
  int failures = 0;
  for (const auto& c : cases) {
    if (!only.empty() && std::find(only.begin(), only.end(), c.name) == only.end()) continue;
    if (c.gpu ? !gpu : !host) continue;
    if (c.gpu && !have_gpu) {
      fmt::print("\n{}: skipped, no GPU here\n", c.name);
      continue;
    }
    if (!c.skip.empty()) {
      fmt::print("\n{}: skipped: {}\n", c.name, c.skip);
      continue;
    }
    try {
      const fs::path dir = cache / c.name;
      std::error_code ec;
      fs::remove_all(dir, ec);
      auto task = c.task();
      const TaskSpec& spec = task->spec();
      EvaluatorConfig cfg;
      cfg.backend = c.gpu ? ks::EvalBackend::cuda : ks::EvalBackend::host;
      cfg.cache_dir = dir;
      if (max_time > 0) cfg.options.max_time_per_workload_s = max_time;
      if (!all_workloads) cfg.options.only_workloads = spec.feedback_workloads;
      const Solution s = c.solution(spec);
      const Solution fresh = variant(s);
      std::vector<Situation> rows;
      auto evaluate = [&](Evaluator& ev, const char* name, const Solution& sol) {
        const auto t0 = Clock::now();
        Situation row{name, ev.evaluate(*task, sol)};
        row.outer_s = std::chrono::duration<double>(Clock::now() - t0).count();
        rows.push_back(std::move(row));
      };
      {
        auto ev = make_evaluator(cfg);
        evaluate(*ev, "cold", s);
        evaluate(*ev, "new candidate", fresh);
        evaluate(*ev, "cached", s);
      }
      {
        auto ev = make_evaluator(cfg);
        evaluate(*ev, "new evaluator", s);
      }
      std::size_t workloads = rows.front().result.workloads.size();
      print_table(c, rows, workloads);
      Json situations = Json::object();
      for (const auto& row : rows) {
        std::string problem = row.result.passed() ? phases_problem(row.result, row.outer_s)
                                                  : fmt::format("the candidate did not pass: {}", row.result.summary());
        if (!problem.empty()) {
          fmt::print(stderr, "bench_phases: {}, {}: {}\n", c.name, row.name, problem);
          ++failures;
        }
        situations[row.name] = Json::obj({{"phases", row.result.metrics.at("phases")},
                                          {"outer_s", row.outer_s},
                                          {"status", to_string(row.result.status)},
                                          {"compile_cache", compile_note(row.result)}});
      }
      report.push_back(Json::obj({{"case", c.name}, {"title", c.title}, {"device", rows.front().result.device},
                                  {"workloads", static_cast<std::int64_t>(workloads)}, {"situations", situations}}));
      done.push_back({c.name, std::move(rows)});
    } catch (const std::exception& e) {
      fmt::print(stderr, "bench_phases: {}: {}\n", c.name, e.what());
      ++failures;
    }
  }

  if (!done.empty()) {
    fmt::print("\nwall s per evaluation        cold  new candidate   cached  new evaluator\n");
    for (const auto& [name, rows] : done) {
      fmt::print("  {:<20}", name);
      for (const auto& r : rows) fmt::print(" {:>10.3f}", r.result.metrics.at("phases").get_number("wall_s"));
      fmt::print("\n");
    }
  }
  if (!json_out.empty()) ks::write_file_atomic(json_out, Json::obj({{"cases", report}}).dump(1));
  std::error_code ec;
  if (temporary) fs::remove_all(cache, ec);
  if (failures) fmt::print(stderr, "bench_phases: {} problem(s) (see above)\n", failures);
  return failures ? 1 : 0;
}
