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
//
// A session can also follow a recording made elsewhere (follow()): another
// run's folder (its answers and its evaluations: an exact reproduction) or a
// transcript (answers only; candidates are measured again). Recorded items
// are written to this run's folder as they are used, so the folder reads as
// an ordinary run; where the search asks for something the recording does
// not hold, the session stops and explains why, skips ahead, or goes live.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/run_events.hpp"
#include "ksearch/evaluator.hpp"
#include "ksearch/llm.hpp"
#include "ksearch/run_store.hpp"
#include "ksearch/vocabulary.hpp"
#include "ksearch/strategy.hpp"
#include "ksearch/task.hpp"
#include "ksearch/world_model.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "ksearch/sys/llm_policy.hpp"
#include "ksearch/sys/search_strategy.hpp"
#include "ksearch/sys/world_model.hpp"

namespace ks::core {

// What a replay follows besides the run's own journal (docs/search.md, "Replay").
struct Recording {
  // Where the search leaves the recording: stop there; answer each request
  // with the next recorded answer of its kind (skipping the others) and
  // take recorded evaluations by solution id; or go on with the live model
  // and evaluator.
  using Mode = ReplayDivergence;  // ksearch/vocabulary.hpp: stop, skip, live

  std::string source;               // the run folder or transcript, for messages
  std::vector<Json> answers;        // transcript entries, in order
  bool has_evaluations = false;     // a run folder: its evaluations are replayed, not measured
  std::vector<AttemptRecord> attempts;
  int strategy_events = -1;         // its journaled events (-1: unknown)
  std::vector<Json> decisions;      // its "decision" events, in order
  Mode mode = Mode::stop;
  bool check_prompts = false;       // a prompt that differs from the recorded one is a divergence
  // The first LLM call the recording answers, with its entry of that index:
  // a resume that switches to a new transcript lets it answer after the journal.
  std::size_t joins_at = 0;
};


class Session final : public SearchContext {
 public:
  Session(const Task& task, Evaluator& evaluator, LlmPolicy& llm, WorldModel& world_model, RunStore& store,
          SearchConfig config, ProgressCallback progress = {});

  // Runs the strategy to its end (or resumes it from the journal) and returns
  // why it stopped: stop_reason(), else strategy_done.
  StopReason run(SearchStrategy& strategy);

  // Follows a recording (before run()); see Recording.
  void follow(Recording recording);

  // What candidates run with beyond the device ("Python 3.12.3, PyTorch
  // 2.11.0, Triton 3.6.0" for Python candidates), appended to the device
  // line of every code prompt, as K-Search names its Triton version.
  void set_environment(std::string text) { environment_ = std::move(text); }

  // Raises the round budget (the tune phase after a search).
  void add_rounds(int n) { config_.max_rounds += n; }

  // How much of the journal was replayed, and totals, for the manifest.
  int replayed_llm_calls() const { return replayed_llm_; }
  int replayed_evaluations() const { return replayed_evals_; }
  // Answers and evaluations taken from the followed recording.
  int recording_answers_used() const { return rec_answers_used_; }
  int recording_evaluations_used() const { return rec_evals_used_; }
  // Where the run first left its recording (null when it did not): see
  // divergence_report() in session.cpp for the fields.
  const Json& divergence() const { return divergence_; }
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
  EvalResult adopt_recorded(Solution& solution, EvalResult recorded, const std::string& source) override;
  void add_solution(const Solution& solution) override;
  int rounds_used() const override { return rounds_used_; }
  int rounds_left() const override { return std::max(0, config_.max_rounds - rounds_used_); }
  bool should_stop() const override { return stop_reason().has_value(); }
  std::optional<StopReason> stop_reason() const override;
  const std::optional<BestSolution>& best() const override { return best_; }
  std::optional<Solution> find_solution(const std::string& id) const override;
  std::optional<EvalResult> find_eval(const std::string& id) const override;
  void event(const std::string& type, Json data) override;
  void snapshot_world_model() override;
  void set_state(Json state) override;
  std::optional<Json> recorded_state() const override;

 private:
  bool replaying_evals() const { return eval_seq_ < journal_evals_.size(); }
  bool following_evaluations() const { return rec_ && rec_->has_evaluations && !rec_left_; }

