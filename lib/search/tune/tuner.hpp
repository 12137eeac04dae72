// Searches over a solution's tunable parameters, independent of evaluation:
// the caller asks for a configuration, measures it however it likes, and
// tells the result.
//
//   Tuner tuner(space, options, seed);
//   while (auto config = tuner.ask()) {
//     if (auto ms = measure(*config)) tuner.tell(*config, *ms);
//     else tuner.tell_failure(*config);
//   }
//   // tuner.best(), tuner.stop_reason()
//
// Several configurations may be asked before their results are told (a
// batch measured together: ask_batch): each later choice treats the ones
// still pending as measured at the model's prediction (kriging believer).
//
// Tuner: a space-filling seed design (maximin Latin hypercube over value
// ranks, repaired to admissible points), then a Gaussian-process surrogate of
// log objective with expected improvement, discounted near known failures.
// RandomSearch: uniform over admissible, untried points; the baseline.
// Both are deterministic given the seed and the results told.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "search/tune/gp.hpp"
#include "search/tune/space.hpp"

namespace ks::core {

struct TunerOptions {
  int max_evaluations = 0;          // stop after this many results (0 = no limit)
  int stall_evaluations = 0;        // stop after this many results without improving the best (0 = never)
  double min_improvement = 0.0;     // relative gain that counts as improving (0.005 = 0.5 %)
  int initial_samples = 0;          // space-filling seeds before the model (0 = automatic)
  std::uint64_t enumerate_limit = 50000;  // grids up to this many points are enumerated
  int candidate_pool = 3000;        // points scored per model decision in larger spaces
  double failure_radius = 0.25;     // reach of the failure penalty in [0, 1] feature units (0 = off)
  double exploration = 0.0;         // xi of expected improvement, in log-objective units
  std::vector<util::Vars> workload_dims;  // configurations must be admissible for each of these
};

enum class TuneStop {
  none,       // still searching
  budget,     // max_evaluations reached
  stalled,    // stall_evaluations results without improvement
  exhausted,  // no admissible configuration left that was not tried
};
const char* to_string(TuneStop s);

// Why the last ask() chose what it chose.
struct TunerDecision {
  // "seed" (space-filling design), "explore" (too few results for a model),
  // "model" (expected improvement), "exploit" (the model expects no gain
  // anywhere: its best guess) or "random".
  std::string phase;
  int candidates = 0;              // points scored for this choice
  double expected_improvement = 0; // model: EI of the choice, in log-objective units
  double feasibility = 1;          // chance of not failing, from nearby failures
  double predicted = 0;            // model/exploit: predicted objective (0 when no model)
  double predicted_log_sd = 0;     // model/exploit: predictive standard deviation of log objective
  // Configurations asked before this one whose results were not told yet
  // (earlier members of its batch); the model took them as measured at its
  // prediction.
  int pending = 0;
};

// One configuration of a batch, with why it was chosen.
struct Proposal {
  util::Vars config;
  TunerDecision decision;
};

// The surrogate as last fitted, for logs: how well it explains the data.
struct SurrogateInfo {
  int points = 0;
  std::vector<double> length_scales;
  double noise_ratio = 0;
  double log_marginal_likelihood = 0;
  double loo_rmse = 0;  // leave-one-out RMSE of log objective (0.05 ~ 5 % error)
};

// What Tuner and RandomSearch share: bookkeeping of tried, pending and failed
// points, the best result and the stopping rules.
class ConfigSearch {
 public:
  virtual ~ConfigSearch() = default;
  ConfigSearch(const ConfigSearch&) = delete;
  ConfigSearch& operator=(const ConfigSearch&) = delete;

  virtual std::string name() const = 0;

  // The next configuration: admissible, never asked or told before. nullopt
  // once the search is done; stop_reason() says why. Several asks before the
  // matching tells are allowed: pending points are not proposed again, and
  // the model takes them as measured at its prediction (kriging believer),
  // so the next choice looks elsewhere.
  std::optional<util::Vars> ask();
  // Up to `count` distinct configurations to measure together (fewer when
  // the search ends first; stop_reason() then says why), each with its
  // decision: ask() repeated. ask_batch(1) is ask(). Throws
  // ks::Error(invalid_argument) for a count below 1.
  std::vector<Proposal> ask_batch(int count);
  // The measured objective (lower is better, positive and finite) of a
  // configuration, asked or not (e.g. a starting point measured beforehand).
  // Throws ks::Error(invalid_argument) for a configuration outside the space
  // or a bad objective, and ks::Error(state) for one already told.
  void tell(const util::Vars& config, double objective);
  // The configuration failed (compile error, launch error, wrong result): it
  // is never proposed again and its neighbourhood is discounted.
  void tell_failure(const util::Vars& config);

