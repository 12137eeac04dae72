#include <doctest/doctest.h>

#include <cmath>

#include "eval/stats.hpp"

using namespace ks;
using namespace ks::eval;

TEST_CASE("stats: summary of known samples") {
  TimingStats t = summarize_samples({4, 1, 3, 2});
  CHECK(t.count == 4);
  CHECK(t.mean_ms == doctest::Approx(2.5));
  CHECK(t.median_ms == doctest::Approx(2.5));
  CHECK(t.min_ms == 1);
  CHECK(t.max_ms == 4);
  CHECK(t.stddev_ms == doctest::Approx(std::sqrt(5.0 / 3.0)));  // n - 1 in the denominator
  CHECK(t.rel_stderr == doctest::Approx(std::sqrt(5.0 / 3.0) / 2.0 / 2.5));

  TimingStats odd = summarize_samples({5, 1, 9});
  CHECK(odd.median_ms == 5);
  TimingStats one = summarize_samples({7});
  CHECK(one.stddev_ms == 0);
  CHECK(one.rel_stderr == 0);
  CHECK(summarize_samples({}).count == 0);
}

namespace {
RepetitionController::Limits limits() {
  RepetitionController::Limits l;
  l.min_reps = 5;
  l.max_reps = 100;
  l.min_time_s = 0;
  l.max_time_s = 1.0;
  l.wall_cap_s = 10.0;
  l.target_rel_stderr = 1e-3;
  return l;
}
}  // namespace

TEST_CASE("stats: steady samples converge exactly at min_reps") {
  RepetitionController c(limits());
  int n = 0;
  while (!c.done()) {
    c.add(1.0, 0.0);
    ++n;
  }
  CHECK(n == 5);
  CHECK(c.stop_reason() == "converged");
}

TEST_CASE("stats: noisy samples run until the standard error is small enough") {
  RepetitionController c(limits());
  // Alternating 0.9 / 1.1: SE(mean)/mean = 0.1/sqrt(n) (approximately), below
  // 1e-3 only after ~10^4 samples, so max_reps ends it.
  int n = 0;
  while (!c.done()) c.add(++n % 2 ? 0.9 : 1.1, 0.0);
  CHECK(n == 100);
  CHECK(c.stop_reason() == "max_reps");

  auto l = limits();
  l.target_rel_stderr = 0.02;  // reached once 0.1/sqrt(n) < 0.02, i.e. n > 25
  RepetitionController c2(l);
  n = 0;
  while (!c2.done()) c2.add(++n % 2 ? 0.9 : 1.1, 0.0);
  CHECK(c2.stop_reason() == "converged");
  CHECK(n >= 25);
  CHECK(n <= 30);
  CHECK(c2.rel_stderr() <= 0.02);
}

TEST_CASE("stats: the time cap and the wall cap end timing") {
  RepetitionController c(limits());
  int n = 0;
  while (!c.done()) {
    c.add(300.0 + (n % 2), 0.0);  // 300 ms each: the 1 s cap is reached at the 4th
    ++n;
  }
  CHECK(n == 4);
  CHECK(c.stop_reason() == "max_time");

  RepetitionController w(limits());
  n = 0;
  while (!w.done()) {
    ++n;
    w.add(0.001 * (1 + n % 3), 2.5 * n);  // flushing dominates: wall time grows fast
  }
  CHECK(n == 4);
  CHECK(w.stop_reason() == "wall_cap");
}

TEST_CASE("stats: min_time keeps steady samples going") {
  auto l = limits();
  l.min_time_s = 0.01;  // 10 ms of samples
  RepetitionController c(l);
  int n = 0;
  while (!c.done()) {
    c.add(1.0, 0.0);
    ++n;
  }
  CHECK(n == 10);
  CHECK(c.stop_reason() == "converged");
}

TEST_CASE("stats: limits from options respect the run timeout") {
  EvalOptions o;
  o.max_time_per_workload_s = 10;
  o.run_timeout_s = 8;
  auto l = RepetitionController::limits_from(o);
  CHECK(l.wall_cap_s == doctest::Approx(4.0));
  o.run_timeout_s = 600;
  CHECK(RepetitionController::limits_from(o).wall_cap_s == doctest::Approx(30.0));
}

