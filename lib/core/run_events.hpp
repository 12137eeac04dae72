// The catalogue of run events: one struct per event type the library writes
// to a run folder's events.jsonl, with the one codec its writers (the search
// session, the engine) and its C++ readers (resume and replay, the report)
// use. docs/search.md ("The run folder") lists them with their fields.
//
// A line of events.jsonl is {"seq", "time", "type", the event's fields...,
// "journal_seq"?}: `journal_seq` numbers the events of the deterministic
// sequence a resume replays (strategy events and the session's per-round
// events); run-level events (started, finished, cancel, replay notes) have
// none. Fields are written in the order the structs list them, so a file
// read and written again is the same bytes.
//
// An event a custom strategy defines is a StrategyEvent: its type and its fields as the strategy wrote
// them. A line whose known type does not decode (a file from another
// version) is kept the same way, so old run folders still load.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ksearch/json.hpp"
#include "ksearch/llm.hpp"

namespace ks::core::events {

struct RunStarted {
  static constexpr std::string_view kName = "run_started";
  std::string strategy;
  std::int64_t journal_llm_calls = 0;  // answers and evaluations already in the folder (a resume)
  std::int64_t journal_attempts = 0;
};

// Why the run stopped (Session::stop_reason) and the manifest's totals.
struct RunFinished {
  static constexpr std::string_view kName = "run_finished";
  std::string reason;
  Json totals = Json::object();
};

// A stop asked for: by whom (a host's cancel, the LLM policy), or after
// which round (a progress callback that returned false).
struct CancelRequested {
  static constexpr std::string_view kName = "cancel_requested";
  std::optional<std::string> by;
  std::optional<std::int64_t> llm_seq;
  std::optional<std::int64_t> round;
};

// Resume: a journalled answer was recorded for another prompt text.
struct JournalPromptMismatch {
  static constexpr std::string_view kName = "journal_prompt_mismatch";
  std::int64_t llm_seq = 0;
  std::string note;
};

struct LlmCall {
  static constexpr std::string_view kName = "llm_call";
  std::int64_t llm_seq = 0;
  std::string kind;  // the prompt kind
  bool ok = true;
  LlmUsage usage;
  std::optional<std::string> error;
};

struct RoundStarted {
  static constexpr std::string_view kName = "round_started";
  std::int64_t round = 0;  // 0: an attempt that does not count as a round
  std::string action;
  std::string solution_id;
};

struct Evaluated {
  static constexpr std::string_view kName = "evaluated";
  struct Workload {
    std::string name;
    std::string status;
    std::optional<double> mean_ms;  // when it was timed
  };
  std::int64_t round = 0;
  bool counted = true;
  std::string action;
  std::string solution_id;
  std::string parent_id;
  std::string status;
  double latency_ms = 0;
  double speedup = 0;
  std::vector<Workload> workloads;
  std::optional<std::string> summary;  // a failure's summary
};

struct BestImproved {
  static constexpr std::string_view kName = "best_improved";
  std::int64_t round = 0;
  std::string solution_id;
  double latency_ms = 0;
  double speedup = 0;
};

struct WorldModelSnapshot {
  static constexpr std::string_view kName = "world_model_snapshot";
  std::int64_t version = 0;  // world_model/vNNNNNN.json
};

// A strategy's decision, with the evidence it rested on. Its fields are the
// strategy's own ("decision" names the kind, "why" says it in words); replay
// compares them with a recording's.
struct Decision {
  static constexpr std::string_view kName = "decision";
  Json fields = Json::object();

