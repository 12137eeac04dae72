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
