// The weak-check detection: the candidates it generates from tensor specs,
// and its logic (which workloads each candidate passes, the statistics it
// reads from exact comparisons, the fix it finds by trying distributions)
// against a scripted evaluator. tests/eval/test_weak_check_host.cpp runs it
// through the real evaluator.
#include <doctest/doctest.h>

#include <functional>

#include "search/weak_check/candidates.hpp"
#include "ksearch/error.hpp"
#include "ksearch/weak_check.hpp"
#include "ksearch/sys/evaluator.hpp"

using namespace ks;
namespace weak = ks::core::weak;

namespace {

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

TensorSpec tensor(const char* name, DType t, std::vector<std::string> shape, bool output = false) {
  TensorSpec s;
  s.name = name;
  s.dtype = t;
  s.shape = std::move(shape);
  s.is_output = output;
  return s;
}

WorkloadSpec workload(const char* name, std::int64_t n, bool benchmark = false) {
  WorkloadSpec w;
  w.name = name;
  w.dims = {{"N", n}};
  w.seed = 7;
  w.benchmark = benchmark;
  return w;
}

Solution host_solution(const char* name, const char* fn, std::vector<LaunchPlan::Arg> args) {
  Solution s;
  s.name = name;
  s.language = Language::cpp;
  s.sources.push_back({"ref.cpp", std::string("// ") + fn + "\n"});
  s.launch_plan.calls.push_back({fn, std::move(args)});
  s.finalize();
  return s;
}

// y = relu(x + b): x ~ N(0, 1), b ~ N(-40, 1), so almost all of y is 0.
TaskSpec relu_task() {
  TaskSpec t;
  t.name = "t/relu";
  t.languages = {Language::cpp};
  t.dims = {"N"};
  t.tensors = {tensor("x", DType::f32, {"N"}), tensor("b", DType::f32, {"N"}), tensor("y", DType::f32, {"N"}, true)};
  t.tensors[1].dist.p0 = "-40";
  t.workloads = {workload("small", 64), workload("big", 4096, true)};
  t.references[Language::cpp] = host_solution("reference", "relu_ref", {"x", "b", "y", "N"});
  t.weakened_references.push_back(host_solution("no_bias", "relu_no_bias", {"x", "y", "N"}));
  t.weakened_references.back().description = "drops b";
  t.validate();
  return t;
}

// An evaluator that asks `judge` for each workload's result, visiting the
// selected workloads in task order and stopping at the first that fails,
// as the real one does. It records every batch.
class ScriptedEvaluator : public Evaluator {
 public:
  using Judge = std::function<WorkloadResult(const Solution&, const WorkloadSpec&, const TaskSpec&)>;
  explicit ScriptedEvaluator(Judge j) : judge_(std::move(j)) {}

  EvalResult evaluate(const Task& task, const Solution& s) override { return evaluate_batch(task, {s}).front(); }
  std::vector<EvalResult> evaluate_batch(const Task& task, const std::vector<Solution>& solutions) override {
    if (throw_on_call > 0 && ++calls_seen == throw_on_call) throw Error(Status::invalid_argument, "reference broke");
    options_seen.push_back(opts_);
    std::vector<std::string> names;
    std::vector<EvalResult> out;
    for (const auto& s : solutions) {
      names.push_back(s.name);
      EvalResult r;
      r.solution_id = s.id;
      for (const auto& w : task.spec().workloads) {
        if (std::find(opts_.only_workloads.begin(), opts_.only_workloads.end(), w.name) == opts_.only_workloads.end())
          continue;
        WorkloadResult wr = judge_(s, w, task.spec());
        wr.name = w.name;
        r.workloads.push_back(wr);
        if (wr.status != EvalStatus::passed && wr.status != EvalStatus::invalid) {
          r.status = wr.status;
          break;
        }
      }
      out.push_back(r);
    }
    batches.push_back(names);
    return out;
  }
  DeviceInfo device() const override { return {}; }
  EvalOptions& options() override { return opts_; }

