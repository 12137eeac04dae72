// make_strategy and the JSON form of SearchConfig.
#include <fmt/format.h>

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

Json SearchConfig::to_json() const {
  return Json::obj({{"strategy", strategy_name()},
                    {"language", to_string(language)},
                    {"max_rounds", max_rounds},
                    {"wm_stagnation_window", world_model.stagnation_window},
                    {"wm_max_difficulty", world_model.max_difficulty},
                    {"wm_edit_retries", world_model.edit_retries},
                    {"wm_lenient_edits", world_model.lenient_edits},
                    {"wm_max_chars", static_cast<std::int64_t>(world_model.max_chars)},
                    {"wm_loop_rules", world_model.loop_rules},
                    {"wm_propose_every", world_model.propose_every},
                    {"debug_rounds_label", debug_rounds_label},
                    {"parallel", parallel},
                    {"tune_rounds", tune.rounds},
                    {"tune_batch", tune.batch},
                    {"evolve_islands", evolve.islands},
                    {"evolve_island_size", evolve.island_size},
                    {"evolve_migration_interval", evolve.migration_interval},
                    {"evolve_migration_size", evolve.migration_size},
                    {"evolve_archive_size", evolve.archive_size},
                    {"evolve_inspirations", evolve.inspirations},
                    {"evolve_exploit_ratio", evolve.exploit_ratio},
                    {"seed", static_cast<std::int64_t>(seed)},
                    {"max_cost_usd", max_cost_usd},
                    {"max_wall_s", max_wall_s},
                    {"max_answer_bytes", static_cast<std::int64_t>(max_answer_bytes)},
                    {"model", model},
                    {"continue_from_solution", continue_from_solution ? continue_from_solution->to_json() : Json()},
                    {"continue_from_solution_eval",
                     continue_from_solution_eval ? continue_from_solution_eval->to_json() : Json()},
                    {"continue_from_world_model",
                     continue_from_world_model ? continue_from_world_model->to_json() : Json()},
                    {"start_from_starting_point", start_from_starting_point},
                    {"remeasure", remeasure}});
}

SearchConfig SearchConfig::from_json(const Json& j) {
  util::FieldReader r(j, "search configuration");
  SearchConfig c;
  c.strategy = parse_strategy_kind(j.get_string("strategy", "world_model"), "strategy");
  auto lang = language_from_string(j.get_string("language", "cuda"));
  if (!lang) throw Error(Status::invalid_argument, "search configuration: unknown language");
  c.language = *lang;
  c.max_rounds = static_cast<int>(r.optional_int("max_rounds", c.max_rounds));
  WorldModelOptions& w = c.world_model;
  w.stagnation_window = static_cast<int>(r.optional_int("wm_stagnation_window", w.stagnation_window));
  w.max_difficulty = static_cast<int>(r.optional_int("wm_max_difficulty", w.max_difficulty));
  w.edit_retries = static_cast<int>(r.optional_int("wm_edit_retries", w.edit_retries));
  if (const Json* lenient = j.find("wm_lenient_edits"); lenient && !lenient->is_null()) {
    if (!lenient->is_bool())
      throw Error(Status::invalid_argument, "search configuration: wm_lenient_edits must be true or false");
    w.lenient_edits = lenient->as_bool();
  }
  w.max_chars = static_cast<std::size_t>(r.optional_int("wm_max_chars", static_cast<std::int64_t>(w.max_chars)));
  // Absent in a manifest written before issue 43's loop: its rules, so its
  // journal replays (proposals only when the frontier runs thin).
  w.loop_rules = static_cast<int>(r.optional_int("wm_loop_rules", 1));
  w.propose_every = static_cast<int>(r.optional_int("wm_propose_every", w.loop_rules >= 2 ? w.propose_every : 0));
  c.debug_rounds_label = static_cast<int>(r.optional_int("debug_rounds_label", c.debug_rounds_label));
  c.parallel = static_cast<int>(r.optional_int("parallel", c.parallel));
  c.tune.rounds = static_cast<int>(r.optional_int("tune_rounds", c.tune.rounds));
  // Absent in a manifest written before tune evaluated batches: that run
  // tuned one configuration at a time, and its resume must too.
  c.tune.batch = static_cast<int>(r.optional_int("tune_batch", 1));
  // Absent in a manifest written before the evolve strategy: the defaults.
  c.evolve.islands = static_cast<int>(r.optional_int("evolve_islands", c.evolve.islands));
  c.evolve.island_size = static_cast<int>(r.optional_int("evolve_island_size", c.evolve.island_size));
  c.evolve.migration_interval =
      static_cast<int>(r.optional_int("evolve_migration_interval", c.evolve.migration_interval));
  c.evolve.migration_size = static_cast<int>(r.optional_int("evolve_migration_size", c.evolve.migration_size));
  c.evolve.archive_size = static_cast<int>(r.optional_int("evolve_archive_size", c.evolve.archive_size));
  c.evolve.inspirations = static_cast<int>(r.optional_int("evolve_inspirations", c.evolve.inspirations));
  c.evolve.exploit_ratio = r.optional_number("evolve_exploit_ratio", c.evolve.exploit_ratio);
  c.seed = static_cast<std::uint64_t>(r.optional_int("seed", 0));
  c.max_cost_usd = r.optional_number("max_cost_usd", 0);
  c.max_wall_s = r.optional_number("max_wall_s", 0);
  const std::int64_t answer_cap = r.optional_int("max_answer_bytes", static_cast<std::int64_t>(c.max_answer_bytes));
  if (answer_cap < 1) throw Error(Status::invalid_argument, "search configuration: max_answer_bytes must be >= 1");
  c.max_answer_bytes = static_cast<std::size_t>(answer_cap);
  c.model = j.get_string("model");
  if (const Json* seed = j.find("continue_from_solution"); seed && !seed->is_null()) {
    if (!seed->is_object())
      throw Error(Status::invalid_argument, "search configuration: continue_from_solution must be a solution object");
    c.continue_from_solution = Solution::from_json(*seed);
    c.continue_from_solution->finalize();
  }
  if (const Json* rec = j.find("continue_from_solution_eval"); rec && !rec->is_null()) {
    try {
      c.continue_from_solution_eval = RecordedEvaluation::from_json(*rec);
    } catch (const Error& e) {
      throw Error(Status::invalid_argument,
                  fmt::format("search configuration: continue_from_solution_eval: {}", e.what()));
    }
  }
  if (const Json* wm = j.find("continue_from_world_model"); wm && !wm->is_null())
    c.continue_from_world_model = WorldModelImport::from_json(*wm);
  // Absent in a manifest written before the seed existed: that run did not use it.
  auto flag = [&](const char* key) {
    const Json* v = j.find(key);
    if (!v || v->is_null()) return false;
    if (!v->is_bool())
      throw Error(Status::invalid_argument, fmt::format("search configuration: {} must be true or false", key));
    return v->as_bool();
  };
  c.start_from_starting_point = flag("start_from_starting_point");
  c.remeasure = flag("remeasure");
  c.validate();
  return c;
}

