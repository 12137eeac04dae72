// The evolutionary baseline K-Search is compared with (OpenEvolve,
// ShinkaEvolve): islands of passing kernels with ring migration of their
// elites, an elite archive of the best kernel per feature cell, and prompts
// that show a parent chosen on an island (its best, or a random member to
// explore) with inspirations from the island and the archive. Every
// generation samples `parallel` islands in turn, asks for their kernels at
// once and evaluates them together. See docs/search.md, "Evolve".
#include <fmt/format.h>

#include <algorithm>

#include "search/code_answer.hpp"
#include "search/evolve.hpp"
#include "search/prompts.hpp"
#include "search/settings_rows.hpp"
#include "search/strategies.hpp"
#include "ksearch/error.hpp"
#include "ksearch/sys/search_strategy.hpp"
#include "util/json_fields.hpp"

namespace ks::core {
namespace {

// state.json as a resumed run folder recorded it, checked field by field.
struct SavedState {
  int generation = 0;
  int rounds_used = 0;
  Json state;  // without the context's rounds_used and max_rounds
};

SavedState read_saved_state_fields(const Json& j, const EvolveParams& params) {
  const std::string what = "state.json";
  // A damaged run folder, not a bad argument.
  auto bad = [&](const std::string& m) { throw Error(Status::parse, what + ": " + m); };
  if (!j.is_object()) bad("must be an object");
  util::FieldReader r(j, what);
  r.allow({"strategy", "generation", "next_island", "migrations", "population", "rounds_used", "max_rounds"});
  const std::string& strategy = r.required_string("strategy");
  if (strategy != "evolve") bad(fmt::format("holds the state of the {} strategy, and the run is an evolve run", strategy));
  SavedState s;
  const std::int64_t gen = r.required_int("generation");
  if (gen < 1 || gen > 100000000) bad(fmt::format("generation must be >= 1, is {}", gen));
  s.generation = static_cast<int>(gen);
  const std::int64_t next = r.required_int("next_island");
  if (next < 0 || next >= params.islands)
    bad(fmt::format("next_island must be an island between 0 and {}, is {}", params.islands - 1, next));
  const std::int64_t migrations = r.required_int("migrations");
  if (migrations < 0 || migrations > gen) bad(fmt::format("migrations must be between 0 and {}, is {}", gen, migrations));
  const std::int64_t rounds = r.required_int("rounds_used");
  if (rounds < 0 || rounds > 100000000) bad(fmt::format("rounds_used must be >= 0, is {}", rounds));
  s.rounds_used = static_cast<int>(rounds);
  r.optional_int("max_rounds", 0);
  EvolvePopulation::from_json(r.required_object("population"), params, what + ": population");
  s.state = j;
  s.state.erase("rounds_used");
  s.state.erase("max_rounds");
  return s;
}

SavedState read_saved_state(const Json& j, const EvolveParams& params) {
  try {
    return read_saved_state_fields(j, params);
  } catch (const Error& e) {
    if (e.status() != Status::invalid_argument) throw;
    throw Error(Status::parse, e.what());  // the field readers' errors, already naming state.json
  }
}

// What the prompt of one sample is built from, kept alive until it is.
struct Failure {
  std::optional<Solution> solution;
  EvalResult eval;
  std::string raw;
};

class EvolveStrategy final : public SearchStrategy {
 public:
  std::string name() const override { return "evolve"; }

