#include "search/session.hpp"

#include <fmt/format.h>

#include "core/run_events.hpp"
#include "ksearch/error.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "ksearch/sys/llm_policy.hpp"
#include "ksearch/sys/search_strategy.hpp"
#include "ksearch/sys/world_model.hpp"
#include "util/secrets.hpp"
#include "util/sha256.hpp"

namespace ks::core {

namespace {

Json usage_json(const LlmUsage& u) { return u.to_json(); }

std::vector<events::Evaluated::Workload> workloads_brief(const EvalResult& r) {
  std::vector<events::Evaluated::Workload> out;
  for (const auto& w : r.workloads) {
    events::Evaluated::Workload b{w.name, std::string(to_string(w.status)), std::nullopt};
    if (w.timing.count > 0) b.mean_ms = w.timing.mean_ms;
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> out;
  for (std::size_t pos = 0;;) {
    std::size_t nl = text.find('\n', pos);
    out.push_back(text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos));
    if (nl == std::string_view::npos) return out;
    pos = nl + 1;
  }
}

// "line 12:\n  recorded: ...\n  now:      ..." for the first line that differs.
std::string first_difference(const std::string& recorded, const std::string& now) {
  auto a = split_lines(recorded), b = split_lines(now);
  auto shown = [](const std::vector<std::string_view>& lines, std::size_t i) {
    if (i >= lines.size()) return std::string("(the prompt ends before this line)");
    std::string s(lines[i].substr(0, 160));
    return lines[i].size() > 160 ? s + "..." : s;
  };
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return fmt::format("line {}:\n  recorded: {}\n  now:      {}", i + 1, shown(a, i), shown(b, i));
}

// What a decision chose: compared between a run and its recording (the
// evidence may differ, the outcome tells whether the path changed).
std::string decision_outcome(const Json& d) { return d.get_string("decision") + " -> " + d.get_string("next"); }

}  // namespace

Session::Session(const Task& task, Evaluator& evaluator, LlmPolicy& llm, WorldModel& world_model,
                 RunStore& store, SearchConfig config, ProgressCallback progress)
    : task_(task),
      evaluator_(evaluator),
      llm_(llm),
      wm_(world_model),
      store_(store),
      config_(std::move(config)),
      progress_(std::move(progress)),
      rng_(config_.seed),
      start_(std::chrono::steady_clock::now()) {
  journal_llm_ = store_.transcript();
  journal_evals_ = store_.attempts();
  // Only strategy events count for replay; run-level events (started,
  // finished, cancel) differ between the original run and a resume.
  std::uint64_t journaled_snapshot = 0;
  std::vector<std::uint64_t> post_stop;
  for (const auto& e : events::decode_all(store_.events())) {
    if (e.journal_seq) ++events_on_disk_;
    if (const auto* w = std::get_if<events::WorldModelSnapshot>(&e.payload)) {
      const auto v = static_cast<std::uint64_t>(w->version);
      if (e.journal_seq) journaled_snapshot = std::max(journaled_snapshot, v);
      else post_stop.push_back(v);
    }
  }
  for (std::uint64_t v : post_stop)
    if (v > journaled_snapshot) stale_snapshots_.insert(v);
  // The journal must be a prefix: sequence numbers 0..n-1 without gaps.
  for (std::size_t i = 0; i < journal_evals_.size(); ++i)
    if (journal_evals_[i].seq != static_cast<int>(i))
      throw Error(Status::state, fmt::format("{}: attempts.jsonl is missing attempt {} (found {} next)",
                                             store_.dir().string(), i, journal_evals_[i].seq));
  for (std::size_t i = 0; i < journal_llm_.size(); ++i)
    if (journal_llm_[i].get_int("seq", -1) != static_cast<std::int64_t>(i))
      throw Error(Status::state, fmt::format("{}: transcript.jsonl is missing LLM call {}",
                                             store_.dir().string(), i));
}

namespace {
// Adds the time until it goes out of scope to `total`.
struct Stopwatch {
  double& total;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  ~Stopwatch() { total += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }
};
}  // namespace

double Session::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string Session::device_description() const {
  DeviceInfo d = evaluator_.device();
  // A Python candidate on a GPU is timed in its own process, the Python
  // call included (docs/python-candidates.md, "Timing on the GPU").
  if (language_is_python(config_.language) && d.backend == "cuda")
    d.timing = "CUDA events on the current stream around your whole entry-point call, Python and PyTorch dispatch "
               "included (GPUMode's window); outputs are filled with a poison pattern and the L2 cache is flushed "
               "between calls.";
  std::string out = d.describe();
  return environment_.empty() ? out : out + "\nSoftware: " + environment_ + ".";
}

void Session::diverged(const std::string& what) const {
  throw Error(Status::state,
              fmt::format("cannot resume {}: {}. The run was made by a different library version or "
                          "configuration; start a new run instead.", store_.dir().string(), what));
}

void Session::follow(Recording recording) {
  for (std::size_t i = 0; i < recording.attempts.size(); ++i)
    if (recording.attempts[i].seq != static_cast<int>(i))
      throw Error(Status::state, fmt::format("{}: attempts.jsonl is missing attempt {} (found {} next)",
                                             recording.source, i, recording.attempts[i].seq));
  for (std::size_t i = 0; i < recording.answers.size(); ++i) {
    const Json& e = recording.answers[i];
    if (!e.is_object() || !e.find("response") || !prompt_kind_from_string(e.get_string("kind")))
      throw Error(Status::parse, fmt::format("{}: answer {} has no kind or no response", recording.source, i + 1));
  }
  if (recording.joins_at > recording.answers.size())
    throw Error(Status::invalid_argument,
                fmt::format("{} has {} answers; cannot start following it at answer {}", recording.source,
                            recording.answers.size(), recording.joins_at + 1));
  rec_next_ = recording.joins_at;
  rec_ = std::move(recording);
}

Json Session::totals() const {
  Json j = Json::obj({{"rounds", rounds_used_},
                      {"llm_calls", static_cast<std::int64_t>(llm_seq_)},
                      {"evaluations", static_cast<std::int64_t>(eval_seq_)},
                      {"llm_usage", usage_json(usage_)}});
  if (wm_edits_ + wm_rejected_ + wm_fallbacks_ > 0)
    j["world_model"] = Json::obj({{"edits", wm_edits_},
                                  {"rejected", wm_rejected_},
                                  {"fallbacks", wm_fallbacks_},
                                  {"repairs", wm_repairs_},
                                  {"repaired_edits", wm_repaired_edits_}});
  // This process's share of the run: where its wall time went.
  const double wall = elapsed_s();
  j["time"] = Json::obj({{"wall_s", wall},
                         {"llm_s", llm_wall_s_},
                         {"evaluation_s", eval_wall_s_},
                         {"search_s", std::max(0.0, wall - llm_wall_s_ - eval_wall_s_)}});
  if (best_) {
    j["best"] = Json::obj({{"solution_id", best_->solution.id},
                           {"round", best_->round},
                           {"latency_ms", best_->eval.latency_ms},
                           {"speedup", best_->eval.speedup}});
    if (best_->eval.vs_baseline > 0) j["best"]["vs_baseline"] = best_->eval.vs_baseline;
  }
  return j;
}

std::optional<StopReason> Session::stop_reason() const {
  if (cancelled_) return StopReason::cancelled;
  if (rec_stop_) return rec_stop_;
  if (config_.max_cost_usd > 0 && usage_.cost_usd >= config_.max_cost_usd) return StopReason::max_cost;
  if (llm_seq_ >= journal_llm_.size() && llm_.exhausted()) return StopReason::llm_exhausted;
  if (config_.max_wall_s > 0 && !finishing_batch_ && !replaying_evals() && !following_evaluations() &&
      elapsed_s() >= config_.max_wall_s)
    return StopReason::max_wall_time;
  if (rounds_used_ >= config_.max_rounds) return StopReason::max_rounds;
  return std::nullopt;
}

void Session::ensure_running() const {
  if (auto why = stop_reason()) throw SearchStopped(*why);
}

StopReason Session::run(SearchStrategy& strategy) {
  append(events::RunStarted{strategy.name(), static_cast<std::int64_t>(journal_llm_.size()),
                            static_cast<std::int64_t>(journal_evals_.size())});
  if (rec_ && !rec_announced_) {
    rec_announced_ = true;
    // Said up front: whether the candidates are measured again decides
    // whether the replay can be exact.
    append(events::ReplayStarted{
        rec_->source, static_cast<std::int64_t>(rec_->answers.size()),
        rec_->has_evaluations ? "recorded" : "measured_again", static_cast<std::int64_t>(rec_->attempts.size()),
        std::string(to_string(rec_->mode)), rec_->check_prompts,
        rec_->has_evaluations ? "answers and evaluations come from the recording; nothing is asked or measured "
                                "again while the run follows it"
                              : "answers come from the recording; every candidate is compiled and measured again "
                                "here, so timings differ from the recording's and a decision that rests on them "
                                "may change"});
  }
  try {
    strategy.run(*this);
    snapshot_world_model();
  } catch (const SearchStopped&) {
    // The strategy was unwound at its first action after the stop; nothing
    // it did after the stop reached the journal.
  }
  const StopReason reason = stop_reason().value_or(StopReason::strategy_done);
  // A replay that left or ran out of its recording keeps the recording's
  // prefix; every other run lets the strategy record what the stop cut short.
  if (reason != StopReason::replay_diverged && reason != StopReason::recording_ended) {
    finishing_ = true;
    try {
      strategy.finish(*this);
    } catch (const SearchStopped&) {
      // It asked for an LLM call or an evaluation: there are none after the stop.
    }
    finishing_ = false;
  }
  append(events::RunFinished{to_string(reason), totals()});
  return reason;
}

void Session::event(const std::string& type, Json data) {
  if (!data.is_object()) data = Json::obj({{"data", std::move(data)}});
  if (finishing_) {
    // After the stop: outside the journal, which a resume replays.
    append(events::payload_from(type, data));
    return;
  }
  ensure_running();
  if (recording_exhausted()) recording_ended("the run passed the last event of the recording", false);
  // A strategy's own fields; the catalogue's types (decision, cycle_*) typed.
  emit(events::payload_from(type, data));
}

void Session::cap_answer(LlmResponse& r) const {
  if (!r.ok || r.text.size() <= config_.max_answer_bytes) return;
  r.ok = false;
  r.error = fmt::format("the answer is {} bytes, over the limit of {} bytes per answer (max_answer_bytes); it was "
                        "discarded",
                        r.text.size(), config_.max_answer_bytes);
  r.text.clear();
  r.text.shrink_to_fit();
}

// What goes to a provider never holds a secret this process knows, whatever
// a compiler log or a candidate's output put into the prompt.
LlmRequest Session::without_secrets(LlmRequest r) {
  r.system = util::redact(r.system);
  r.prompt = util::redact(r.prompt);
  return r;
}

void Session::emit(const events::Payload& event) {
  // Events are numbered in the order the (deterministic) strategy emits them;
  // on replay the ones already on disk are skipped.
  if (const auto* d = std::get_if<events::Decision>(&event)) decisions_.push_back(d->fields);
  if (const auto* e = std::get_if<events::WorldModelEdited>(&event)) {
    ++wm_edits_;
    wm_repairs_ += static_cast<std::int64_t>(e->edit.repairs.size());
    if (!e->edit.repairs.empty()) ++wm_repaired_edits_;
  }
  if (std::holds_alternative<events::WorldModelEditRejected>(event) ||
      std::holds_alternative<events::WorldModelEditFailed>(event))
    ++wm_rejected_;
  if (std::holds_alternative<events::WorldModelFallback>(event)) ++wm_fallbacks_;
  if (event_seq_ >= events_on_disk_) {
    Json fields = events::fields_of(event);
    fields["journal_seq"] = event_seq_;
    store_.append_event(events::type_of(event), std::move(fields));
  }
  ++event_seq_;
}

void Session::append(const events::Payload& event) {
  store_.append_event(events::type_of(event), events::fields_of(event));
}

Json Session::llm_entry(std::size_t seq, const LlmRequest& req, const LlmResponse& resp) const {
  return Json::obj({{"seq", static_cast<std::int64_t>(seq)},
                    {"kind", to_string(req.kind)},
                    {"policy", llm_.describe()},
                    {"request", Json::obj({{"system", req.system}, {"prompt", req.prompt}})},
                    {"prompt_sha256", util::sha256_hex(req.system + "\n" + req.prompt)},
                    {"response", resp.to_json()},
                    {"time", utc_timestamp()}});
}

Json Session::recorded_entry(std::size_t seq, const LlmRequest& req, const LlmResponse& resp,
                             const Json& recorded) const {
  // What was asked now, with the recorded answer and who gave it when.
  Json e = llm_entry(seq, req, resp);
  if (const Json* p = recorded.find("policy"); p && p->is_string()) e["policy"] = *p;
  if (const Json* t = recorded.find("time"); t && t->is_string()) e["time"] = *t;
  return e;
}

LlmResponse Session::replay_llm(const LlmRequest& req) {
  const Json& e = journal_llm_[llm_seq_];
  std::string kind = e.get_string("kind");
  if (kind != to_string(req.kind))
    diverged(fmt::format("LLM call {} was \"{}\" in the journal but the strategy now asks \"{}\"", llm_seq_,
                         kind, to_string(req.kind)));
  const Json* r = e.find("response");
  if (!r) diverged(fmt::format("LLM call {} in the journal has no response", llm_seq_));
  // Same kind but different prompt text: the library (or the task's prompt)
  // changed since the answer was recorded. The answer is still what the run
  // was built on, so it is replayed, but the difference is recorded.
  std::string recorded = e.get_string("prompt_sha256");
  if (!recorded.empty() && recorded != util::sha256_hex(req.system + "\n" + req.prompt) && !prompt_mismatch_noted_) {
    prompt_mismatch_noted_ = true;
    append(events::JournalPromptMismatch{static_cast<std::int64_t>(llm_seq_),
                                         "a replayed answer was recorded for a different prompt text; the "
                                         "library, the task's prompt or a setting the prompts state (the round "
                                         "budget, the stagnation window) changed since"});
  }
  return LlmResponse::from_json(*r);
}

void Session::after_llm(std::size_t seq, const LlmRequest& req, const LlmResponse& resp, bool replayed) {
  usage_ += resp.usage;
  if (replayed) ++replayed_llm_;
  events::LlmCall ev{static_cast<std::int64_t>(seq), std::string(to_string(req.kind)), resp.ok, resp.usage, {}};
  if (!resp.ok) ev.error = resp.error;
  emit(ev);
}

// ---------------------------------------------------------------------------
// Following a recording

bool Session::recording_exhausted() const {
  return rec_ && !rec_left_ && rec_->mode == Recording::Mode::stop && rec_->has_evaluations &&
         rec_next_ >= rec_->answers.size() && eval_seq_ >= rec_->attempts.size() && rec_->strategy_events >= 0 &&
         event_seq_ >= rec_->strategy_events && event_seq_ >= events_on_disk_;
}

events::Divergence Session::divergence_report(const std::string& what, const std::string& asked,
                                              const std::string& recorded, std::int64_t llm_call,
                                              std::int64_t attempt, const std::string& detail) const {
  events::Divergence j;
  j.source = rec_->source;
  j.what = what;
  j.after_round = rounds_used_;
  j.asked = asked;
  j.recorded = recorded;
  j.on_divergence = to_string(rec_->mode);
  j.evaluations = rec_->has_evaluations ? "recorded" : "measured_again";
  std::string head;
  if (what == "kind") {
    j.llm_call = llm_call;
    j.recording_answer = static_cast<std::int64_t>(rec_next_);
    head = fmt::format("After round {}, at LLM call {}: the search asked for an answer of kind {}; the recording "
                       "holds one of kind {} there (its answer {})",
                       rounds_used_, llm_call + 1, asked, recorded, rec_next_ + 1);
  } else if (what == "prompt") {
    j.llm_call = llm_call;
    head = fmt::format("After round {}, at LLM call {} ({}): the prompt differs from the recorded one at {}",
                       rounds_used_, llm_call + 1, asked, detail);
  } else {
    j.attempt = attempt;
    head = fmt::format("After round {}, at attempt {}: the search evaluates {}; the recording evaluated {} there",
                       rounds_used_, attempt + 1, asked.empty() ? "no candidate (a failed round)" : "solution " + asked,
                       recorded.empty() ? "no candidate (a failed round)" : "solution " + recorded);
    if (!detail.empty()) head += " (" + detail + ")";
  }
  if (!detail.empty()) j.detail = detail;

  // Which decision changed: the first of this run's decisions whose outcome
  // differs from the recording's, with the evidence each rested on.
  std::string why;
  const auto& mine = decisions_;
  const auto& theirs = rec_->decisions;
  std::optional<std::size_t> changed;
  for (std::size_t i = 0; i < std::min(mine.size(), theirs.size()) && !changed; ++i)
    if (decision_outcome(mine[i]) != decision_outcome(theirs[i])) changed = i;
  if (changed) {
    std::size_t i = *changed;
    j.decision = Json::obj({{"index", static_cast<std::int64_t>(i)}, {"now", mine[i]}, {"recorded", theirs[i]}});
    why = fmt::format("Decision {} changed.\n  now:      {}\n  recorded: {}", i + 1, mine[i].get_string("why"),
                      theirs[i].get_string("why"));
  } else if (!mine.empty()) {
    std::size_t i = mine.size() - 1;
    j.decision = Json::obj({{"index", static_cast<std::int64_t>(i)},
                            {"now", mine[i]},
                            {"recorded", i < theirs.size() ? theirs[i] : Json()}});
    why = fmt::format("No decision differs from the recording's before this point{}. The last one:\n  now:      {}",
                      theirs.empty() ? " (the recording holds no decisions to compare: a transcript without its run "
                                       "folder, or a run made before libksearch recorded them)"
                                     : "",
                      mine[i].get_string("why"));
    if (i < theirs.size()) why += "\n  recorded: " + theirs[i].get_string("why");
  }
  std::string message = head + ".";
  if (!why.empty()) message += "\n" + why;
  if (!rec_->has_evaluations)
    message += "\nThe candidates were measured again in this run (only the answers are recorded), so a decision "
               "that compares timings can go another way than it did in the recording.";
  j.message = message;
  return j;
}

void Session::leave_recording(events::Divergence report, bool in_journal) {
  bool stop = rec_->mode != Recording::Mode::live;
  report.stopped = stop && !in_journal;
  if (divergence_.is_null()) divergence_ = events::to_json(report);
  if (in_journal) {
    // This run's own journal already went past this point (a resume): it
    // is what the run is, and the recording has no say after it.
    rec_left_ = true;
    return;
  }
  if (stop) {
    rec_stop_ = StopReason::replay_diverged;
    append(events::ReplayDiverged{std::move(report)});
    throw SearchStopped(*rec_stop_);
  }
  rec_left_ = true;
  append(events::ReplayWentLive{std::move(report)});
}

void Session::recording_ended(const std::string& what, bool in_journal) {
  if (in_journal) {
    rec_left_ = true;
    return;
  }
  events::RecordingEnd ev{rec_->source, rounds_used_, what, rec_answers_used_, rec_evals_used_};
  if (rec_->mode == Recording::Mode::live) {
    rec_left_ = true;
    append(events::ReplayWentLive{std::move(ev)});
    return;
  }
  rec_stop_ = StopReason::recording_ended;
  append(events::ReplayRecordingEnded{std::move(ev)});
  throw SearchStopped(*rec_stop_);
}

std::optional<Json> Session::recorded_answer(const LlmRequest& req, std::size_t seq) {
  if (!rec_ || rec_left_ || seq < rec_->joins_at) return std::nullopt;
  const bool in_journal = seq < journal_llm_.size();
  const auto& answers = rec_->answers;
  const std::string asked = to_string(req.kind);
  if (rec_next_ >= answers.size()) {
    recording_ended(fmt::format("the search asked for a {} answer (LLM call {}) after the recording's last answer",
                                asked, seq + 1),
                    in_journal);
    return std::nullopt;
  }
  std::size_t at = rec_next_;
  const std::string kind = answers[at].get_string("kind");
  if (kind != asked) {
    if (rec_->mode != Recording::Mode::skip) {
      leave_recording(divergence_report("kind", asked, kind, static_cast<std::int64_t>(seq), -1, ""), in_journal);
      return std::nullopt;
    }
    // Skip mode: the next recorded answer of the kind asked; the ones passed
    // over are never used.
    std::size_t found = at;
    while (found < answers.size() && answers[found].get_string("kind") != asked) ++found;
    events::Divergence report = divergence_report("kind", asked, kind, static_cast<std::int64_t>(seq), -1, "");
    Json skipped = Json::array();
    for (std::size_t k = at; k < found; ++k)
      skipped.push_back(
          Json::obj({{"answer", static_cast<std::int64_t>(k + 1)}, {"kind", answers[k].get_string("kind")}}));
    report.skipped = skipped;
    report.stopped = false;
    if (divergence_.is_null()) divergence_ = events::to_json(report);
    if (!in_journal) append(events::ReplaySkipped{std::move(report)});
    rec_next_ = found;
    if (found == answers.size()) {
      recording_ended(fmt::format("the search asked for a {} answer (LLM call {}) and the recording holds none after "
                                  "its answer {}",
                                  asked, seq + 1, at + 1),
                      in_journal);
      return std::nullopt;
    }
    at = found;
  }
  const Json& e = answers[at];
  // The same kind with another prompt: the model would have been asked
  // something else. An exact reproduction stops there; otherwise noted once.
  std::string recorded_hash = e.get_string("prompt_sha256");
  if (!recorded_hash.empty() && recorded_hash != util::sha256_hex(req.system + "\n" + req.prompt)) {
    const Json& r = e["request"];
    std::string detail =
        first_difference(r.get_string("system") + "\n" + r.get_string("prompt"), req.system + "\n" + req.prompt);
    if (rec_->check_prompts && rec_->mode != Recording::Mode::skip) {
      leave_recording(divergence_report("prompt", asked, kind, static_cast<std::int64_t>(seq), -1, detail),
                      in_journal);
      return std::nullopt;
    }
    if (!rec_prompt_noted_ && !in_journal) {
      rec_prompt_noted_ = true;
      append(events::ReplayPromptChanged{static_cast<std::int64_t>(seq), static_cast<std::int64_t>(at + 1), detail,
                                         "a recorded answer is used for a prompt that differs from the one it "
                                         "answered (noted once per session)"});
    }
  }
  rec_next_ = at + 1;
  return e;
}

Session::RecordedEval Session::lookup_recorded(std::size_t seq, const Solution& s, bool left) const {
  if (!rec_ || !rec_->has_evaluations || left) return {};
  const auto& atts = rec_->attempts;
  if (rec_->mode == Recording::Mode::skip) {
    if (s.id.empty()) return {};
    for (const auto& a : atts)
      if (a.solution.id == s.id) return {RecordedEval::What::use, &a};
    return {};
  }
  if (seq >= atts.size()) return {RecordedEval::What::ended, nullptr};
  if (atts[seq].solution.id != s.id) return {RecordedEval::What::diverged, &atts[seq]};
  return {RecordedEval::What::use, &atts[seq]};
}

namespace {

LlmResponse response_of(const Json& entry) { return LlmResponse::from_json(entry["response"]); }

}  // namespace

// ---------------------------------------------------------------------------
// LLM calls

LlmResponse Session::llm(const LlmRequest& request) {
  ensure_running();
  std::size_t seq = llm_seq_;
  std::optional<Json> recorded = recorded_answer(request, seq);
  if (seq < journal_llm_.size()) {
    LlmResponse r = replay_llm(request);
    ++llm_seq_;
    after_llm(seq, request, r, true);
    return r;
  }
  if (recorded) {
    // A recording is untrusted input too: its answers get the same cap.
    LlmResponse r = response_of(*recorded);
    cap_answer(r);
    store_.append_transcript(recorded_entry(seq, request, r, *recorded));
    ++llm_seq_;
    ++rec_answers_used_;
    after_llm(seq, request, r, false);
    return r;
  }
  LlmResponse r;
  try {
    Stopwatch timed{llm_wall_s_};
    r = llm_.complete(without_secrets(request));
  } catch (const Error& e) {
    // A policy that says "stop" (a host callback returning KS_E_USER) cancels
    // the run; its non-answer is not journaled.
    if (e.status() != Status::cancelled) throw;
    cancelled_ = true;
    append(events::CancelRequested{"llm policy", static_cast<std::int64_t>(seq), std::nullopt});
    throw SearchStopped(StopReason::cancelled);
  }
  cap_answer(r);
  store_.append_transcript(llm_entry(seq, request, r));
  ++llm_seq_;
  after_llm(seq, request, r, false);
  return r;
}

std::vector<LlmResponse> Session::llm_batch(const std::vector<LlmRequest>& requests) {
  ensure_running();
  // Where each answer comes from: the journal, the recording or the live
  // policy. A replay that stops does so before anything of the batch is written.
  std::vector<std::optional<Json>> recorded(requests.size());
  std::vector<LlmRequest> live;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    std::size_t seq = llm_seq_ + i;
    recorded[i] = recorded_answer(requests[i], seq);
    if (seq >= journal_llm_.size() && !recorded[i]) live.push_back(without_secrets(requests[i]));
  }
  std::vector<LlmResponse> answers;
  if (!live.empty()) {
    try {
      Stopwatch timed{llm_wall_s_};
      answers = llm_.complete_batch(live);
    } catch (const Error& e) {
      if (e.status() != Status::cancelled) throw;
      cancelled_ = true;
      append(events::CancelRequested{"llm policy", std::nullopt, std::nullopt});
      throw SearchStopped(StopReason::cancelled);
    }
  }
  std::vector<LlmResponse> out(requests.size());
  std::size_t next_live = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    std::size_t seq = llm_seq_;
    bool replayed = seq < journal_llm_.size();
    if (replayed) {
      out[i] = replay_llm(requests[i]);
    } else if (recorded[i]) {
      out[i] = response_of(*recorded[i]);
      cap_answer(out[i]);
      store_.append_transcript(recorded_entry(seq, requests[i], out[i], *recorded[i]));
      ++rec_answers_used_;
    } else {
      out[i] = answers.at(next_live++);
      cap_answer(out[i]);
      store_.append_transcript(llm_entry(seq, requests[i], out[i]));
    }
    ++llm_seq_;
    after_llm(seq, requests[i], out[i], replayed);
  }
  return out;
}

