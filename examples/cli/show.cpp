// ksearch show: a run's configuration, world-model tree, attempts and best.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "args.hpp"
#include "commands.hpp"
#include "diff.hpp"
#include "exit_codes.hpp"
#include "ksearch/error.hpp"
#include "ksearch/report.hpp"
#include "ksearch/run_store.hpp"
#include "ksearch/world_model.hpp"
#include "ksearch/sys/world_model.hpp"
#include "report.hpp"
#include "term.hpp"

namespace ks::cli {

namespace {

int print_dot(const RunStore& store, const Args& a) {
  std::optional<std::uint64_t> version;
  if (a.has("wm-version")) {
    int v = a.get_int("wm-version", 0);
    if (v < 0) throw Error(Status::invalid_argument, "--wm-version must be a snapshot number (0 or more)");
    version = static_cast<std::uint64_t>(v);
  }
  const std::string dot = terminal_text(run_world_model_dot(store.dir(), version));  // labels hold model text
  std::fwrite(dot.data(), 1, dot.size(), stdout);
  return 0;
}

const AttemptRecord& find_attempt(const std::vector<AttemptRecord>& attempts, const std::string& id) {
  const bool number = !id.empty() && id.find_first_not_of("0123456789") == std::string::npos;
  if (number)
    for (const auto& r : attempts)
      if (std::to_string(r.seq) == id || (id.size() > 1 && id[0] == '0' && r.seq == std::stoi(id))) return r;
  const AttemptRecord* found = nullptr;
  std::set<std::string> ids;
  for (const auto& r : attempts)
    if (!r.solution.id.empty() && r.solution.id.rfind(id, 0) == 0) {
      if (!found) found = &r;
      ids.insert(r.solution.id);
    }
  if (ids.size() > 1)
    throw Error(Status::invalid_argument, fmt::format("--attempt {}: {} solutions start with it; give more of the id",
                                                      id, ids.size()));
  if (!found)
    throw Error(Status::not_found, fmt::format("--attempt {}: no such attempt ({} attempts: sequence numbers 0 to {}, "
                                               "or a solution id)", id, attempts.size(),
                                               attempts.empty() ? 0 : attempts.back().seq));
  return *found;
}

std::string plan_text(const Solution& s) {
  std::string t;
  if (!s.launch_plan.empty()) t += s.launch_plan.to_json().dump(2) + "\n";
  if (const ks::Json p = s.params.to_json(); !p.is_null()) t += "params: " + p.dump(2) + "\n";
  return t;
}

// The code of `from` against `to`, file by file (by path), then the plan.
std::string solution_diff(const Solution& from, const Solution& to) {
  std::string out;
  std::vector<std::string> paths;
  for (const auto& f : from.sources) paths.push_back(f.path);
  for (const auto& f : to.sources)
    if (std::find(paths.begin(), paths.end(), f.path) == paths.end()) paths.push_back(f.path);
  auto content = [](const Solution& s, const std::string& path) -> const std::string* {
    for (const auto& f : s.sources)
      if (f.path == path) return &f.content;
    return nullptr;
  };
  for (const auto& p : paths) {
    const std::string* x = content(from, p);
    const std::string* y = content(to, p);
    out += unified_diff(x ? *x : "", y ? *y : "", x ? "parent/" + p : "/dev/null", y ? p : "/dev/null");
  }
  out += unified_diff(plan_text(from), plan_text(to), "parent/launch_plan", "launch_plan");
  return out;
}

int print_attempt(const RunStore& store, const std::string& id, bool json) {
  const auto attempts = store.attempts();
  const AttemptRecord& r = find_attempt(attempts, id);
  const AttemptRecord* parent = nullptr;
  for (const auto& p : attempts)
    if (!r.solution.parent_id.empty() && p.solution.id == r.solution.parent_id) {
      parent = &p;
      break;
    }
  std::string others;
  for (const auto& p : attempts)
    if (&p != &r && !r.solution.id.empty() && p.solution.id == r.solution.id)
      others += fmt::format("{}{}", others.empty() ? "" : ", ", p.seq);
  const std::string diff = parent ? solution_diff(parent->solution, r.solution) : "";
  if (json) {
    Json j = r.to_json();
    j["solution"] = r.solution.to_json();
    j["eval"] = r.eval.to_json();
    if (!r.raw_answer.empty()) j["raw_answer"] = r.raw_answer;
    j["parent_seq"] = parent ? Json(parent->seq) : Json();
    j["diff_against_parent"] = diff;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  say("Attempt {} (round {}): {}\n", r.seq, r.round > 0 ? std::to_string(r.round) : "not counted",
      r.eval.summary());
  say("  action: {}\n  solution: {}{}\n  time: {}\n", r.action, r.solution.id.empty() ? "-" : r.solution.id,
      others.empty() ? "" : fmt::format(" (the same code as attempt {})", others), r.time);
  say("  parent: {}\n", r.solution.parent_id.empty() ? "none (written from the task alone)"
                          : parent ? fmt::format("{} (attempt {}, round {})", r.solution.parent_id, parent->seq,
                                                 parent->round)
                                   : r.solution.parent_id + " (not an attempt of this run)");
  for (const auto& f : r.solution.sources)
    say("\n== {} ==\n{}{}", f.path, f.content, f.content.empty() || f.content.back() == '\n' ? "" : "\n");
  if (std::string plan = plan_text(r.solution); !plan.empty()) say("\n== launch plan ==\n{}", plan);
  if (r.solution.sources.empty() && !r.raw_answer.empty())
    say("\n== the model's answer (no usable candidate in it) ==\n{}\n", r.raw_answer);
  say("\n== compiler and run log ==\n{}\n", r.eval.log.empty() ? "(empty)" : r.eval.log);
  say("\n== evaluation ==\n{}{}\n", r.eval.summary(),
      r.eval.device.empty() ? "" : fmt::format(" on {}", r.eval.device));
  if (!r.eval.workloads.empty()) print_eval_table(stdout, r.eval);
  if (!r.eval.metrics.empty()) say("  metrics: {}\n", r.eval.metrics.dump());
  if (parent)
    say("\n== diff against the parent (attempt {}) ==\n{}", parent->seq,
        diff.empty() ? "(the same code)\n" : diff);
  return 0;
}

}  // namespace

int cmd_show(int argc, char** argv) {
  Args a("show", "ksearch show RUN_DIR [--attempts] [--attempt ID] [--json] [--dot [--wm-version N]]",
         "Prints what a run folder holds: its configuration and status, the world model's decision tree, every "
         "attempt and the best solution's per-workload results.",
         {{"attempts", "", "List every attempt, not only the counts.", "", false},
          {"no-tree", "", "Do not print the world-model tree.", "", false},
          {"json", "", "Print manifest, state, best and attempts as one JSON object.", "", false},
          {"attempt", "ID", "Print one attempt: its code, compiler and run log, evaluation, and a diff against its "
                            "parent. ID is its sequence number (the first column of --attempts) or its solution id "
                            "(a prefix will do).", "", false},
          {"dot", "", "Print the world-model tree in Graphviz dot (e.g. `| dot -Tsvg > tree.svg`).", "", false},
          {"wm-version", "N", "With --dot: that snapshot (world_model/vNNNNNN.json).", "the latest", false}});
  if (!a.parse(argc, argv)) {
    throw UsageError(a.error());
  }
  if (a.help_requested()) {
    std::printf("%s", a.help_text().c_str());
    return 0;
  }
  if (a.positional().size() != 1) {
    throw UsageError("give exactly one run folder");
  }
  RunStore store = RunStore::open_read_only(a.positional()[0]);
  if (a.has("dot")) return print_dot(store, a);
  if (a.has("attempt")) return print_attempt(store, a.get("attempt"), a.has("json"));
  const Json m = store.manifest();  // const: a lookup of a missing key must not insert one (and move cfg)
  auto attempts = store.attempts();
  auto best = store.best();
  if (a.has("json")) {
    Json j = Json::obj({{"manifest", m}});
    if (auto st = store.state()) j["state"] = *st;
    Json at = Json::array();
    for (const auto& r : attempts) at.push_back(r.to_json());
    j["attempts"] = at;
    if (best) j["best"] = Json::obj({{"round", best->round}, {"solution", best->solution.to_json()}, {"eval", best->eval.to_json()}});
    if (auto fe = store.final_eval()) j["final_eval"] = fe->to_json();
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  const Json& cfg = m["config"];
  say("Run {}\n  task {} | strategy {} | language {} | status {} ({})\n", store.dir().string(),
      m["task"].get_string("name"), cfg.get_string("strategy"), cfg.get_string("language"),
      m.get_string("status"), m.get_string("stop_reason", "-"));
  if (m.contains("error")) say("  error: {}\n", m.get_string("error"));
  if (const Json& r = m["replay"]; r.is_object()) {
    std::string changes;
    if (r["config_changes"].is_object())
      for (const auto& [k, v] : r["config_changes"].as_object())
        changes += (changes.empty() ? "" : ", ") + k + " " + v.dump();
    say("  replay of {} | settings {} | on divergence: {}\n", r.get_string("source"),
        changes.empty() ? "as recorded" : "changed: " + changes, r.get_string("on_divergence"));
  }
  if (const Json& d = m["replay_divergence"]; d.is_object()) {
    std::string msg = d.get_string("message");
    say("  left its recording: {}\n", msg.substr(0, msg.find('\n')));
  }
  say("  created {} | library {} | device {}\n", m.get_string("created"), m.get_string("library_version"),
      m["device"].get_string("name", m["device"].get_string("backend")));
  const Json& totals = m["totals"];
  if (totals.is_object()) {
    const Json& u = totals["llm_usage"];
    say("  rounds {} / {} | LLM calls {} | tokens {} in, {} out | ${:.4f}\n", totals.get_int("rounds"),
        cfg.get_int("max_rounds"), totals.get_int("llm_calls"), u.get_int("input_tokens"),
        u.get_int("output_tokens"), u.get_number("cost_usd"));
    if (const Json& w = totals["world_model"]; w.is_object()) {
      const Json* lenient = cfg.find("wm_lenient_edits");
      std::string mode = lenient && lenient->is_bool() && lenient->as_bool()
                             ? fmt::format("lenient edits, {} repairs in {} edits", w.get_int("repairs"),
                                           w.get_int("repaired_edits"))
                             : "strict edits";
      say("  world model: {} edits committed, {} answers rejected, {} fallbacks; {}\n", w.get_int("edits"),
          w.get_int("rejected"), w.get_int("fallbacks"), mode);
      // Each fallback with why: a tree that fell back is not the model's.
      if (w.get_int("fallbacks") > 0)
        for (const auto& e : store.events())
          if (e.get_string("type") == "world_model_fallback")
            say("  world model fallback ({}): {}\n", e.get_string("kind"),
                e.get_string("why", "no edit was accepted; a fallback stood in"));
    }
  }
  std::map<std::string, int> by_status;
  for (const auto& r : attempts) ++by_status[to_string(r.eval.status)];
  std::string counts;
  for (const auto& [k, v] : by_status) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", v, k);
  say("  attempts: {}\n", counts.empty() ? "none" : counts);
  if (!a.has("no-tree")) {
    if (auto wmj = store.latest_world_model()) {
      auto wm = make_tree_world_model();
      try {
        wm->load_json(*wmj);
      } catch (const Error& e) {
        // Name the damaged snapshot, not only what is wrong inside it.
        auto file = store.dir() / "world_model" / fmt::format("v{:06d}.json", store.world_model_versions().back());
        throw Error(e.status(), fmt::format("{}: {}", file.string(), e.what()));
      }
      say("\nWorld model (version {}):\n{}\n", wm->version(), wm->render_tree());
    }
  }
  if (a.has("attempts")) {
    say("\n  {:>4} {:>5}  {:<16} {:<16} {:>11}  {}\n", "seq", "round", "solution", "status", "latency ms", "action");
    for (const auto& r : attempts)
      say("  {:>4} {:>5}  {:<16} {:<16} {:>11}  {}\n", r.seq, r.round,
          r.solution.id.empty() ? "-" : r.solution.id, to_string(r.eval.status),
          r.eval.latency_ms > 0 ? fmt::format("{:.4f}", r.eval.latency_ms) : "-", r.action);
  }
  if (best) {
    say("\nBest: {} (round {}): {}\n", best->solution.id, best->round, eval_headline(best->eval));
    print_eval_table(stdout, best->eval);
    if (auto fe = store.final_eval(); fe && fe->solution_id == best->solution.id) {
      say("\nFinal evaluation on every workload: {}\n", fe->passed() ? eval_headline(*fe) : fe->summary());
      print_eval_table(stdout, *fe);
    }
  } else {
    say("\nNo passing solution yet.\n");
  }
  return 0;
}

}  // namespace ks::cli