  void run(SearchContext& ctx) override {
    const SearchConfig& cfg = ctx.config();
    const EvolveParams params = cfg.evolve;
    EvolvePopulation pop(params);
    // A resume rebuilds the population from the journal; the state the run
    // recorded must come out again, or the folder was changed.
    std::optional<SavedState> saved;
    if (auto j = ctx.recorded_state()) saved = read_saved_state(*j, params);
    std::vector<std::optional<Failure>> failures(static_cast<std::size_t>(params.islands));
    int generation = 0, next_island = 0, migrations = 0;
    while (!ctx.should_stop()) {
      ++generation;
      const int k = std::max(1, std::min(cfg.parallel, ctx.rounds_left()));
      std::vector<LlmRequest> reqs;
      std::vector<EvolveChoice> choices;
      for (int i = 0; i < k; ++i) {
        const int island = next_island;
        next_island = (next_island + 1) % params.islands;
        EvolveChoice ch = pop.choose(island, ctx.rng());
        reqs.push_back(build_request(ctx, ch, failures[static_cast<std::size_t>(island)], generation));
        decide(ctx, ch, reqs.back(), failures[static_cast<std::size_t>(island)].has_value(), generation, i, k);
        choices.push_back(std::move(ch));
      }
      std::vector<LlmResponse> resps = ctx.llm_batch(reqs);
      std::vector<Solution> cands;
      std::vector<std::string> actions;
      std::vector<int> cand_island;
      for (int i = 0; i < k; ++i) {
        const auto u = static_cast<std::size_t>(i);
        const int island = choices[u].island;
        std::string label = fmt::format("{} gen {} island {}", to_string(reqs[u].kind), generation, island + 1);
        const LlmResponse& r = resps[u];
        CodeAnswer answer = read_code_answer(ctx, label, r);
        if (!answer.candidate) {
          // An outage keeps the island's evidence as it was.
          if (answer.unreadable)
            failures[static_cast<std::size_t>(island)] = Failure{std::nullopt, *answer.unreadable, r.text};
          continue;
        }
        Solution cand = std::move(*answer.candidate);
        cand.parent_id = choices[u].parent ? choices[u].parent->solution_id : "";
        cand.name = fmt::format("r{}-evolve-i{}", ctx.rounds_used() + static_cast<int>(cands.size()) + 1, island + 1);
        cands.push_back(std::move(cand));
        actions.push_back(label);
        cand_island.push_back(island);
      }
      Json added = Json::array();
      if (!cands.empty()) {
        std::vector<EvalResult> results = ctx.evaluate_batch(cands, actions);
        for (std::size_t j = 0; j < cands.size(); ++j) {
          const int island = cand_island[j];
          const EvalResult& res = results[j];
          Json rec = Json::obj({{"island", island},
                                {"solution_id", cands[j].id},
                                {"parent_id", cands[j].parent_id},
                                {"status", to_string(res.status)}});
          if (res.passed() && res.score > 0) {
            EvolveMember m{cands[j].id, res.score, res.latency_ms, generation, island, evolve_cell(cands[j])};
            EvolveAdded a = pop.add(island, m);
            failures[static_cast<std::size_t>(island)].reset();
            rec["score"] = res.score;
            rec["latency_ms"] = res.latency_ms;
            rec["cell"] = m.cell;
            rec["island_added"] = a.island_added;
            if (!a.island_dropped.empty()) rec["island_dropped"] = a.island_dropped;
            rec["archive"] = a.archive;
            if (!a.archive_replaced.empty()) rec["archive_replaced"] = a.archive_replaced;
          } else {
            failures[static_cast<std::size_t>(island)] = Failure{cands[j], res, ""};
          }
          added.push_back(std::move(rec));
        }
      }
      std::optional<std::vector<EvolveMigration>> moves;
      if (generation % params.migration_interval == 0 && params.islands > 1 && params.migration_size > 0) {
        ++migrations;
        moves = pop.migrate();
      }
      // The state first: once the budget is spent the events below are
      // refused (the run stops), and state.json should still hold the
      // population the last generation left.
      Json state = Json::obj({{"strategy", "evolve"},
                              {"generation", generation},
                              {"next_island", next_island},
                              {"migrations", migrations},
                              {"population", pop.to_json()}});
      if (saved && generation == saved->generation && ctx.rounds_used() == saved->rounds_used) {
        // Compared as it reads back from the file (numbers as written).
        std::string diff = json_first_difference(saved->state, Json::parse(state.dump()));
        if (!diff.empty())
          throw Error(Status::state,
                      fmt::format("state.json records generation {} after {} rounds, and replaying the run's journal "
                                  "gives another state there (recorded vs replayed: {}): the file was changed, or "
                                  "the journal is not this configuration's",
                                  saved->generation, saved->rounds_used, diff));
        saved.reset();
      }
      ctx.set_state(std::move(state));
      Json sizes = Json::array();
      for (const auto& isl : pop.islands()) sizes.push_back(static_cast<std::int64_t>(isl.size()));
      ctx.event("evolve_generation", Json::obj({{"generation", generation},
                                                {"candidates", added},
                                                {"island_sizes", sizes},
                                                {"archive_size", static_cast<std::int64_t>(pop.archive().size())}}));
      if (moves) {
        Json list = Json::array();
        for (const auto& mv : *moves)
          list.push_back(Json::obj({{"from", mv.from}, {"to", mv.to}, {"solution_id", mv.solution_id},
                                    {"score", mv.score}}));
        ctx.event("evolve_migration", Json::obj({{"generation", generation}, {"migration", migrations},
                                                 {"moves", list}}));
      }
    }
  }