EvalResult Session::finish_attempt(Solution& s, const std::string& action, bool counted,
                                   std::optional<EvalResult> live_result, const std::string& raw_answer,
                                   bool adopted) {
  ensure_running();
  const std::size_t seq = eval_seq_;
  const bool replayed = seq < journal_evals_.size();
  // The recording's evaluation of this candidate; a replay that stops here
  // does so before the attempt counts.
  const AttemptRecord* recorded = nullptr;
  if (following_evaluations()) {
    RecordedEval found = lookup_recorded(seq, s, false);
    if (found.what == RecordedEval::What::use) {
      recorded = found.attempt;
    } else if (found.what == RecordedEval::What::diverged) {
      const AttemptRecord& other = *found.attempt;
      leave_recording(divergence_report("evaluation", s.id, other.solution.id, -1, static_cast<std::int64_t>(seq),
                                        fmt::format("now \"{}\", recorded \"{}\"", action, other.action)),
                      replayed);
    } else if (found.what == RecordedEval::What::ended) {
      recording_ended(fmt::format("the search evaluates a candidate (attempt {}) after the recording's last "
                                  "evaluation",
                                  seq + 1),
                      replayed);
    }
  }
  ++eval_seq_;
  int round = counted ? ++rounds_used_ : 0;
  EvalResult r;
  if (replayed) {
    const AttemptRecord& rec = journal_evals_[seq];
    if (rec.solution.id != s.id)
      diverged(fmt::format("attempt {} evaluated solution {} in the journal but the strategy now produced {}",
                           seq, rec.solution.id.empty() ? "(none)" : rec.solution.id,
                           s.id.empty() ? "(none)" : s.id));
    emit(events::RoundStarted{round, action, s.id});
    r = rec.eval;
    ++replayed_evals_;
  } else {
    emit(events::RoundStarted{round, action, s.id});
    if (recorded) {
      live_result = recorded->eval;
      ++rec_evals_used_;
    } else if (!live_result) {
      // The same code again (models repeat themselves): its result is known,
      // and a second measurement would only add noise to the comparison.
      auto known = s.id.empty() ? evals_.end() : evals_.find(s.id);
      if (known != evals_.end()) {
        live_result = known->second;
        live_result->metrics["reused_evaluation"] = true;
      } else {
        live_result = evaluate_live(s, counted);
      }
    }
    r = std::move(*live_result);
    r.solution_id = s.id;
    // A lead over the best within the measurements' noise is measured
    // again before it counts; what was found goes into the attempt's record,
    // so resume and replay decide the same way.
    if ((counted || adopted) && !recorded && !r.metrics.contains("noise_check") && lead_within_noise(r))
      r.metrics["noise_check"] = measure_again(s, r, counted);
    AttemptRecord rec;
    rec.seq = static_cast<int>(seq);
    rec.round = round;
    rec.action = action;
    rec.solution = s;
    rec.eval = r;
    rec.raw_answer = raw_answer;
    rec.time = recorded ? recorded->time : utc_timestamp();  // when it was measured
    store_.record_attempt(rec);
  }
  if (!s.id.empty()) {
    solutions_[s.id] = s;
    evals_[s.id] = r;
  }
  bool improved = false;
  if ((counted || adopted) && r.passed() && r.score > 0 && (!best_ || beats_best(r))) {
    best_ = BestSolution{s, r, round};
    improved = true;
    // A replayed improvement is already on disk, or a later one is: writing
    // it again would roll best/ back to an older kernel, and leave it there
    // if the resume then stops at a journal mismatch.
    if (!replayed) store_.write_best(*best_);
  }
  // At the journal's end best/ holds the replayed run's best again (this
  // also restores a best.json that went missing).
  if (replayed && seq + 1 == journal_evals_.size() && best_) store_.write_best(*best_);
  events::Evaluated ev{round, counted, action, s.id, s.parent_id, std::string(to_string(r.status)),
                       r.latency_ms, r.speedup, workloads_brief(r), std::nullopt};
  if (!r.passed()) ev.summary = r.summary();
  emit(ev);
  if (improved) emit(events::BestImproved{round, s.id, r.latency_ms, r.speedup});
  if (counted || improved) {
    Json m = store_.manifest();
    m["totals"] = totals();
    m["status"] = "running";
    if (!replayed) store_.write_manifest(m);
  }
  if (counted) report(action, s, r, improved, replayed, recorded != nullptr);
  return r;
}

