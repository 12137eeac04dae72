#include "core/run_events.hpp"

#include <fmt/format.h>

#include <utility>

#include "ksearch/error.hpp"
#include "util/json_fields.hpp"

namespace ks::core::events {
namespace {

// Strict readers: a field missing or of another type throws, and the line
// is kept as a StrategyEvent instead.
const Json& field(const Json& j, std::string_view k) { return j.at(k); }
std::string str(const Json& j, std::string_view k) { return field(j, k).as_string(); }
std::int64_t num(const Json& j, std::string_view k) {
  const Json& v = field(j, k);
  if (!v.is_int()) throw Error(Status::parse, fmt::format("\"{}\" is not an integer", k));
  return v.as_int();
}
double real(const Json& j, std::string_view k) {
  const Json& v = field(j, k);
  if (!v.is_number() || v.is_int()) throw Error(Status::parse, fmt::format("\"{}\" is not a number", k));
  return v.as_number();
}
bool flag(const Json& j, std::string_view k) { return field(j, k).as_bool(); }
template <class T, class Read>
std::optional<T> maybe(const Json& j, std::string_view k, Read read) {
  if (!j.contains(k)) return std::nullopt;
  return read(j, k);
}
const Json& object(const Json& j, std::string_view k) {
  const Json& v = field(j, k);
  if (!v.is_object()) throw Error(Status::parse, fmt::format("\"{}\" is not an object", k));
  return v;
}

// ---- Fields of each payload, in the order they are written.

Json put(const RunStarted& e) {
  return Json::obj({{"strategy", e.strategy},
                    {"journal_llm_calls", e.journal_llm_calls},
                    {"journal_attempts", e.journal_attempts}});
}
Json put(const RunFinished& e) { return Json::obj({{"reason", e.reason}, {"totals", e.totals}}); }
Json put(const CancelRequested& e) {
  Json j = Json::object();
  if (e.by) j["by"] = *e.by;
  if (e.llm_seq) j["llm_seq"] = *e.llm_seq;
  if (e.round) j["round"] = *e.round;
  return j;
}
Json put(const JournalPromptMismatch& e) { return Json::obj({{"llm_seq", e.llm_seq}, {"note", e.note}}); }
Json put(const LlmCall& e) {
  Json j = Json::obj({{"llm_seq", e.llm_seq}, {"kind", e.kind}, {"ok", e.ok}, {"usage", e.usage.to_json()}});
  if (e.error) j["error"] = *e.error;
  return j;
}
Json put(const RoundStarted& e) {
  return Json::obj({{"round", e.round}, {"action", e.action}, {"solution_id", e.solution_id}});
}
Json put(const Evaluated& e) {
  Json ws = Json::array();
  for (const auto& w : e.workloads) {
    Json x = Json::obj({{"name", w.name}, {"status", w.status}});
    if (w.mean_ms) x["mean_ms"] = *w.mean_ms;
    ws.push_back(std::move(x));
  }
  Json j = Json::obj({{"round", e.round},
                      {"counted", e.counted},
                      {"action", e.action},
                      {"solution_id", e.solution_id},
                      {"parent_id", e.parent_id},
                      {"status", e.status},
                      {"latency_ms", e.latency_ms},
                      {"speedup", e.speedup},
                      {"workloads", ws}});
  if (e.summary) j["summary"] = *e.summary;
  return j;
}
Json put(const BestImproved& e) {
  return Json::obj(
      {{"round", e.round}, {"solution_id", e.solution_id}, {"latency_ms", e.latency_ms}, {"speedup", e.speedup}});
}
Json put(const WorldModelSnapshot& e) { return Json::obj({{"version", e.version}}); }
Json put(const Decision& e) { return e.fields; }
Json put(const CycleStarted& e) {
  return Json::obj({{"cycle", e.cycle},
                    {"node_id", e.node_id},
                    {"title", e.title},
                    {"difficulty", e.difficulty},
                    {"score", e.score},
                    {"base_solution_id", e.base_solution_id}});
}
Json put(const CycleFinished& e) {
  return Json::obj({{"cycle", e.cycle},
                    {"node_id", e.node_id},
                    {"attempts", e.attempts},
                    {"passed", e.passed},
                    {"cycle_best", e.cycle_best}});
}
Json put(const SearchExhausted& e) { return Json::obj({{"reason", e.reason}}); }
Json put(const WorldModelEdit& e) {
  Json j = Json::obj({{"kind", e.kind},
                      {"attempt", e.attempt},
                      {"applied_ops", e.applied_ops},
                      {"new_nodes", e.new_nodes},
                      {"errors", util::string_array(e.errors)},
                      {"report", e.report}});
  // Strict edits repair nothing, and their events stay as they were.
  if (!e.repairs.empty()) j["repairs"] = util::string_array(e.repairs);
  return j;
}
Json put(const WorldModelEdited& e) { return put(e.edit); }
Json put(const WorldModelEditRejected& e) { return put(e.edit); }
Json put(const WorldModelEditFailed& e) {
  return Json::obj({{"kind", e.kind}, {"attempt", e.attempt}, {"errors", util::string_array(e.errors)}});
}
Json put(const WorldModelFallback& e) {
  Json j = Json::obj({{"kind", e.kind}});
  if (e.why) j["why"] = *e.why;
  return j;
}
Json nullable(const std::optional<double>& x) { return x ? Json(*x) : Json(); }
Json nullable(const std::optional<std::string>& x) { return x ? Json(*x) : Json(); }
Json put(const TuneSkipped& e) { return Json::obj({{"base", e.base}, {"reason", e.reason}}); }
Json put(const TuneStart& e) {
  Json params = Json::array();
  for (const auto& p : e.params) params.push_back(Json::obj({{"name", p.name}, {"count", p.count}}));
  Json j = Json::obj({{"base", e.base},
                      {"base_name", e.base_name},
                      {"method", e.method},
                      {"params", params},
                      {"constraints", e.constraints},
                      {"grid_size", e.grid_size},
                      {"admissible", e.admissible},
                      {"initial_samples", e.initial_samples},
                      {"seed", e.seed},
                      {"stall_rounds", e.stall_rounds},
                      {"base_config", nullable(e.base_config)},
                      {"base_latency_ms", nullable(e.base_latency_ms)}});
  if (e.batch) j["batch"] = *e.batch;
  return j;
}
Json put(const TuneRound& e) {
  Json j = Json::obj({{"config", e.config},
                      {"solution", e.solution},
                      {"phase", e.phase},
                      {"candidates", e.candidates},
                      {"status", e.status},
                      {"latency_ms", nullable(e.latency_ms)},
                      {"improved", e.improved}});
  if (e.model) {
    j["expected_improvement"] = nullable(e.model->expected_improvement);
    j["feasibility"] = nullable(e.model->feasibility);
    j["predicted_ms"] = nullable(e.model->predicted_ms);
    j["predicted_log_sd"] = nullable(e.model->predicted_log_sd);
    if (!e.model->surrogate.is_null()) j["surrogate"] = e.model->surrogate;
  }
  if (e.batch) {
    j["batch"] = e.batch->index;
    j["batch_size"] = e.batch->size;
    j["pending"] = e.batch->pending;
  }
  return j;
}
Json put(const TuneStop& e) {
  return Json::obj({{"reason", e.reason},
                    {"evaluations", e.evaluations},
                    {"failures", e.failures},
                    {"best_config", nullable(e.best_config)},
                    {"best_latency_ms", nullable(e.best_latency_ms)},
                    {"base_latency_ms", nullable(e.base_latency_ms)}});
}
Json put(const TuneVariants& e) {
  Json j = Json::obj({{"overall", e.overall}, {"per_workload", e.per_workload}});
  if (!e.evaluation) {
    j["evaluated"] = false;
    j["why"] = e.why;
    return j;
  }
  j["evaluated"] = true;
  j["solution"] = e.evaluation->solution;
  j["status"] = e.evaluation->status;
  j["latency_ms"] = nullable(e.evaluation->latency_ms);
  j["best_single_ms"] = nullable(e.evaluation->best_single_ms);
  return j;
}
Json put(const FinalEvaluationStarted& e) {
  return Json::obj({{"solution_id", e.solution_id}, {"workloads", e.workloads}});
}
Json put(const FinalEvaluation& e) {
  return Json::obj({{"solution_id", e.solution_id},
                    {"status", e.status},
                    {"latency_ms", e.latency_ms},
                    {"speedup", e.speedup},
                    {"vs_baseline", e.vs_baseline},
                    {"summary", e.summary}});
}
Json put(const ReplayStarted& e) {
  return Json::obj({{"source", e.source},
                    {"answers", e.answers},
                    {"evaluations", e.evaluations},
                    {"recorded_attempts", e.recorded_attempts},
                    {"on_divergence", e.on_divergence},
                    {"check_prompts", e.check_prompts},
                    {"note", e.note}});
}
Json put(const Divergence& d) {
  Json j = Json::obj({{"source", d.source},
                      {"what", d.what},
                      {"after_round", d.after_round},
                      {"asked", d.asked},
                      {"recorded", d.recorded},
                      {"on_divergence", d.on_divergence},
                      {"evaluations", d.evaluations}});
  if (d.llm_call) j["llm_call"] = *d.llm_call;
  if (d.recording_answer) j["recording_answer"] = *d.recording_answer;
  if (d.attempt) j["attempt"] = *d.attempt;
  if (d.detail) j["detail"] = *d.detail;
  if (!d.decision.is_null()) j["decision"] = d.decision;
  j["message"] = d.message;
  if (!d.skipped.is_null()) j["skipped"] = d.skipped;
  if (d.stopped) j["stopped"] = *d.stopped;
  return j;
}
Json put(const RecordingEnd& e) {
  return Json::obj({{"source", e.source},
                    {"after_round", e.after_round},
                    {"detail", e.detail},
                    {"answers_used", e.answers_used},
                    {"evaluations_used", e.evaluations_used}});
}
Json put(const ReplayDiverged& e) { return put(e.divergence); }
Json put(const ReplaySkipped& e) { return put(e.divergence); }
Json put(const ReplayWentLive& e) {
  return std::visit([](const auto& w) { return put(w); }, e.why);
}
Json put(const ReplayRecordingEnded& e) { return put(e.end); }
Json put(const ReplayPromptChanged& e) {
  return Json::obj({{"llm_call", e.llm_call},
                    {"recording_answer", e.recording_answer},
                    {"detail", e.detail},
                    {"note", e.note}});
}
Json put(const StrategyEvent& e) { return e.fields; }

// ---- Each payload from its fields.

template <class T>
T take(const Json& j);

template <>
RunStarted take(const Json& j) {
  return {str(j, "strategy"), num(j, "journal_llm_calls"), num(j, "journal_attempts")};
}
template <>
RunFinished take(const Json& j) {
  return {str(j, "reason"), object(j, "totals")};
}
template <>
CancelRequested take(const Json& j) {
  return {maybe<std::string>(j, "by", str), maybe<std::int64_t>(j, "llm_seq", num),
          maybe<std::int64_t>(j, "round", num)};
}
template <>
JournalPromptMismatch take(const Json& j) {
  return {num(j, "llm_seq"), str(j, "note")};
}
template <>
LlmCall take(const Json& j) {
  return {num(j, "llm_seq"), str(j, "kind"), flag(j, "ok"), LlmUsage::from_json(object(j, "usage")),
          maybe<std::string>(j, "error", str)};
}
template <>
RoundStarted take(const Json& j) {
  return {num(j, "round"), str(j, "action"), str(j, "solution_id")};
}
template <>
Evaluated take(const Json& j) {
  Evaluated e{num(j, "round"), flag(j, "counted"), str(j, "action"), str(j, "solution_id"), str(j, "parent_id"),
              str(j, "status"), real(j, "latency_ms"), real(j, "speedup"), {}, maybe<std::string>(j, "summary", str)};
  for (const auto& w : field(j, "workloads").as_array())
    e.workloads.push_back({str(w, "name"), str(w, "status"), maybe<double>(w, "mean_ms", real)});
  return e;
}
template <>
BestImproved take(const Json& j) {
  return {num(j, "round"), str(j, "solution_id"), real(j, "latency_ms"), real(j, "speedup")};
}
template <>
WorldModelSnapshot take(const Json& j) {
  return {num(j, "version")};
}
template <>
Decision take(const Json& j) {
  return {j};
}
template <>
CycleStarted take(const Json& j) {
  return {num(j, "cycle"), str(j, "node_id"), str(j, "title"), num(j, "difficulty"), real(j, "score"),
          str(j, "base_solution_id")};
}
template <>
CycleFinished take(const Json& j) {
  return {num(j, "cycle"), str(j, "node_id"), num(j, "attempts"), flag(j, "passed"), str(j, "cycle_best")};
}
std::vector<std::string> strings_at(const Json& j, std::string_view k) { return util::string_list(&field(j, k), k); }
template <>
SearchExhausted take(const Json& j) {
  return {str(j, "reason")};
}
template <>
WorldModelEdit take(const Json& j) {
  return {str(j, "kind"),         num(j, "attempt"),         num(j, "applied_ops"),
          num(j, "new_nodes"),    strings_at(j, "errors"),   field(j, "report"),
          util::string_list(j.find("repairs"), "repairs")};
}
template <>
WorldModelEdited take(const Json& j) {
  return {take<WorldModelEdit>(j)};
}
template <>
WorldModelEditRejected take(const Json& j) {
  return {take<WorldModelEdit>(j)};
}
template <>
WorldModelEditFailed take(const Json& j) {
  return {str(j, "kind"), num(j, "attempt"), strings_at(j, "errors")};
}
template <>
WorldModelFallback take(const Json& j) {
  return {str(j, "kind"), maybe<std::string>(j, "why", str)};
}
// A number or null (a non-finite value is written as null).
std::optional<double> real_or_null(const Json& j, std::string_view k) {
  if (field(j, k).is_null()) return std::nullopt;
  return real(j, k);
}
std::optional<std::string> str_or_null(const Json& j, std::string_view k) {
  if (field(j, k).is_null()) return std::nullopt;
  return str(j, k);
}
template <>
TuneSkipped take(const Json& j) {
  return {str(j, "base"), str(j, "reason")};
}
template <>
TuneStart take(const Json& j) {
  TuneStart e;
  e.base = str(j, "base");
  e.base_name = str(j, "base_name");
  e.method = str(j, "method");
  for (const auto& p : field(j, "params").as_array()) e.params.push_back({str(p, "name"), num(p, "count")});
  e.constraints = num(j, "constraints");
  e.grid_size = field(j, "grid_size");
  e.admissible = field(j, "admissible");
  e.initial_samples = num(j, "initial_samples");
  e.seed = num(j, "seed");
  e.stall_rounds = num(j, "stall_rounds");
  e.base_config = str_or_null(j, "base_config");
  e.base_latency_ms = real_or_null(j, "base_latency_ms");
  e.batch = maybe<std::int64_t>(j, "batch", num);
  return e;
}
template <>
TuneRound take(const Json& j) {
  TuneRound e{str(j, "config"), str(j, "solution"), str(j, "phase"), num(j, "candidates"), str(j, "status"),
              real_or_null(j, "latency_ms"), flag(j, "improved"), std::nullopt};
  if (j.contains("expected_improvement")) {
    TuneRound::Model m{real_or_null(j, "expected_improvement"), real_or_null(j, "feasibility"),
                       real_or_null(j, "predicted_ms"), real_or_null(j, "predicted_log_sd"), Json()};
    if (const Json* s = j.find("surrogate")) m.surrogate = *s;
    e.model = std::move(m);
  }
  if (j.contains("batch"))
    e.batch = TuneRound::Batch{num(j, "batch"), num(j, "batch_size"), num(j, "pending")};
  return e;
}
template <>
TuneStop take(const Json& j) {
  return {str(j, "reason"),           num(j, "evaluations"),
          num(j, "failures"),         str_or_null(j, "best_config"),
          real_or_null(j, "best_latency_ms"), real_or_null(j, "base_latency_ms")};
}
template <>
TuneVariants take(const Json& j) {
  TuneVariants e;
  e.overall = str(j, "overall");
  e.per_workload = object(j, "per_workload");
  if (flag(j, "evaluated"))
    e.evaluation = TuneVariants::Evaluation{str(j, "solution"), str(j, "status"), real_or_null(j, "latency_ms"),
                                            real_or_null(j, "best_single_ms")};
  else
    e.why = str(j, "why");
  return e;
}
template <>
FinalEvaluationStarted take(const Json& j) {
  return {str(j, "solution_id"), num(j, "workloads")};
}
template <>
FinalEvaluation take(const Json& j) {
  return {str(j, "solution_id"), str(j, "status"), real(j, "latency_ms"), real(j, "speedup"), real(j, "vs_baseline"),
          str(j, "summary")};
}
template <>
ReplayStarted take(const Json& j) {
  return {str(j, "source"), num(j, "answers"), str(j, "evaluations"), num(j, "recorded_attempts"),
          str(j, "on_divergence"), flag(j, "check_prompts"), str(j, "note")};
}
template <>
Divergence take(const Json& j) {
  Divergence d;
  d.source = str(j, "source");
  d.what = str(j, "what");
  d.after_round = num(j, "after_round");
  d.asked = str(j, "asked");
  d.recorded = str(j, "recorded");
  d.on_divergence = str(j, "on_divergence");
  d.evaluations = str(j, "evaluations");
  d.llm_call = maybe<std::int64_t>(j, "llm_call", num);
  d.recording_answer = maybe<std::int64_t>(j, "recording_answer", num);
  d.attempt = maybe<std::int64_t>(j, "attempt", num);
  d.detail = maybe<std::string>(j, "detail", str);
  if (const Json* x = j.find("decision")) d.decision = *x;
  d.message = str(j, "message");
  if (const Json* x = j.find("skipped")) d.skipped = *x;
  d.stopped = maybe<bool>(j, "stopped", flag);
  return d;
}
template <>
RecordingEnd take(const Json& j) {
  return {str(j, "source"), num(j, "after_round"), str(j, "detail"), num(j, "answers_used"),
          num(j, "evaluations_used")};
}
template <>
ReplayDiverged take(const Json& j) {
  return {take<Divergence>(j)};
}
template <>
ReplaySkipped take(const Json& j) {
  return {take<Divergence>(j)};
}
template <>
ReplayWentLive take(const Json& j) {
  if (j.contains("what")) return {take<Divergence>(j)};
  return {take<RecordingEnd>(j)};
}
template <>
ReplayRecordingEnded take(const Json& j) {
  return {take<RecordingEnd>(j)};
}
template <>
ReplayPromptChanged take(const Json& j) {
  return {num(j, "llm_call"), num(j, "recording_answer"), str(j, "detail"), str(j, "note")};
}

template <std::size_t... I>
std::optional<Payload> decode(const std::string& type, const Json& fields, std::index_sequence<I...>) {
  std::optional<Payload> out;
  (
      [&] {
        using T = std::variant_alternative_t<I, Payload>;
        if constexpr (!std::is_same_v<T, StrategyEvent>)
          if (!out && T::kName == type) out.emplace(take<T>(fields));
      }(),
      ...);
  return out;
}

}  // namespace

std::string type_of(const Payload& p) {
  return std::visit(
      [](const auto& e) -> std::string {
        if constexpr (std::is_same_v<std::decay_t<decltype(e)>, StrategyEvent>) return e.type;
        else return std::string(e.kName);
      },
      p);
}

Json fields_of(const Payload& p) {
  return std::visit([](const auto& e) { return put(e); }, p);
}

Payload payload_from(const std::string& type, const Json& fields) {
  if (fields.is_object()) {
    try {
      auto p = decode(type, fields, std::make_index_sequence<std::variant_size_v<Payload>>());
      // Typed only when the struct holds the line exactly (a file from
      // another version may carry fields this one does not know).
      if (p && fields_of(*p) == fields) return std::move(*p);
    } catch (const std::exception&) {
    }
  }
  return StrategyEvent{type, fields};
}

Json to_json(const Divergence& d) { return put(d); }

Json envelope(std::int64_t seq, const std::string& time, const std::string& type, Json fields,
              std::optional<std::int64_t> journal_seq) {
  Json j = Json::obj({{"seq", seq}, {"time", time}, {"type", type}});
  if (fields.is_object()) {
    for (auto& [k, v] : fields.as_object()) j[k] = std::move(v);
  } else if (!fields.is_null()) {
    j["data"] = std::move(fields);
  }
  if (journal_seq) j["journal_seq"] = *journal_seq;
  return j;
}

std::string RunEvent::type() const { return type_of(payload); }

Json RunEvent::to_json() const { return envelope(seq, time, type(), fields_of(payload), journal_seq); }

RunEvent RunEvent::from_json(const Json& j) {
  if (!j.is_object()) throw Error(Status::parse, "a run event that is not a JSON object");
  const Json* seq = j.find("seq");
  const Json* time = j.find("time");
  const Json* type = j.find("type");
  if (!seq || !seq->is_int() || !time || !time->is_string() || !type || !type->is_string())
    throw Error(Status::parse, fmt::format("a run event without seq, time or type: {}", j.dump()));
  RunEvent e;
  e.seq = seq->as_int();
  e.time = time->as_string();
  Json fields = Json::object();
  for (const auto& [k, v] : j.as_object())
    if (k != "seq" && k != "time" && k != "type") fields[k] = v;
  // journal_seq is the envelope's when it comes last, as the session writes it.
  if (const auto& members = j.as_object(); !members.empty() && members.back().first == "journal_seq" &&
                                            members.back().second.is_int()) {
    e.journal_seq = members.back().second.as_int();
    fields.erase("journal_seq");
  }
  e.payload = payload_from(type->as_string(), fields);
  return e;
}

std::vector<RunEvent> decode_all(const std::vector<Json>& lines) {
  std::vector<RunEvent> out;
  out.reserve(lines.size());
  for (const auto& l : lines) out.push_back(RunEvent::from_json(l));
  return out;
}

}  // namespace ks::core::events