// GPUMode eval.py's loop, written out as it reads (tests/eval only): from the
// 3rd sample on, stop when err/mean < 0.001 (err = std(n-1)/sqrt(n)), or
// mean*runs > max_time, or the wall time passed 120 s; at most 100 samples.
namespace {
int gpumode_reference_count(const std::vector<double>& ms, const std::vector<double>& wall_s, double max_time_ms) {
  std::vector<double> d;
  for (std::size_t i = 0; i < 100 && i < ms.size(); ++i) {
    d.push_back(ms[i]);
    if (i > 1) {
      double mean = 0, var = 0;
      for (double x : d) mean += x;
      mean /= static_cast<double>(d.size());
      for (double x : d) var += (x - mean) * (x - mean);
      double err = std::sqrt(var / static_cast<double>(d.size() - 1)) / std::sqrt(static_cast<double>(d.size()));
      if (err / mean < 0.001 || mean * static_cast<double>(d.size()) > max_time_ms || wall_s[i] > 120.0) break;
    }
  }
  return static_cast<int>(d.size());
}

int controller_count(const EvalOptions& o, const std::vector<double>& ms, const std::vector<double>& wall_s,
                     std::string* reason) {
  RepetitionController c(RepetitionController::limits_from(o));
  int n = 0;
  while (!c.done() && n < static_cast<int>(ms.size())) {
    c.add(ms[static_cast<std::size_t>(n)], wall_s[static_cast<std::size_t>(n)]);
    ++n;
  }
  *reason = c.stop_reason();
  return n;
}
}  // namespace

TEST_CASE("stats: timing \"upstream\" stops where GPUMode's eval.py stops") {
  EvalOptions o;
  o.timing = ks::TimingMode::upstream;
  o.max_time_per_workload_s = 10;  // eval.py benchmark mode
  o.run_timeout_s = 600;
  auto l = RepetitionController::limits_from(o);
  CHECK(l.rule == RepetitionController::Rule::gpumode);
  CHECK(l.min_reps == 3);
  CHECK(l.max_reps == 100);
  CHECK(l.wall_cap_s == doctest::Approx(120.0));

  std::string why;
  // Identical samples: converged at the 3rd (no earlier, even though two agree).
  std::vector<double> steady(200, 1.85), wall(200, 0.0);
  CHECK(controller_count(o, steady, wall, &why) == 3);
  CHECK(gpumode_reference_count(steady, wall, 10e3) == 3);
  CHECK(why == "converged");

  // Noise of a few per cent: the 0.1 % target is out of reach, 100 calls.
  std::vector<double> noisy;
  for (int i = 0; i < 200; ++i) noisy.push_back(1.85 * (1.0 + 0.03 * std::sin(1.7 * i)));
  CHECK(controller_count(o, noisy, wall, &why) == gpumode_reference_count(noisy, wall, 10e3));
  CHECK(why == "max_reps");

  // A slow call: the time cap, but never before three samples.
  std::vector<double> slow(200, 0.0);
  for (int i = 0; i < 200; ++i) slow[static_cast<std::size_t>(i)] = 6000.0 * (1.0 + 0.1 * (i % 2));
  CHECK(controller_count(o, slow, wall, &why) == 3);
  CHECK(gpumode_reference_count(slow, wall, 10e3) == 3);
  CHECK(why == "max_time");

  // Slowly decaying noise: both stop at the same sample.
  std::vector<double> decay;
  for (int i = 0; i < 200; ++i) decay.push_back(2.0 + 0.05 * std::cos(2.1 * i) / (1.0 + 0.2 * i));
  int expect = gpumode_reference_count(decay, wall, 10e3);
  CHECK(expect > 3);
  CHECK(expect < 100);
  CHECK(controller_count(o, decay, wall, &why) == expect);

  // The wall clock: past 120 s at the 5th sample.
  std::vector<double> walls;
  for (int i = 0; i < 200; ++i) walls.push_back(30.0 * (i + 1));
  CHECK(controller_count(o, noisy, walls, &why) == gpumode_reference_count(noisy, walls, 10e3));
  CHECK(why == "wall_cap");

  EvalOptions d;  // the default rule is unchanged
  CHECK(RepetitionController::limits_from(d).rule == RepetitionController::Rule::libksearch);
}

TEST_CASE("stats: the latency statistic and its interval") {
  std::vector<double> xs;
  for (int i = 1; i <= 100; ++i) xs.push_back(i);
  TimingStats p10 = summarize_samples(xs, LatencyStatistic::p10);
  CHECK(p10.statistic == LatencyStatistic::p10);
  CHECK(p10.latency_ms == doctest::Approx(10.9));  // 1 + 0.1 * 99, between the 10th and 11th samples
  // Order statistics at ranks 10 -+ 1.96 * 3, widened to whole ranks.
  CHECK(p10.ci_lo_ms == 4);
  CHECK(p10.ci_hi_ms == 17);
  TimingStats med = summarize_samples(xs, LatencyStatistic::median);
  CHECK(med.latency_ms == doctest::Approx(50.5));
  CHECK(med.ci_lo_ms < 50.5);
  CHECK(med.ci_hi_ms > 50.5);
  TimingStats mean = summarize_samples(xs, LatencyStatistic::mean);
  CHECK(mean.latency_ms == doctest::Approx(50.5));
  CHECK(mean.ci_hi_ms - mean.latency_ms == doctest::Approx(1.96 * mean.stddev_ms / 10));
  // Few samples: the interval is clamped to them, never beyond.
  TimingStats few = summarize_samples({3, 1, 2}, LatencyStatistic::p10);
  CHECK(few.ci_lo_ms == 1);
  CHECK(few.ci_hi_ms <= 3);
  // JSON keeps them; a result written before they existed reads as its mean.
  TimingStats back = TimingStats::from_json(p10.to_json());
  CHECK(back.statistic == LatencyStatistic::p10);
  CHECK(back.latency() == doctest::Approx(10.9));
  Json old = Json::parse(R"({"mean_ms": 2.0, "median_ms": 1.9, "min_ms": 1.5, "max_ms": 3, "stddev_ms": 0.5,
                             "rel_stderr": 0.02, "count": 25})");
  TimingStats legacy = TimingStats::from_json(old);
  CHECK(legacy.latency() == 2.0);
  CHECK(legacy.rel_half_width() == doctest::Approx(1.96 * 0.02));
  CHECK_THROWS(TimingStats::from_json(Json::parse(R"({"statistic": "max", "count": 1})")));
}