void Session::report(const std::string& action, const Solution& s, const EvalResult& r, bool improved,
                     bool replayed, bool recorded) {
  if (!progress_) return;
  RoundReport rep;
  rep.round = rounds_used_;
  rep.max_rounds = config_.max_rounds;
  rep.strategy = config_.strategy_name();
  rep.action = util::redact(action);
  rep.solution_id = s.id;
  rep.status = r.status;
  rep.reason = util::redact(r.failure_reason());
  rep.latency_ms = r.passed() ? r.latency_ms : 0;
  rep.best_latency_ms = best_ ? best_->eval.latency_ms : 0;
  rep.best_speedup = best_ ? best_->eval.speedup : 0;
  rep.best_vs_baseline = best_ ? best_->eval.vs_baseline : 0;
  rep.improved = improved;
  rep.replayed = replayed;
  rep.recorded = recorded;
  rep.elapsed_s = elapsed_s();
  rep.llm_usage = usage_;
  bool go_on = true;
  try {
    go_on = progress_(rep);
  } catch (...) {
    go_on = false;  // a throwing callback stops the run rather than killing it
  }
  if (!go_on && !cancelled_) {
    cancelled_ = true;
    // Not part of the deterministic event sequence: a resumed run does not cancel.
    append(events::CancelRequested{std::nullopt, std::nullopt, rounds_used_});
  }
}

