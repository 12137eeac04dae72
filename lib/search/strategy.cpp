// make_strategy and the JSON form of SearchConfig.
#include <fmt/format.h>

#include "search/settings_rows.hpp"
#include "search/strategies.hpp"
#include "search/tune/tune_strategy.hpp"
#include "ksearch/error.hpp"
#include "ksearch/sys/search_strategy.hpp"
#include "ksearch/sys/world_model.hpp"
#include "util/json_fields.hpp"

KS_NAMESPACE_BEGIN

std::vector<std::string> strategy_names() { return {"world_model", "greedy", "evolve", "tune"}; }

std::unique_ptr<SearchStrategy> make_strategy(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::world_model: return core::make_world_model_strategy();
    case StrategyKind::greedy: return core::make_greedy_strategy();
    case StrategyKind::evolve: return core::make_evolve_strategy();
    case StrategyKind::tune: return core::make_tune_strategy();
  }
  throw Error(Status::invalid_argument, fmt::format("strategy {} is not a StrategyKind", static_cast<int>(kind)));
}

std::unique_ptr<SearchStrategy> make_strategy(const std::string& name) {
  if (auto kind = strategy_kind_from_string(name)) return make_strategy(*kind);
  throw Error(Status::not_found,
              fmt::format("unknown strategy \"{}\" (known: world_model, greedy, evolve, tune)", name));
}

// ---------------------------------------------------------------------------
// Warm starts

Json RecordedEvaluation::to_json() const {
  return Json::obj({{"eval", eval.to_json()},
                    {"source", source},
                    {"task_fingerprint", task_fingerprint},
                    {"device", device.to_json()},
                    {"adopted", adopted},
                    {"why", why}});
}

RecordedEvaluation RecordedEvaluation::from_json(const Json& j) {
  if (!j.is_object()) throw Error(Status::invalid_argument, "recorded evaluation: must be an object");
  util::FieldReader r(j, "recorded evaluation");
  r.allow({"eval", "source", "task_fingerprint", "device", "adopted", "why"});
  RecordedEvaluation e;
  e.eval = EvalResult::from_json(r.required_object("eval"));
  e.source = j.get_string("source");
  e.task_fingerprint = j.get_string("task_fingerprint");
  e.device = DeviceInfo::from_json(j["device"]);
  if (const Json* a = j.find("adopted"); a && !a->is_null()) {
    if (!a->is_bool()) throw Error(Status::invalid_argument, "recorded evaluation: \"adopted\" must be true or false");
    e.adopted = a->as_bool();
  }
  e.why = j.get_string("why");
  return e;
}

Json WorldModelImport::to_json() const {
  Json sols = Json::array();
  for (const auto& s : solutions)
    sols.push_back(Json::obj({{"solution", s.solution.to_json()},
                              {"original_id", s.original_id},
                              {"recorded", s.recorded ? s.recorded->to_json() : Json()}}));
  return Json::obj({{"source", source},
                    {"format", format},
                    {"tree", tree},
                    {"solutions", sols},
                    {"repairs", util::string_array(repairs)}});
}

