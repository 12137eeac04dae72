// Runs side by side (`ksearch compare`): each run's best so far over rounds,
// the rounds it took to come within 90 % of its final best, its LLM usage and
// wall time, and per label (a strategy, or a name the caller gives) the mean
// and spread over repeated runs. The folders are read strictly, unlike the
// report: a comparison built on a damaged file would print wrong numbers, so
// every problem is an error that names the file. A torn last log line (a run
// in progress, a kill) is no problem: the run store leaves it out.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <system_error>

#include "core/run_events.hpp"
#include "ksearch/error.hpp"
#include "ksearch/report.hpp"
#include "ksearch/run_store.hpp"
#include "report/tree_view.hpp"

KS_NAMESPACE_BEGIN

namespace fs = std::filesystem;
using report::num_field;
using report::str_field;

namespace {

// Within 90 % of the final best: latency at most final / 0.9, score at least
// 0.9 x final. The tolerance keeps a value equal to the bound (up to
// rounding) on the right side.
constexpr double kNinety = 0.9;
constexpr double kTolerance = 1e-9;

bool is_code_kind(const std::string& kind) { return kind == "generate" || kind == "improve" || kind == "debug"; }

// Everything compare takes from one folder.
struct RunRead {
  Json manifest;
  std::vector<AttemptRecord> attempts;
  std::vector<core::events::RunEvent> events;
  std::optional<EvalResult> final_eval;
};

// A read error as the comparison reports it: the run store's messages name
// the file; a decoding error of a record (an unknown status) is a damaged
// folder, not a usage error.
[[noreturn]] void damaged(const Error& e, const fs::path& dir) {
  std::string what = e.what();
  if (what.find(dir.string()) == std::string::npos) what = fmt::format("{}: {}", dir.string(), what);
  throw Error(e.status() == Status::not_found || e.status() == Status::io ? e.status() : Status::parse,
              what + " (a damaged run folder; compare reads only complete runs' files)");
}

RunRead read_run(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error(Status::not_found, fs::exists(dir, ec) ? fmt::format("{}: not a folder (a run folder was expected)", dir.string())
                                                       : fmt::format("{}: no such run folder", dir.string()));
  RunRead r;
  try {
    RunStore store = RunStore::open_read_only(dir);
    r.manifest = store.manifest();
    if (!r.manifest.is_object()) throw Error(Status::parse, fmt::format("{}: not a JSON object", (dir / "manifest.json").string()));
    r.attempts = store.attempts();
    const fs::path events_file = dir / "events.jsonl";
    for (const Json& j : store.events()) {
      try {
        r.events.push_back(core::events::RunEvent::from_json(j));
      } catch (const Error& e) {
        throw Error(Status::parse, fmt::format("{}: {}", events_file.string(), e.what()));
      }
    }
    r.final_eval = store.final_eval();
  } catch (const Error& e) {
    if (e.status() == Status::not_found && std::string(e.what()).find("holds no run") != std::string::npos) throw;
    damaged(e, dir);
  }
  return r;
}

// The best so far is kept as the session keeps it: counted rounds, and an
// evaluation adopted from another run when the run started (round 0 with
// metrics.recorded_from, docs/world-model.md "Warm start"), which counts from
// round 1 on.
bool counts_from_start(const AttemptRecord& a) {
  const Json* from = a.eval.metrics.find("recorded_from");
  return a.round == 0 && from && from->is_string();
}

double paper_score_of(const EvalResult& e) { return e.vs_baseline > 0 ? 100.0 * e.vs_baseline : 0; }

// The session's choice of best: the highest score (1 / latency, or the mean
// speedup over the task's baseline).
double rank_of(const EvalResult& e) {
  if (!e.passed()) return 0;
  if (e.score > 0) return e.score;
  return e.latency_ms > 0 ? 1.0 / e.latency_ms : 0;
}

Json opt(const std::optional<double>& v) { return v ? Json(*v) : Json(); }

// The timed calls behind an evaluation's latency, over its benchmark workloads.
std::int64_t timed_calls(const EvalResult& e) {
  std::int64_t n = 0;
  for (const auto& w : e.workloads)
    if (w.benchmark) n += w.timing.count;
  return n;
}

Json curve_json(const std::vector<std::optional<double>>& c) {
  Json out = Json::array();
  for (const auto& v : c) out.push_back(opt(v));
  return out;
}

// The first round (1-based) whose best so far is within 90 % of the last one.
std::optional<int> rounds_to_90(const std::vector<std::optional<double>>& curve, bool lower_is_better) {
  if (curve.empty() || !curve.back()) return std::nullopt;
  const double final_best = *curve.back();
  for (std::size_t i = 0; i < curve.size(); ++i) {
    if (!curve[i]) continue;
    const bool within = lower_is_better ? *curve[i] <= final_best / kNinety * (1 + kTolerance)
                                        : *curve[i] >= final_best * kNinety * (1 - kTolerance);
    if (within) return static_cast<int>(i) + 1;
  }
  return std::nullopt;
}

// One run: its settings, curves and usage.
struct RunSummary {
  Json json;
  std::string task, fingerprint;
  std::vector<std::optional<double>> best_ms, best_score;
};

// LLM usage from the events (a call is written once; a resumed or replayed
// run's calls keep their recorded usage).
Json llm_usage(const RunRead& r) {
  namespace ev = core::events;
  std::set<std::int64_t> seen;
  LlmUsage total;
  int calls = 0, failed_calls = 0, code_calls = 0, wm_calls = 0;
  std::map<std::string, std::pair<int, LlmUsage>> by_kind;
  for (const auto& e : r.events) {
    const auto* call = std::get_if<ev::LlmCall>(&e.payload);
    if (!call || (call->llm_seq >= 0 && !seen.insert(call->llm_seq).second)) continue;
    ++calls;
    if (!call->ok) ++failed_calls;
    if (is_code_kind(call->kind)) ++code_calls;
    else if (call->kind.rfind("wm_", 0) == 0) ++wm_calls;
    total += call->usage;
    by_kind[call->kind].first++;
    by_kind[call->kind].second += call->usage;
  }
  Json kinds = Json::object();
  for (const auto& [k, cu] : by_kind)
    kinds[k] = Json::obj({{"calls", cu.first},
                          {"input_tokens", cu.second.input_tokens},
                          {"output_tokens", cu.second.output_tokens}});
  return Json::obj({{"calls", calls},
                    {"failed_calls", failed_calls},
                    {"code_calls", code_calls},
                    {"world_model_calls", wm_calls},
                    {"input_tokens", total.input_tokens},
                    {"output_tokens", total.output_tokens},
                    {"reasoning_tokens", total.reasoning_tokens},
                    {"cost_usd", total.cost_usd},
                    {"llm_s", total.wall_s},
                    {"by_kind", kinds}});
}

// Workloads at or above x times the baseline: the best kernel's evaluation
// on every workload when the run made one (final_eval.json), else the
// evaluation the search ranked it by. Null without baselines.
Json workloads_at_least(const AttemptRecord* best, const RunRead& r, const CompareOptions& options) {
  if (!best) return Json();
  const bool final_matches = r.final_eval && r.final_eval->solution_id == best->solution.id;
  const EvalResult& e = final_matches ? *r.final_eval : best->eval;
  int with_baseline = 0, above = 0;
  for (const auto& w : e.workloads) {
    if (!w.benchmark || !(w.baseline_ms > 0)) continue;
    ++with_baseline;
    if (w.status == EvalStatus::passed && w.timing.count > 0 && w.timing.latency() > 0 &&
        w.baseline_ms / w.timing.latency() >= options.at_least * (1 - kTolerance))
      ++above;
  }
  if (with_baseline == 0) return Json();
  return Json::obj({{"x", options.at_least},
                    {"workloads", with_baseline},
                    {"at_least", above},
                    {"fraction", static_cast<double>(above) / with_baseline},
                    {"from", final_matches ? "final_eval.json" : "best kernel's search evaluation"}});
}

RunSummary summarize(const CompareRun& run, const RunRead& r, const CompareOptions& options) {
  const Json& m = r.manifest;
  const Json& cfg = m["config"];
  const Json& dev = m["device"];
  RunSummary s;
  s.task = str_field(m["task"], "name");
  s.fingerprint = str_field(m["task"], "fingerprint");
  if (s.task.empty())
    throw Error(Status::parse, fmt::format("{}: names no task (task.name); a damaged run folder",
                                           (run.dir / "manifest.json").string()));
  const std::string strategy = str_field(cfg, "strategy", "unknown");
  // The folder's own name, also when it is given as "RUN/" or ".".
  fs::path normal = fs::absolute(run.dir).lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();
  const std::string name = normal.filename().string();

  // The rounds: the largest counted round of an attempt (a round whose answer
  // held no candidate is an attempt too).
  int rounds = 0;
  for (const auto& a : r.attempts) {
    // Every counted round is an attempt, so no round number passes their count.
    if (a.round < 0 || static_cast<std::size_t>(a.round) > r.attempts.size())
      throw Error(Status::parse, fmt::format("{}: attempt {} says round {}, and the run holds {} attempts; a damaged run "
                                             "folder", (run.dir / "attempts.jsonl").string(), a.seq, a.round,
                                             r.attempts.size()));
    rounds = std::max(rounds, a.round);
  }
  s.best_ms.assign(static_cast<std::size_t>(rounds), std::nullopt);
  s.best_score.assign(static_cast<std::size_t>(rounds), std::nullopt);
  std::vector<std::optional<double>> round_ms(static_cast<std::size_t>(rounds)), round_score(round_ms.size());
  std::optional<double> start_ms, start_score;
  const AttemptRecord* best = nullptr;
  auto better = [](std::optional<double>& slot, double v, bool lower) {
    if (!slot || (lower ? v < *slot : v > *slot)) slot = v;
  };
  for (const auto& a : r.attempts) {
    if (!a.eval.passed() || !(a.eval.latency_ms > 0)) continue;
    const bool from_start = counts_from_start(a);
    if (a.round <= 0 && !from_start) continue;
    if (!best || rank_of(a.eval) > rank_of(best->eval)) best = &a;
    const double score = paper_score_of(a.eval);
    if (from_start) {
      better(start_ms, a.eval.latency_ms, true);
      if (score > 0) better(start_score, score, false);
    } else {
      better(round_ms[static_cast<std::size_t>(a.round - 1)], a.eval.latency_ms, true);
      if (score > 0) better(round_score[static_cast<std::size_t>(a.round - 1)], score, false);
    }
  }
  std::optional<double> run_ms = start_ms, run_score = start_score;
  for (std::size_t i = 0; i < s.best_ms.size(); ++i) {
    if (round_ms[i]) better(run_ms, *round_ms[i], true);
    if (round_score[i]) better(run_score, *round_score[i], false);
    s.best_ms[i] = run_ms;
    s.best_score[i] = run_score;
  }
  const bool has_score = std::any_of(s.best_score.begin(), s.best_score.end(), [](const auto& v) { return v.has_value(); });

  const Json& time = m["totals"]["time"];
  const bool replayed = m["replay"].is_object();
  const auto wall = num_field(time, "wall_s");
  const auto r90 = rounds_to_90(s.best_ms, true);
  const auto r90_score = has_score ? rounds_to_90(s.best_score, false) : std::nullopt;
  Json j = Json::obj({{"label", run.label.empty() ? strategy : run.label},
                      {"name", name},
                      {"dir", run.dir.string()},
                      {"strategy", strategy},
                      {"model", str_field(cfg, "model", str_field(m["llm"], "kind"))},
                      {"language", str_field(cfg, "language")},
                      {"device", str_field(dev, "name", str_field(dev, "backend"))},
                      {"status", str_field(m, "status")},
                      {"stop_reason", str_field(m, "stop_reason")},
                      {"max_rounds", num_field(cfg, "max_rounds").value_or(0)},
                      {"parallel", num_field(cfg, "parallel").value_or(1)},
                      {"seed", opt(num_field(cfg, "seed"))},
                      {"resumed", num_field(m, "resumed").value_or(0)},
                      {"replayed", replayed},
                      {"rounds", rounds},
                      {"attempts", static_cast<std::int64_t>(r.attempts.size())},
                      {"best_latency_ms", rounds ? opt(s.best_ms.back()) : opt(start_ms)},
                      {"best_score", has_score && rounds ? opt(s.best_score.back()) : Json()},
                      {"best_round", best ? Json(best->round) : Json()},
                      // The best's own measurement: +- half its 95% interval, and its timed calls.
                      {"best_ci_pct", best && best->eval.latency_lo_ms > 0
                                          ? Json(50.0 * (best->eval.latency_hi_ms - best->eval.latency_lo_ms) /
                                                 best->eval.latency_ms)
                                          : Json()},
                      {"best_timed_calls", best ? Json(timed_calls(best->eval)) : Json()},
                      {"best_solution_id", best ? Json(best->solution.id) : Json()},
                      {"rounds_to_90", r90 ? Json(*r90) : Json()},
                      {"rounds_to_90_score", r90_score ? Json(*r90_score) : Json()},
                      {"curve", Json::obj({{"best_latency_ms", curve_json(s.best_ms)},
                                           {"best_score", has_score ? curve_json(s.best_score) : Json()}})},
                      {"llm", llm_usage(r)},
                      // A replay measured nothing: its own time says nothing of the run's.
                      {"wall_s", replayed ? Json() : opt(wall)},
                      {"workloads_at_least", workloads_at_least(best, r, options)}});
  s.json = std::move(j);
  return s;
}

// Mean, minimum, maximum and the sample standard deviation (0 for one value).
Json stats(const std::vector<double>& v) {
  if (v.empty()) return Json();
  double sum = 0, lo = v.front(), hi = v.front();
  for (double x : v) {
    sum += x;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  const double mean = sum / static_cast<double>(v.size());
  double sq = 0;
  for (double x : v) sq += (x - mean) * (x - mean);
  const double sd = v.size() > 1 ? std::sqrt(sq / static_cast<double>(v.size() - 1)) : 0.0;
  return Json::obj({{"n", static_cast<std::int64_t>(v.size())}, {"mean", mean}, {"min", lo}, {"max", hi}, {"stddev", sd}});
}

// The values a field has over some runs (those where it is a number).
std::vector<double> values(const std::vector<const RunSummary*>& runs, const std::function<const Json&(const Json&)>& at) {
  std::vector<double> out;
  for (const auto* r : runs)
    if (const Json& v = at(r->json); v.is_number()) out.push_back(v.as_number());
  return out;
}

// Per round, over the runs that reached it with a value there.
Json group_curve(const std::vector<const RunSummary*>& runs, bool score) {
  std::size_t n = 0;
  for (const auto* r : runs) n = std::max(n, (score ? r->best_score : r->best_ms).size());
  Json out = Json::array();
  bool any = false;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<double> v;
    for (const auto* r : runs) {
      const auto& c = score ? r->best_score : r->best_ms;
      if (i < c.size() && c[i]) v.push_back(*c[i]);
    }
    any = any || !v.empty();
    out.push_back(stats(v));
  }
  return any ? out : Json();
}

Json group_json(const std::string& label, const std::vector<const RunSummary*>& runs) {
  Json names = Json::array();
  std::set<std::string> strategies;
  for (const auto* r : runs) {
    names.push_back(r->json["name"]);
    strategies.insert(r->json["strategy"].as_string());
  }
  Json strat = Json::array();
  for (const auto& s : strategies) strat.push_back(s);
  auto field = [&](const char* k) { return stats(values(runs, [k](const Json& j) -> const Json& { return j[k]; })); };
  auto llm = [&](const char* k) { return stats(values(runs, [k](const Json& j) -> const Json& { return j["llm"][k]; })); };
  return Json::obj({{"label", label},
                    {"runs", names},
                    {"strategies", strat},
                    {"best_latency_ms", field("best_latency_ms")},
                    {"best_score", field("best_score")},
                    {"rounds", field("rounds")},
                    {"rounds_to_90", field("rounds_to_90")},
                    {"rounds_to_90_score", field("rounds_to_90_score")},
                    {"llm_calls", llm("calls")},
                    {"code_calls", llm("code_calls")},
                    {"world_model_calls", llm("world_model_calls")},
                    {"input_tokens", llm("input_tokens")},
                    {"output_tokens", llm("output_tokens")},
                    {"cost_usd", llm("cost_usd")},
                    {"wall_s", field("wall_s")},
                    {"workloads_at_least_fraction",
                     stats(values(runs, [](const Json& j) -> const Json& { return j["workloads_at_least"]["fraction"]; }))},
                    {"curve", Json::obj({{"best_latency_ms", group_curve(runs, false)},
                                         {"best_score", group_curve(runs, true)}})}});
}

// Where the runs differ in what should be equal for a fair comparison.
void note_differences(const std::vector<RunSummary>& runs, Json& warnings) {
  auto differ = [&](const char* what, const std::function<std::string(const RunSummary&)>& key) {
    std::map<std::string, std::vector<std::string>> seen;
    for (const auto& r : runs) seen[key(r)].push_back(r.json["label"].as_string() + "/" + r.json["name"].as_string());
    if (seen.size() < 2) return;
    std::string list;
    for (const auto& [k, names] : seen) {
      if (!list.empty()) list += "; ";
      list += fmt::format("{}: {}", k.empty() ? "(none)" : k, fmt::join(names, ", "));
    }
    warnings.push_back(fmt::format("the runs differ in {} ({})", what, list));
  };
  auto num = [](const Json& v) { return v.is_number() ? fmt::format("{}", v.as_number()) : std::string(); };
  differ("their round budget", [&](const RunSummary& r) { return num(r.json["max_rounds"]); });
  differ("the model", [](const RunSummary& r) { return r.json["model"].as_string(); });
  differ("the device, so their latencies do not compare", [](const RunSummary& r) { return r.json["device"].as_string(); });
  differ("the language", [](const RunSummary& r) { return r.json["language"].as_string(); });
  differ("the candidates at once (--parallel)", [&](const RunSummary& r) { return num(r.json["parallel"]); });
  differ("the task's files (fingerprint)", [](const RunSummary& r) { return r.fingerprint; });
  for (const auto& r : runs) {
    const std::string who = r.json["label"].as_string() + "/" + r.json["name"].as_string();
    const std::string status = r.json["status"].as_string();
    if (status == "running")
      warnings.push_back(fmt::format("{} is still running (or was killed): its numbers are those so far", who));
    else if (status == "failed")
      warnings.push_back(fmt::format("{} ended on an error", who));
    if (r.json["rounds"].as_int() < r.json["max_rounds"].as_int() && status != "running")
      warnings.push_back(fmt::format("{} ran {} of its {} rounds ({})", who, r.json["rounds"].as_int(),
                                     r.json["max_rounds"].as_int(), r.json["stop_reason"].as_string()));
  }
}

}  // namespace

