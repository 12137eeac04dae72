// The session's noise-aware comparison with the best: a lead within the
// measurements' intervals is measured again, both kernels, and counts only
// if it holds; the finding is journalled, so a resume decides the same way
// without measuring again.
#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <sstream>

#include "core/response/parse.hpp"
#include "ksearch/sys/search_strategy.hpp"
#include "search/fakes.hpp"
#include "search/session.hpp"
#include "support/test_util.hpp"

using namespace ks;
using ks::core::Session;
using ks::test::NoWorldModel;

namespace {

// "// NOISY: 0.97 1.02" in the source: the latency of each successive
// evaluation of that solution, each with a +-5% interval ("// HALF: 0.01":
// +-1%). Timed as on the host (p10).
class NoisyEvaluator : public test::FakeDeviceEvaluator {
 public:
  EvalResult evaluate(const Task& task, const Solution& s) override {
    ++evaluations;
    const std::string& src = s.sources.at(0).content;
    std::istringstream in(src.substr(src.find("NOISY: ") + 7));
    std::vector<double> seq;
    for (double v; in >> v;) seq.push_back(v);
    const double latency = seq.at(std::min(seen_[s.id]++, seq.size() - 1));
    const auto h = src.find("HALF: ");
    const double half = h == std::string::npos ? 0.05 : std::stod(src.substr(h + 6));
    EvalResult r;
    r.solution_id = s.id;
    for (const auto* w : task.spec().benchmark_workloads()) {
      WorkloadResult wr;
      wr.name = w->name;
      wr.benchmark = true;
      wr.timing.count = 50;
      wr.timing.statistic = LatencyStatistic::p10;
      wr.timing.mean_ms = wr.timing.latency_ms = latency;
      wr.timing.ci_lo_ms = latency * (1 - half);
      wr.timing.ci_hi_ms = latency * (1 + half);
      wr.reference_ms = 10.0;
      wr.paired = true;
      r.workloads.push_back(wr);
    }
    r.compute_summary();
    return r;
  }
  int evaluations = 0;

 private:
  std::map<std::string, std::size_t> seen_;
};

std::string noisy(const std::string& tag, const std::string& latencies, double half = 0.05) {
  return fmt::format(
      "```cpp kernel.cpp\n// {}\n// HALF: {}\n// NOISY: {}\nvoid f(const float* x, float* y, long n) {{ for (long i = 0; i < n; "
      "++i) y[i] = x[i]; }}\n```\n\n```json launch_plan\n{{\"calls\": [{{\"fn\": \"f\", \"args\": [\"x\", \"y\", "
      "\"N\"]}}]}}\n```\n",
      tag, half, latencies);
}

class Generate : public SearchStrategy {
 public:
  std::string name() const override { return "toy"; }
  void run(SearchContext& ctx) override {
    while (!ctx.should_stop()) {
      LlmRequest req;
      req.kind = PromptKind::generate;
      req.prompt = fmt::format("round {}", ctx.rounds_used() + 1);
      LlmResponse r = ctx.llm(req);
      Solution s = core::parse_candidate(r.text, Language::cpp);
      ctx.evaluate(s, "toy");
    }
  }
};

struct Run {
  SpecTask task{test::tiny_task_spec()};
  NoisyEvaluator evaluator;
  NoWorldModel wm;
};

std::vector<Json> decisions(const RunStore& store) {
  std::vector<Json> out;
  for (const auto& e : store.events())
    if (e.get_string("type") == "decision" && e.get_string("decision") == "noise_check") out.push_back(e);
  return out;
}

// A greedy run of one round per answer in a new folder `name`.
struct Ran {
  RunStore store;
  std::optional<BestSolution> best;
  int evaluations = 0;
};
Ran run_answers(const std::string& name, const std::vector<std::string>& answers) {
  Run f;
  test::ScriptedLlm llm(answers);
  RunStore store = RunStore::create(test::scratch_dir(name), Json::object());
  Session s(f.task, f.evaluator, llm, f.wm, store,
            test::search_config("greedy", Language::cpp, static_cast<int>(answers.size())));
  Generate g;
  s.run(g);
  return {std::move(store), s.best(), f.evaluator.evaluations};
}

}  // namespace

TEST_CASE("noise check: a lead within the noise that does not hold when measured again leaves the best") {
  Ran r = run_answers("noise_check_kept", {noisy("a", "1.00 1.00"), noisy("b", "0.97 1.03")});
  CHECK(r.evaluations == 4);  // a, b, then a and b again
  REQUIRE(r.best);
  CHECK(r.best->round == 1);
  CHECK(r.best->eval.latency_ms == doctest::Approx(1.0));
  auto at = r.store.attempts();
  REQUIRE(at.size() == 2);
  const Json* check = at[1].eval.metrics.find("noise_check");
  REQUIRE(check);
  CHECK_FALSE(check->get_bool("better"));
  CHECK(check->get_string("best") == at[0].solution.id);
  auto d = decisions(r.store);
  REQUIRE(d.size() == 1);
  CHECK(d[0].get_string("why").find("did not hold") != std::string::npos);
}

TEST_CASE("noise check: a lead that holds when measured again makes the new best") {
  Ran r = run_answers("noise_check_taken", {noisy("a", "1.00 1.00"), noisy("b", "0.97 0.96")});
  CHECK(r.evaluations == 4);
  REQUIRE(r.best);
  CHECK(r.best->round == 2);
  REQUIRE(decisions(r.store).size() == 1);
  CHECK(decisions(r.store)[0].get_bool("better"));
}

TEST_CASE("noise check: on the host a lead under 10% is measured again even when the intervals are apart") {
  // +-1% intervals, 6% apart: one evaluation says clear, separate ones differ more.
  Ran r = run_answers("noise_check_floor", {noisy("a", "1.00 1.00", 0.01), noisy("b", "0.94 1.02", 0.01)});
  CHECK(r.evaluations == 4);
  REQUIRE(r.best);
  CHECK(r.best->round == 1);
  REQUIRE(decisions(r.store).size() == 1);
}

TEST_CASE("noise check: a lead beyond the noise is taken at once, and a slower kernel is never checked") {
  Ran r = run_answers("noise_check_clear", {noisy("a", "1.00"), noisy("b", "0.50"), noisy("c", "0.52")});
  CHECK(r.evaluations == 3);
  REQUIRE(r.best);
  CHECK(r.best->round == 2);
  CHECK(decisions(r.store).empty());
}

TEST_CASE("noise check: a resume decides from the journal without measuring again") {
  const auto dir = run_answers("noise_check_resume", {noisy("a", "1.00 1.00"), noisy("b", "0.97 1.03")}).store.dir();
  Run f;
  test::ScriptedLlm llm({noisy("c", "2.0")});
  RunStore store = RunStore::open(dir);
  Session s(f.task, f.evaluator, llm, f.wm, store, test::search_config("greedy", Language::cpp, 3));
  Generate g;
  s.run(g);
  CHECK(s.replayed_evaluations() == 2);
  CHECK(f.evaluator.evaluations == 1);  // only the new round
  REQUIRE(s.best());
  CHECK(s.best()->round == 1);
}