  std::string kind() const { return fields.get_string("decision"); }
  std::string why() const { return fields.get_string("why"); }
};

// The world-model strategy's cycle on one action node.
struct CycleStarted {
  static constexpr std::string_view kName = "cycle_started";
  std::int64_t cycle = 0;
  std::string node_id;
  std::string title;
  std::int64_t difficulty = 0;
  double score = 0;
  std::string base_solution_id;
};

struct CycleFinished {
  static constexpr std::string_view kName = "cycle_finished";
  std::int64_t cycle = 0;
  std::string node_id;
  std::int64_t attempts = 0;
  bool passed = false;
  std::string cycle_best;  // the cycle's best solution id, or ""
};

// The world-model strategy found no executable open action.
struct SearchExhausted {
  static constexpr std::string_view kName = "search_exhausted";
  std::string reason;
};

// One try at a world-model edit (wm_init, wm_propose, wm_refine, wm_too_hard).
struct WorldModelEdit {
  std::string kind;  // the prompt kind
  std::int64_t attempt = 0;
  std::int64_t applied_ops = 0;
  std::int64_t new_nodes = 0;
  std::vector<std::string> errors;  // each phrased for the LLM
  Json report = Json::object();     // per-op details
  std::vector<std::string> repairs;  // lenient edits: what was repaired; written only when there is any
};
struct WorldModelEdited {
  static constexpr std::string_view kName = "world_model_edited";
  WorldModelEdit edit;
};
struct WorldModelEditRejected {
  static constexpr std::string_view kName = "world_model_edit_rejected";
  WorldModelEdit edit;
};
// The LLM request for an edit failed.
struct WorldModelEditFailed {
  static constexpr std::string_view kName = "world_model_edit_failed";
  std::string kind;
  std::int64_t attempt = 0;
  std::vector<std::string> errors;
};
// No edit was accepted: the strategy's fallback edit stands in.
struct WorldModelFallback {
  static constexpr std::string_view kName = "world_model_fallback";
  std::string kind;
  // What was rejected, what stood in, and the likely cause; absent in runs
  // made before it was written.
  std::optional<std::string> why;
};

// ---- The tune strategy (docs/tuning.md). A number that may be missing
// (no passing result, a non-finite value) is written as null.

struct TuneSkipped {
  static constexpr std::string_view kName = "tune_skipped";
  std::string base;  // the solution id tuning would start from
  std::string reason;
};

struct TuneStart {
  static constexpr std::string_view kName = "tune_start";
  struct Param {
    std::string name;
    std::int64_t count = 0;  // values it may take
  };
  std::string base;
  std::string base_name;
  std::string method;
  std::vector<Param> params;
  std::int64_t constraints = 0;
  Json grid_size;   // an integer, or a number beyond 2^62
  Json admissible;  // the admissible configurations when counted, else null
  std::int64_t initial_samples = 0;
  std::int64_t seed = 0;  // the tuner's seed, as a signed 64-bit pattern
  std::int64_t stall_rounds = 0;
  std::optional<std::string> base_config;  // null: the base carries per-shape values
  std::optional<double> base_latency_ms;
  // Configurations evaluated together (absent in runs made before batches).
  std::optional<std::int64_t> batch;
};

struct TuneRound {
  static constexpr std::string_view kName = "tune_round";
  // The model's view of the choice (phases "model" and "exploit").
  struct Model {
    std::optional<double> expected_improvement;
    std::optional<double> feasibility;
    std::optional<double> predicted_ms;
    std::optional<double> predicted_log_sd;
    Json surrogate;  // the surrogate as last fitted, or null (absent)
  };
  // The batch it was evaluated in (absent in runs made before batches).
  struct Batch {
    std::int64_t index = 0;    // 1, 2, ... in the order the batches were evaluated
    std::int64_t size = 0;     // configurations in it
    std::int64_t pending = 0;  // chosen before this one in it, taken at the model's prediction
  };
  std::string config;
  std::string solution;
  std::string phase;
  std::int64_t candidates = 0;
  std::string status;
  std::optional<double> latency_ms;
  bool improved = false;
  std::optional<Model> model;
  std::optional<Batch> batch;
};

struct TuneStop {
  static constexpr std::string_view kName = "tune_stop";
  std::string reason;
  std::int64_t evaluations = 0;
  std::int64_t failures = 0;
  std::optional<std::string> best_config;
  std::optional<double> best_latency_ms;
  std::optional<double> base_latency_ms;
};

// Per-shape values: the best configuration per benchmark workload, and
// whether the solution carrying them was evaluated.
struct TuneVariants {
  static constexpr std::string_view kName = "tune_variants";
  struct Evaluation {
    std::string solution;
    std::string status;
    std::optional<double> latency_ms;
    std::optional<double> best_single_ms;
  };
  std::string overall;
  Json per_workload = Json::object();
  std::optional<Evaluation> evaluation;  // absent: not evaluated, for `why`
  std::string why;
};

struct FinalEvaluationStarted {
  static constexpr std::string_view kName = "final_evaluation_started";
  std::string solution_id;
  std::int64_t workloads = 0;
};

struct FinalEvaluation {
  static constexpr std::string_view kName = "final_evaluation";
  std::string solution_id;
  std::string status;
  double latency_ms = 0;
  double speedup = 0;
  double vs_baseline = 0;
  std::string summary;
};

// ---- Replays (docs/search.md, "Replaying a run").

struct ReplayStarted {
  static constexpr std::string_view kName = "replay_started";
  std::string source;
  std::int64_t answers = 0;
  std::string evaluations;  // "recorded" or "measured_again"
  std::int64_t recorded_attempts = 0;
  std::string on_divergence;
  bool check_prompts = false;
  std::string note;
};

// Where and why a replay left its recording.
struct Divergence {
  std::string source;
  std::string what;  // "kind", "prompt" or "evaluation"
  std::int64_t after_round = 0;
  std::string asked;
  std::string recorded;
  std::string on_divergence;
  std::string evaluations;
  std::optional<std::int64_t> llm_call;          // "kind", "prompt"
  std::optional<std::int64_t> recording_answer;  // "kind"
  std::optional<std::int64_t> attempt;           // "evaluation"
  std::optional<std::string> detail;
  Json decision;  // {"index", "now", "recorded"}: the decision that changed, or null
  std::string message;
  Json skipped;  // skip mode: the recorded answers passed over, or null
  std::optional<bool> stopped;
};

// The recording ran out (or the run passed its last event).
struct RecordingEnd {
  std::string source;
  std::int64_t after_round = 0;
  std::string detail;
  std::int64_t answers_used = 0;
  std::int64_t evaluations_used = 0;
};

struct ReplayDiverged {
  static constexpr std::string_view kName = "replay_diverged";
  Divergence divergence;
};
struct ReplaySkipped {
  static constexpr std::string_view kName = "replay_skipped";
  Divergence divergence;
};
// Live after a divergence, or after the recording's end.
struct ReplayWentLive {
  static constexpr std::string_view kName = "replay_went_live";
  std::variant<Divergence, RecordingEnd> why;
};
struct ReplayRecordingEnded {
  static constexpr std::string_view kName = "replay_recording_ended";
  RecordingEnd end;
};
struct ReplayPromptChanged {
  static constexpr std::string_view kName = "replay_prompt_changed";
  std::int64_t llm_call = 0;
  std::int64_t recording_answer = 0;
  std::string detail;
  std::string note;
};

// Any other event: a strategy's own, or a line this version cannot decode.
struct StrategyEvent {
  std::string type;
  Json fields = Json::object();
};

using Payload =
    std::variant<RunStarted, RunFinished, CancelRequested, JournalPromptMismatch, LlmCall, RoundStarted, Evaluated,
                 BestImproved, WorldModelSnapshot, Decision, CycleStarted, CycleFinished, SearchExhausted,
                 WorldModelEdited, WorldModelEditRejected, WorldModelEditFailed, WorldModelFallback, TuneSkipped,
                 TuneStart, TuneRound, TuneStop, TuneVariants,
                 FinalEvaluationStarted, FinalEvaluation, ReplayStarted, ReplayDiverged, ReplaySkipped, ReplayWentLive,
                 ReplayRecordingEnded, ReplayPromptChanged, StrategyEvent>;

// One line of events.jsonl.
struct RunEvent {
  std::int64_t seq = 0;
  std::string time;
  Payload payload;
  std::optional<std::int64_t> journal_seq;