  std::vector<std::vector<std::string>> batches;
  std::vector<EvalOptions> options_seen;
  int throw_on_call = 0;
  int calls_seen = 0;

 private:
  Judge judge_;
  EvalOptions opts_;
};

WorkloadResult result(EvalStatus s, double ratio = 1, double max_abs = 0) {
  WorkloadResult w;
  w.status = s;
  w.matched_ratio = ratio;
  w.max_abs_error = max_abs;
  return w;
}

bool exact(const TaskSpec& t) { return t.tolerance.atol == 0 && t.tolerance.rtol == 0; }

}  // namespace

TEST_CASE("weak check: the trivial candidates are typed by each output's dtype") {
  TaskSpec t;
  t.name = "t/mixed";
  t.languages = {Language::cpp, Language::cuda};
  t.dims = {"N"};
  t.tensors = {tensor("a", DType::f16, {"N", "2"}), tensor("i", DType::i32, {"N"}),
               tensor("h", DType::f16, {"N", "2"}, true), tensor("k", DType::i32, {"N"}, true),
               tensor("m", DType::boolean, {"N"}, true), tensor("s", DType::bf16, {}, true)};
  auto host = weak::trivial_candidates(t, Language::cpp);
  REQUIRE(host.size() == 3);
  CHECK(host[0].name == "zeros");
  CHECK(host[1].name == "ones");
  CHECK(host[2].name == "echo");
  for (const auto& c : host) {
    CHECK(c.solution.language == Language::cpp);
    CHECK(c.solution.task == "t/mixed");
    CHECK_FALSE(c.solution.id.empty());
    REQUIRE(c.solution.launch_plan.calls.size() == 4);  // one call per output
  }
  const std::string& ones = host[1].solution.sources[0].content;
  CHECK(contains(ones, "void ks_weak_out0(uint16_t* out, std::int64_t n)"));  // the host's f16 type
  CHECK(contains(ones, "0x3c00ull"));                                          // f16 1.0
  CHECK(contains(ones, "void ks_weak_out1(int32_t* out"));
  CHECK(contains(ones, "void ks_weak_out2(bool* out"));
  CHECK(contains(ones, "0x3f80ull"));  // bf16 1.0
  const auto& calls = host[1].solution.launch_plan.calls;
  CHECK(calls[0].fn == "ks_weak_out0");
  CHECK(calls[0].args[0].value.text == "h");
  CHECK(calls[0].args[1].value.text == "(N)*(2)");
  CHECK(calls[3].args[1].value.text == "1");  // rank 0: one element
  // Echo: each output from the input of its dtype; bool and bf16 have none and get zeros.
  const auto& echo = host[2].solution.launch_plan.calls;
  CHECK(echo[0].args.size() == 4);
  CHECK(echo[0].args[0].value.text == "a");
  CHECK(echo[1].args[0].value.text == "i");
  CHECK(echo[2].args.size() == 2);
  CHECK(contains(host[2].description, "a into h, i into k"));

  auto cuda = weak::trivial_candidates(t, Language::cuda);
  REQUIRE(cuda.size() == 3);
  const Solution& z = cuda[0].solution;
  CHECK(z.language == Language::cuda);
  CHECK(z.sources[0].path == "weak_check.cu");
  REQUIRE(z.launch_plan.kernels.size() == 4);
  CHECK(z.launch_plan.kernels[0].name == "ks_weak_out0");
  CHECK(z.launch_plan.kernels[0].grid[0].text == "max(1, min(cdiv((N)*(2), 256), 4096))");
  CHECK(contains(z.sources[0].content, "extern \"C\" __global__ void ks_weak_out0(unsigned short* out, long long n)"));
  CHECK(contains(cuda[2].solution.sources[0].content, "const unsigned int* in, unsigned int* out"));

  // No output has an input of its dtype: no echo.
  TaskSpec plain = t;
  plain.tensors = {tensor("a", DType::f32, {"N"}), tensor("y", DType::f64, {"N"}, true)};
  CHECK(weak::trivial_candidates(plain, Language::cpp).size() == 2);
}