EvalResult Session::evaluate(Solution& candidate, const std::string& action) {
  ensure_running();
  if (candidate.task.empty()) candidate.task = task_.name();
  candidate.finalize();
  return finish_attempt(candidate, action, true, std::nullopt, "");
}

std::vector<EvalResult> Session::evaluate_batch(std::vector<Solution>& candidates,
                                                const std::vector<std::string>& actions) {
  ensure_running();
  if (actions.size() != candidates.size())
    throw Error(Status::invalid_argument, "evaluate_batch: one action per candidate is needed");
  // Candidates past the journal are evaluated together (compilation overlaps
  // measurement); code already evaluated in this run, or twice in the batch,
  // is evaluated once and its result reused by finish_attempt.
  // Candidates the recording holds are not measured either; after the
  // recording is left (live mode) the rest are.
  std::vector<Solution> live;
  std::vector<int> live_index(candidates.size(), -1);
  bool left = !following_evaluations();
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].task.empty()) candidates[i].task = task_.name();
    candidates[i].finalize();
    std::size_t seq = eval_seq_ + i;
    RecordedEval found = lookup_recorded(seq, candidates[i], left);
    if (found.what == RecordedEval::What::diverged || found.what == RecordedEval::What::ended) {
      if (rec_->mode != Recording::Mode::live && seq >= journal_evals_.size()) break;  // the replay stops here
      left = true;
    }
    if (seq < journal_evals_.size() || found.what == RecordedEval::What::use || evals_.count(candidates[i].id))
      continue;
    bool earlier = false;
    for (const auto& l : live) earlier = earlier || l.id == candidates[i].id;
    if (earlier) continue;
    live_index[i] = static_cast<int>(live.size());
    live.push_back(candidates[i]);
  }
  std::vector<EvalResult> live_results;
  if (!live.empty()) {
    try {
      Stopwatch timed{eval_wall_s_};
      live_results = evaluator_.evaluate_batch(task_, live);
    } catch (const Error& e) {
      if (e.status() != Status::cancelled) throw;
      stop_for_cancel("evaluator");
    }
  }
  // The wall-time budget is checked between rounds: a batch started before
  // it ran out is journaled whole, as a single round would be (its results
  // are measured; dropping them would only make a resume measure them again).
  finishing_batch_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{finishing_batch_};
  std::vector<EvalResult> out;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    std::optional<EvalResult> lr;
    if (live_index[i] >= 0) lr = live_results.at(static_cast<std::size_t>(live_index[i]));
    out.push_back(finish_attempt(candidates[i], actions[i], true, std::move(lr), ""));
  }
  return out;
}

