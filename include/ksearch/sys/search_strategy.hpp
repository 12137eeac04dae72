// Extension interface (less stable: it may change in a minor release; see
// docs/api.md): search strategies and the context they run in.
//
// This is the full interface, for strategies of the built-in kind that edit
// the world model, evaluate outside the round budget or write events of
// their own. A strategy that only proposes candidates or prompts given what
// came of its last ones is simpler as a Searcher (ksearch/sys/searcher.hpp),
// which make_searcher_strategy runs over this context.
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

#include <exception>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ksearch/export.h"
#include "ksearch/llm.hpp"
#include "ksearch/strategy.hpp"
#include "ksearch/task.hpp"
#include "ksearch/types.hpp"
#include "ksearch/world_model.hpp"
#include "ksearch/sys/world_model.hpp"

KS_NAMESPACE_BEGIN

// Thrown by SearchContext calls made after the run has been told to stop.
class KS_API SearchStopped : public std::exception {
 public:
  explicit SearchStopped(StopReason reason) : reason_(reason) {}
  const char* what() const noexcept override { return to_string(reason_); }
  StopReason reason() const { return reason_; }

 private:
  StopReason reason_;
};

// What a strategy works with. Implemented by the engine (lib/engine), and by
// test doubles in unit tests.
class KS_API SearchContext {
 public:
  virtual ~SearchContext() = default;

  virtual const Task& task() const = 0;
  virtual const SearchConfig& config() const = 0;
  virtual WorldModel& world_model() = 0;
  virtual std::mt19937_64& rng() = 0;
  // Where candidates run, for prompts: a few lines (DeviceInfo::describe):
  // "NVIDIA H100 80GB HBM3 (sm_90a), a GPU", its SMs, caches, memory, and
  // what a timed call includes.
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
  // A kernel whose evaluation another run of the same task on the same
  // device recorded (a warm start): journaled as an attempt that does not
  // count as a round, with the recorded result (metrics.recorded_from names
  // `source`), and it may become the best so far like a measured one.
  virtual EvalResult adopt_recorded(Solution& solution, EvalResult recorded, const std::string& source) = 0;
  // Makes a kernel known to find_solution without evaluating it (an
  // imported tree's kernel measured elsewhere): a base to build on, never
  // the best so far, and find_eval knows no result for it.
  virtual void add_solution(const Solution& solution) = 0;

  virtual int rounds_used() const = 0;
  virtual int rounds_left() const = 0;
  // True once the round, cost or time budget is spent or the user asked to stop.
  virtual bool should_stop() const = 0;
  // Why the run should stop: nothing while it may go on, else max_rounds,
  // max_cost, max_wall_time, llm_exhausted, cancelled, replay_diverged or
  // recording_ended (strategy_done is the session's, once the strategy returns).
  virtual std::optional<StopReason> stop_reason() const = 0;

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
  // When this run resumes a run folder: the last state set_state wrote
  // there (state.json, with the "rounds_used" and "max_rounds" the context
  // adds), as read and not yet checked: a run folder is untrusted input. A
  // strategy may compare the state it reaches while the journal replays
  // with it. nullopt for a new run or a folder without one. Throws
  // ks::Error naming the file when it is not JSON.
  virtual std::optional<Json> recorded_state() const { return std::nullopt; }
};

class KS_API SearchStrategy {
 public:
  virtual ~SearchStrategy() = default;
  virtual std::string name() const = 0;
  virtual void run(SearchContext& ctx) = 0;
  // Called once after run() ended, whatever stopped it (but a replay that
  // stopped where it left its recording or where the recording ended), so
  // the strategy can record what it holds: the world-model strategy
  // attaches a cycle's best kernel that the stop cut short. The context
  // takes no LLM call or evaluation here (they throw ks::SearchStopped);
  // world-model changes, snapshot_world_model() and event() are written
  // outside the journal, so a resume with a larger budget goes on from
  // before this call, as it goes on from any stop.
  virtual void finish(SearchContext& ctx) { (void)ctx; }
};

KS_NAMESPACE_END