std::string SearchConfig::strategy_name() const {
  return custom_strategy_name.empty() ? to_string(strategy) : custom_strategy_name;
}

void SearchConfig::validate() const {
  auto bad = [](const std::string& m) { throw Error(Status::invalid_argument, m); };
  if (max_rounds < 0) bad(fmt::format("max_rounds must be >= 0, is {}", max_rounds));
  if (world_model.stagnation_window < 1)
    bad(fmt::format("wm_stagnation_window must be >= 1, is {}", world_model.stagnation_window));
  if (world_model.max_difficulty < 1 || world_model.max_difficulty > 5)
    bad(fmt::format("wm_max_difficulty must be between 1 and 5, is {}", world_model.max_difficulty));
  if (world_model.edit_retries < 1) bad(fmt::format("wm_edit_retries must be >= 1, is {}", world_model.edit_retries));
  if (world_model.loop_rules < 1 || world_model.loop_rules > 2)
    bad(fmt::format("wm_loop_rules must be 1 or 2, is {}", world_model.loop_rules));
  if (world_model.propose_every < 0) bad(fmt::format("wm_propose_every must be >= 0, is {}", world_model.propose_every));
  if (parallel < 1) bad(fmt::format("parallel must be >= 1, is {}", parallel));
  if (tune.rounds < 0) bad(fmt::format("tune_rounds must be >= 0, is {}", tune.rounds));
  if (tune.batch < 0 || tune.batch > core::kMaxTuneBatch)
    bad(fmt::format("tune_batch must be between 0 (automatic) and {}, is {}", core::kMaxTuneBatch, tune.batch));
  // Bounded so that a manifest cannot make the strategy allocate without limit.
  if (evolve.islands < 1 || evolve.islands > 64)
    bad(fmt::format("evolve_islands must be between 1 and 64, is {}", evolve.islands));
  if (evolve.island_size < 1 || evolve.island_size > 1000)
    bad(fmt::format("evolve_island_size must be between 1 and 1000, is {}", evolve.island_size));
  if (evolve.migration_interval < 1)
    bad(fmt::format("evolve_migration_interval must be >= 1, is {}", evolve.migration_interval));
  if (evolve.migration_size < 0 || evolve.migration_size > evolve.island_size)
    bad(fmt::format("evolve_migration_size must be between 0 and evolve_island_size ({}), is {}", evolve.island_size,
                    evolve.migration_size));
  if (evolve.archive_size < 1 || evolve.archive_size > 1000)
    bad(fmt::format("evolve_archive_size must be between 1 and 1000, is {}", evolve.archive_size));
  if (evolve.inspirations < 0 || evolve.inspirations > 16)
    bad(fmt::format("evolve_inspirations must be between 0 and 16, is {}", evolve.inspirations));
  if (!(evolve.exploit_ratio >= 0 && evolve.exploit_ratio <= 1))
    bad(fmt::format("evolve_exploit_ratio must be a number between 0 and 1, is {}", evolve.exploit_ratio));
  // Written so that NaN fails too: a NaN budget would silently mean "unlimited".
  if (!(max_cost_usd >= 0)) bad(fmt::format("max_cost_usd must be a number >= 0, is {}", max_cost_usd));
  if (!(max_wall_s >= 0)) bad(fmt::format("max_wall_s must be a number >= 0, is {}", max_wall_s));
  if (max_answer_bytes < 1) bad("max_answer_bytes must be >= 1");
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
