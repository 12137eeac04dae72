// Model-guided tuner (gp-ei) against random search on synthetic problems with
// known optima, on the same budgets and the same noisy measurements, averaged
// over seeds; and the tuner asked 4 configurations at a time (a batch, told
// after all four are measured) beside the tuner asked one at a time.
// Everything is measured side by side in this one run and printed as ratios.
//
//   bench_tune [--seeds N] [--cap N]
//
// Metrics per problem:
//   evaluations to reach the optimum (within 1 %): mean and median; a seed
//     that never reaches it counts as cap + 1 (and is reported);
//   quality after k evaluations: true latency of the best measured
//     configuration over the optimum (1.00 = found it);
//   failed evaluations among the first 40 (the constrained problem has a
//     hidden failure region);
//   decision overhead: wall time of ask() per evaluation (not a kernel's run time).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "search/tune/tune_strategy.hpp"
#include "search/tune/tuner.hpp"
#include "tune/synthetic.hpp"

namespace {

// The tune strategy's automatic batch.
constexpr int kBatch = ks::core::kDefaultTuneBatch;

struct Stats {
  std::vector<int> to_target;
  std::vector<std::vector<double>> quality;  // [checkpoint][seed]
  int never = 0;
  double failures = 0;
  double ask_seconds = 0;
  long asks = 0;
};

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

double median(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Runs one search on one problem and adds its numbers to `out`.
void drive(ks::core::ConfigSearch& s, const ks::test::SyntheticProblem& p, std::uint64_t noise_seed,
           double target, int cap, const std::vector<int>& checkpoints, double optimum, Stats& out, int batch = 1) {
  const auto t0 = std::chrono::steady_clock::now();
  const ks::test::SearchTrace trace =
      ks::test::run_search(s, p, noise_seed, target, cap, checkpoints.back(), batch);
  out.ask_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.asks += static_cast<long>(trace.best_true.size());
  out.to_target.push_back(trace.evaluations_to_target);
  out.never += trace.evaluations_to_target > cap;
  // Failures among the first evaluations, so both methods are counted over the same budget.
  const std::size_t window = std::min(static_cast<std::size_t>(checkpoints.back()), trace.failures.size());
  out.failures += window == 0 ? 0 : trace.failures[window - 1];
  for (std::size_t c = 0; c < checkpoints.size(); ++c) {
    const std::size_t k = std::min(static_cast<std::size_t>(checkpoints[c]), trace.best_true.size());
    const double q = k == 0 ? 0 : trace.best_true[k - 1];
    out.quality[c].push_back(q > 0 ? q / optimum : std::numeric_limits<double>::infinity());
  }
}

}  // namespace

int main(int argc, char** argv) {
  int seeds = 30, cap_large = 150;
  for (int i = 1; i < argc; ++i) {
    auto next = [&](const char* flag) {
      if (i + 1 >= argc) {
        fmt::print(stderr, "bench_tune: {} needs a value\n", flag);
        std::exit(2);
      }
      return std::atoi(argv[++i]);
    };
    if (!std::strcmp(argv[i], "--seeds"))
      seeds = next("--seeds");
    else if (!std::strcmp(argv[i], "--cap"))
      cap_large = next("--cap");
    else {
      fmt::print(stderr, "usage: bench_tune [--seeds N] [--cap N]\n");
      return 2;
    }
  }
  if (seeds < 1 || cap_large < 40) {
    fmt::print(stderr, "bench_tune: --seeds must be >= 1 and --cap >= 40\n");
    return 2;
  }

  const std::vector<int> checkpoints{10, 20, 40};
  fmt::print("tuner (gp-ei) vs random search, {} seeds, same noisy measurements (1 % noise)\n\n", seeds);
  fmt::print("{:<12} {:<34} {:>10} {:>10} {:>14}\n", "problem", "metric", "gp-ei", "random", "random/gp-ei");

  for (const auto& problem : {ks::test::bowl_problem(), ks::test::constrained_problem(), ks::test::large_problem()}) {
    const ks::core::ParamSpace space = ks::core::ParamSpace::from_json(problem.params);
    const double optimum = ks::test::true_minimum(problem);
    const bool small = space.grid_size() <= 50000;
    // Small grids: run until found (neither method repeats, so both get there).
    const int cap = small ? static_cast<int>(space.grid_size()) : cap_large;
    Stats gp, rnd, batched;
    gp.quality.resize(checkpoints.size());
    rnd.quality.resize(checkpoints.size());
    batched.quality.resize(checkpoints.size());
    for (int seed = 0; seed < seeds; ++seed) {
      const auto s = static_cast<std::uint64_t>(seed);
      ks::core::Tuner tuner(space, {}, s);
      ks::core::RandomSearch random(space, {}, s);
      ks::core::Tuner in_batches(space, {}, s);
      drive(tuner, problem, 1000 + s, optimum * 1.01, cap, checkpoints, optimum, gp);
      drive(random, problem, 1000 + s, optimum * 1.01, cap, checkpoints, optimum, rnd);
      drive(in_batches, problem, 1000 + s, optimum * 1.01, cap, checkpoints, optimum, batched, kBatch);
    }
    auto row = [&](const std::string& metric, double a, double b, bool lower_is_better = true) {
      const double ratio = lower_is_better ? b / a : a / b;
      fmt::print("{:<12} {:<34} {:>10.2f} {:>10.2f} {:>13.2f}x\n", problem.name, metric, a, b, ratio);
    };
    auto to_d = [](const std::vector<int>& v) { return std::vector<double>(v.begin(), v.end()); };
    const std::string capped = small ? "" : fmt::format(" (cap {})", cap);
    row("evals to optimum, mean" + capped, mean(to_d(gp.to_target)), mean(to_d(rnd.to_target)));
    row("evals to optimum, median" + capped, median(gp.to_target), median(rnd.to_target));
    if (!small)
      fmt::print("{:<12} {:<34} {:>10} {:>10}\n", problem.name, "seeds that never reached it",
                 fmt::format("{}/{}", gp.never, seeds), fmt::format("{}/{}", rnd.never, seeds));
    for (std::size_t c = 0; c < checkpoints.size(); ++c) {
      // True latency of the best configuration found, over the optimum (1.000 = found it).
      fmt::print("{:<12} {:<34} {:>10.3f} {:>10.3f} {:>13.2f}x\n", problem.name,
                 fmt::format("best/optimum after {} evals", checkpoints[c]), mean(gp.quality[c]),
                 mean(rnd.quality[c]), mean(rnd.quality[c]) / mean(gp.quality[c]));
    }
    fmt::print("{:<12} {:<34} {:>10.2f} {:>10.2f}\n", problem.name,
               fmt::format("failed evals in the first {}", checkpoints.back()), gp.failures / seeds,
               rnd.failures / seeds);
    fmt::print("{:<12} {:<34} {:>10.3f} {:>10.3f}\n", problem.name, "decision overhead, ms per eval",
               1e3 * gp.ask_seconds / static_cast<double>(gp.asks),
               1e3 * rnd.ask_seconds / static_cast<double>(rnd.asks));
    // The same tuner, 4 at a time: what choosing before seeing costs in evaluations.
    fmt::print("{:<12} {:<34} {:>10} {:>10} {:>14}\n", problem.name, "", "gp-ei", fmt::format("batch {}", kBatch),
               "batch/gp-ei");
    auto batch_row = [&](const std::string& metric, double a, double b) {
      fmt::print("{:<12} {:<34} {:>10.2f} {:>10.2f} {:>13.2f}x\n", problem.name, metric, a, b, b / a);
    };
    batch_row("evals to optimum, mean" + capped, mean(to_d(gp.to_target)), mean(to_d(batched.to_target)));
    batch_row("evals to optimum, median" + capped, median(gp.to_target), median(batched.to_target));
    for (std::size_t c = 0; c < checkpoints.size(); ++c)
      fmt::print("{:<12} {:<34} {:>10.3f} {:>10.3f} {:>13.2f}x\n", problem.name,
                 fmt::format("best/optimum after {} evals", checkpoints[c]), mean(gp.quality[c]),
                 mean(batched.quality[c]), mean(batched.quality[c]) / mean(gp.quality[c]));
    fmt::print("\n");
  }
  fmt::print("ratios: random/gp-ei > 1 means the tuner needs fewer evaluations, or that the best kernel\n"
             "random search found after k evaluations is that many times slower than the tuner's;\n"
             "batch/gp-ei > 1: what asking {} at a time costs in evaluations (a batch is compiled at once,\n"
             "so it takes far less time than {} rounds one at a time: bench_tune_batch measures that).\n",
             kBatch, kBatch);
  return 0;
}