TEST_CASE("weak check: the most-common-value probe is the reference plus one call per output") {
  TaskSpec t = relu_task();
  LaunchPlan::Variant v;
  v.when = "N < 100";
  v.calls.push_back({"relu_small", {"x", "b", "y", "N"}});
  t.references[Language::cpp].launch_plan.variants.push_back(v);
  auto probe = weak::most_common_value_probe(t, Language::cpp);
  REQUIRE(probe);
  REQUIRE(probe->sources.size() == 2);
  CHECK(probe->sources[0].content == t.references[Language::cpp].sources[0].content);
  CHECK(contains(probe->sources[1].content, "void ks_weak_most_common_out0(float* out, std::int64_t n)"));
  CHECK(contains(probe->sources[1].content, "0x80000000ull"));  // -0 counts as 0
  REQUIRE(probe->launch_plan.calls.size() == 2);
  CHECK(probe->launch_plan.calls[1].fn == "ks_weak_most_common_out0");
  REQUIRE(probe->launch_plan.variants.size() == 1);
  CHECK(probe->launch_plan.variants[0].calls.back().fn == "ks_weak_most_common_out0");
  CHECK(probe->id != t.references[Language::cpp].compute_id());
  CHECK_FALSE(weak::most_common_value_probe(t, Language::cuda));
}

TEST_CASE("weak check: a task whose check tells every candidate apart is ok, and the options come back") {
  TaskSpec spec = relu_task();
  SpecTask task(spec);
  ScriptedEvaluator ev([](const Solution&, const WorkloadSpec&, const TaskSpec&) {
    return result(EvalStatus::incorrect, 0.1);
  });
  ev.options().max_reps = 77;
  ev.options().only_workloads = {"big"};
  const Json before = ev.options().to_json();
  WeakCheckReport r = check_weak(task, Language::cpp, ev);
  CHECK(r.status == "ok");
  CHECK_FALSE(r.flagged());
  CHECK(r.workloads == std::vector<std::string>{"small", "big"});
  REQUIRE(r.candidates.size() == 4);  // zeros, ones, echo, no_bias
  CHECK(r.candidates[3].kind == "weakened_reference");
  for (const auto& c : r.candidates) CHECK(c.failed == std::vector<std::string>{"small", "big"});
  // One batch for every candidate, then one for the workload after the first failure.
  REQUIRE(ev.batches.size() == 2);
  CHECK(ev.batches[0].size() == 4);
  CHECK(r.evaluations == 2);
  // Correctness only, cheaply.
  const EvalOptions& o = ev.options_seen.front();
  CHECK(o.seeds_per_workload == 2);
  CHECK_FALSE(o.time_reference);
  CHECK_FALSE(o.recheck_after_timing);
  CHECK(o.max_reps == 1);
  CHECK(ev.options().to_json() == before);
  CHECK(contains(r.text(), "ok: none of 4 candidates"));
  CHECK(r.stats.empty());
  CHECK_FALSE(r.fix);
}

