// The hostile-candidate corpus (tests/fixtures/hostile/<language>/): one
// file per attack, written as a hostile model would write it, each naming
// the status it must end with. Forged statuses and answers, forged frames,
// cached results, patched timers and runners, side work, input writes,
// exits, aborts, hangs, floods of output, disk and memory. Each runs through
// the real evaluator (run worker, candidate processes, sandbox), and after
// each language's cases an honest candidate must still pass. `cpp` and
// `python` run on the host backend here; `triton` and `cuda` on a GPU
// (test_hostile_candidates_gpu, label gpu). docs/security.md, "Who says
// what", states the rule the corpus checks: nothing a candidate's process
// says is a status.
//
// A case's header, in comment lines at its top:
//   expect: <status>         the status it must end with
//   words: <text>            in its message or log (any number of lines)
//   min_latency_ms: <ms>     a passing case's latency is at least this
//   plan: <json>             a cuda case's launch plan
//   needs: namespaces        skipped where candidates get no user namespaces
//   about: <text>            what it tries
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "eval/python/python_program.hpp"
#include "fixtures.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "support/test_util.hpp"
#include "util/fs.hpp"

using namespace ks;
namespace fs = std::filesystem;

namespace {

struct Case {
  std::string name;  // the file's name
  std::string text;
  EvalStatus expect = EvalStatus::passed;
  std::vector<std::string> words;
  double min_latency_ms = 0;
  std::string plan;
  bool needs_namespaces = false;
};

std::vector<Case> corpus(const std::string& language) {
  std::vector<Case> cases;
  const fs::path folder = test::source_dir() / "tests/fixtures/hostile" / language;
  for (const auto& e : fs::directory_iterator(folder)) {
    Case c;
    c.name = e.path().filename().string();
    c.text = util::read_file(e.path());
    bool expected = false;
    for (std::size_t at = 0; at < c.text.size();) {
      const std::size_t end = std::min(c.text.find('\n', at), c.text.size());
      std::string line = c.text.substr(at, end - at);
      at = end + 1;
      const std::string prefix = line.rfind("# ", 0) == 0 ? "# " : line.rfind("// ", 0) == 0 ? "// " : "";
      if (prefix.empty()) break;  // the header ends at the first line that is no comment
      line.erase(0, prefix.size());
      const auto colon = line.find(": ");
      if (colon == std::string::npos) continue;
      const std::string key = line.substr(0, colon), value = line.substr(colon + 2);
      if (key == "expect") {
        const auto s = eval_status_from_string(value);
        REQUIRE_MESSAGE(s.has_value(), c.name << ": unknown status " << value);
        c.expect = *s;
        expected = true;
      } else if (key == "words") {
        c.words.push_back(value);
      } else if (key == "min_latency_ms") {
        c.min_latency_ms = std::stod(value);
      } else if (key == "plan") {
        c.plan = value;
      } else if (key == "needs") {
        c.needs_namespaces = value == "namespaces";
      }
    }
    REQUIRE_MESSAGE(expected, c.name << " names no expected status (a first line \"expect: STATUS\")");
    cases.push_back(std::move(c));
  }
  std::sort(cases.begin(), cases.end(), [](const Case& a, const Case& b) { return a.name < b.name; });
  REQUIRE_FALSE(cases.empty());
  return cases;
}

std::string message_of(const EvalResult& r) {
  std::string m = r.log;
  for (const auto& w : r.workloads) m += "\n" + w.message;
  return m;
}

bool have_torch() {
  const char* p = std::getenv("KSEARCH_PYTHON");
  return p && *p && std::string(p) != "NONE";
}

Solution solution_of(const Case& c, const std::string& task, Language language) {
  Solution s;
  s.name = c.name.substr(0, c.name.find('.'));
  s.task = task;
  s.language = language;
  if (language == Language::cpp) {
    s.sources = {{"kernel.cpp", c.text}};
    s.launch_plan = LaunchPlan::from_json(
        Json::obj({{"calls", Json::arr({Json::obj({{"fn", "vadd"}, {"args", Json::arr({"X", "Y", "Z", "N"})}})})}}));
  } else if (language == Language::cuda) {
    s.sources = {{"kernel.cu", c.text}};
    s.launch_plan = LaunchPlan::from_json(Json::parse(c.plan));
  } else {
    s.sources = {{"main.py", c.text}};
  }
  return s.finalize();
}

// Runs every case of `language` on `task`; an honest candidate after each
// failure must pass (the worker, the zygote and the device recovered).
void run_corpus(Evaluator& ev, const Task& task, const std::string& task_name, Language language,
                const std::string& corpus_name, const Solution& honest) {
  bool namespaces = true;
  {
    const EvalResult probe = ev.evaluate(task, honest);
    INFO(probe.to_json().dump(2));
    REQUIRE(probe.status == EvalStatus::passed);
    namespaces = probe.metrics.get_string("candidate_isolation", "").find("ns") != std::string::npos;
  }
  for (const Case& c : corpus(corpus_name)) {
    CAPTURE(c.name);
    if (c.needs_namespaces && !namespaces) {
      MESSAGE("skipped: candidates get no user namespaces here");
      continue;
    }
    EvalResult r;
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_NOTHROW(r = ev.evaluate(task, solution_of(c, task_name, language)));
    MESSAGE(fmt::format("{}/{}: {} in {:.1f} s", corpus_name, c.name, to_string(r.status),
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
    INFO(r.to_json().dump(2));
    CHECK(r.status == c.expect);
    for (const auto& w : c.words) CHECK_MESSAGE(message_of(r).find(w) != std::string::npos, "missing: " << w);
    if (c.min_latency_ms > 0 && r.passed()) CHECK(r.workloads.back().timing.min_ms >= c.min_latency_ms);
    if (c.expect != EvalStatus::passed) {
      const EvalResult after = ev.evaluate(task, honest);
      CHECK_MESSAGE(after.status == EvalStatus::passed, "the honest candidate after " << c.name);
    }
  }
}

EvaluatorConfig host_config(const std::string& name) {
  EvaluatorConfig c = test::test_config(test::scratch_dir(name).string());
  c.options.run_timeout_s = 60;  // a first workload imports PyTorch; on a loaded machine it takes seconds
  return c;
}

TaskSpec python_vadd_task() {
  TaskSpec t = test::vadd_task("2*N", "test/vadd");
  t.languages.push_back(Language::python);
  t.validate();
  return t;
}

}  // namespace

TEST_CASE("hostile corpus: cpp candidates on the host") {
  EvaluatorConfig c = host_config("hostile_cpp");
  c.memory_limit_bytes = std::uint64_t{1} << 30;
  c.options.run_timeout_s = 10;
  auto ev = make_evaluator(c);
  SpecTask task(test::vadd_task());
  run_corpus(*ev, task, "test/vadd", Language::cpp, "cpp", test::vadd_candidate(test::kGoodBody, "honest"));
}

TEST_CASE("hostile corpus: python candidates on the host") {
  if (!have_torch()) {
    MESSAGE("skipped: no Python with PyTorch ($KSEARCH_PYTHON)");
    return;
  }
  EvaluatorConfig c = host_config("hostile_python");
  c.memory_limit_bytes = std::uint64_t{3} << 30;  // PyTorch's own address space, and room to grow
  // The zygote imports PyTorch once per worker (seconds on a loaded machine,
  // in the first workload after a crash): room for that, not for the hang.
  c.options.run_timeout_s = 20;
  auto ev = make_evaluator(c);
  SpecTask task(python_vadd_task());
  Solution honest;
  honest.name = "honest";
  honest.task = "test/vadd";
  honest.language = Language::python;
  honest.sources = {{"main.py", "def run(X, Y):\n    return X + 2 * Y\n"}};
  run_corpus(*ev, task, "test/vadd", Language::python, "python", honest.finalize());
}

// After many hostile Python evaluations, the cache holds only what the
// evaluator wrote: no link, nothing of a candidate's, within a budget.
TEST_CASE("hostile corpus: what python candidates write does not outlive them") {
  if (!have_torch()) return;
  EvaluatorConfig c = host_config("hostile_python_cache");
  c.memory_limit_bytes = std::uint64_t{3} << 30;
  auto ev = make_evaluator(c);
  SpecTask task(python_vadd_task());
  const Case flood = [] {
    for (auto& k : corpus("python"))
      if (k.name == "floods_links.py") return k;
    FAIL("tests/fixtures/hostile/python/floods_links.py is missing");
    return Case{};
  }();
  const int rounds = std::getenv("KS_HOSTILE_ROUNDS") ? std::atoi(std::getenv("KS_HOSTILE_ROUNDS")) : 100;
  for (int i = 0; i < rounds; ++i) {
    // A new solution each round (its own artifact), as a search makes them.
    Case k = flood;
    k.name = fmt::format("flood_{}.py", i);
    k.text += fmt::format("\n# round {}\n", i);
    const auto t0 = std::chrono::steady_clock::now();
    const EvalResult r = ev->evaluate(task, solution_of(k, "test/vadd", Language::python));
    REQUIRE_MESSAGE(r.status == EvalStatus::passed, r.to_json().dump(2));
    if (i < 3)
      MESSAGE(fmt::format("round {}: {:.2f} s, phases {}", i,
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                          r.metrics.contains("phases") ? r.metrics.at("phases").dump() : "-"));
  }
  std::uintmax_t bytes = 0;
  std::vector<std::string> unexpected;
  for (auto it = fs::recursive_directory_iterator(c.cache_dir); it != fs::recursive_directory_iterator(); ++it) {
    const auto st = it->symlink_status();
    if (fs::is_symlink(st)) unexpected.push_back("a link: " + it->path().string());
    if (!fs::is_regular_file(st)) continue;
    bytes += it->file_size();
    const std::string name = it->path().filename().string();
    if (name.find("ballast") != std::string::npos) unexpected.push_back(it->path().string());
  }
  INFO(fmt::format("{} bytes in {}", bytes, c.cache_dir.string()));
  CHECK(unexpected.empty());
  for (const auto& u : unexpected) MESSAGE("left behind: " << u);
  // The artifacts (a few KiB each), reference outputs and compiled host
  // programs: far below what one candidate tried to leave.
  CHECK(bytes < std::uintmax_t{64} << 20);
}

// ---------------------------------------------------------------------------
// On the GPU (ctest entry test_hostile_candidates_gpu, label gpu): y = 2 x
// with a CUDA reference. Each skips, saying why, without a GPU (and for
// triton, without a CUDA build of PyTorch with Triton).

namespace {

EvaluatorConfig gpu_config(const std::string& name) {
  EvaluatorConfig c = host_config(name);
  c.backend = ks::EvalBackend::cuda;
  c.options.max_time_per_workload_s = 0.2;
  c.options.flush_l2 = true;
  c.options.run_timeout_s = 60;  // a first workload imports PyTorch and starts CUDA
  c.memory_limit_bytes = std::uint64_t{8} << 30;
  return c;
}

bool gpu_present(Language language) {
  std::string why;
  if (!cuda_available(&why)) {
  } else if (language == Language::triton && !have_torch()) {
    why = "no Python with PyTorch in $KSEARCH_PYTHON";
  } else if (language == Language::triton) {
    why = eval::python::python_problem(Language::triton, true);
  }
  if (why.empty()) return true;
  MESSAGE("skipped: " << why);
  return false;
}

}  // namespace

TEST_CASE("hostile corpus on the GPU: cuda candidates") {
  if (!gpu_present(Language::cuda)) return;
  EvaluatorConfig c = gpu_config("hostile_cuda");
  c.options.run_timeout_s = 10;
  auto ev = make_evaluator(c);
  SpecTask task(test::gpu_scale_task());
  Case honest;
  for (auto& k : corpus("cuda"))
    if (k.name == "honest.cu") honest = k;
  run_corpus(*ev, task, "test/scale-python-gpu", Language::cuda, "cuda",
             solution_of(honest, "test/scale-python-gpu", Language::cuda));
}

TEST_CASE("hostile corpus on the GPU: triton candidates") {
  if (!gpu_present(Language::triton)) return;
  auto ev = make_evaluator(gpu_config("hostile_triton"));
  TaskSpec spec = test::gpu_scale_task();
  spec.languages.push_back(Language::triton);
  spec.validate();
  SpecTask task(spec);
  Case honest;
  for (auto& k : corpus("triton"))
    if (k.name == "honest.py") honest = k;
  run_corpus(*ev, task, "test/scale-python-gpu", Language::triton, "triton",
             solution_of(honest, "test/scale-python-gpu", Language::triton));
}
