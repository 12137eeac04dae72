// Collects what the report shows from a run folder. Everything is read
// leniently: a run in progress may have a torn last line (left out, as the
// run store does) or a file it has not written yet; such gaps become
// warnings, never a failed report. Files are read through util::Folder, as
// the run store reads them: never through a link (the folder may come from
// someone else).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/run_events.hpp"
#include "core/world_model_file.hpp"
#include "ksearch/error.hpp"
#include "ksearch/report.hpp"
#include "ksearch/run_store.hpp"
#include "report/tree_view.hpp"
#include "util/fs.hpp"

KS_NAMESPACE_BEGIN

namespace fs = std::filesystem;
using report::num_field;
using report::str_field;

namespace {

// Cuts at a UTF-8 boundary so the JSON stays valid text.
std::string clip(const std::string& s, std::size_t max, bool* cut = nullptr) {
  if (cut) *cut = s.size() > max;
  if (s.size() <= max) return s;
  std::size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

// The complete, valid lines of a JSON-lines log; others become warnings.
std::vector<Json> read_log(const util::Folder& run, const fs::path& file, Json& warnings) {
  std::vector<Json> out;
  bool torn = false;
  std::vector<std::string> lines;
  try {
    lines = run.read_lines(file, &torn);
  } catch (const Error& e) {
    warnings.push_back(e.what());
    return out;
  }
  if (torn) warnings.push_back(fmt::format("{}: the last line is incomplete (a run in progress, or a kill); left out",
                                           file.filename().string()));
  std::size_t bad = 0;
  for (const auto& line : lines) {
    auto j = Json::try_parse(line);
    if (j && j->is_object()) out.push_back(std::move(*j));
    else ++bad;
  }
  if (bad) warnings.push_back(fmt::format("{}: {} line(s) are not JSON objects; left out", file.filename().string(), bad));
  return out;
}

// The run's events, typed; a line without seq, time or type becomes a warning.
std::vector<core::events::RunEvent> read_events(const util::Folder& run, Json& warnings) {
  const fs::path file = "events.jsonl";
  std::vector<core::events::RunEvent> out;
  std::size_t bad = 0;
  for (const Json& j : read_log(run, file, warnings)) {
    try {
      out.push_back(core::events::RunEvent::from_json(j));
    } catch (const Error&) {
      ++bad;
    }
  }
  if (bad) warnings.push_back(fmt::format("{}: {} event(s) without seq, time or type; left out",
                                          file.filename().string(), bad));
  return out;
}

Json run_summary(const Json& m, const fs::path& dir) {
  const Json& cfg = m["config"];
  const Json& totals = m["totals"];
  const Json& dev = m["device"];
  const Json& llm = m["llm"];
  Json r = Json::obj({{"dir", dir.string()},
                      {"task", str_field(m["task"], "name")},
                      {"strategy", str_field(cfg, "strategy")},
                      {"language", str_field(cfg, "language")},
                      {"model", str_field(cfg, "model")},
                      {"llm", str_field(llm, "kind")},
                      {"status", str_field(m, "status")},
                      {"stop_reason", str_field(m, "stop_reason")},
                      {"error", str_field(m, "error")},
                      {"created", str_field(m, "created")},
                      {"finished", str_field(m, "finished")},
                      {"library_version", str_field(m, "library_version")},
                      {"device", str_field(dev, "name", str_field(dev, "backend"))},
                      {"max_rounds", num_field(cfg, "max_rounds").value_or(0)},
                      {"rounds", num_field(totals, "rounds").value_or(0)},
                      {"llm_calls", num_field(totals, "llm_calls").value_or(0)}});
  if (const Json& w = totals["world_model"]; w.is_object()) {
    const Json* lenient = cfg.find("wm_lenient_edits");
    r["world_model"] = Json::obj({{"edits", num_field(w, "edits").value_or(0)},
                                  {"rejected", num_field(w, "rejected").value_or(0)},
                                  {"fallbacks", num_field(w, "fallbacks").value_or(0)},
                                  {"repairs", num_field(w, "repairs").value_or(0)},
                                  {"repaired_edits", num_field(w, "repaired_edits").value_or(0)},
                                  {"lenient", lenient && lenient->is_bool() && lenient->as_bool()}});
  }
  const Json& u = totals["llm_usage"];
  r["usage"] = Json::obj({{"input_tokens", num_field(u, "input_tokens").value_or(0)},
                          {"output_tokens", num_field(u, "output_tokens").value_or(0)},
                          {"reasoning_tokens", num_field(u, "reasoning_tokens").value_or(0)},
                          {"cost_usd", num_field(u, "cost_usd").value_or(0)}});
  return r;
}

// The attempts as the index lists them, with each one's evaluation when its
// files can be read.
std::vector<AttemptRecord> read_attempts(const RunStore& store, const util::Folder& run, Json& warnings) {
  try {
    return store.attempts();
  } catch (const Error& e) {
    warnings.push_back(fmt::format("{}; the attempts are shown from attempts.jsonl alone", e.what()));
  }
  std::vector<AttemptRecord> out;
  for (const Json& j : read_log(run, "attempts.jsonl", warnings)) {
    AttemptRecord a;
    a.seq = static_cast<int>(num_field(j, "seq").value_or(0));
    a.round = static_cast<int>(num_field(j, "round").value_or(0));
    a.action = str_field(j, "action");
    a.time = str_field(j, "time");
    a.solution.id = str_field(j, "solution_id");
    a.solution.parent_id = str_field(j, "parent_id");
    a.eval.status = eval_status_from_string(str_field(j, "status")).value_or(EvalStatus::invalid);
    a.eval.latency_ms = num_field(j, "latency_ms").value_or(0);
    a.eval.speedup = num_field(j, "speedup").value_or(0);
    out.push_back(std::move(a));
  }
  return out;
}

// The score the session ranks by (higher is better: 1 / latency, or the mean
// speedup over the task's baseline); 1 / latency where a record has none.
double score_of(const EvalResult& e) {
  if (!e.passed()) return 0;
  if (e.score > 0) return e.score;
  return e.latency_ms > 0 ? 1.0 / e.latency_ms : 0;
}

Json attempts_json(const std::vector<AttemptRecord>& attempts) {
  Json out = Json::array();
  double best = 0, best_score = 0;
  int last_round = 0;
  for (const auto& a : attempts) {
    const bool counted = a.round > 0;
    bool improved = false;
    // The best so far as the session keeps it: the passing attempt with the
    // highest score that counted, or whose evaluation was adopted from
    // another run of the same task and device (docs/world-model.md, "Warm start").
    const double score = score_of(a.eval);
    const Json* recorded_from = a.eval.metrics.find("recorded_from");
    if ((counted || (recorded_from && recorded_from->is_string())) && score > best_score) {
      best_score = score;
      best = a.eval.latency_ms;
      improved = true;
    }
    if (counted) last_round = std::max(last_round, a.round);
    Json j = Json::obj({{"seq", a.seq},
                        {"round", a.round},
                        // Where the plot puts it: its round, or half a round
                        // after the last counted one (an uncounted evaluation).
                        {"x", counted ? a.round : last_round + 0.5},
                        {"action", a.action},
                        {"solution_id", a.solution.id},
                        {"parent_id", a.solution.parent_id},
                        {"status", to_string(a.eval.status)},
                        {"latency_ms", a.eval.latency_ms},
                        {"speedup", a.eval.speedup},
                        {"score", score},
                        {"score_mode", to_string(a.eval.score_mode)},
                        {"best_ms", best},
                        {"improved", improved},
                        {"time", a.time}});
    if (!a.eval.passed()) j["reason"] = a.eval.summary();
    out.push_back(std::move(j));
  }
  return out;
}

// LLM calls, each tied to the round it was spent towards: one more than the
// counted rounds evaluated before it.
Json llm_json(const std::vector<core::events::RunEvent>& events) {
  namespace ev = core::events;
  Json calls = Json::array();
  std::set<std::int64_t> seen;
  int rounds_done = 0;
  std::map<int, LlmUsage> per_round;
  std::map<int, int> calls_per_round;
  std::map<std::string, std::pair<int, LlmUsage>> per_kind;
  for (const auto& e : events) {
    if (const auto* x = std::get_if<ev::Evaluated>(&e.payload); x && x->counted) {
      rounds_done = std::max(rounds_done, static_cast<int>(x->round));
    } else if (const auto* call = std::get_if<ev::LlmCall>(&e.payload)) {
      const std::int64_t seq = call->llm_seq;
      if (seq >= 0 && !seen.insert(seq).second) continue;  // written once per call; guard anyway
      const LlmUsage& u = call->usage;
      const int round = rounds_done + 1;
      const std::string& kind = call->kind;
      calls.push_back(Json::obj({{"llm_seq", seq},
                                 {"kind", kind},
                                 {"ok", call->ok},
                                 {"round", round},
                                 {"input_tokens", u.input_tokens},
                                 {"output_tokens", u.output_tokens},
                                 {"reasoning_tokens", u.reasoning_tokens},
                                 {"cost_usd", u.cost_usd},
                                 {"wall_s", u.wall_s},
                                 {"attempts", u.attempts}}));
      per_round[round] += u;
      ++calls_per_round[round];
      per_kind[kind].first++;
      per_kind[kind].second += u;
    }
  }
  Json rounds = Json::array();
  double cum_cost = 0;
  std::int64_t cum_tokens = 0;
  for (const auto& [r, u] : per_round) {
    cum_cost += u.cost_usd;
    cum_tokens += u.input_tokens + u.output_tokens;
    rounds.push_back(Json::obj({{"round", r},
                                {"calls", calls_per_round[r]},
                                {"input_tokens", u.input_tokens},
                                {"output_tokens", u.output_tokens},
                                {"reasoning_tokens", u.reasoning_tokens},
                                {"cost_usd", u.cost_usd},
                                {"cum_tokens", cum_tokens},
                                {"cum_cost_usd", cum_cost}}));
  }
  Json kinds = Json::array();
  for (const auto& [k, cu] : per_kind)
    kinds.push_back(Json::obj({{"kind", k},
                               {"calls", cu.first},
                               {"input_tokens", cu.second.input_tokens},
                               {"output_tokens", cu.second.output_tokens},
                               {"reasoning_tokens", cu.second.reasoning_tokens},
                               {"cost_usd", cu.second.cost_usd},
                               {"wall_s", cu.second.wall_s}}));
  return Json::obj({{"calls", calls}, {"rounds", rounds}, {"kinds", kinds}});
}

Json node_json(const report::ViewNode& v, std::size_t max_text) {
  Json j = Json::obj({{"id", v.id},
                      {"parent", v.parent},
                      {"status", v.status},
                      {"title", clip(v.title, max_text)}});
  auto opt = [&](const char* k, const std::optional<double>& x) {
    if (x) j[k] = *x;
  };
  opt("score", v.score);
  if (v.difficulty) j["difficulty"] = v.difficulty;
  opt("rating", v.rating);
  opt("confidence", v.confidence);
  opt("expected_factor", v.expected_factor);
  if (!v.decision.empty()) j["decision"] = clip(v.decision, max_text);
  if (!v.choice.empty()) j["choice"] = clip(v.choice, max_text);
  if (!v.description.empty()) j["description"] = clip(v.description, max_text);
  if (!v.rationale.empty()) j["rationale"] = clip(v.rationale, max_text);
  if (!v.notes.empty()) j["notes"] = clip(v.notes, max_text);
  if (v.last_updated_round) j["last_updated_round"] = v.last_updated_round;
  if (!v.solution_id.empty()) {
    j["solution_id"] = v.solution_id;
    if (!v.solution_name.empty()) j["solution_name"] = v.solution_name;
    if (v.solution_round) j["solution_round"] = v.solution_round;
    if (v.latency_ms > 0) j["latency_ms"] = v.latency_ms;
    if (v.speedup > 0) j["speedup"] = v.speedup;
  }
  return j;
}

// Per snapshot version, from the event log: the counted rounds done when it
// was taken, and the nodes whose last cycle by then ended without a passing
// kernel (and were not tried again).
std::map<std::uint64_t, std::pair<int, std::set<std::string>>> snapshot_context(
    const std::vector<core::events::RunEvent>& events) {
  namespace ev = core::events;
  std::map<std::uint64_t, std::pair<int, std::set<std::string>>> at;
  int rounds_done = 0;
  std::set<std::string> failed;
  for (const auto& e : events) {
    if (const auto* x = std::get_if<ev::Evaluated>(&e.payload); x && x->counted) {
      rounds_done = std::max(rounds_done, static_cast<int>(x->round));
    } else if (const auto* started = std::get_if<ev::CycleStarted>(&e.payload)) {
      failed.erase(started->node_id);
    } else if (const auto* finished = std::get_if<ev::CycleFinished>(&e.payload)) {
      if (!finished->passed) failed.insert(finished->node_id);
    } else if (const auto* snap = std::get_if<ev::WorldModelSnapshot>(&e.payload)) {
      at.emplace(static_cast<std::uint64_t>(snap->version), std::make_pair(rounds_done, failed));
    }
  }
  return at;
}

std::optional<Json> read_snapshot(const util::Folder& run, const fs::path& file, std::string& err) {
  try {
    return Json::try_parse(run.read(file, core::kMaxWorldModelFileBytes), &err);
  } catch (const Error& e) {
    err = e.what();
    return std::nullopt;
  }
}

fs::path snapshot_file(std::uint64_t version) {
  return fs::path("world_model") / fmt::format("v{:06d}.json", version);
}

// Every snapshot, in version order, with the round it was taken after and the
// nodes that had failed a cycle by then. A node unchanged between snapshots
// is stored once ("nodes") and referred to by index.
Json world_model_json(const RunStore& store, const util::Folder& run, const std::vector<core::events::RunEvent>& events,
                      std::size_t max_text,
                      Json& warnings) {
  const auto at = snapshot_context(events);
  Json nodes = Json::array();
  Json texts = Json::array();
  std::map<std::string, std::size_t> node_index, text_index;
  auto intern = [](Json& table, std::map<std::string, std::size_t>& index, Json value) {
    std::string key = value.dump();
    auto [it, fresh] = index.emplace(key, table.size());
    if (fresh) table.push_back(std::move(value));
    return it->second;
  };
  Json snapshots = Json::array();
  std::vector<std::uint64_t> versions;
  try {
    versions = store.world_model_versions();
  } catch (const std::exception& e) {
    warnings.push_back(fmt::format("world_model/: {}", e.what()));
  }
  for (std::uint64_t version : versions) {
    const fs::path file = snapshot_file(version);
    std::string err;
    std::optional<Json> wm = read_snapshot(run, file, err);
    if (!wm) {
      warnings.push_back(fmt::format("{}: {}; snapshot left out", file.filename().string(), err));
      continue;
    }
    auto it = at.find(version);
    report::TreeView t = report::read_tree(*wm, it != at.end() ? it->second.second : std::set<std::string>{});
    int round = it != at.end() ? it->second.first
                               : static_cast<int>(num_field((*wm)["computed_signals"], "round_index").value_or(0));
    Json idx = Json::array();
    for (const auto& v : t.nodes) idx.push_back(intern(nodes, node_index, node_json(v, max_text)));
    Json questions = Json::array();
    for (const auto& q : t.open_questions) questions.push_back(clip(q, max_text));
    snapshots.push_back(Json::obj({{"version", version},
                                   {"round", round},
                                   {"root", t.root_id},
                                   {"active", t.active_id},
                                   {"summary", intern(texts, text_index, Json(clip(t.kernel_summary, 4 * max_text)))},
                                   {"questions", intern(texts, text_index, questions)},
                                   {"nodes", idx}}));
  }
  return Json::obj({{"snapshots", snapshots}, {"nodes", nodes}, {"texts", texts}});
}

Json workload_timings(const WorkloadResult& w) {
  Json j = Json::obj({{"name", w.name}, {"benchmark", w.benchmark}, {"status", to_string(w.status)}});
  if (w.timing.count > 0) {
    j["latency_ms"] = w.timing.latency();
    j["statistic"] = to_string(w.timing.statistic);
    j["ci_pct"] = 100.0 * w.timing.rel_half_width();  // +- half the 95% interval
    j["mean_ms"] = w.timing.mean_ms;
    j["median_ms"] = w.timing.median_ms;
    j["min_ms"] = w.timing.min_ms;
    j["stddev_ms"] = w.timing.stddev_ms;
    j["reps"] = w.timing.count;
  }
  if (w.reference_ms > 0) j["reference_ms"] = w.reference_ms;
  if (w.paired) j["paired"] = true;
  if (w.speedup() > 0) j["speedup"] = w.speedup();
  return j;
}

// The best kernel: per-workload timings beside the reference and the
// baselines there are (the run's first passing kernel, and torch.compile
// where the task's oracle measured it), and its source.
Json best_json(const RunStore& store, const std::vector<AttemptRecord>& attempts, const ReportOptions& opts,
               Json& warnings) {
  std::optional<BestSolution> best;
  try {
    best = store.best();
  } catch (const Error& e) {
    warnings.push_back(fmt::format("{}; no best kernel shown", e.what()));
  }
  if (!best) return Json();
  const EvalResult& ev = best->eval;
  Json b = Json::obj({{"round", best->round},
                      {"solution_id", best->solution.id},
                      {"name", best->solution.name},
                      {"language", to_string(best->solution.language)},
                      {"latency_ms", ev.latency_ms},
                      {"reference_latency_ms", ev.reference_latency_ms},
                      {"speedup", ev.speedup},
                      {"vs_baseline", ev.vs_baseline},
                      {"score_mode", to_string(ev.score_mode)},
                      {"device", ev.device}});
  // Baselines per workload name.
  Json baselines = Json::array();
  std::map<std::string, std::map<std::string, double>> base_ms;  // workload -> baseline -> ms
  for (const auto& a : attempts) {
    if (a.round <= 0 || !a.eval.passed()) continue;
    if (a.solution.id != best->solution.id) {
      const std::string name = fmt::format("first passing kernel (round {})", a.round);
      bool any = false;
      for (const auto& w : a.eval.workloads)
        if (w.timing.count > 0) {
          base_ms[w.name][name] = w.timing.mean_ms;
          any = true;
        }
      if (any) baselines.push_back(name);
    }
    break;
  }
  // The task's own baseline (FlashInfer-Bench tasks score against it).
  bool task_baseline = false;
  for (const auto& w : ev.workloads)
    if (w.baseline_ms > 0) {
      base_ms[w.name]["the task's baseline"] = w.baseline_ms;
      task_baseline = true;
    }
  if (task_baseline) baselines.push_back("the task's baseline");
  if (const Json* c = ev.metrics.find("compile_ms"); c && c->is_number() && c->as_number() > 0) {
    baselines.push_back("torch.compile");
    for (const auto& w : ev.workloads)
      if (w.benchmark) base_ms[w.name]["torch.compile"] = c->as_number();
  }
  Json ws = Json::array();
  for (const auto& w : ev.workloads) {
    Json j = workload_timings(w);
    if (auto it = base_ms.find(w.name); it != base_ms.end()) {
      Json bj = Json::object();
      for (const auto& [k, v] : it->second) bj[k] = v;
      j["baselines"] = bj;
    }
    ws.push_back(std::move(j));
  }
  b["baselines"] = baselines;
  b["workloads"] = ws;
  Json sources = Json::array();
  for (const auto& s : best->solution.sources) {
    bool cut = false;
    std::string content = clip(s.content, opts.max_source_bytes, &cut);
    sources.push_back(Json::obj({{"path", s.path}, {"content", content}, {"truncated", cut}, {"bytes", s.content.size()}}));
  }
  b["sources"] = sources;
  if (!best->solution.launch_plan.empty()) b["launch_plan"] = best->solution.launch_plan.to_json().dump(2);
  return b;
}

}  // namespace

Json run_report_data(const fs::path& run_dir, const ReportOptions& options) {
  RunStore store = RunStore::open_read_only(run_dir);
  const util::Folder run(run_dir);
  Json warnings = Json::array();
  Json m = store.manifest();  // written atomically: always whole
  const auto events = read_events(run, warnings);
  std::vector<AttemptRecord> attempts = read_attempts(store, run, warnings);
  Json data = Json::obj({{"format", "ksearch-report"},
                         {"format_version", 1},
                         {"generated", utc_timestamp()},
                         {"run", run_summary(m, run_dir)}});
  data["attempts"] = attempts_json(attempts);
  data["llm"] = llm_json(events);
  data["world_model"] = world_model_json(store, run, events, options.max_node_text, warnings);
  data["best"] = best_json(store, attempts, options, warnings);
  data["warnings"] = warnings;
  return data;
}

std::string run_world_model_dot(const fs::path& run_dir, std::optional<std::uint64_t> version) {
  RunStore store = RunStore::open_read_only(run_dir);
  auto versions = store.world_model_versions();
  if (versions.empty())
    throw Error(Status::not_found, fmt::format("{} holds no world-model snapshot (the strategy keeps none, or none is "
                                               "written yet)", run_dir.string()));
  const std::uint64_t v = version.value_or(versions.back());
  if (std::find(versions.begin(), versions.end(), v) == versions.end())
    throw Error(Status::invalid_argument, fmt::format("world-model version {}: no such snapshot; {} has versions {} to {}",
                                                      v, run_dir.string(), versions.front(), versions.back()));
  const util::Folder run(run_dir);
  const fs::path file = snapshot_file(v);
  std::string err;
  std::optional<Json> wm = read_snapshot(run, file, err);
  if (!wm) throw Error(Status::parse, fmt::format("{}: {}", (run_dir / file).string(), err));
  Json ignored = Json::array();
  const auto at = snapshot_context(read_events(run, ignored));
  auto it = at.find(v);
  const std::string task = str_field(store.manifest()["task"], "name");
  return report::tree_dot(*wm, fmt::format("{}: world model v{}{}", task, v,
                                           it != at.end() ? fmt::format(", after round {}", it->second.first) : ""),
                          it != at.end() ? it->second.second : std::set<std::string>{});
}

KS_NAMESPACE_END