TEST_CASE("stats: the 10th percentile hardly moves when other processes steal time from some calls") {
  // A kernel of 1 ms; under load, a share of the calls is preempted and
  // takes 1 to 3 ms more. The mean follows the load, the 10th percentile
  // stays with the kernel.
  auto samples = [](double preempted_share, unsigned seed) {
    std::vector<double> xs;
    unsigned state = seed;
    auto next = [&] {
      state = state * 1664525u + 1013904223u;
      return static_cast<double>(state >> 8) / static_cast<double>(1u << 24);
    };
    for (int i = 0; i < 400; ++i) {
      double x = 1.0 + 0.01 * next();
      if (next() < preempted_share) x += 1.0 + 2.0 * next();
      xs.push_back(x);
    }
    return xs;
  };
  TimingStats quiet = summarize_samples(samples(0.0, 1), LatencyStatistic::p10);
  TimingStats busy = summarize_samples(samples(0.6, 2), LatencyStatistic::p10);
  CHECK(busy.latency_ms / quiet.latency_ms < 1.02);
  CHECK(busy.mean_ms / quiet.mean_ms > 1.8);
  CHECK(busy.ci_hi_ms / quiet.latency_ms < 1.05);
}

TEST_CASE("stats: the evaluation's latency interval combines the workloads' in log space") {
  EvalResult r;
  for (double l : {1.0, 4.0}) {
    WorkloadResult w;
    w.benchmark = true;
    w.timing.count = 20;
    w.timing.latency_ms = l;
    w.timing.ci_lo_ms = l / 1.1;
    w.timing.ci_hi_ms = l * 1.1;
    w.reference_ms = 2 * l;
    r.workloads.push_back(w);
  }
  r.compute_summary();
  CHECK(r.latency_ms == doctest::Approx(2.0));
  CHECK(r.speedup == doctest::Approx(2.0));
  // Two independent terms of half-width log(1.1): sqrt(2) * log(1.1) / 2.
  const double h = std::sqrt(2.0) * std::log(1.1) / 2;
  CHECK(r.latency_lo_ms == doctest::Approx(2.0 * std::exp(-h)));
  CHECK(r.latency_hi_ms == doctest::Approx(2.0 * std::exp(h)));
  EvalResult back = EvalResult::from_json(r.to_json());
  CHECK(back.latency_hi_ms == doctest::Approx(r.latency_hi_ms));
  CHECK(r.summary().find("+-") != std::string::npos);
}

TEST_CASE("stats: host timings leave out the calls another process interrupted") {
  // 30 undisturbed calls near 1 ms and 70 interrupted ones far slower: the
  // latency is the undisturbed calls' median, whatever the others took.
  std::vector<double> xs;
  std::vector<bool> hit;
  for (int i = 0; i < 100; ++i) {
    const bool interrupted = i % 10 >= 3;
    xs.push_back(interrupted ? 3.0 + i * 0.01 : 1.0 + 0.001 * (i % 7));
    hit.push_back(interrupted);
  }
  TimingStats t = summarize_host_samples(xs, hit);
  CHECK(t.statistic == LatencyStatistic::undisturbed_median);
  CHECK(t.disturbed == 70);
  CHECK(t.count == 100);
  CHECK(t.latency_ms == doctest::Approx(1.003).epsilon(0.01));
  CHECK(t.ci_hi_ms < 1.01);
  CHECK(t.mean_ms > 2.5);  // the mean still describes every call
  // Too few undisturbed calls: the 10th percentile of all of them.
  std::vector<bool> mostly(100, true);
  for (int i = 0; i < kMinUndisturbed - 1; ++i) mostly[static_cast<std::size_t>(i)] = false;
  TimingStats few = summarize_host_samples(xs, mostly);
  CHECK(few.statistic == LatencyStatistic::p10);
  CHECK(few.disturbed == 100 - (kMinUndisturbed - 1));
  // Unknown (no flags): the 10th percentile.
  CHECK(summarize_host_samples(xs, {}).statistic == LatencyStatistic::p10);
  CHECK(TimingStats::from_json(t.to_json()).disturbed == 70);
}
