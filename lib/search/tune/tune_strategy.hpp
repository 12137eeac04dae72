// The `tune` search strategy: search without an LLM. It takes the run's best
// solution (or, when nothing has passed yet, the task's first starting point
// in the run's language, evaluated first), explores the parameters that
// solution declares with the model-guided Tuner, one evaluated candidate per
// round, several rounds at a time (a batch is compiled together and measured
// one after another: SearchConfig::tune.batch), and finally tries per-shape
// values where the best configuration differs between benchmark workloads.
// See docs/tuning.md.
//
// The same strategy serves the tune phase after an LLM search
// (--tune-rounds N): the engine runs it with the remaining round budget.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "ksearch/strategy.hpp"
#include "ksearch/sys/search_strategy.hpp"

namespace ks::core {

// Configurations evaluated together (SearchConfig::tune.batch): at most
// kMaxTuneBatch; automatic is `parallel` when above 1, else
// kDefaultTuneBatch, which keeps a GPU host's compile workers busy while
// leaving the model a decision every few rounds (docs/tuning.md, "Batches").
inline constexpr int kDefaultTuneBatch = 4;
inline constexpr int kMaxTuneBatch = 64;
// The batch size a run's configuration asks for (before the rounds left cap it).
int tune_batch_size(const SearchConfig& config);

struct TuneStrategyOptions {
  // Stop after this many rounds without a gain of min_improvement (0 = only
  // the run's budget or an exhausted space stops the search).
  int stall_rounds = 16;
  double min_improvement = 0.005;
  // A workload gets its own values only when they beat the overall best
  // configuration on it by this fraction (timing noise is not a reason).
  double variant_min_gain = 0.01;
  int initial_samples = 0;        // space-filling seeds (0 = automatic)
  std::string method = "gp-ei";   // "gp-ei" or "random" (for comparisons)
};

// Runs deterministically given the evaluation results: the tuner's seed comes
// from the run's seed and the base solution's id. Throws
// ks::Error(Status::invalid_argument) when there is nothing to tune (no
// passing solution and no starting point) or the base's parameter
// declaration is malformed; a base without parameters ends the strategy with
// a "tune_skipped" event.
std::unique_ptr<SearchStrategy> make_tune_strategy();
std::unique_ptr<SearchStrategy> make_tune_strategy(TuneStrategyOptions options);

// The round budget a tune pass planned its search for (the run's rounds when
// it began: how many configurations it seeds with, how it sizes its last
// batches), as its state (state.json) records it: "planned_rounds", or for
// a run recorded before that field its "max_rounds". nullopt when `state`
// is not a tune pass's. A resumed pass keeps that plan whatever the budget
// now is, so a run resumed with fewer rounds replays its journal and stops
// early; a budget above the plan would leave rounds the tuner never uses.
// Throws ks::Error(Status::parse) for a tune state whose plan is not a
// round count.
std::optional<int> recorded_tune_plan(const Json& state);

}  // namespace ks::core