  std::string type() const;
  Json to_json() const;
  // Throws ks::Error(Status::parse) for a line without seq, time or type;
  // a payload that does not decode becomes a StrategyEvent.
  static RunEvent from_json(const Json& j);
};

// The payload's type and its fields, as RunStore::append_event takes them.
std::string type_of(const Payload& p);
Json fields_of(const Payload& p);
Json to_json(const Divergence& d);  // as in the replay events and SearchOutcome's divergence

// The line of an event: {"seq", "time", "type", fields..., "journal_seq"?}
// (RunStore::append_event and RunEvent::to_json both write it so). Fields
// that are not an object travel under "data".
Json envelope(std::int64_t seq, const std::string& time, const std::string& type, Json fields,
              std::optional<std::int64_t> journal_seq = std::nullopt);
// The payload of an event of `type` with these fields; a StrategyEvent when
// the type is not in the catalogue or the fields do not decode.
Payload payload_from(const std::string& type, const Json& fields);

// A built-in strategy's event, through its one way out (SearchContext::event).
template <class Context>
void emit(Context& ctx, const Payload& event) {
  ctx.event(type_of(event), fields_of(event));
}

// The events as they are on disk (RunStore::events()).
std::vector<RunEvent> decode_all(const std::vector<Json>& lines);

}  // namespace ks::core::events