namespace {
// Separate evaluations of one kernel on the host differ by more than one
// evaluation's interval says: another process, another placement of the
// buffers in memory. On the 2-core development VM, quiet, about +-10%
// (benchmarks/eval/load_stability.py), so a lead under that is noise too.
constexpr double kHostEvaluationSpread = 0.10;

bool timed_on_host(const EvalResult& r) {
  for (const auto& w : r.workloads)
    if (w.timing.count > 0)
      return w.timing.statistic == LatencyStatistic::undisturbed_median || w.timing.statistic == LatencyStatistic::p10;
  return false;
}
}  // namespace

// A passing result with a higher score than the best, whose latency
// interval overlaps the best's, or (on the host) whose lead is under the
// spread between evaluations: the lead may be the machine's noise.
bool Session::lead_within_noise(const EvalResult& r) const {
  if (!best_ || !r.passed() || !(r.score > best_->eval.score)) return false;
  const EvalResult& b = best_->eval;
  if (r.latency_lo_ms <= 0 || b.latency_lo_ms <= 0) return false;  // no intervals: a recorded or old result
  if (r.latency_lo_ms <= b.latency_hi_ms && b.latency_lo_ms <= r.latency_hi_ms) return true;
  return timed_on_host(r) && b.latency_ms > 0 && (b.latency_ms - r.latency_ms) / b.latency_ms < kHostEvaluationSpread;
}