TEST_CASE("weak check: zeros passing everywhere make it weak, with the outputs' statistics and a fix") {
  TaskSpec spec = relu_task();
  spec.workloads.push_back(workload("unchecked", 8));
  spec.feedback_workloads = {"small", "big"};
  SpecTask task(spec);
  // Zeros pass while b is drawn around -40; an exact comparison says how many
  // elements are 0. Centred at 0, b lets the outputs be half non-zero.
  ScriptedEvaluator ev([](const Solution& s, const WorkloadSpec& w, const TaskSpec& t) {
    const bool fixed = w.dist_overrides.count("b") && w.dist_overrides.at("b").p0 == "0";
    if (s.name == "reference") return result(EvalStatus::passed);
    if (s.name == "weak-check: zeros") {
      if (exact(t)) return result(fixed ? EvalStatus::passed : EvalStatus::invalid, fixed ? 0.5 : 0.99997, 0.004);
      return result(fixed ? EvalStatus::incorrect : (w.benchmark ? EvalStatus::invalid : EvalStatus::passed));
    }
    return result(EvalStatus::incorrect, 0);
  });
  WeakCheckReport r = check_weak(task, Language::cpp, ev);
  INFO(r.to_json().dump(2));
  CHECK(r.status == "weak");
  CHECK(r.workloads == std::vector<std::string>{"small", "big"});  // the feedback workloads
  CHECK(r.candidates[0].passed == std::vector<std::string>{"small", "big"});  // invalid (faster than light) passed too
  CHECK(r.candidates[0].passes_all(r.workloads));
  REQUIRE(r.stats.size() == 2);
  CHECK(r.stats[0].zero_fraction == doctest::Approx(0.99997));
  CHECK(r.stats[0].most_common_fraction == doctest::Approx(0.99997));  // zeros are the majority: no probe
  CHECK(r.stats[0].max_abs == doctest::Approx(0.004));
  REQUIRE(r.fix);
  CHECK(r.fix->tensor == "b");
  CHECK(r.fix->change == "centred at 0");
  CHECK(r.fix->to.p0 == "0");
  CHECK(r.fix->from.p0 == "-40");
  CHECK(r.fix->workload == "big");  // the largest workload
  CHECK(r.fix->extra_workload.name == "big_weak_fix");
  CHECK_FALSE(r.fix->extra_workload.benchmark);
  CHECK(r.fix->stats.zero_fraction == doctest::Approx(0.5));
  // x is centred already: the first trial is b's.
  const std::string text = r.text();
  CHECK(contains(text, "is weak"));
  CHECK(contains(text, "zeros (writes 0 to every output element) passes on small, big"));
  CHECK(contains(text, "workload \"small\": the reference's outputs are 99.997 % zeros"));
  CHECK(contains(text, "told apart everywhere: ones, echo, weakened reference \"no_bias\""));
  CHECK(contains(text, "Suggested fix: draw input \"b\" from {\"kind\":\"normal\",\"mean\":0,\"std\":1}"));
  CHECK(contains(text, "outputs are 50.0 % zeros"));
  CHECK(contains(text, "and list it in \"feedback_workloads\""));
  // The record reads back as written.
  const WeakCheckReport back = WeakCheckReport::from_json(r.to_json());
  CHECK(back.to_json() == r.to_json());
  CHECK(back.text() == text);
}

TEST_CASE("weak check: a weakened reference that passes, and the statistics of a non-zero majority") {
  TaskSpec spec = relu_task();
  SpecTask task(spec);
  ScriptedEvaluator ev([](const Solution& s, const WorkloadSpec&, const TaskSpec& t) {
    if (s.name == "no_bias") return result(EvalStatus::passed);
    if (exact(t) && s.name == "weak-check: zeros") return result(EvalStatus::incorrect, 0, 3.5);
    if (exact(t) && s.name == "weak-check: most common value") return result(EvalStatus::passed, 0.75);
    return result(EvalStatus::incorrect, 0);
  });
  WeakCheckOptions o;
  o.suggest_fixes = false;
  WeakCheckReport r = check_weak(task, Language::cpp, ev, o);
  CHECK(r.status == "weak");
  CHECK(r.candidates[3].passes_all(r.workloads));
  REQUIRE(r.stats.size() == 2);
  CHECK(r.stats[0].zero_fraction == 0);
  CHECK(r.stats[0].most_common_fraction == doctest::Approx(0.75));
  CHECK(contains(r.text(), "weakened reference \"no_bias\" (drops b) passes on small, big"));
  CHECK(contains(r.text(), "0 % zeros, its most common value makes up 75.0 %, largest |value| 3.5"));
  CHECK_FALSE(r.fix);
  REQUIRE(r.suggestions.size() == 1);
  CHECK(contains(r.suggestions[0], "Add a workload whose outputs are not almost all one value"));
  CHECK_FALSE(contains(r.suggestions[0], "tried"));  // none was
}