Json compare_runs_data(const std::vector<CompareRun>& runs, const CompareOptions& options) {
  if (runs.empty()) throw Error(Status::invalid_argument, "compare: no run folder given");
  if (!(options.at_least > 0) || !std::isfinite(options.at_least))
    throw Error(Status::invalid_argument, fmt::format("compare: at_least must be a number > 0, is {}", options.at_least));
  std::map<std::string, std::string> dirs;  // canonical folder -> as given
  std::vector<RunSummary> summaries;
  for (const auto& run : runs) {
    RunRead r = read_run(run.dir);
    std::error_code ec;
    const std::string canonical = fs::weakly_canonical(run.dir, ec).string();
    if (auto [it, fresh] = dirs.emplace(ec ? run.dir.string() : canonical, run.dir.string()); !fresh)
      throw Error(Status::invalid_argument,
                  it->second == run.dir.string()
                      ? fmt::format("compare: the run folder {} is given twice", run.dir.string())
                      : fmt::format("compare: the run folder {} is given twice (as {})", it->second, run.dir.string()));
    summaries.push_back(summarize(run, r, options));
  }
  for (const auto& s : summaries)
    if (s.task != summaries.front().task)
      throw Error(Status::invalid_argument,
                  fmt::format("compare: the runs are of different tasks: {} is a run of {}, {} of {}; compare runs of "
                              "one task", summaries.front().json["dir"].as_string(), summaries.front().task,
                              s.json["dir"].as_string(), s.task));

  Json warnings = Json::array();
  note_differences(summaries, warnings);
  std::vector<std::string> order;
  std::map<std::string, std::vector<const RunSummary*>> by_label;
  int max_round = 0;
  bool any_score = false;
  Json run_list = Json::array();
  for (const auto& s : summaries) {
    const std::string& label = s.json["label"].as_string();
    if (!by_label.count(label)) order.push_back(label);
    by_label[label].push_back(&s);
    max_round = std::max(max_round, static_cast<int>(s.best_ms.size()));
    any_score = any_score || s.json["best_score"].is_number();
    run_list.push_back(s.json);
  }
  Json groups = Json::array();
  for (const auto& label : order) groups.push_back(group_json(label, by_label[label]));
  return Json::obj({{"format", "ksearch-compare"},
                    {"format_version", 1},
                    {"generated", utc_timestamp()},
                    {"task", summaries.front().task},
                    {"at_least", options.at_least},
                    {"max_round", max_round},
                    {"score", any_score},
                    {"definitions",
                     Json::obj({{"best_latency_ms", "after round r: the lowest geometric-mean latency of a passing "
                                                    "kernel in rounds 1..r (and an evaluation adopted at the start)"},
                                {"best_score", "after round r: the highest score of a passing kernel in rounds 1..r, "
                                               "score = 100 x the mean over workloads of baseline latency / kernel "
                                               "latency (tasks with baseline latencies only)"},
                                {"best_ci_pct", "the best kernel's own measurement: half its latency's 95 % "
                                                "interval, in % of the latency (none for results made before "
                                                "intervals existed); best_timed_calls: its timed calls"},
                                {"rounds_to_90", "the first round whose best-so-far latency is within 90 % of the "
                                                 "run's final best speed: latency <= final best / 0.9"},
                                {"rounds_to_90_score", "the first round whose best-so-far score is >= 0.9 x the "
                                                       "run's final best score"},
                                {"workloads_at_least", "the best kernel's benchmark workloads with baseline latency / "
                                                       "kernel latency >= at_least, over those with a baseline"},
                                {"groups", "runs with the same label; per round the mean, min, max and sample "
                                           "standard deviation over the runs that reached the round with a "
                                           "passing kernel"},
                                {"wall_s", "the run's wall time as its manifest records it (the last process "
                                           "of a resumed run; none for a replay); llm_s: the recorded LLM time"}})},
                    {"runs", run_list},
                    {"groups", groups},
                    {"warnings", warnings}});
}

KS_NAMESPACE_END