WorldModelImport WorldModelImport::from_json(const Json& j) {
  const std::string what = "continue_from_world_model";
  if (!j.is_object()) throw Error(Status::invalid_argument, what + ": must be an object");
  util::FieldReader r(j, what);
  r.allow({"source", "format", "tree", "solutions", "repairs"});
  WorldModelImport w;
  w.source = j.get_string("source");
  w.format = r.required_string("format");
  if (w.format != "ksearch-run" && w.format != "ksearch-snapshot" && w.format != "k-search")
    throw Error(Status::invalid_argument,
                fmt::format("{}: format must be ksearch-run, ksearch-snapshot or k-search, is \"{}\"", what, w.format));
  w.tree = r.required_object("tree");
  // The tree must load as it will when the search starts.
  try {
    make_tree_world_model()->load_json(w.tree);
  } catch (const Error& e) {
    throw Error(Status::invalid_argument, fmt::format("{}: tree: {}", what, e.what()));
  }
  if (const Json* sols = j.find("solutions"); sols && !sols->is_null()) {
    if (!sols->is_array()) throw Error(Status::invalid_argument, what + ": solutions must be an array");
    for (std::size_t i = 0; i < sols->size(); ++i) {
      const Json& sj = (*sols)[i];
      const std::string where = fmt::format("{}: solutions[{}]", what, i);
      if (!sj.is_object()) throw Error(Status::invalid_argument, where + " must be an object");
      util::FieldReader sr(sj, where);
      sr.allow({"solution", "original_id", "recorded"});
      ImportedSolution s;
      try {
        s.solution = Solution::from_json(sr.required_object("solution"));
        if (const Json* rec = sj.find("recorded"); rec && !rec->is_null())
          s.recorded = RecordedEvaluation::from_json(*rec);
      } catch (const Error& e) {
        throw Error(Status::invalid_argument, fmt::format("{}: {}", where, e.what()));
      }
      s.original_id = sj.get_string("original_id");
      w.solutions.push_back(std::move(s));
    }
  }
  w.repairs = util::string_list(j.find("repairs"), what + ": repairs");
  return w;
}

// ---------------------------------------------------------------------------
// SearchConfig

KS_NAMESPACE_END