 private:
  static LlmRequest build_request(SearchContext& ctx, const EvolveChoice& ch, const std::optional<Failure>& failure,
                                  int generation) {
    const SearchConfig& cfg = ctx.config();
    EvolvePromptInputs in;
    in.codegen.task = &ctx.task();
    in.codegen.language = cfg.language;
    in.codegen.device = ctx.device_description();
    in.codegen.debug_rounds_label = cfg.debug_rounds_label;
    in.island = ch.island;
    in.islands = cfg.evolve.islands;
    in.generation = generation;
    in.mode = ch.mode;
    // The kernels the prompt shows, alive until it is built.
    std::optional<Solution> parent;
    std::optional<EvalResult> parent_eval;
    if (ch.parent) {
      parent = ctx.find_solution(ch.parent->solution_id);
      parent_eval = ctx.find_eval(ch.parent->solution_id);
      if (!parent || !parent_eval)
        throw Error(Status::internal, fmt::format("evolve: the parent {} is not known", ch.parent->solution_id));
      in.codegen.base = {&*parent, &*parent_eval, ""};
    } else if (failure) {
      in.codegen.last = {failure->solution ? &*failure->solution : nullptr, &failure->eval, failure->raw};
    }
    std::vector<Solution> sols;
    std::vector<EvalResult> evals;
    sols.reserve(ch.inspirations.size());
    evals.reserve(ch.inspirations.size());
    for (const auto& m : ch.inspirations) {
      auto s = ctx.find_solution(m.solution_id);
      auto e = ctx.find_eval(m.solution_id);
      if (!s || !e) throw Error(Status::internal, fmt::format("evolve: the kernel {} is not known", m.solution_id));
      sols.push_back(std::move(*s));
      evals.push_back(std::move(*e));
    }
    for (std::size_t i = 0; i < sols.size(); ++i) in.inspirations.push_back({&sols[i], &evals[i], ""});
    return build_evolve_request(in);
  }

