// ksearch show: a run's configuration, world-model tree, attempts and best.
#include <fmt/format.h>

#include <cstdio>

#include "args.hpp"
#include "commands.hpp"
#include "ksearch/error.hpp"
#include "ksearch/run_store.hpp"
#include "ksearch/world_model.hpp"
#include "report.hpp"

namespace ks::cli {

int cmd_show(int argc, char** argv) {
  Args a("show", "ksearch show RUN_DIR [--attempts] [--json]",
         "Prints what a run folder holds: its configuration and status, the world model's decision tree, every "
         "attempt and the best solution's per-workload results.",
         {{"attempts", "", "List every attempt, not only the counts.", "", false},
          {"no-tree", "", "Do not print the world-model tree.", "", false},
          {"json", "", "Print manifest, state, best and attempts as one JSON object.", "", false}});
  if (!a.parse(argc, argv)) {
    std::fprintf(stderr, "ksearch show: %s\n", a.error().c_str());
    return 2;
  }
  if (a.help_requested()) {
    std::printf("%s", a.help_text().c_str());
    return 0;
  }
  if (a.positional().size() != 1) {
    std::fprintf(stderr, "ksearch show: give exactly one run folder\n");
    return 2;
  }
  RunStore store = RunStore::open_read_only(a.positional()[0]);
  Json m = store.manifest();
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
  fmt::print("Run {}\n  task {} | strategy {} | language {} | status {} ({})\n", store.dir().string(),
             m["task"].get_string("name"), cfg.get_string("strategy"), cfg.get_string("language"),
             m.get_string("status"), m.get_string("stop_reason", "-"));
  if (m.contains("error")) fmt::print("  error: {}\n", m.get_string("error"));
  if (const Json& r = m["replay"]; r.is_object()) {
    std::string changes;
    if (r["config_changes"].is_object())
      for (const auto& [k, v] : r["config_changes"].as_object())
        changes += (changes.empty() ? "" : ", ") + k + " " + v.dump();
    fmt::print("  replay of {} | settings {} | on divergence: {}\n", r.get_string("source"),
               changes.empty() ? "as recorded" : "changed: " + changes, r.get_string("on_divergence"));
  }
  if (const Json& d = m["replay_divergence"]; d.is_object()) {
    std::string msg = d.get_string("message");
    fmt::print("  left its recording: {}\n", msg.substr(0, msg.find('\n')));
  }
  fmt::print("  created {} | library {} | device {}\n", m.get_string("created"), m.get_string("library_version"),
             m["device"].get_string("name", m["device"].get_string("backend")));
  const Json& totals = m["totals"];
  if (totals.is_object()) {
    const Json& u = totals["llm_usage"];
    fmt::print("  rounds {} / {} | LLM calls {} | tokens {} in, {} out | ${:.4f}\n", totals.get_int("rounds"),
               cfg.get_int("max_rounds"), totals.get_int("llm_calls"), u.get_int("input_tokens"),
               u.get_int("output_tokens"), u.get_number("cost_usd"));
  }
  std::map<std::string, int> by_status;
  for (const auto& r : attempts) ++by_status[to_string(r.eval.status)];
  std::string counts;
  for (const auto& [k, v] : by_status) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", v, k);
  fmt::print("  attempts: {}\n", counts.empty() ? "none" : counts);
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
      fmt::print("\nWorld model (version {}):\n{}\n", wm->version(), wm->render_tree());
    }
  }
  if (a.has("attempts")) {
    fmt::print("\n  {:>4} {:>5}  {:<16} {:<16} {:>11}  {}\n", "seq", "round", "solution", "status", "latency ms", "action");
    for (const auto& r : attempts)
      fmt::print("  {:>4} {:>5}  {:<16} {:<16} {:>11}  {}\n", r.seq, r.round,
                 r.solution.id.empty() ? "-" : r.solution.id, to_string(r.eval.status),
                 r.eval.latency_ms > 0 ? fmt::format("{:.4f}", r.eval.latency_ms) : "-", r.action);
  }
  if (best) {
    fmt::print("\nBest: {} (round {}): {}\n", best->solution.id, best->round, eval_headline(best->eval));
    print_eval_table(stdout, best->eval);
    if (auto fe = store.final_eval(); fe && fe->solution_id == best->solution.id) {
      fmt::print("\nFinal evaluation on every workload: {}\n", fe->passed() ? eval_headline(*fe) : fe->summary());
      print_eval_table(stdout, *fe);
    }
  } else {
    fmt::print("\nNo passing solution yet.\n");
  }
  return 0;
}

}  // namespace ks::cli