namespace ks::core {

// The search's own rows: the budget, the width, the seed and the warm
// start; the strategies' rows are beside them (search/settings_rows.hpp).
// The names, objects and the manifest-only rows are read and written here
// too, so SearchConfig's codec is this table and nothing else.
std::vector<SettingSpec> search_setting_rows() {
  std::vector<SettingSpec> rows;
  rows.push_back({.key = "strategy", .component = "search", .type = SettingType::text, .settable = false,
                  .get = [](const SearchConfig& c) { return Json(c.strategy_name()); },
                  .set = [](SearchConfig& c, const Json& v) {
                    c.strategy = parse_strategy_kind(setting_value<std::string>(v, "strategy"), "strategy");
                  }});
  rows.push_back({.key = "language", .component = "search", .type = SettingType::text, .settable = false,
                  .get = [](const SearchConfig& c) { return Json(to_string(c.language)); },
                  .set = [](SearchConfig& c, const Json& v) {
                    auto lang = language_from_string(setting_value<std::string>(v, "language"));
                    if (!lang) throw Error(Status::invalid_argument, "unknown language " + v.dump());
                    c.language = *lang;
                  }});
  rows.push_back(field_setting([](SearchConfig& c) -> int& { return c.max_rounds; },
                               {.key = "max_rounds", .component = "search", .min = 0,
                                .help = "Round budget; a round is one evaluated candidate. Past a recording's end "
                                        "a replay goes on only with a model.",
                                .flag = "max-rounds", .placeholder = "N", .replay = true}));
  rows.push_back(field_setting([](SearchConfig& c) -> int& { return c.debug_rounds_label; },
                               {.key = "debug_rounds_label", .component = "search", .settable = false}));
  rows.push_back(field_setting(
      [](SearchConfig& c) -> int& { return c.parallel; },
      {.key = "parallel", .component = "search", .min = 1,
       .help = "Candidates generated and evaluated at once (greedy; evolve, one per island in turn); world-model "
               "cycles run at once, on the top N actions (world_model); configurations evaluated at once (tune, "
               "unless --tune-batch says).",
       .flag = "parallel", .placeholder = "N", .replay = true}));
  rows.push_back(field_setting([](SearchConfig& c) -> std::uint64_t& { return c.seed; },
                               {.key = "seed", .component = "search", .help = "Seed for the strategies' random choices.",
                                .flag = "seed", .placeholder = "N", .replay = true}));
  rows.push_back(field_setting([](SearchConfig& c) -> double& { return c.max_cost_usd; },
                               {.key = "max_cost_usd", .component = "search", .min = 0,
                                .help = "Stop sending LLM requests once this much (USD) is spent; 0: unlimited.",
                                .flag = "max-cost", .placeholder = "USD", .default_text = "unlimited"}));
  rows.push_back(field_setting([](SearchConfig& c) -> double& { return c.max_wall_s; },
                               {.key = "max_wall_s", .component = "search", .min = 0,
                                .help = "Stop starting rounds after this many seconds of this process (a resume "
                                        "starts counting again); 0: unlimited.",
                                .flag = "max-wall-time", .placeholder = "S", .default_text = "unlimited",
                                .replay = true}));
  rows.push_back(field_setting([](SearchConfig& c) -> std::size_t& { return c.max_answer_bytes; },
                               {.key = "max_answer_bytes", .component = "search", .type = SettingType::bytes, .min = 1,
                                .help = "Longest LLM answer accepted; a longer one is a failed generation and is "
                                        "not stored.",
                                .flag = "max-answer-size", .placeholder = "SIZE", .default_text = "4M"}));
  rows.push_back({.key = "model", .component = "search", .type = SettingType::text, .settable = false,
                  .get = [](const SearchConfig& c) { return Json(c.model); },
                  .set = [](SearchConfig& c, const Json& v) { c.model = setting_value<std::string>(v, "model"); }});
  rows.push_back({.key = "continue_from_solution", .component = "search", .type = SettingType::object,
                  .settable = false,
                  .get = [](const SearchConfig& c) {
                    return c.continue_from_solution ? c.continue_from_solution->to_json() : Json();
                  },
                  .set = [](SearchConfig& c, const Json& v) {
                    if (!v.is_object())
                      throw Error(Status::invalid_argument, "continue_from_solution must be a solution object");
                    c.continue_from_solution = Solution::from_json(v);
                    c.continue_from_solution->finalize();
                  }});
  rows.push_back({.key = "continue_from_solution_eval", .component = "search", .type = SettingType::object,
                  .settable = false,
                  .get = [](const SearchConfig& c) {
                    return c.continue_from_solution_eval ? c.continue_from_solution_eval->to_json() : Json();
                  },
                  .set = [](SearchConfig& c, const Json& v) {
                    try {
                      c.continue_from_solution_eval = RecordedEvaluation::from_json(v);
                    } catch (const Error& e) {
                      throw Error(Status::invalid_argument, fmt::format("continue_from_solution_eval: {}", e.what()));
                    }
                  }});
  rows.push_back({.key = "continue_from_world_model", .component = "search", .type = SettingType::object,
                  .settable = false,
                  .get = [](const SearchConfig& c) {
                    return c.continue_from_world_model ? c.continue_from_world_model->to_json() : Json();
                  },
                  .set = [](SearchConfig& c, const Json& v) {
                    c.continue_from_world_model = WorldModelImport::from_json(v);
                  }});
  // Absent in a manifest written before the warm start existed: that run did not use it.
  rows.push_back(field_setting([](SearchConfig& c) -> bool& { return c.start_from_starting_point; },
                               {.key = "start_from_starting_point", .component = "search",
                                .help = "Start the world-model search from the task's starting point: round 1 "
                                        "evaluates it and, when it passes, it is attached to the root.",
                                .flag = "no-starting-point", .negated = true,
                                .when_absent = [](const SearchConfig&) { return Json(false); }}));
  rows.push_back(field_setting(
      [](SearchConfig& c) -> bool& { return c.remeasure; },
      {.key = "remeasure", .component = "search",
       .help = "Adopt no evaluation a run folder recorded, even for this task on this device (a folder you do not "
               "trust): --continue-from-solution's kernel is evaluated again in round 1, and "
               "--continue-from-world-model's kernels are known by their code only.",
       .flag = "remeasure", .when_absent = [](const SearchConfig&) { return Json(false); }}));
  return rows;
}

}  // namespace ks::core

KS_NAMESPACE_BEGIN