  bool done() const { return stop_ != TuneStop::none; }
  TuneStop stop_reason() const { return stop_; }
  int evaluations() const { return static_cast<int>(results_.size() + failed_.size()); }
  int failures() const { return static_cast<int>(failed_.size()); }
  int pending() const { return static_cast<int>(pending_.size()); }
  int evaluations_since_improvement() const { return since_improvement_; }
  std::optional<util::Vars> best() const;
  double best_objective() const { return best_objective_; }  // +inf before the first result
  const TuneSpace& space() const { return space_; }
  // Admissible points in the whole space, when the grid is small enough to count.
  std::optional<std::uint64_t> admissible_count() const;
  const TunerDecision& last_decision() const { return decision_; }
  const TunerOptions& options() const { return options_; }

 protected:
  ConfigSearch(ParamSpace space, TunerOptions options, std::uint64_t seed);

  // The next point: admissible and not tried. nullopt when none is left.
  virtual std::optional<GridPoint> propose() = 0;

  struct Result {
    GridPoint point;
    double objective;
  };
  const std::vector<Result>& results() const { return results_; }
  const std::vector<GridPoint>& failed() const { return failed_; }
  bool tried(const GridPoint& p) const { return tried_.count(p) > 0; }
  // Every point asked or told so far.
  const std::set<GridPoint>& tried_points() const { return tried_; }
  // Points asked whose results are not told yet.
  const std::set<GridPoint>& pending_points() const { return pending_; }
  // Every admissible point, when the grid is enumerated.
  const std::optional<std::vector<GridPoint>>& all_admissible() const { return all_; }
  // Untried points to score: all of them when there are few, else a random
  // sample of the admissible grid plus neighbours of the best results.
  std::vector<GridPoint> candidate_pool();
  // Chance that `p` works, from failures and successes near it (1 with no
  // failures around).
  double feasibility(const GridPoint& p) const;
  std::mt19937_64& rng() { return rng_; }

  TunerDecision decision_;

 private:
  const Result* best_result() const;

  TuneSpace space_;
  TunerOptions options_;
  std::mt19937_64 rng_;
  std::optional<std::vector<GridPoint>> all_;
  std::set<GridPoint> tried_, pending_;
  std::vector<Result> results_;
  std::vector<GridPoint> failed_;
  double best_objective_;
  int since_improvement_ = 0;
  TuneStop stop_ = TuneStop::none;
};

// The model-guided tuner.
class Tuner final : public ConfigSearch {
 public:
  Tuner(ParamSpace space, TunerOptions options, std::uint64_t seed);
  std::string name() const override { return "gp-ei"; }

  // Number of space-filling seeds this tuner starts with.
  int initial_samples() const { return initial_samples_; }
  // The surrogate after the last model decision; nullopt before the first.
  const std::optional<SurrogateInfo>& surrogate() const { return surrogate_; }

 protected:
  std::optional<GridPoint> propose() override;

 private:
  std::vector<GridPoint> space_filling_design(int count);
  std::optional<GridPoint> farthest_point(const std::vector<GridPoint>& pool) const;
  std::optional<GridPoint> model_choice(const std::vector<GridPoint>& pool);

  int initial_samples_;
  bool design_made_ = false;
  std::vector<GridPoint> design_;  // seeds still to propose, in order
  GaussianProcess gp_;
  std::optional<GpHyper> hyper_;  // warm start for the next fit
  int full_fit_points_ = 0;       // data size at the last full hyperparameter search
  int fit_points_ = -1;           // data size at the last fit (a later choice of one batch reuses it)
  std::optional<SurrogateInfo> surrogate_;
};

// Uniform random search over admissible, untried points: the baseline.
class RandomSearch final : public ConfigSearch {
 public:
  RandomSearch(ParamSpace space, TunerOptions options, std::uint64_t seed);
  std::string name() const override { return "random"; }

 protected:
  std::optional<GridPoint> propose() override;

 private:
  std::vector<GridPoint> order_;  // enumerated spaces: a shuffled admissible list
  std::size_t next_ = 0;
  bool shuffled_ = false;
};

// "gp-ei" (Tuner) or "random" (RandomSearch); throws ks::Error(not_found) otherwise.
std::unique_ptr<ConfigSearch> make_config_search(const std::string& method, ParamSpace space,
                                                 TunerOptions options, std::uint64_t seed);

}  // namespace ks::core