TEST_CASE("weak check: passing on some workloads only is flagged, not weak") {
  SpecTask task(relu_task());
  ScriptedEvaluator ev([](const Solution& s, const WorkloadSpec& w, const TaskSpec&) {
    return s.name == "weak-check: ones" && w.name == "small" ? result(EvalStatus::passed, 1)
                                                              : result(EvalStatus::incorrect, 0);
  });
  WeakCheckReport r = check_weak(task, Language::cpp, ev);
  CHECK(r.status == "weak_workloads");
  CHECK(r.flagged_workloads() == std::vector<std::string>{"small"});
  CHECK(r.candidates[1].passed == std::vector<std::string>{"small"});
  CHECK(r.candidates[1].failed == std::vector<std::string>{"big"});
  REQUIRE(r.stats.size() == 1);
  CHECK(r.suggestions.empty());
  CHECK_FALSE(r.fix);
  CHECK(contains(r.text(), "is weak on some workloads"));
  CHECK(contains(r.text(), "ones (writes 1 to every output element) passes on small; fails on big"));
}

TEST_CASE("weak check: without every_workload a candidate stops at the first workload that fails it") {
  SpecTask task(relu_task());
  // ones fails on small and would pass on big; zeros passes everywhere.
  ScriptedEvaluator ev([](const Solution& s, const WorkloadSpec& w, const TaskSpec&) {
    if (s.name == "weak-check: zeros") return result(EvalStatus::passed, 1);
    return s.name == "weak-check: ones" && w.name == "big" ? result(EvalStatus::passed, 1)
                                                            : result(EvalStatus::incorrect, 0);
  });
  WeakCheckOptions o;
  o.every_workload = false;
  o.suggest_fixes = false;
  WeakCheckReport r = check_weak(task, Language::cpp, ev, o);
  CHECK(r.status == "weak");
  CHECK(r.candidates[0].passed == std::vector<std::string>{"small", "big"});
  CHECK(r.candidates[1].passed.empty());
  CHECK(r.candidates[1].failed == std::vector<std::string>{"small"});  // big never tried
  // One batch of every candidate, then only the statistics (zeros, exactly, per workload).
  CHECK(r.evaluations == 3);
  CHECK(ev.batches[0].size() == 4);
  CHECK(ev.batches[1] == std::vector<std::string>{"weak-check: zeros"});

  // A normal task: one evaluation.
  ScriptedEvaluator normal([](const Solution&, const WorkloadSpec&, const TaskSpec&) {
    return result(EvalStatus::incorrect, 0);
  });
  CHECK(check_weak(task, Language::cpp, normal, o).evaluations == 1);
}

TEST_CASE("weak check: a candidate that does not compile is reported, and errors restore the options") {
  SpecTask task(relu_task());
  ScriptedEvaluator ev([](const Solution& s, const WorkloadSpec&, const TaskSpec&) {
    return result(s.name == "weak-check: echo" ? EvalStatus::compile_error : EvalStatus::incorrect, 0);
  });
  WeakCheckReport r = check_weak(task, Language::cpp, ev);
  CHECK(r.status == "ok");
  CHECK(contains(r.candidates[2].error, "compile_error"));
  CHECK_FALSE(r.candidates[2].passes_all(r.workloads));

  ScriptedEvaluator broken([](const Solution&, const WorkloadSpec&, const TaskSpec&) {
    return result(EvalStatus::passed);
  });
  broken.throw_on_call = 1;
  broken.options().seeds_per_workload = 5;
  CHECK_THROWS_WITH_AS(check_weak(task, Language::cpp, broken), "reference broke", Error);
  CHECK(broken.options().seeds_per_workload == 5);

  const WeakCheckReport skipped = weak_check_skipped(task, Language::cuda, "no GPU");
  CHECK(skipped.status == "skipped");
  CHECK(skipped.text() == "weak-check detection skipped: no GPU");
  CHECK(skipped.to_json().get_string("reason") == "no GPU");
}
