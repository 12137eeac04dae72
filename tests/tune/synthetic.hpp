// Synthetic tuning problems with known optima, shared by the tuner tests and
// benchmarks/tune: a latency model over a discrete grid, measured with
// multiplicative noise, and a driver that counts how many evaluations a
// search needs to reach the optimum.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "search/tune/tuner.hpp"
#include "ksearch/json.hpp"

namespace ks::test {

using util::Vars;

struct SyntheticProblem {
  std::string name;
  Json params;  // the declaration, as a solution would carry it
  // Noise-free latency; nullopt where the configuration fails (a hidden
  // constraint: it compiles or launches badly, which the tuner must learn).
  std::function<std::optional<double>(const util::Vars&)> latency;
  double noise = 0.01;  // relative standard deviation of a measurement
};

inline double log2v(const util::Vars& v, const char* name) { return std::log2(static_cast<double>(v.at(name))); }

// A shifted quadratic bowl in log2 parameter space with a mild interaction;
// the unique minimum is BLOCK_M=64 BLOCK_N=32 VEC=4 STAGES=3 (800 points).
inline SyntheticProblem bowl_problem() {
  SyntheticProblem p;
  p.name = "bowl";
  p.params = Json::parse(R"({
    "space": {"BLOCK_M": {"values": [16, 32, 64, 128, 256]},
              "BLOCK_N": {"values": [16, 32, 64, 128, 256]},
              "VEC":     {"min": 1, "max": 8},
              "STAGES":  {"min": 1, "max": 4}}})");
  p.latency = [](const util::Vars& v) -> std::optional<double> {
    const double m = log2v(v, "BLOCK_M") - 6, n = log2v(v, "BLOCK_N") - 5;
    const double vec = log2v(v, "VEC") - 2, st = log2v(v, "STAGES") - std::log2(3.0);
    return 0.5 * std::exp(0.5 * m * m + 0.3 * n * n + 0.1 * m * n + 0.2 * vec * vec + 0.4 * st * st);
  };
  return p;
}

// A bowl whose unconstrained minimum (128 x 128 tiles) is cut away by a
// declared constraint, so the optimum lies on the constraint's boundary
// (BLOCK_M=64 BLOCK_N=128 WARPS=4 UNROLL=2), plus a hidden failure region
// (too many warps for small tiles) that only evaluation reveals (1024 points).
inline SyntheticProblem constrained_problem() {
  SyntheticProblem p;
  p.name = "constrained";
  p.params = Json::parse(R"({
    "space": {"BLOCK_M": {"values": [16, 32, 64, 128, 256, 512]},
              "BLOCK_N": {"values": [16, 32, 64, 128, 256, 512]},
              "WARPS":   {"values": [1, 2, 4, 8]},
              "UNROLL":  {"min": 1, "max": 8}},
    "constraints": ["BLOCK_M * BLOCK_N <= 8192", "BLOCK_M * BLOCK_N >= WARPS * 32"]})");
  p.latency = [](const util::Vars& v) -> std::optional<double> {
    if (v.at("WARPS") == 8 && v.at("BLOCK_M") * v.at("BLOCK_N") <= 1024) return std::nullopt;
    const double m = log2v(v, "BLOCK_M") - 7, n = log2v(v, "BLOCK_N") - 7.3;
    const double w = log2v(v, "WARPS") - 2, u = log2v(v, "UNROLL") - 1;
    return 1.0 * std::exp(0.35 * m * m + 0.25 * n * n + 0.3 * w * w + 0.15 * u * u);
  };
  return p;
}

// A space too large to enumerate (64^4 points): four integer parameters 1..64
// with a bowl in log2 space; the optimum is A=8 B=24 C=3 D=40.
inline SyntheticProblem large_problem() {
  SyntheticProblem p;
  p.name = "large";
  p.params = Json::parse(R"({
    "space": {"A": {"min": 1, "max": 64}, "B": {"min": 1, "max": 64},
              "C": {"min": 1, "max": 64}, "D": {"min": 1, "max": 64}}})");
  p.latency = [](const util::Vars& v) -> std::optional<double> {
    const double a = log2v(v, "A") - 3, b = log2v(v, "B") - std::log2(24.0);
    const double c = log2v(v, "C") - std::log2(3.0), d = log2v(v, "D") - std::log2(40.0);
    return 2.0 * std::exp(0.6 * a * a + 0.4 * b * b + 0.3 * c * c + 0.5 * d * d + 0.1 * a * d);
  };
  return p;
}

// Known optima, for problems too large to enumerate.
inline double known_minimum(const SyntheticProblem& p) {
  if (p.name == "large") return *p.latency({{"A", 8}, {"B", 24}, {"C", 3}, {"D", 40}});
  return std::numeric_limits<double>::quiet_NaN();
}

// The noise-free optimum over every admissible, working configuration.
inline double true_minimum(const SyntheticProblem& p) {
  core::TuneSpace space(core::ParamSpace::from_json(p.params));
  if (space.grid_size() > (1u << 20)) return known_minimum(p);
  double best = std::numeric_limits<double>::infinity();
  const auto all = space.enumerate_admissible(1u << 20);
  for (const auto& pt : *all)
    if (auto l = p.latency(space.to_vars(pt))) best = std::min(best, *l);
  return best;
}

struct SearchTrace {
  int evaluations_to_target = 0;   // evaluations until one within the target (cap + 1 if never)
  std::vector<double> best_true;   // after each evaluation: true latency of the best measured config
  std::vector<int> failures;       // after each evaluation: failed evaluations so far
};

// Drives `search` on `problem` until it reaches `target` (and has made at
// least `min_evaluations`), runs out of configurations, or has made `cap`
// evaluations, asking `batch` configurations at a time (never more than the
// cap leaves) and telling their results in order. Measurements carry noise
// drawn from `noise_seed` and the configuration, so every search sees the
// same measurement for the same configuration.
inline SearchTrace run_search(core::ConfigSearch& search, const SyntheticProblem& problem,
                              std::uint64_t noise_seed, double target, int cap, int min_evaluations = 0,
                              int batch = 1) {
  SearchTrace t;
  t.evaluations_to_target = cap + 1;
  double best_measured = std::numeric_limits<double>::infinity(), best_true = 0;
  int e = 0;
  while (e < cap && (t.evaluations_to_target > cap || e < min_evaluations)) {
    const std::vector<core::Proposal> proposals = search.ask_batch(std::min(batch, cap - e));
    if (proposals.empty()) break;
    for (const auto& p : proposals) {
      ++e;
      const util::Vars& config = p.config;
      std::optional<double> truth = problem.latency(config);
      if (!truth) {
        search.tell_failure(config);
      } else {
        std::uint64_t h = noise_seed * 0x9E3779B97F4A7C15ull;
        for (const auto& [k, v] : config) h = (h ^ static_cast<std::uint64_t>(v)) * 0x100000001B3ull;
        std::mt19937_64 rng(h);
        const double u1 = (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53;
        const double u2 = static_cast<double>(rng() >> 11) * 0x1.0p-53;
        const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.141592653589793 * u2);
        const double measured = *truth * std::exp(problem.noise * z);
        search.tell(config, measured);
        if (measured < best_measured) {
          best_measured = measured;
          best_true = *truth;
        }
        if (*truth <= target && t.evaluations_to_target > cap) t.evaluations_to_target = e;
      }
      t.best_true.push_back(best_true);
      t.failures.push_back(search.failures());
    }
  }
  return t;
}

}  // namespace ks::test
