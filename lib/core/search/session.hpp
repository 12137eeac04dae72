// The journaling search session: the SearchContext every strategy runs in.
//
// Every LLM answer and every evaluation is written to the run folder before
// the strategy sees it. Resuming a run re-runs the strategy from the start
// while the session answers from that journal (same answers, same
// evaluation results, so the same decisions), and switches to the live LLM
// and evaluator where the journal ends. Events are numbered; on replay an
// event already on disk is not written twice. The result: after a kill at
// any point, the resumed run reaches exactly the state the uninterrupted run
// would have, with no strategy-specific checkpoint code.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ksearch/evaluator.hpp"
#include "ksearch/llm.hpp"
#include "ksearch/run_store.hpp"
#include "ksearch/strategy.hpp"
#include "ksearch/task.hpp"
#include "ksearch/world_model.hpp"

namespace ks::detail {

class Session final : public SearchContext {
 public:
  Session(const Task& task, Evaluator& evaluator, LlmPolicy& llm, WorldModel& world_model, RunStore& store,
          SearchConfig config, ProgressCallback progress = {});

  // Runs the strategy to its end (or resumes it from the journal) and returns
  // why it stopped: "max_rounds", "cancelled", "max_cost", "max_wall_time",
  // "llm_exhausted" or "strategy_done".
  std::string run(SearchStrategy& strategy);

  // Raises the round budget (the tune phase after a search).
  void add_rounds(int n) { config_.max_rounds += n; }

  // How much of the journal was replayed, and totals, for the manifest.
  int replayed_llm_calls() const { return replayed_llm_; }
  int replayed_evaluations() const { return replayed_evals_; }
  const LlmUsage& usage() const { return usage_; }
  double elapsed_s() const;
  Json totals() const;

  // SearchContext
  const Task& task() const override { return task_; }
  const SearchConfig& config() const override { return config_; }
  WorldModel& world_model() override { return wm_; }
  std::mt19937_64& rng() override { return rng_; }
  std::string device_description() const override;
  LlmResponse llm(const LlmRequest& request) override;
  std::vector<LlmResponse> llm_batch(const std::vector<LlmRequest>& requests) override;
  EvalResult evaluate(Solution& candidate, const std::string& action) override;
  std::vector<EvalResult> evaluate_batch(std::vector<Solution>& candidates,
                                         const std::vector<std::string>& actions) override;
  EvalResult record_failed_round(const std::string& action, const std::string& why,
                                 const std::string& raw_answer) override;
  EvalResult evaluate_uncounted(Solution& solution, const std::string& purpose) override;
  int rounds_used() const override { return rounds_used_; }
  int rounds_left() const override { return std::max(0, config_.max_rounds - rounds_used_); }
  bool should_stop() const override { return !stop_reason().empty(); }
  std::string stop_reason() const override;
  const std::optional<BestSolution>& best() const override { return best_; }
  std::optional<Solution> find_solution(const std::string& id) const override;
  std::optional<EvalResult> find_eval(const std::string& id) const override;
  void event(const std::string& type, Json data) override;
  void snapshot_world_model() override;
  void set_state(Json state) override;

 private:
  bool replaying_evals() const { return eval_seq_ < journal_evals_.size(); }
  // Throws SearchStopped once a stop condition holds (see strategy.hpp).
  void ensure_running() const;
  static LlmRequest without_secrets(LlmRequest r);
  // An answer over max_answer_bytes becomes a failed generation without its text.
  void cap_answer(LlmResponse& r) const;
  // Appends a strategy event without the stop check: the session's own
  // events inside an action that was admitted before the stop.
  void emit(const std::string& type, Json data);
  Json llm_entry(std::size_t seq, const LlmRequest& req, const LlmResponse& resp) const;
  LlmResponse replay_llm(const LlmRequest& req);
  void after_llm(std::size_t seq, const LlmRequest& req, const LlmResponse& resp, bool replayed);
  // The evaluator's verdict on a candidate; an evaluation the evaluator
  // gave up because the run was cancelled stops the run instead.
  EvalResult evaluate_live(const Solution& s, bool counted);
  [[noreturn]] void stop_for_cancel(const std::string& by);
  // Journals (or replays) one attempt and does the bookkeeping of a round.
  EvalResult finish_attempt(Solution& s, const std::string& action, bool counted,
                            std::optional<EvalResult> live_result, const std::string& raw_answer);
  void report(const std::string& action, const Solution& s, const EvalResult& r, bool improved,
              bool replayed);
  [[noreturn]] void diverged(const std::string& what) const;

  const Task& task_;
  Evaluator& evaluator_;
  LlmPolicy& llm_;
  WorldModel& wm_;
  RunStore& store_;
  SearchConfig config_;
  ProgressCallback progress_;
  std::mt19937_64 rng_;
  std::chrono::steady_clock::time_point start_;

  std::vector<Json> journal_llm_;
  std::vector<AttemptRecord> journal_evals_;
  std::size_t llm_seq_ = 0;
  std::size_t eval_seq_ = 0;
  int events_on_disk_ = 0;
  int event_seq_ = 0;
  int replayed_llm_ = 0;
  int replayed_evals_ = 0;

  int rounds_used_ = 0;
  bool cancelled_ = false;
  bool prompt_mismatch_noted_ = false;
  std::uint64_t snapshot_version_ = 0;
  bool snapshot_written_ = false;
  std::optional<BestSolution> best_;
  std::map<std::string, Solution> solutions_;
  std::map<std::string, EvalResult> evals_;
  LlmUsage usage_;
};

}  // namespace ks::detail
