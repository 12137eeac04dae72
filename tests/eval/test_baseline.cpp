// Scoring against a task's baseline (vs_baseline): the baseline solution is
// measured once per device and cached (memory and file), or its latencies
// are imported per card; results carry both the speedup over the reference
// and the mean ratio over the baseline.
#include <doctest/doctest.h>

#include <filesystem>

#include "eval/baseline_scoring.hpp"
#include "fixtures.hpp"
#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "support/test_util.hpp"

using namespace ks;
using ks::test::vadd_candidate;

namespace {

// vadd scored against a baseline that does the work four times over.
TaskSpec vadd_vs_baseline() {
  TaskSpec t = ks::test::vadd_task("2*N", "test/vadd_vs_baseline");
  t.score = ScoreMode::vs_baseline;
  Solution b = vadd_candidate("for (int r = 0; r < 4; ++r)\n  for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] + 2.0f * y[i];",
                              "baseline (4x the work)");
  b.description = "the work four times over";
  t.baselines[Language::cpp] = b;
  t.validate();
  return t;
}

}  // namespace

TEST_CASE("vs_baseline: mean of per-workload ratios, score follows the task's mode") {
  EvalResult r;
  r.status = EvalStatus::passed;
  WorkloadResult a, b, t;
  a.name = "a", a.benchmark = true, a.timing.count = 3, a.timing.mean_ms = 2.0, a.baseline_ms = 4.0, a.reference_ms = 8;
  b.name = "b", b.benchmark = true, b.timing.count = 3, b.timing.mean_ms = 1.0, b.baseline_ms = 0.5, b.reference_ms = 4;
  t.name = "t";  // a correctness test: not timed, not scored
  r.workloads = {t, a, b};
  r.compute_summary();
  CHECK(r.vs_baseline == doctest::Approx((2.0 + 0.5) / 2));  // arithmetic mean, as K-Search
  CHECK(r.speedup == doctest::Approx(4.0));
  CHECK(r.score == doctest::Approx(1.0 / r.latency_ms));     // mode latency
  r.score_mode = ScoreMode::vs_baseline;
  r.compute_summary();
  CHECK(r.score == doctest::Approx(1.25));
  CHECK(r.summary().find("1.25x vs baseline") != std::string::npos);
  CHECK(EvalResult::from_json(r.to_json()).score_mode == ScoreMode::vs_baseline);
  CHECK(EvalResult::from_json(r.to_json()).workloads[1].baseline_ms == 4.0);
  // One workload without a baseline latency: no ratio, and the score falls back.
  r.workloads[2].baseline_ms = 0;
  r.compute_summary();
  CHECK(r.vs_baseline == 0);
  CHECK(r.score == doctest::Approx(1.0 / r.latency_ms));
}

TEST_CASE("vs_baseline: imported latencies match a card by name or by its underscored prefix") {
  Json table = Json::parse(R"({"NVIDIA_H100": {"w1": 0.5}, "NVIDIA A100-SXM4-80GB": {"w1": 0.9}})");
  CHECK(eval::imported_baseline_ms(table, "NVIDIA H100 80GB HBM3", "w1") == 0.5);
  CHECK(eval::imported_baseline_ms(table, "NVIDIA A100-SXM4-80GB", "w1") == 0.9);
  CHECK_FALSE(eval::imported_baseline_ms(table, "NVIDIA H100 80GB HBM3", "w2"));
  CHECK_FALSE(eval::imported_baseline_ms(table, "NVIDIA H1000", "w1"));
  CHECK_FALSE(eval::imported_baseline_ms(table, "NVIDIA H200", "w1"));
}

TEST_CASE("vs_baseline: the baseline is measured once per device, cached on disk, or imported") {
  auto dir = ks::test::scratch_dir("eval_baseline");
  SpecTask task(vadd_vs_baseline());
  auto cfg = ks::test::test_config(dir.string());
  EvalResult first;
  {
    auto ev = make_evaluator(cfg);
    first = ev->evaluate(task, vadd_candidate(ks::test::kGoodBody, "good"));
    INFO(first.to_json().dump(2));
    REQUIRE(first.passed());
    CHECK(first.score_mode == ScoreMode::vs_baseline);
    REQUIRE(first.workloads.size() == 2);
    CHECK(first.workloads[0].baseline_ms == 0);  // the correctness test is not timed
    CHECK(first.workloads[1].baseline_ms > 0);
    CHECK(first.vs_baseline > 0);
    CHECK(first.score == first.vs_baseline);
    CHECK(first.speedup > 0);  // the speedup over the reference is still there
    // A failing candidate gets no baseline figures.
    EvalResult wrong = ev->evaluate(task, vadd_candidate(ks::test::kWrongBody, "wrong"));
    CHECK_FALSE(wrong.passed());
    CHECK(wrong.vs_baseline == 0);
    // The same evaluator does not measure the baseline again.
    EvalResult again = ev->evaluate(task, vadd_candidate(ks::test::kGoodBody, "good"));
    CHECK(again.workloads[1].baseline_ms == first.workloads[1].baseline_ms);
    // The evaluation that measured it says so in its phases, within its wall time.
    const Json& fp = first.metrics.at("phases");
    CHECK(fp.get_number("baseline_s") > 0);
    CHECK(fp.get_number("baseline_s") <= fp.get_number("wall_s") - fp.get_number("checks_s"));
    CHECK(again.metrics.at("phases").get_number("baseline_s") == 0);
  }
  CHECK(std::filesystem::is_regular_file(dir / "baselines" / "test_vadd_vs_baseline.json"));
  {
    // Nor does a new evaluator (another process would read the same file).
    auto ev = make_evaluator(cfg);
    EvalResult r = ev->evaluate(task, vadd_candidate(ks::test::kGoodBody, "good"));
    CHECK(r.workloads[1].baseline_ms == first.workloads[1].baseline_ms);
  }
  {
    // Imported latencies for this card take precedence over measurements.
    auto imported_cfg = cfg;
    imported_cfg.options.baseline_latencies =
        Json::obj({{first.device, Json::obj({{"b1", 1000.0}})}});
    auto ev = make_evaluator(imported_cfg);
    EvalResult r = ev->evaluate(task, vadd_candidate(ks::test::kGoodBody, "good"));
    CHECK(r.workloads[1].baseline_ms == 1000.0);
    CHECK(r.vs_baseline == doctest::Approx(1000.0 / r.workloads[1].timing.latency()));
  }
  {
    auto bad_cfg = cfg;
    bad_cfg.options.baseline_latencies = Json::obj({{"x", Json::obj({{"b1", -1.0}})}});
    CHECK_THROWS_WITH_AS(make_evaluator(bad_cfg), doctest::Contains("must be a positive number of milliseconds"), Error);
  }
}

TEST_CASE("vs_baseline: a baseline that fails is the task's fault, not the candidate's") {
  TaskSpec t = vadd_vs_baseline();
  t.name = "test/vadd_bad_baseline";
  t.baselines[Language::cpp] = vadd_candidate(ks::test::kWrongBody, "broken baseline");
  SpecTask task(t);
  auto ev = make_evaluator(ks::test::test_config(ks::test::scratch_dir("eval_bad_baseline").string()));
  CHECK_THROWS_WITH_AS(ev->evaluate(task, vadd_candidate(ks::test::kGoodBody, "good")),
                       doctest::Contains("its baseline solution \"broken baseline\" does not pass"), Error);
}