  // The recording's part in one LLM call (may stop the run); nullopt when
  // the call is answered by the journal or live.
  std::optional<Json> recorded_answer(const LlmRequest& req, std::size_t seq);
  // What the recording says about attempt `seq` evaluating `s`.
  struct RecordedEval {
    enum class What { none, use, diverged, ended } what = What::none;
    const AttemptRecord* attempt = nullptr;
  };
  RecordedEval lookup_recorded(std::size_t seq, const Solution& s, bool left) const;
  // Applies a divergence: stops (stop mode), or leaves the recording. `in_journal`:
  // the point lies inside this run's own journal (a resume passing it again).
  void leave_recording(events::Divergence report, bool in_journal);
  // The recording is used up: stops (stop and skip modes) or goes live.
  void recording_ended(const std::string& what, bool in_journal);
  // Stop mode, a run-folder recording: true once everything it holds was replayed.
  bool recording_exhausted() const;
  events::Divergence divergence_report(const std::string& what, const std::string& asked,
                                       const std::string& recorded, std::int64_t llm_call, std::int64_t attempt,
                                       const std::string& detail) const;
  // Throws SearchStopped once a stop condition holds (see strategy.hpp).
  void ensure_running() const;
  static LlmRequest without_secrets(LlmRequest r);
  // An answer over max_answer_bytes becomes a failed generation without its text.
  void cap_answer(LlmResponse& r) const;
  // Appends an event of the deterministic sequence (with its journal_seq)
  // without the stop check: the session's own events inside an action that
  // was admitted before the stop, and the strategy's.
  void emit(const events::Payload& event);
  // Appends a run-level event (no journal_seq: not replayed).
  void append(const events::Payload& event);
  Json llm_entry(std::size_t seq, const LlmRequest& req, const LlmResponse& resp) const;
  Json recorded_entry(std::size_t seq, const LlmRequest& req, const LlmResponse& resp, const Json& recorded) const;
  LlmResponse replay_llm(const LlmRequest& req);
  void after_llm(std::size_t seq, const LlmRequest& req, const LlmResponse& resp, bool replayed);
  // The evaluator's verdict on a candidate; an evaluation the evaluator
  // gave up because the run was cancelled stops the run instead.
  EvalResult evaluate_live(const Solution& s, bool counted);
  // The noise-aware comparison with the best (docs/evaluation.md, "Latency
  // and its noise").
  bool lead_within_noise(const EvalResult& r) const;
  Json measure_again(const Solution& s, const EvalResult& first, bool counted);
  bool beats_best(const EvalResult& r);
  [[noreturn]] void stop_for_cancel(const std::string& by);
  // Journals (or replays) one attempt and does the bookkeeping of a round.
  // `adopted`: an uncounted attempt with a recorded result that may still
  // become the best (adopt_recorded).
  EvalResult finish_attempt(Solution& s, const std::string& action, bool counted,
                            std::optional<EvalResult> live_result, const std::string& raw_answer,
                            bool adopted = false);
  void report(const std::string& action, const Solution& s, const EvalResult& r, bool improved,
              bool replayed, bool recorded);
  [[noreturn]] void diverged(const std::string& what) const;

  const Task& task_;
  Evaluator& evaluator_;
  LlmPolicy& llm_;
  WorldModel& wm_;
  RunStore& store_;
  std::string environment_;
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
  bool finishing_batch_ = false;  // journaling a batch that started before the wall-time budget ran out
  bool finishing_ = false;        // inside SearchStrategy::finish: events and snapshots outside the journal
  bool prompt_mismatch_noted_ = false;
  std::uint64_t snapshot_version_ = 0;
  // Snapshots a stop wrote outside the journal, past the journal's last:
  // this run writes its own over them.
  std::set<std::uint64_t> stale_snapshots_;
  bool snapshot_written_ = false;
  std::optional<BestSolution> best_;
  std::map<std::string, Solution> solutions_;
  std::map<std::string, EvalResult> evals_;
  LlmUsage usage_;
  // Wall time inside the LLM policy and the evaluator; the rest of the
  // run's time is the search's own (prompts, tree edits, the run folder).
  double llm_wall_s_ = 0;
  double eval_wall_s_ = 0;

  // state.json as the resumed folder held it, read on the first
  // recorded_state() call (only a strategy that asks reads it).
  mutable std::optional<std::optional<Json>> recorded_state_;

  std::optional<Recording> rec_;
  std::size_t rec_next_ = 0;        // next recorded answer
  bool rec_left_ = false;           // the run went live after leaving the recording
  std::optional<StopReason> rec_stop_;  // replay_diverged or recording_ended once the replay stopped
  bool rec_prompt_noted_ = false;
  bool rec_announced_ = false;
  int rec_answers_used_ = 0;
  int rec_evals_used_ = 0;
  Json divergence_;
  std::vector<Json> decisions_;     // this run's "decision" events, replayed ones included
  // World-model edits committed, answers rejected (or requests failed), and
  // deterministic fallbacks, replayed ones included: the run's totals.
  std::int64_t wm_edits_ = 0, wm_rejected_ = 0, wm_fallbacks_ = 0;
  // Lenient edits: the repairs of committed edits, and how many edits had any.
  std::int64_t wm_repairs_ = 0, wm_repaired_edits_ = 0;
};

}  // namespace ks::core