Json Session::measure_again(const Solution& s, const EvalResult& first, bool counted) {
  const BestSolution& best = *best_;
  // The best first, then the candidate: one after the other under the same
  // load. Each is a whole evaluation (checks included) that is not a round.
  EvalResult best_again = evaluate_live(best.solution, counted);
  EvalResult again = evaluate_live(s, counted);
  const bool better = again.passed() && best_again.passed() && again.score > best_again.score;
  auto ms = [](const EvalResult& e) { return e.passed() ? Json(e.latency_ms) : Json(); };
  auto pm = [](const EvalResult& e) {
    return e.latency_lo_ms > 0 ? fmt::format(" +-{:.1f}%", 50.0 * (e.latency_hi_ms - e.latency_lo_ms) / e.latency_ms)
                               : std::string();
  };
  auto pair = [](Json a, Json b) {
    Json j = Json::array();
    j.push_back(std::move(a));
    j.push_back(std::move(b));
    return j;
  };
  Json check = Json::obj({{"best", best.solution.id},
                          {"candidate_ms", pair(first.latency_ms, ms(again))},
                          {"best_ms", pair(best.eval.latency_ms, ms(best_again))},
                          {"better", better}});
  check["why"] = fmt::format(
      "{:.4g} ms{} against the best's {:.4g} ms{}: within the measurements' noise (the intervals overlap, or on the "
      "host the lead is under the 10% that separate evaluations differ by), so both were measured again: "
      "{} against {}; {}",
      first.latency_ms, pm(first), best.eval.latency_ms, pm(best.eval),
      again.passed() ? fmt::format("{:.4g} ms", again.latency_ms) : std::string(to_string(again.status)),
      best_again.passed() ? fmt::format("{:.4g} ms", best_again.latency_ms) : std::string(to_string(best_again.status)),
      better ? "the lead held, it is the new best" : "the lead did not hold, the best stays");
  return check;
}

