// The weak-check detection through the real evaluator (host backend, worker
// processes): the fixture tasks whose check is weak, one whose outputs are
// almost all one value other than 0, and the matmul example, whose check is
// not weak. tests/core/test_weak_check.cpp tests the logic on its own.
#include <doctest/doctest.h>

#include "ksearch/eval.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/weak_check.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "support/test_util.hpp"

using namespace ks;

namespace {

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

std::unique_ptr<Evaluator> host_evaluator(const std::string& name) {
  EvaluatorConfig cfg;
  cfg.backend = ks::EvalBackend::host;
  cfg.cache_dir = ks::test::scratch_dir(name);
  cfg.options.max_time_per_workload_s = 0.05;
  cfg.options.min_reps = 3;
  cfg.options.max_reps = 10;
  return make_evaluator(cfg);
}

std::unique_ptr<Task> fixture(const char* name) {
  return load_task((ks::test::source_dir() / "tests/fixtures/tasks" / name).string());
}

const WeakCandidate& candidate(const WeakCheckReport& r, const std::string& name) {
  for (const auto& c : r.candidates)
    if (c.name == name) return c;
  FAIL("no candidate " << name);
  throw;
}

}  // namespace

TEST_CASE("weak check (host): a ReLU whose outputs are 99.99 % zeros passes a kernel that writes zeros") {
  auto task = fixture("relu_bias_weak");
  auto ev = host_evaluator("weak_relu");
  const Json options_before = ev->options().to_json();
  WeakCheckReport r = check_weak(*task, Language::cpp, *ev);
  INFO(r.text());
  CHECK(r.status == "weak");
  CHECK(r.workloads == std::vector<std::string>{"small", "big"});
  CHECK(candidate(r, "zeros").passed == std::vector<std::string>{"small", "big"});
  CHECK(candidate(r, "ones").passed.empty());
  CHECK(candidate(r, "echo").passed.empty());
  const WeakCandidate no_bias = candidate(r, "no_bias");
  CHECK(no_bias.kind == "weakened_reference");
  CHECK(no_bias.passed.empty());  // dropping the bias is seen: half the outputs turn positive
  REQUIRE(r.stats.size() == 2);
  for (const auto& s : r.stats) {
    CHECK(s.zero_fraction > 0.999);
    CHECK(s.most_common_fraction == s.zero_fraction);
    CHECK(s.max_abs >= 0);
    CHECK(s.max_abs < 0.01);  // within atol: the few non-zero outputs are that small
  }
  REQUIRE(r.fix);
  CHECK(r.fix->tensor == "b");
  CHECK(r.fix->change == "centred at 0");
  CHECK(r.fix->workload == "big");
  CHECK(r.fix->stats.zero_fraction > 0.3);
  CHECK(r.fix->stats.zero_fraction < 0.7);
  CHECK(contains(r.text(), "% zeros"));
  CHECK(contains(r.text(), "Suggested fix: draw input \"b\""));
  CHECK(ev->options().to_json() == options_before);

  // The reference outputs the check computed serve later evaluations.
  EvalResult ref = ev->evaluate(*task, task->spec().references.at(Language::cpp));
  CHECK(ref.passed());
  CHECK(ref.metrics.get_int("reference_memory_hits") > 0);
}

TEST_CASE("weak check (host): a bias far below the tolerance lets the reference without it pass") {
  auto task = fixture("linear_small_bias");
  auto ev = host_evaluator("weak_linear");
  WeakCheckReport r = check_weak(*task, Language::cpp, *ev);
  INFO(r.text());
  CHECK(r.status == "weak");
  CHECK(candidate(r, "no_bias").passes_all(r.workloads));
  CHECK(candidate(r, "zeros").passed.empty());
  REQUIRE(r.stats.size() == 2);
  CHECK(r.stats[0].zero_fraction == 0);
  CHECK(r.stats[0].most_common_fraction < 0.05);  // measured by the most-common-value probe
  REQUIRE(r.fix);
  CHECK(r.fix->tensor == "b");
  CHECK(r.fix->change == "100x wider");
  CHECK(contains(r.text(), "weakened reference \"no_bias\" (the reference without the bias b) passes on small, big"));
}

TEST_CASE("weak check (host): outputs saturated at 1 pass the ones candidate; the probe measures their share") {
  TaskSpec t;
  t.name = "t/clamp";
  t.languages = {Language::cpp};
  t.dims = {"N"};
  TensorSpec x{"x", DType::f32, {"N"}, {}, false, false};
  x.dist.p0 = "6";  // N(6, 1): min(x, 1) is 1 but for one element in millions
  t.tensors = {x, TensorSpec{"y", DType::f32, {"N"}, {}, true, false}};
  WorkloadSpec w;
  w.name = "n4096";
  w.dims = {{"N", 4096}};
  w.seed = 5;
  w.benchmark = true;
  t.workloads = {w};
  Solution ref;
  ref.language = Language::cpp;
  ref.name = "reference";
  ref.sources.push_back({"clamp.cpp",
                         "#include <cstdint>\nvoid clamp1(const float* x, float* y, std::int64_t n) {\n"
                         "  for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] < 1.0f ? x[i] : 1.0f;\n}\n"});
  ref.launch_plan.calls.push_back({"clamp1", {"x", "y", "N"}});
  t.references[Language::cpp] = ref;
  SpecTask task(t);
  auto ev = host_evaluator("weak_clamp");
  WeakCheckReport r = check_weak(task, Language::cpp, *ev);
  INFO(r.text());
  CHECK(r.status == "weak");
  CHECK(candidate(r, "ones").passes_all(r.workloads));  // a benchmark workload: passed as faster than light
  REQUIRE(r.stats.size() == 1);
  CHECK(r.stats[0].zero_fraction == 0);
  CHECK(r.stats[0].most_common_fraction > 0.999);
  CHECK(r.stats[0].max_abs == doctest::Approx(1.0));
  REQUIRE(r.fix);
  CHECK(r.fix->change == "centred at 0");
  CHECK(contains(r.text(), "its most common value makes up"));
  CHECK(contains(r.text(), "the most common value of the reference's outputs makes up"));
}

TEST_CASE("weak check (host): the matmul example's check tells every candidate apart") {
  auto task = load_task("matmul");
  auto ev = host_evaluator("weak_matmul");
  WeakCheckReport r = check_weak(*task, Language::cpp, *ev);
  INFO(r.to_json().dump(2));
  CHECK(r.status == "ok");
  CHECK(r.candidates.size() == 3);
  for (const auto& c : r.candidates) {
    CHECK(c.error.empty());
    CHECK(c.passed.empty());
    CHECK(c.failed.size() == task->spec().workloads.size());
  }
  CHECK(r.stats.empty());
  CHECK_FALSE(r.fix);
}
