#include "eval/stats.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace ks::eval {

double quantile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto i = static_cast<std::size_t>(pos);
  if (i + 1 >= sorted.size()) return sorted.back();
  return sorted[i] + (pos - static_cast<double>(i)) * (sorted[i + 1] - sorted[i]);
}

std::pair<double, double> quantile_interval_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return {0, 0};
  const double n = static_cast<double>(sorted.size());
  const double spread = 1.96 * std::sqrt(n * q * (1 - q));
  // 1-based ranks of the order statistics that bracket the quantile.
  const double lo = std::floor(n * q - spread), hi = std::ceil(n * q + spread) + 1;
  auto at = [&](double rank) {
    const double r = std::clamp(rank, 1.0, n);
    return sorted[static_cast<std::size_t>(r) - 1];
  };
  return {at(lo), at(hi)};
}

TimingStats summarize_samples(std::vector<double> samples, LatencyStatistic statistic) {
  TimingStats t;
  if (samples.empty()) return t;
  const std::size_t n = samples.size();
  t.count = static_cast<int>(n);
  double sum = 0;
  for (double s : samples) sum += s;
  t.mean_ms = sum / static_cast<double>(n);
  double sq = 0;
  for (double s : samples) sq += (s - t.mean_ms) * (s - t.mean_ms);
  t.stddev_ms = n > 1 ? std::sqrt(sq / static_cast<double>(n - 1)) : 0.0;
  t.rel_stderr = (n > 1 && t.mean_ms > 0) ? t.stddev_ms / std::sqrt(static_cast<double>(n)) / t.mean_ms : 0.0;
  std::sort(samples.begin(), samples.end());
  t.min_ms = samples.front();
  t.max_ms = samples.back();
  t.median_ms = quantile_sorted(samples, 0.5);
  t.statistic = statistic;
  switch (statistic) {
    case LatencyStatistic::mean: {
      t.latency_ms = t.mean_ms;
      const double half = 1.96 * t.stddev_ms / std::sqrt(static_cast<double>(n));
      t.ci_lo_ms = std::max(t.min_ms, t.mean_ms - half);
      t.ci_hi_ms = std::min(t.max_ms, t.mean_ms + half);
      break;
    }
    case LatencyStatistic::median:
    case LatencyStatistic::undisturbed_median:
    case LatencyStatistic::p10: {
      const double q = statistic == LatencyStatistic::p10 ? 0.1 : 0.5;
      t.latency_ms = statistic == LatencyStatistic::p10 ? quantile_sorted(samples, q) : t.median_ms;
      std::tie(t.ci_lo_ms, t.ci_hi_ms) = quantile_interval_sorted(samples, q);
      break;
    }
  }
  return t;
}

TimingStats summarize_host_samples(const std::vector<double>& samples, const std::vector<bool>& disturbed) {
  TimingStats all = summarize_samples(samples, LatencyStatistic::p10);
  if (disturbed.size() != samples.size()) return all;
  std::vector<double> quiet;
  for (std::size_t i = 0; i < samples.size(); ++i)
    if (!disturbed[i]) quiet.push_back(samples[i]);
  all.disturbed = static_cast<int>(samples.size() - quiet.size());
  if (static_cast<int>(quiet.size()) < kMinUndisturbed) return all;
  TimingStats q = summarize_samples(quiet, LatencyStatistic::undisturbed_median);
  // The latency and its interval from the undisturbed calls; the rest
  // describes every call.
  all.statistic = q.statistic;
  all.latency_ms = q.latency_ms;
  all.ci_lo_ms = q.ci_lo_ms;
  all.ci_hi_ms = q.ci_hi_ms;
  return all;
}

LatencyStatistic latency_statistic_for(const EvalOptions& options, const std::string& backend) {
  if (options.timing == TimingMode::upstream) return LatencyStatistic::mean;
  return backend == "host" ? LatencyStatistic::p10 : LatencyStatistic::median;
}

RepetitionController::Limits RepetitionController::limits_from(const EvalOptions& o) {
  Limits l;
  l.min_reps = std::max(1, o.min_reps);
  l.max_reps = std::max(l.min_reps, o.max_reps);
  l.min_time_s = std::max(0.0, o.min_time_per_workload_s);
  l.max_time_s = std::max(l.min_time_s, o.max_time_per_workload_s);
  l.wall_cap_s = 3.0 * l.max_time_s;
  if (o.run_timeout_s > 0) l.wall_cap_s = std::min(l.wall_cap_s, 0.5 * o.run_timeout_s);
  l.target_rel_stderr = o.target_rel_stderr;
  if (o.timing == TimingMode::upstream) {
    // GPUMode eval.py: 3 to 100 calls, its own caps; max_time is the
    // caller's (upstream benchmarks use 10 s).
    l.rule = Rule::gpumode;
    l.min_reps = 3;
    l.max_reps = 100;
    l.min_time_s = 0;
    l.wall_cap_s = 120.0;
    if (o.run_timeout_s > 0) l.wall_cap_s = std::min(l.wall_cap_s, 0.5 * o.run_timeout_s);
  }
  return l;
}

double RepetitionController::rel_stderr() const {
  const std::size_t n = samples_.size();
  if (n < 2 || mean_ <= 0) return INFINITY;
  double var = m2_ / static_cast<double>(n - 1);
  return std::sqrt(var / static_cast<double>(n)) / mean_;
}

void RepetitionController::add(double sample_ms, double loop_wall_s) {
  if (done()) return;
  samples_.push_back(sample_ms);
  sum_ms_ += sample_ms;
  // Welford's update: stable even when the samples are nearly identical.
  const int n = static_cast<int>(samples_.size());
  double delta = sample_ms - mean_;
  mean_ += delta / n;
  m2_ += delta * (sample_ms - mean_);
  if (limits_.rule == Rule::gpumode) {
    if (n >= limits_.min_reps) {
      if (rel_stderr() < limits_.target_rel_stderr) reason_ = "converged";
      else if (sum_ms_ > limits_.max_time_s * 1e3) reason_ = "max_time";
      else if (loop_wall_s > limits_.wall_cap_s) reason_ = "wall_cap";
    }
    if (reason_.empty() && n >= limits_.max_reps) reason_ = "max_reps";
    return;
  }
  if (n >= limits_.max_reps) {
    reason_ = "max_reps";
  } else if (sum_ms_ >= limits_.max_time_s * 1e3) {
    reason_ = "max_time";
  } else if (loop_wall_s >= limits_.wall_cap_s) {
    reason_ = "wall_cap";
  } else if (n >= std::max(limits_.min_reps, 2) && sum_ms_ >= limits_.min_time_s * 1e3 &&
             rel_stderr() <= limits_.target_rel_stderr) {
    reason_ = "converged";
  }
}

}  // namespace ks::eval