// Whether a passing result with a score replaces the best: a higher score,
// and when its lead was within noise, a lead that held when measured again.
bool Session::beats_best(const EvalResult& r) {
  if (!(r.score > best_->eval.score)) return false;
  const Json* check = r.metrics.find("noise_check");
  if (!check || !check->is_object() || check->get_string("best") != best_->solution.id) return true;
  const bool better = check->get_bool("better");
  emit(events::Decision{Json::obj({{"decision", "noise_check"},
                                   {"solution_id", r.solution_id},
                                   {"best", best_->solution.id},
                                   {"better", better},
                                   {"next", better ? "new best" : "best stays"},
                                   {"why", check->get_string("why")}})});
  return better;
}

EvalResult Session::evaluate_live(const Solution& s, bool counted) {
  try {
    Stopwatch timed{eval_wall_s_};
    return evaluator_.evaluate(task_, s);
  } catch (const Error& e) {
    if (e.status() != Status::cancelled) throw;
    // The attempt was never made: it is not journalled and not a round.
    --eval_seq_;
    if (counted) --rounds_used_;
    stop_for_cancel("evaluator");
  }
}

void Session::stop_for_cancel(const std::string& by) {
  // Not part of the deterministic event sequence: a resumed run does not cancel.
  cancelled_ = true;
  append(events::CancelRequested{by, std::nullopt, std::nullopt});
  throw SearchStopped(StopReason::cancelled);
}