Json SearchConfig::to_json() const {
  Json j = Json::object();
  for (const auto& s : search_settings()) j[s.key] = s.get(*this);
  return j;
}

SearchConfig SearchConfig::from_json(const Json& j) {
  if (!j.is_object()) throw Error(Status::invalid_argument, "search configuration: must be an object");
  SearchConfig c;
  for (const auto& s : search_settings()) {
    const Json* v = j.find(s.key);
    try {
      if (v && !v->is_null()) s.set(c, *v);
      else if (s.when_absent) s.set(c, s.when_absent(c));
    } catch (const Error& e) {
      throw Error(Status::invalid_argument, fmt::format("search configuration: {}", e.what()));
    }
  }
  c.validate();
  return c;
}

std::string SearchConfig::strategy_name() const {
  return custom_strategy_name.empty() ? to_string(strategy) : custom_strategy_name;
}

void SearchConfig::validate() const {
  auto bad = [](const std::string& m) { throw Error(Status::invalid_argument, m); };
  // Each row's bounds (bounded so that a manifest cannot make a strategy
  // allocate without limit), then what one row cannot say.
  for (const auto& s : search_settings()) check_setting_bounds(s, s.get(*this));
  if (evolve.migration_size > evolve.island_size)
    bad(fmt::format("evolve_migration_size must be between 0 and evolve_island_size ({}), is {}", evolve.island_size,
                    evolve.migration_size));
  if (continue_from_solution && strategy != StrategyKind::world_model)
    bad(fmt::format("continue_from_solution is read by the world_model strategy, not by {}", strategy_name()));
  if (continue_from_solution && continue_from_solution->language != language)
    bad(fmt::format("continue_from_solution is a {} solution, and the run's language is {}",
                    to_string(continue_from_solution->language), to_string(language)));
  // Round 1 is the given kernel's; a stop right after it would leave no trace of it in the tree.
  if (continue_from_solution && max_rounds < 2)
    bad(fmt::format("continue_from_solution needs max_rounds >= 2 (round 1 evaluates the given kernel), is {}",
                    max_rounds));
  if (continue_from_solution_eval && !continue_from_solution)
    bad("continue_from_solution_eval is the evaluation of continue_from_solution, which is not set");
  // An adopted evaluation stands for a measurement of that very kernel: a
  // manifest that says otherwise was changed.
  if (continue_from_solution_eval && continue_from_solution && continue_from_solution_eval->adopted &&
      (continue_from_solution_eval->eval.solution_id != continue_from_solution->id ||
       !continue_from_solution_eval->eval.passed()))
    bad(fmt::format("continue_from_solution_eval is adopted, but it is a {} evaluation of solution {}, not a passing "
                    "one of the given {}",
                    to_string(continue_from_solution_eval->eval.status), continue_from_solution_eval->eval.solution_id,
                    continue_from_solution->id));
  if (continue_from_world_model && strategy != StrategyKind::world_model)
    bad(fmt::format("continue_from_world_model is read by the world_model strategy, not by {}", strategy_name()));
  if (continue_from_world_model)
    for (const auto& s : continue_from_world_model->solutions) {
      if (s.recorded && s.recorded->adopted &&
          (s.recorded->eval.solution_id != s.solution.id || !s.recorded->eval.passed()))
        bad(fmt::format("continue_from_world_model adopts a {} evaluation of solution {} for the solution {}",
                        to_string(s.recorded->eval.status), s.recorded->eval.solution_id, s.solution.id));
      if (s.solution.language != language)
        bad(fmt::format("continue_from_world_model holds the {} solution {}, and the run's language is {}",
                        to_string(s.solution.language), s.solution.id, to_string(language)));
    }
  if (!strategy_kind_from_string(to_string(strategy)))  // a value cast from outside the set
    bad(fmt::format("strategy {} is not a StrategyKind", static_cast<int>(strategy)));
}

KS_NAMESPACE_END
