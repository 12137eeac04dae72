// Timing statistics and the adaptive stopping rule for timed repetitions
// (architecture decision 4): repeat until the standard error of the mean is
// below a target fraction of the mean, or a time or repetition cap is hit.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ksearch/evaluator.hpp"
#include "ksearch/types.hpp"

namespace ks::eval {

// Mean, median, min, max, sample standard deviation (n - 1), the relative
// standard error of the mean, and the latency: `statistic` of the samples
// with its 95% confidence interval. Empty input gives all zeros.
TimingStats summarize_samples(std::vector<double> samples_ms,
                              LatencyStatistic statistic = LatencyStatistic::mean);

// Host timings: `disturbed[i]` says whether another process interrupted
// call i (empty: unknown). The latency is the median of the undisturbed
// calls when there are at least kMinUndisturbed of them, else the 10th
// percentile of all; `disturbed` counts the calls left out.
constexpr int kMinUndisturbed = 10;
TimingStats summarize_host_samples(const std::vector<double>& samples_ms, const std::vector<bool>& disturbed);

// The q-quantile of sorted samples (linear interpolation between order
// statistics), and a distribution-free 95% confidence interval for it: the
// order statistics at ranks n*q -+ 1.96*sqrt(n*q*(1-q)), widened to whole
// ranks and clamped to the samples.
double quantile_sorted(const std::vector<double>& sorted, double q);
std::pair<double, double> quantile_interval_sorted(const std::vector<double>& sorted, double q);

// The statistic timings use where a device is: on the host the undisturbed
// calls' median (summarize_host_samples; p10 is what this returns), the
// median on a GPU, the mean under the suite's own timing (TimingMode::upstream).
LatencyStatistic latency_statistic_for(const EvalOptions& options, const std::string& backend);

// Decides when to stop timing. Feed it every sample (and the wall time the
// loop has taken, which includes cache flushes); done() applies, in order:
//   count >= max_reps                                     -> "max_reps"
//   sum of samples >= max_time                            -> "max_time"
//   wall time >= wall cap                                 -> "wall_cap"
//   count >= max(min_reps, 2), sum >= min_time and
//   rel. standard error <= target                         -> "converged"
// Under Rule::gpumode (EvalOptions::timing TimingMode::upstream) it applies
// GPUMode eval.py's rule instead: nothing stops before min_reps (3) samples, then
//   rel. standard error < target                          -> "converged"
//   sum of samples > max_time                             -> "max_time"
//   wall time > wall cap (120 s)                          -> "wall_cap"
// and count >= max_reps (100)                             -> "max_reps".
class RepetitionController {
 public:
  enum class Rule { libksearch, gpumode };
  struct Limits {
    Rule rule = Rule::libksearch;
    int min_reps = 5;
    int max_reps = 1000;
    double min_time_s = 0;
    double max_time_s = 2.0;
    double wall_cap_s = 6.0;
    double target_rel_stderr = 1e-3;
  };
  explicit RepetitionController(Limits limits) : limits_(limits) {}
  // The limits EvalOptions asks for; the wall cap is three times the timing
  // cap (flushing dominates for short kernels) and at most half the
  // per-workload run timeout, so timing never runs into the kill.
  static Limits limits_from(const EvalOptions& options);

  void add(double sample_ms, double loop_wall_s);
  bool done() const { return !reason_.empty(); }
  // Why it stopped ("converged", "max_time", ...); empty while running.
  const std::string& stop_reason() const { return reason_; }
  const std::vector<double>& samples() const { return samples_; }
  const Limits& limits() const { return limits_; }
  double rel_stderr() const;

 private:
  Limits limits_;
  std::vector<double> samples_;
  double sum_ms_ = 0, mean_ = 0, m2_ = 0;
  std::string reason_;
};

}  // namespace ks::eval
