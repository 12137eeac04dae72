// Extension interface (less stable: it may change in a minor release; see
// docs/api.md): a searcher, the small way to write a search strategy.
//
// A Searcher only proposes what to try next; the library drives the loop.
// Each step it is handed what came of its last proposals (the candidate,
// the model's answer, the evaluation) and returns the next ones: ready
// candidates (a tuner's configurations) or prompts, whose answers the
// library reads as candidates the way the built-in strategies do. An empty
// step ends the search. make_searcher_strategy() turns a Searcher into a
// SearchStrategy for SearchOptions::custom_strategy.
//
// Resume and replay run the search again from the start and answer from the
// run's journal, so a searcher must decide only from what it is given (its
// view, the results it is handed, the view's seeded rng()): no clocks, no
// unseeded randomness, no state kept from an earlier run (initialize()
// resets it).
//
// A strategy that needs more (the world model, uncounted evaluations, its
// own event types) implements SearchStrategy against the full
// SearchContext (ksearch/sys/search_strategy.hpp) instead.
#pragma once

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ksearch/export.h"
#include "ksearch/json.hpp"
#include "ksearch/llm.hpp"
#include "ksearch/strategy.hpp"
#include "ksearch/task.hpp"
#include "ksearch/types.hpp"
#include "ksearch/sys/search_strategy.hpp"

KS_NAMESPACE_BEGIN

// One thing to try: one round of the budget. Exactly one of `solution` and
// `request` is set (the factories below set one).
struct KS_API Proposal {
  // What the round tries, in words: the attempt's action in the run folder
  // and in progress reports ("tune: BLOCK=64", "improve step 3").
  std::string action;
  // A ready candidate, evaluated as it is (its parent_id and name as given).
  std::optional<Solution> solution;
  // A prompt: its answer is read as a candidate in the run's language. An
  // answer without a usable candidate, or a failed request, is a failed round.
  std::optional<LlmRequest> request;
  // For a prompt: the parent_id the candidate read from the answer gets (the
  // kernel it improves); its name is "r<round>-<searcher name>".
  std::string parent_id;

  static Proposal candidate(Solution s, std::string action);
  static Proposal prompt(LlmRequest r, std::string action, std::string parent_id = "");
};

// What came of one proposal, handed back at the next step.
struct KS_API ProposalResult {
  Proposal proposal;
  // What was evaluated, with its id; none when a prompt's answer held no
  // usable candidate (or the request failed).
  std::optional<Solution> candidate;
  // A prompt's answer as the run's journal holds it (ok, text, error).
  std::optional<LlmResponse> answer;
  // The round's result: the evaluation, or status generation_failed with
  // why in its log when there was no candidate.
  EvalResult eval;

  bool evaluated() const { return candidate.has_value(); }
  // The request failed (an outage): the answer says nothing about the code.
  bool outage() const { return answer && !answer->ok; }
};

// A step's proposals and what the run records about it.
struct KS_API SearcherStep {
  std::vector<Proposal> proposals;  // empty: the search is done
  // Optional: a "decision" event written before the proposals run
  // ({"decision": kind, "why": sentence, evidence...}); replay compares
  // decisions to say which one changed (docs/search.md, "Replay").
  Json decision;
  // Optional: the searcher's state, written to state.json once the step's
  // proposals ran (`ksearch show`).
  Json state;
};

// What a searcher may read about the run. Valid from initialize() until the
// run ends; nothing in it changes the run.
class KS_API SearcherView {
 public:
  virtual ~SearcherView() = default;
  virtual const Task& task() const = 0;
  virtual const SearchConfig& config() const = 0;
  // Where candidates run, for prompts: "NVIDIA H100 80GB HBM3 (sm_90a, ...)".
  virtual std::string device_description() const = 0;
  // Seeded with the run's seed: the one source of randomness.
  virtual std::mt19937_64& rng() = 0;
  virtual const std::optional<BestSolution>& best() const = 0;
  virtual int rounds_used() const = 0;
  virtual int rounds_left() const = 0;
};

class KS_API Searcher {
 public:
  virtual ~Searcher() = default;
  // Recorded as the run's strategy (the manifest, events, candidate names).
  virtual std::string name() const = 0;
  // Called before the first step of every run, a resumed one included (it
  // runs from the start): reset all state here.
  virtual void initialize(SearcherView& view) { (void)view; }
  // The next step, given what came of the last step's proposals, in their
  // order (empty at the first step). Called while the run may go on; the
  // library runs at most rounds_left() proposals of it, the first ones.
  virtual SearcherStep next(const std::vector<ProposalResult>& last) = 0;
};

// A SearchStrategy that runs `searcher`: for SearchOptions::custom_strategy
// (and ResumeOptions::custom_strategy, to resume such a run). Each step: the
// step's decision event, its prompts asked together (SearchContext::llm_batch),
// their answers read as candidates, all candidates evaluated together
// (evaluate_batch), then its state. A searcher that returns no proposals
// ends the run (stop reason strategy_done) with a "search_exhausted" event.
// Throws ks::Error(invalid_argument) from the run for a proposal with
// neither or both of a solution and a request.
KS_API std::unique_ptr<SearchStrategy> make_searcher_strategy(std::shared_ptr<Searcher> searcher);

KS_NAMESPACE_END
