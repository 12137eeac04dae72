#include "core/search/session.hpp"

#include <fmt/format.h>

#include "core/secrets.hpp"
#include "core/sha256.hpp"
#include "ksearch/error.hpp"

namespace ks::detail {

namespace {

Json usage_json(const LlmUsage& u) { return u.to_json(); }

Json workloads_brief(const EvalResult& r) {
  Json out = Json::array();
  for (const auto& w : r.workloads) {
    Json j = Json::obj({{"name", w.name}, {"status", to_string(w.status)}});
    if (w.timing.count > 0) j["mean_ms"] = w.timing.mean_ms;
    out.push_back(std::move(j));
  }
  return out;
}

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
  for (const auto& e : store_.events())
    if (e.contains("journal_seq")) ++events_on_disk_;
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

double Session::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string Session::device_description() const {
  DeviceInfo d = evaluator_.device();
  if (d.name.empty()) return d.backend;
  return d.arch.empty() ? d.name : fmt::format("{} ({})", d.name, d.arch);
}

void Session::diverged(const std::string& what) const {
  throw Error(Status::state,
              fmt::format("cannot resume {}: {}. The run was made by a different library version or "
                          "configuration; start a new run instead.", store_.dir().string(), what));
}

Json Session::totals() const {
  Json j = Json::obj({{"rounds", rounds_used_},
                      {"llm_calls", static_cast<std::int64_t>(llm_seq_)},
                      {"evaluations", static_cast<std::int64_t>(eval_seq_)},
                      {"llm_usage", usage_json(usage_)}});
  if (best_) {
    j["best"] = Json::obj({{"solution_id", best_->solution.id},
                           {"round", best_->round},
                           {"latency_ms", best_->eval.latency_ms},
                           {"speedup", best_->eval.speedup}});
  }
  return j;
}

std::string Session::stop_reason() const {
  if (cancelled_) return "cancelled";
  if (config_.max_cost_usd > 0 && usage_.cost_usd >= config_.max_cost_usd) return "max_cost";
  if (llm_seq_ >= journal_llm_.size() && llm_.exhausted()) return "llm_exhausted";
  if (config_.max_wall_s > 0 && !replaying_evals() && elapsed_s() >= config_.max_wall_s) return "max_wall_time";
  if (rounds_used_ >= config_.max_rounds) return "max_rounds";
  return "";
}

void Session::ensure_running() const {
  std::string why = stop_reason();
  if (!why.empty()) throw SearchStopped(why);
}

std::string Session::run(SearchStrategy& strategy) {
  store_.append_event("run_started",
                      Json::obj({{"strategy", strategy.name()},
                                 {"journal_llm_calls", static_cast<std::int64_t>(journal_llm_.size())},
                                 {"journal_attempts", static_cast<std::int64_t>(journal_evals_.size())}}));
  try {
    strategy.run(*this);
    snapshot_world_model();
  } catch (const SearchStopped&) {
    // The strategy was unwound at its first action after the stop; nothing
    // it did after the stop reached the journal.
  }
  std::string reason = stop_reason();
  if (reason.empty()) reason = "strategy_done";
  store_.append_event("run_finished", Json::obj({{"reason", reason}, {"totals", totals()}}));
  return reason;
}

void Session::event(const std::string& type, Json data) {
  ensure_running();
  emit(type, std::move(data));
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
  r.system = detail::redact(r.system);
  r.prompt = detail::redact(r.prompt);
  return r;
}

void Session::emit(const std::string& type, Json data) {
  // Events are numbered in the order the (deterministic) strategy emits them;
  // on replay the ones already on disk are skipped.
  if (event_seq_ >= events_on_disk_) {
    if (!data.is_object()) data = Json::obj({{"data", std::move(data)}});
    data["journal_seq"] = event_seq_;
    store_.append_event(type, std::move(data));
  }
  ++event_seq_;
}

Json Session::llm_entry(std::size_t seq, const LlmRequest& req, const LlmResponse& resp) const {
  return Json::obj({{"seq", static_cast<std::int64_t>(seq)},
                    {"kind", to_string(req.kind)},
                    {"policy", llm_.describe()},
                    {"request", Json::obj({{"system", req.system}, {"prompt", req.prompt}})},
                    {"prompt_sha256", sha256_hex(req.system + "\n" + req.prompt)},
                    {"response", resp.to_json()},
                    {"time", utc_timestamp()}});
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
  if (!recorded.empty() && recorded != sha256_hex(req.system + "\n" + req.prompt) && !prompt_mismatch_noted_) {
    prompt_mismatch_noted_ = true;
    store_.append_event("journal_prompt_mismatch",
                        Json::obj({{"llm_seq", static_cast<std::int64_t>(llm_seq_)},
                                   {"note", "a replayed answer was recorded for a different prompt text; the "
                                            "library or the task's prompt changed since"}}));
  }
  return LlmResponse::from_json(*r);
}

void Session::after_llm(std::size_t seq, const LlmRequest& req, const LlmResponse& resp, bool replayed) {
  usage_ += resp.usage;
  if (replayed) ++replayed_llm_;
  Json ev = Json::obj({{"llm_seq", static_cast<std::int64_t>(seq)},
                       {"kind", to_string(req.kind)},
                       {"ok", resp.ok},
                       {"usage", usage_json(resp.usage)}});
  if (!resp.ok) ev["error"] = resp.error;
  emit("llm_call", std::move(ev));
}

LlmResponse Session::llm(const LlmRequest& request) {
  ensure_running();
  std::size_t seq = llm_seq_;
  if (seq < journal_llm_.size()) {
    LlmResponse r = replay_llm(request);
    ++llm_seq_;
    after_llm(seq, request, r, true);
    return r;
  }
  LlmResponse r;
  try {
    r = llm_.complete(without_secrets(request));
  } catch (const Error& e) {
    // A policy that says "stop" (a host callback returning KS_E_USER) cancels
    // the run; its non-answer is not journaled.
    if (e.status() != Status::cancelled) throw;
    cancelled_ = true;
    store_.append_event("cancel_requested", Json::obj({{"by", "llm policy"}, {"llm_seq", static_cast<std::int64_t>(seq)}}));
    throw SearchStopped("cancelled");
  }
  cap_answer(r);
  store_.append_transcript(llm_entry(seq, request, r));
  ++llm_seq_;
  after_llm(seq, request, r, false);
  return r;
}

std::vector<LlmResponse> Session::llm_batch(const std::vector<LlmRequest>& requests) {
  ensure_running();
  std::vector<LlmResponse> out(requests.size());
  std::vector<LlmRequest> live;
  std::size_t first_live = requests.size();
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (llm_seq_ + i < journal_llm_.size()) continue;
    first_live = std::min(first_live, i);
    live.push_back(without_secrets(requests[i]));
  }
  std::vector<LlmResponse> answers;
  if (!live.empty()) {
    try {
      answers = llm_.complete_batch(live);
    } catch (const Error& e) {
      if (e.status() != Status::cancelled) throw;
      cancelled_ = true;
      store_.append_event("cancel_requested", Json::obj({{"by", "llm policy"}}));
      throw SearchStopped("cancelled");
    }
  }
  for (std::size_t i = 0; i < requests.size(); ++i) {
    std::size_t seq = llm_seq_;
    bool replayed = seq < journal_llm_.size();
    if (replayed) {
      out[i] = replay_llm(requests[i]);
    } else {
      out[i] = answers.at(i - first_live);
      cap_answer(out[i]);
      store_.append_transcript(llm_entry(seq, requests[i], out[i]));
    }
    ++llm_seq_;
    after_llm(seq, requests[i], out[i], replayed);
  }
  return out;
}

EvalResult Session::finish_attempt(Solution& s, const std::string& action, bool counted,
                                   std::optional<EvalResult> live_result, const std::string& raw_answer) {
  ensure_running();
  std::size_t seq = eval_seq_++;
  int round = counted ? ++rounds_used_ : 0;
  bool replayed = seq < journal_evals_.size();
  EvalResult r;
  if (replayed) {
    const AttemptRecord& rec = journal_evals_[seq];
    if (rec.solution.id != s.id)
      diverged(fmt::format("attempt {} evaluated solution {} in the journal but the strategy now produced {}",
                           seq, rec.solution.id.empty() ? "(none)" : rec.solution.id,
                           s.id.empty() ? "(none)" : s.id));
    emit("round_started", Json::obj({{"round", round}, {"action", action}, {"solution_id", s.id}}));
    r = rec.eval;
    ++replayed_evals_;
  } else {
    emit("round_started", Json::obj({{"round", round}, {"action", action}, {"solution_id", s.id}}));
    if (!live_result) {
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
    AttemptRecord rec;
    rec.seq = static_cast<int>(seq);
    rec.round = round;
    rec.action = action;
    rec.solution = s;
    rec.eval = r;
    rec.raw_answer = raw_answer;
    rec.time = utc_timestamp();
    store_.record_attempt(rec);
  }
  if (!s.id.empty()) {
    solutions_[s.id] = s;
    evals_[s.id] = r;
  }
  bool improved = false;
  if (counted && r.passed() && r.score > 0 && (!best_ || r.score > best_->eval.score)) {
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
  Json ev = Json::obj({{"round", round},
                       {"counted", counted},
                       {"action", action},
                       {"solution_id", s.id},
                       {"parent_id", s.parent_id},
                       {"status", to_string(r.status)},
                       {"latency_ms", r.latency_ms},
                       {"speedup", r.speedup},
                       {"workloads", workloads_brief(r)}});
  if (!r.passed()) ev["summary"] = r.summary();
  emit("evaluated", std::move(ev));
  if (improved)
    emit("best_improved", Json::obj({{"round", round},
                                      {"solution_id", s.id},
                                      {"latency_ms", r.latency_ms},
                                      {"speedup", r.speedup}}));
  if (counted) {
    Json m = store_.manifest();
    m["totals"] = totals();
    m["status"] = "running";
    if (!replayed) store_.write_manifest(m);
    report(action, s, r, improved, replayed);
  }
  return r;
}

void Session::report(const std::string& action, const Solution& s, const EvalResult& r, bool improved,
                     bool replayed) {
  if (!progress_) return;
  RoundReport rep;
  rep.round = rounds_used_;
  rep.max_rounds = config_.max_rounds;
  rep.strategy = config_.strategy;
  rep.action = detail::redact(action);
  rep.solution_id = s.id;
  rep.status = r.status;
  rep.latency_ms = r.passed() ? r.latency_ms : 0;
  rep.best_latency_ms = best_ ? best_->eval.latency_ms : 0;
  rep.best_speedup = best_ ? best_->eval.speedup : 0;
  rep.improved = improved;
  rep.replayed = replayed;
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
    store_.append_event("cancel_requested", Json::obj({{"round", rounds_used_}}));
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
  std::vector<Solution> live;
  std::vector<int> live_index(candidates.size(), -1);
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].task.empty()) candidates[i].task = task_.name();
    candidates[i].finalize();
    if (eval_seq_ + i < journal_evals_.size() || evals_.count(candidates[i].id)) continue;
    bool earlier = false;
    for (const auto& l : live) earlier = earlier || l.id == candidates[i].id;
    if (earlier) continue;
    live_index[i] = static_cast<int>(live.size());
    live.push_back(candidates[i]);
  }
  std::vector<EvalResult> live_results;
  if (!live.empty()) {
    try {
      live_results = evaluator_.evaluate_batch(task_, live);
    } catch (const Error& e) {
      if (e.status() != Status::cancelled) throw;
      stop_for_cancel("evaluator");
    }
  }
  std::vector<EvalResult> out;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    std::optional<EvalResult> lr;
    if (live_index[i] >= 0) lr = live_results.at(static_cast<std::size_t>(live_index[i]));
    out.push_back(finish_attempt(candidates[i], actions[i], true, std::move(lr), ""));
  }
  return out;
}

EvalResult Session::evaluate_live(const Solution& s, bool counted) {
  try {
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
  store_.append_event("cancel_requested", Json::obj({{"by", by}}));
  throw SearchStopped("cancelled");
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
  ensure_running();
  if (!wm_.initialized()) return;
  std::uint64_t v = wm_.version();
  if (snapshot_written_ && v == snapshot_version_) return;
  store_.write_world_model(v, wm_.to_json());
  snapshot_version_ = v;
  snapshot_written_ = true;
  emit("world_model_snapshot", Json::obj({{"version", static_cast<std::int64_t>(v)}}));
}

void Session::set_state(Json state) {
  state["rounds_used"] = rounds_used_;
  state["max_rounds"] = config_.max_rounds;
  // While the journal replays, state.json already holds a later state.
  if (replaying_evals()) return;
  store_.write_state(state);
}

}  // namespace ks::detail
