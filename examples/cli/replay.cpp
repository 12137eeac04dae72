// ksearch replay: a run folder reproduced into a new one from its recorded
// answers and evaluations, with the recorded settings or changed ones.
#include <fmt/format.h>

#include <cstdio>

#include "args.hpp"
#include "term.hpp"
#include "commands.hpp"
#include "exit_codes.hpp"
#include "ksearch/error.hpp"
#include "ksearch/run_store.hpp"
#include "ksearch/search.hpp"
#include "search_cli.hpp"

namespace ks::cli {

namespace {

// What the reproduction holds against the recording: the final world-model
// tree, every attempt (candidate, round, action, evaluation) and the best.
std::vector<std::string> compare_runs(const std::filesystem::path& mine, const std::filesystem::path& theirs,
                                      std::vector<std::string>& same) {
  RunStore a = RunStore::open_read_only(mine);
  RunStore b = RunStore::open_read_only(theirs);
  std::vector<std::string> differ;

  auto va = a.world_model_versions(), vb = b.world_model_versions();
  auto wa = a.latest_world_model(), wb = b.latest_world_model();
  if (va == vb && wa == wb) {
    if (wa)
      same.push_back(
          fmt::format("world model: the same {} versions, final tree identical (v{})", va.size(), va.back()));
  } else {
    differ.push_back(fmt::format("world model: {} versions here (last v{}), {} in the recording (last v{}){}",
                                 va.size(), va.empty() ? 0 : va.back(), vb.size(), vb.empty() ? 0 : vb.back(),
                                 va == vb ? "; the final trees differ" : ""));
  }

  auto aa = a.attempts(), ab = b.attempts();
  std::size_t n = std::min(aa.size(), ab.size()), first = n;
  for (std::size_t i = 0; i < n && first == n; ++i) {
    const auto &x = aa[i], &y = ab[i];
    if (x.solution.id != y.solution.id || x.round != y.round || x.action != y.action ||
        x.eval.to_json() != y.eval.to_json())
      first = i;
  }
  if (first == n && aa.size() == ab.size()) {
    same.push_back(fmt::format("attempts: the same {} (candidates, rounds, actions, evaluations)", aa.size()));
  } else if (first < n) {
    differ.push_back(fmt::format("attempts: the first {} agree; attempt {} is {} \"{}\" here, {} \"{}\" in the "
                                 "recording",
                                 first, first + 1, aa[first].solution.id, aa[first].action, ab[first].solution.id,
                                 ab[first].action));
  } else {
    differ.push_back(
        fmt::format("attempts: {} here, {} in the recording (the first {} agree)", aa.size(), ab.size(), n));
  }

  auto ba = a.best(), bb = b.best();
  if (!ba && !bb) {
    same.push_back("best: none in either");
  } else if (ba && bb && ba->solution.id == bb->solution.id && ba->round == bb->round &&
             ba->eval.to_json() == bb->eval.to_json()) {
    same.push_back(fmt::format("best: the same, {} (round {}, {:.4f} ms)", ba->solution.id, ba->round,
                               ba->eval.latency_ms));
  } else {
    differ.push_back(fmt::format("best: {} here, {} in the recording", ba ? ba->solution.id : "none",
                                 bb ? bb->solution.id : "none"));
  }
  return differ;
}

// The strategy, the settings table's replay rows (ksearch/search_settings.hpp)
// and how to follow the recording.
std::vector<OptionSpec> replay_options() {
  std::vector<OptionSpec> out = {
      {"run-dir", "DIR", "The new run folder (must not hold a run).", "runs/<task>-<UTC time>", false},
      {"strategy", "NAME", "Another strategy (world_model, greedy, evolve, tune).", "as recorded", false}};
  for (auto& o : setting_options(true)) out.push_back(std::move(o));
  std::vector<OptionSpec> more = {
      {"on-divergence", "stop|skip|live",
       "Where the search leaves the recording: stop (say where and why, and stop); skip (answer each request "
       "with the next recorded answer of its kind, take recorded evaluations by solution id, measure only "
       "candidates the recording never evaluated); live (go on with the model given by --llm and the "
       "recorded evaluator settings).",
       "live with --llm, else stop", false},
      {"allow-prompt-changes", "",
       "A request of the recorded kind whose prompt differs from the recorded one (another library version, a "
       "changed setting that only alters prompts) still gets the recorded answer; the first such difference "
       "is noted in the events. Without it, it is a divergence.",
       "", false},
      {"llm", "SPEC", "A model to continue with where the run leaves the recording: openai (with --model) or "
                      "command:PROGRAM ARGS.", "none", false},
      {"model", "NAME", "With --llm openai: the model.", "", false},
      {"llm-timeout", "S", "With --llm command: seconds the program may take for one answer.", "600", false},
      {"base-url", "URL", "With --llm openai: the endpoint.", "https://api.openai.com/v1", false},
      {"api", "chat|responses", "With --llm openai: the API.", "chat", false},
      {"api-key-env", "NAME", "With --llm openai: the key's environment variable.", "OPENAI_API_KEY", false},
      {"quiet", "", "Print only the final summary (with --json: nothing but the JSON).", "", false},
      {"json", "", "Print the outcome and the comparison with the recording as one JSON document on stdout, "
                   "errors too; progress goes to stderr.", "", false}};
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

}  // namespace

int cmd_replay(int argc, char** argv) {
  Args a("replay", "ksearch replay RUN_DIR [--run-dir NEW_DIR] [setting changes] [--on-divergence stop|skip|live]",
         "Replays a finished or partial run folder into a new one from its recorded LLM answers and its recorded "
         "evaluations: nothing is asked or measured again, so it needs no model and no GPU. With the recorded "
         "settings the new run ends with the same world-model tree, attempts and best solution as the recording; "
         "the command compares the two folders and says so. With changed settings (e.g. --wm-stagnation-window 3) "
         "it follows the recording until the search asks for something the recording does not hold (another kind "
         "of request, the same kind with another prompt, another candidate to evaluate), then says where (the "
         "round, the request asked and the one recorded) and why (the strategy decision that went another way, "
         "with the timings it compared), and stops there. Given a model (--llm ...) it goes on live from that "
         "point instead; `ksearch resume NEW_DIR --llm ...` does the same later.\n\n" + std::string(kExitCodesHelp),
         replay_options());
  if (!a.parse(argc, argv)) throw UsageError(a.error());
  if (a.help_requested()) {
    std::printf("%s", a.help_text().c_str());
    return 0;
  }
  if (a.positional().size() != 1) throw UsageError("give exactly one run folder to replay");
  const std::filesystem::path source = a.positional()[0];
  ReplayOptions o;
  o.run_dir = a.get("run-dir");
  if (a.has("strategy")) o.config_changes["strategy"] = a.get("strategy");
  if (a.has("max-rounds") && a.get_int("max-rounds", 1) < 1)  // as run and resume: no run of no rounds
    throw UsageError(fmt::format("--max-rounds must be at least 1, not {} (leave it out to keep the recorded budget)",
                                 a.get_int("max-rounds", 1)));
  SearchConfig unused;
  apply_setting_flags(a, unused, &o.config_changes);
  if (!a.has("llm")) (void)openai_config_from_args(a);  // checked even when unused
  if (a.has("llm")) {
    o.llm = llm_choice_from_args(a);
    if (o.llm->kind == ks::LlmSource::replay || o.llm->kind == ks::LlmSource::offline)
      throw Error(Status::invalid_argument,
                  "--llm for `ksearch replay` names a model to continue with: openai or command:PROGRAM ARGS");
  }
  auto divergence = ks::replay_divergence_from_string(a.get("on-divergence", o.llm ? "live" : "stop"));
  if (!divergence) throw Error(Status::invalid_argument, "--on-divergence must be stop, skip or live");
  o.on_divergence = *divergence;
  o.check_prompts = !a.has("allow-prompt-changes");
  bool quiet = a.has("quiet");
  Interrupts interrupts;
  o.progress = progress_printer(quiet, interrupts);
  o.on_start = [&interrupts](const SearchStart& s) { interrupts.set_run_dir(s.run_dir); };
  if (!quiet) {
    std::string changes;
    for (const auto& [k, v] : o.config_changes.as_object())
      changes += (changes.empty() ? "" : ", ") + k + " " + v.dump();
    say(progress_stream(),
        "ksearch: replaying {} (recorded answers and evaluations; nothing is asked or measured while the run "
        "follows them) | settings {} | where it leaves the recording: {}\n",
        source.string(), changes.empty() ? "as recorded" : "changed: " + changes, to_string(o.on_divergence));
    std::fflush(progress_stream());
  }
  SearchOutcome out = replay_search(source, o);
  std::vector<std::string> same;
  std::vector<std::string> differ = compare_runs(out.run_dir, source, same);
  Json cmp = Json::obj({{"source", source.string()}, {"reproduced", differ.empty()}});
  Json js = Json::array(), jd = Json::array();
  for (const auto& s : same) js.push_back(s);
  for (const auto& d : differ) jd.push_back(d);
  cmp["same"] = js;
  cmp["differ"] = jd;
  int rc = finish(out, Json::obj({{"comparison", cmp}}));
  if (json_output()) return rc;
  if (differ.empty())
    say("\nReproduced {} exactly:\n", source.string());
  else
    say("\nCompared with the recording {}:\n", source.string());
  for (const auto& s : same) say("  same:   {}\n", s);
  for (const auto& d : differ) say("  differ: {}\n", d);
  return rc;
}

}  // namespace ks::cli
