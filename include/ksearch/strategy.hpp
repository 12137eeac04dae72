// Search strategies and the context they run in.
//
// A strategy is straight-line code that asks the context for LLM answers and
// evaluations. The context journals both in the run folder, which is what
// makes every strategy resumable for free: on resume the strategy runs again
// from the start and the context answers from the journal (same LLM answers,
// same evaluation results) until it reaches the point where the run
// stopped, then continues live. Strategies must therefore be deterministic
// given the answers they receive: no wall-clock decisions, no unseeded
// randomness (use rng()).
//
// Stopping: once should_stop() is true (budget spent, Ctrl-C, a callback),
// the context accepts no further LLM call, evaluation, event or snapshot: the
// call throws ks::SearchStopped, which unwinds the strategy and is caught by
// the engine. A stopped run's journal is thus always a prefix of what a
// longer run would have done, which is what lets a resume (possibly with a
// larger budget) continue it exactly. Strategies just loop while
// !should_stop() and must not catch SearchStopped.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ksearch/evaluator.hpp"
#include "ksearch/export.h"
#include "ksearch/llm.hpp"
#include "ksearch/task.hpp"
#include "ksearch/types.hpp"
#include "ksearch/world_model.hpp"

KS_NAMESPACE_BEGIN

// Thrown by SearchContext calls made after the run has been told to stop.
class KS_API SearchStopped : public std::exception {
 public:
  explicit SearchStopped(std::string reason) : reason_(std::move(reason)) {}
  const char* what() const noexcept override { return reason_.c_str(); }
  const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
};

// Configuration of one search run. Names follow the original's CLI flags.
struct KS_API SearchConfig {
  std::string strategy = "world_model";  // world_model | greedy | tune
  Language language = Language::cuda;
  int max_rounds = 20;                   // a round is one evaluated candidate
  int wm_stagnation_window = 5;          // cycle ends after this many rounds without improvement
  int wm_max_difficulty = 4;             // difficulty gate for action selection (1..5)
  int wm_edit_retries = 3;               // attempts per world-model edit before the deterministic fallback
  std::size_t wm_max_chars = 50000;      // compact world-model budget in code-generation prompts
  int debug_rounds_label = 5;            // "Debug-and-improve round k/N" label in prompts
  int parallel = 1;                      // candidates generated at once (greedy)
  int tune_rounds = 0;                   // tune phase after an LLM search (0 = none)
  std::uint64_t seed = 0;
  double max_cost_usd = 0;               // 0 = unlimited
  double max_wall_s = 0;                 // 0 = unlimited; checked between rounds only
  // A longer answer is a failed generation, recorded without its text: a
  // model (or a hostile provider) cannot fill the disk or the next prompt.
  std::size_t max_answer_bytes = std::size_t{4} << 20;
  std::string model;                     // for the manifest: what answered the prompts

  // Throws ks::Error(Status::invalid_argument) naming the first bad field.
  void validate() const;
  Json to_json() const;
  static SearchConfig from_json(const Json& j);
};

// The best passing solution found so far.
struct KS_API BestSolution {
  Solution solution;
  EvalResult eval;
  int round = 0;
};

// One line of progress, sent after every round.
struct KS_API RoundReport {
  int round = 0;
  int max_rounds = 0;
  std::string strategy;
  std::string action;            // what this round tried (node title, "improve", "tune: BLOCK=64")
  std::string solution_id;
  EvalStatus status = EvalStatus::passed;
  std::string reason;            // why it failed, one line (EvalResult::failure_reason); "" when passed
  double latency_ms = 0;         // this candidate, 0 unless passed
  double best_latency_ms = 0;    // best so far, 0 when nothing passed yet
  double best_speedup = 0;
  double best_vs_baseline = 0;   // best so far against the task's baseline, 0 when not scored so
  bool improved = false;
  bool replayed = false;         // answered from the journal during resume
  bool recorded = false;         // its evaluation came from the recording a replay follows
  double elapsed_s = 0;
  LlmUsage llm_usage;            // totals so far
};

// Return false to stop the run after this round.
using ProgressCallback = std::function<bool(const RoundReport&)>;

// What a strategy works with. Implemented by the engine (lib/engine), and by
// test doubles in unit tests.
class KS_API SearchContext {
 public:
  virtual ~SearchContext() = default;

  virtual const Task& task() const = 0;
  virtual const SearchConfig& config() const = 0;
  virtual WorldModel& world_model() = 0;
  virtual std::mt19937_64& rng() = 0;
  // Where candidates run, for prompts: "NVIDIA H100 80GB HBM3 (sm_90a, 132 SMs, ...)".
  virtual std::string device_description() const = 0;

  // Asks the LLM (journaled). A failed generation comes back with ok == false.
  virtual LlmResponse llm(const LlmRequest& request) = 0;
  virtual std::vector<LlmResponse> llm_batch(const std::vector<LlmRequest>& requests) = 0;

  // Evaluates one candidate and counts it as a round (journaled). Records the
  // attempt, updates the best solution and reports progress. `action` says
  // what the round tried. A candidate that could not be generated is passed
  // as a result with status generation_failed via record_failed_round().
  virtual EvalResult evaluate(Solution& candidate, const std::string& action) = 0;
  virtual std::vector<EvalResult> evaluate_batch(std::vector<Solution>& candidates,
                                                 const std::vector<std::string>& actions) = 0;
  // Counts a round whose LLM answer held no usable candidate.
  virtual EvalResult record_failed_round(const std::string& action, const std::string& why,
                                         const std::string& raw_answer) = 0;

  // Evaluations of solutions outside the round budget (e.g. a seed solution
  // or the reference); journaled, not counted as rounds.
  virtual EvalResult evaluate_uncounted(Solution& solution, const std::string& purpose) = 0;

  virtual int rounds_used() const = 0;
  virtual int rounds_left() const = 0;
  // True once the round, cost or time budget is spent or the user asked to stop.
  virtual bool should_stop() const = 0;
  // Why the run should stop: "" while it may go on, else "max_rounds",
  // "max_cost", "max_wall_time", "llm_exhausted" or "cancelled".
  virtual std::string stop_reason() const = 0;

  virtual const std::optional<BestSolution>& best() const = 0;
  // A solution the run has seen (attempted or seeded), by id.
  virtual std::optional<Solution> find_solution(const std::string& id) const = 0;
  virtual std::optional<EvalResult> find_eval(const std::string& id) const = 0;

  // Appends an event to the run's log (skipped while replaying a journal
  // that already holds it).
  virtual void event(const std::string& type, Json data) = 0;
  // Writes a versioned snapshot of the world model if it changed.
  virtual void snapshot_world_model() = 0;
  // Strategy state worth showing in `ksearch show` (cycle, streaks, ...).
  virtual void set_state(Json state) = 0;
};

class KS_API SearchStrategy {
 public:
  virtual ~SearchStrategy() = default;
  virtual std::string name() const = 0;
  virtual void run(SearchContext& ctx) = 0;
};

// Built-in strategies by name: "world_model", "greedy", "tune". Throws
// ks::Error(Status::not_found) listing the known names.
KS_API std::unique_ptr<SearchStrategy> make_strategy(const std::string& name);
KS_API std::vector<std::string> strategy_names();

KS_NAMESPACE_END