  // The decision of one sample, with its evidence: a replay compares it with
  // the recording's (docs/search.md, "Replay").
  static void decide(SearchContext& ctx, const EvolveChoice& ch, const LlmRequest& req, bool failing, int generation,
                     int sample, int samples) {
    std::string mode = ch.parent ? ch.mode : failing ? "fix" : "new";
    std::string why;
    if (ch.parent && ch.mode == "exploit")
      why = fmt::format("generation {}, island {}: improve the island's best, {} ({:.4f} ms)", generation,
                        ch.island + 1, ch.parent->solution_id.substr(0, 8), ch.parent->latency_ms);
    else if (ch.parent)
      why = fmt::format("generation {}, island {}: explore from a random member of the island, {} ({:.4f} ms)",
                        generation, ch.island + 1, ch.parent->solution_id.substr(0, 8), ch.parent->latency_ms);
    else if (failing)
      why = fmt::format("generation {}, island {}: no passing kernel on the island yet; fix its last attempt",
                        generation, ch.island + 1);
    else
      why = fmt::format("generation {}, island {}: the island is empty; write a new kernel", generation, ch.island + 1);
    Json insp = Json::array();
    for (const auto& m : ch.inspirations) insp.push_back(m.solution_id);
    Json d = Json::obj({{"decision", "evolve_sample"},
                        {"next", to_string(req.kind)},
                        {"generation", generation},
                        {"sample", sample},
                        {"parallel", samples},
                        {"island", ch.island},
                        {"mode", mode},
                        {"parent", ch.parent ? Json(ch.parent->solution_id) : Json()},
                        {"inspirations", insp},
                        {"why", why}});
    ctx.event("decision", std::move(d));
  }
};

}  // namespace

std::unique_ptr<SearchStrategy> make_evolve_strategy() { return std::make_unique<EvolveStrategy>(); }

// The evolve strategy's rows of the settings table (ksearch/search_settings.hpp).
// Bounded so that a manifest cannot make the strategy allocate without limit.
std::vector<SettingSpec> evolve_setting_rows() {
  auto ev = [](SettingSpec s) {
    s.component = "evolve";
    s.flag = "evolve-" + s.key.substr(7);
    std::replace(s.flag.begin(), s.flag.end(), '_', '-');
    return s;
  };
  return {
      field_setting([](SearchConfig& c) -> int& { return c.evolve.islands; },
                    ev({.key = "evolve_islands", .min = 1, .max = 64,
                        .help = "evolve: islands, each with its own population of passing kernels; samples go to "
                                "the islands in turn.",
                        .placeholder = "N", .replay = true})),
      field_setting([](SearchConfig& c) -> int& { return c.evolve.island_size; },
                    ev({.key = "evolve_island_size", .min = 1, .max = 1000,
                        .help = "evolve: kernels kept per island (the worst goes when it is full).",
                        .placeholder = "N"})),
      field_setting([](SearchConfig& c) -> int& { return c.evolve.migration_interval; },
                    ev({.key = "evolve_migration_interval", .min = 1,
                        .help = "evolve: generations between migrations (a generation is --parallel samples).",
                        .placeholder = "N", .replay = true})),
      // At most evolve_island_size too (SearchConfig::validate).
      field_setting([](SearchConfig& c) -> int& { return c.evolve.migration_size; },
                    ev({.key = "evolve_migration_size", .min = 0, .max = 1000,
                        .help = "evolve: kernels each island sends to the next (a ring) per migration; 0: none.",
                        .placeholder = "N", .replay = true})),
      field_setting([](SearchConfig& c) -> int& { return c.evolve.archive_size; },
                    ev({.key = "evolve_archive_size", .min = 1, .max = 1000,
                        .help = "evolve: cells of the elite archive, the best kernel of each approach and code "
                                "size.",
                        .placeholder = "N"})),
      field_setting([](SearchConfig& c) -> int& { return c.evolve.inspirations; },
                    ev({.key = "evolve_inspirations", .min = 0, .max = 16,
                        .help = "evolve: kernels of the island and the archive shown beside the parent in each "
                                "prompt (the best of them, then random ones).",
                        .placeholder = "N", .replay = true})),
      field_setting([](SearchConfig& c) -> double& { return c.evolve.exploit_ratio; },
                    ev({.key = "evolve_exploit_ratio", .min = 0, .max = 1,
                        .help = "evolve: chance that the parent is the island's best kernel; otherwise a random "
                                "member of the island.",
                        .placeholder = "P"})),
  };
}

}  // namespace ks::core