EvalResult Session::record_failed_round(const std::string& action, const std::string& why,
                                        const std::string& raw_answer) {
  Solution none;
  none.task = task_.name();
  EvalResult r;
  r.status = EvalStatus::generation_failed;
  r.log = why;
  return finish_attempt(none, action, true, r, raw_answer);
}

EvalResult Session::evaluate_uncounted(Solution& solution, const std::string& purpose) {
  if (solution.task.empty()) solution.task = task_.name();
  solution.finalize();
  return finish_attempt(solution, purpose, false, std::nullopt, "");
}

EvalResult Session::adopt_recorded(Solution& solution, EvalResult recorded, const std::string& source) {
  if (solution.task.empty()) solution.task = task_.name();
  solution.finalize();
  // The attempt says where its result was measured; a later look at the run
  // (show, the report) tells it from one measured here.
  recorded.metrics["recorded_from"] = source;
  return finish_attempt(solution, "recorded evaluation (" + source + ")", false, std::move(recorded), "", true);
}

void Session::add_solution(const Solution& solution) {
  Solution s = solution;
  if (s.task.empty()) s.task = task_.name();
  s.finalize();
  // Code only: evals_ stays without it, so neither the best so far nor a
  // cycle's comparison with its base kernel rests on a result measured elsewhere.
  solutions_.emplace(s.id, std::move(s));
}

std::optional<Solution> Session::find_solution(const std::string& id) const {
  auto it = solutions_.find(id);
  if (it == solutions_.end()) return std::nullopt;
  return it->second;
}

std::optional<EvalResult> Session::find_eval(const std::string& id) const {
  auto it = evals_.find(id);
  if (it == evals_.end()) return std::nullopt;
  return it->second;
}

void Session::snapshot_world_model() {
  if (!finishing_) ensure_running();
  if (!wm_.initialized()) return;
  std::uint64_t v = wm_.version();
  if (snapshot_written_ && v == snapshot_version_) return;
  if (!finishing_ && recording_exhausted()) recording_ended("the run passed the last event of the recording", false);
  if (stale_snapshots_.erase(v)) store_.remove_world_model(v);
  store_.write_world_model(v, wm_.to_json());
  snapshot_version_ = v;
  snapshot_written_ = true;
  // A snapshot after the stop is outside the journal: a resume that goes on
  // writes its own snapshot of that version over it.
  if (finishing_) append(events::WorldModelSnapshot{static_cast<std::int64_t>(v)});
  else emit(events::WorldModelSnapshot{static_cast<std::int64_t>(v)});
}

void Session::set_state(Json state) {
  state["rounds_used"] = rounds_used_;
  state["max_rounds"] = config_.max_rounds;
  // While the journal replays, state.json already holds a later state.
  if (replaying_evals()) return;
  store_.write_state(state);
}

std::optional<Json> Session::recorded_state() const {
  if (!recorded_state_) {
    // Only a resume has one: the journal holds what the state was built from.
    if (journal_llm_.empty() && journal_evals_.empty()) recorded_state_.emplace(std::nullopt);
    else recorded_state_.emplace(store_.state());
  }
  return *recorded_state_;
}

}  // namespace ks::core
