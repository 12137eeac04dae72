#include "search/tune/tune_strategy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>

#include "core/run_events.hpp"
#include "search/tune/tuner.hpp"
#include "search/settings_rows.hpp"
#include "ksearch/error.hpp"
#include "ksearch/log.hpp"
#include "ksearch/sys/search_strategy.hpp"

namespace ks::core {
namespace {

using events::emit;

// How often a long evaluation in a tune pass says it is still going.
constexpr std::chrono::milliseconds kTuneHeartbeat{10000};

// A number for the event log: a non-finite one is written as null.
std::optional<double> finite(double x) { return std::isfinite(x) ? std::optional<double>(x) : std::nullopt; }

// "BLOCK=128 VEC=4", parameters in declaration order.
std::string describe(const ParamSpace& space, const util::Vars& values) {
  std::string out;
  for (const auto& p : space.params())
    if (auto it = values.find(p.name); it != values.end())
      out += fmt::format("{}{}={}", out.empty() ? "" : " ", p.name, it->second);
  return out;
}

Json values_json(const ParamSpace& space, const util::Vars& values) {
  Json j = Json::object();
  for (const auto& p : space.params())
    if (auto it = values.find(p.name); it != values.end()) j[p.name] = it->second;
  return j;
}

// FNV-1a: folds the base solution into the seed, so tuning another base
// explores differently while the same base always replays the same way.
std::uint64_t hash_text(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Solution make_candidate(const Solution& base, const ParamSpace& space, const util::Vars& values,
                        const Json& per_workload, std::string name) {
  Solution c = base;
  c.parent_id = base.id;
  c.name = std::move(name);
  // The base's params as written with "values" and "per_workload" replaced:
  // the JSON (and so the ids) recorded runs hold, whatever order the base
  // wrote its values in.
  Json params = base.params.to_json();
  params["values"] = values_json(space, values);
  if (per_workload.is_object() && !per_workload.empty())
    params["per_workload"] = per_workload;
  else
    params.erase("per_workload");
  c.params = Params::from_json(params);
  c.finalize();
  return c;
}

// Mean latency of every passed, timed benchmark workload.
std::map<std::string, double> workload_latencies(const EvalResult& r) {
  std::map<std::string, double> out;
  for (const auto& w : r.workloads)
    if (w.benchmark && w.status == EvalStatus::passed && w.timing.latency() > 0) out[w.name] = w.timing.latency();
  return out;
}

Json surrogate_json(const SurrogateInfo& s) {
  Json ls = Json::array();
  for (double l : s.length_scales) ls.push_back(l);
  return Json::obj({{"points", s.points},
                    {"length_scales", std::move(ls)},
                    {"noise_ratio", s.noise_ratio},
                    {"log_marginal_likelihood", s.log_marginal_likelihood},
                    {"loo_rmse_log", s.loo_rmse}});
}

// The round at which this pass's plan ends: the run's budget when it
// began, kept on a resume (state.json), so the journal replays whatever the
// budget now is.
int planned_rounds(SearchContext& ctx, const std::string& base_id) {
  if (const auto recorded = ctx.recorded_state(); recorded && recorded->get_string("base") == base_id)
    if (const auto plan = recorded_tune_plan(*recorded)) return *plan;
  return ctx.rounds_used() + ctx.rounds_left();
}

class TuneStrategy final : public SearchStrategy {
 public:
  explicit TuneStrategy(TuneStrategyOptions options) : options_(std::move(options)) {}
  std::string name() const override { return "tune"; }
  void run(SearchContext& ctx) override;

 private:
  struct Measured {
    util::Vars config;
    std::map<std::string, double> latency_ms;  // per benchmark workload
  };

  struct Pass;
  bool start(Pass& pass);
  std::string run_batches(Pass& pass);
  void tell(Pass& pass, const Proposal& proposal, const Solution& candidate, const EvalResult& r,
            std::int64_t batch_size);
  void finish(Pass& pass, const std::string& stop_reason);
  Solution choose_base(SearchContext& ctx, EvalResult& base_eval, bool& evaluated) const;
  // Per benchmark workload, values that beat the overall best there by
  // variant_min_gain; an empty object when no workload needs its own.
  Json per_shape_values(const ConfigSearch& search, const ParamSpace& space) const;
  void record(const util::Vars& config, const EvalResult& r);

  TuneStrategyOptions options_;
  std::vector<Measured> measured_;
  std::vector<std::string> benchmark_names_;
};

Solution TuneStrategy::choose_base(SearchContext& ctx, EvalResult& base_eval, bool& evaluated) const {
  if (const auto& best = ctx.best()) {
    base_eval = best->eval;
    evaluated = true;
    return best->solution;
  }
  const TaskSpec& spec = ctx.task().spec();
  const Language lang = ctx.config().language;
  for (const auto& sp : spec.starting_points) {
    if (sp.language != lang) continue;
    Solution base = sp;
    if (base.task.empty()) base.task = spec.name;
    base.finalize();
    evaluated = false;
    return base;
  }
  if (spec.starting_points.empty())
    throw Error(Status::invalid_argument,
                fmt::format("tune: nothing to tune: the run has no passing solution and task \"{}\" has no "
                            "starting point (give the task a tunable starting kernel, or run an LLM strategy "
                            "first with --tune-rounds)",
                            spec.name));
  throw Error(Status::invalid_argument,
              fmt::format("tune: task \"{}\" has no starting point in language {} (its starting points are "
                          "in {})",
                          spec.name, to_string(lang), to_string(spec.starting_points.front().language)));
}

void TuneStrategy::record(const util::Vars& config, const EvalResult& r) {
  measured_.push_back({config, workload_latencies(r)});
}

Json TuneStrategy::per_shape_values(const ConfigSearch& search, const ParamSpace& space) const {
  Json out = Json::object();
  const std::optional<util::Vars> overall = search.best();
  if (!overall || benchmark_names_.size() < 2) return out;
  const Measured* overall_m = nullptr;
  for (const auto& m : measured_)
    if (m.config == *overall) overall_m = &m;
  if (!overall_m) return out;
  for (const auto& w : benchmark_names_) {
    auto base_it = overall_m->latency_ms.find(w);
    if (base_it == overall_m->latency_ms.end()) continue;
    const Measured* best = nullptr;
    double best_ms = base_it->second;
    for (const auto& m : measured_) {
      auto it = m.latency_ms.find(w);
      if (it != m.latency_ms.end() && it->second < best_ms) {
        best_ms = it->second;
        best = &m;
      }
    }
    if (best && best->config != *overall && best_ms < base_it->second * (1.0 - options_.variant_min_gain))
      out[w] = values_json(space, best->config);
  }
  return out;
}

// One tune pass over a base solution's parameter space: its tuner, its
// plan of rounds, the batches it ran, and the state it writes.
struct TuneStrategy::Pass {
  SearchContext& ctx;
  Solution base;
  EvalResult base_eval;
  ParamSpace space;
  std::optional<util::Vars> base_config;  // the base's own configuration, a measured point
  std::unique_ptr<ConfigSearch> search;
  int plan_end = 0;
  int batch = 1;
  std::int64_t batches = 0;  // evaluated so far

  int plan_left() const { return std::max(0, plan_end - ctx.rounds_used()); }

  // What `ksearch show` reads of the tuner's progress.
  void state(const std::string& phase) {
    const std::optional<util::Vars> best = search->best();
    ctx.set_state(Json::obj({{"strategy", "tune"},
                             {"base", base.id},
                             {"phase", phase},
                             {"evaluations", search->evaluations()},
                             {"failures", search->failures()},
                             {"since_improvement", search->evaluations_since_improvement()},
                             {"best_config", best ? Json(describe(space, *best)) : Json()},
                             {"best_latency_ms", best ? Json(search->best_objective()) : Json()},
                             {"stop", to_string(search->stop_reason())},
                             {"batch", batch},
                             {"batches", batches},
                             {"planned_rounds", plan_end}}));
  }
};

void TuneStrategy::run(SearchContext& ctx) {
  measured_.clear();
  benchmark_names_.clear();
  const TaskSpec& spec = ctx.task().spec();
  for (const WorkloadSpec* w : spec.benchmark_workloads()) benchmark_names_.push_back(w->name);

  Pass pass{.ctx = ctx};
  bool evaluated = false;
  pass.base = choose_base(ctx, pass.base_eval, evaluated);
  try {
    pass.space = ParamSpace(pass.base.params);
  } catch (const Error& e) {
    throw Error(Status::invalid_argument, fmt::format("tune: solution \"{}\": {}", pass.base.name, e.what()));
  }
  if (!evaluated) {
    if (ctx.should_stop()) return;
    const LogHeartbeat heartbeat(LogLevel::info, kTuneHeartbeat, [](auto elapsed) {
      return fmt::format("tune: the starting point: still evaluating ({:.0f} s so far)",
                         std::chrono::duration<double>(elapsed).count());
    });
    pass.base_eval = ctx.evaluate(pass.base, "tune: evaluate starting point");
  }
  if (pass.space.empty()) {
    emit(ctx, events::TuneSkipped{pass.base.id, "the solution declares no tunable parameters"});
    return;
  }
  if (!start(pass)) return;
  // The plan is on disk before any candidate is: a resume finds it.
  pass.state("start");
  const std::string stop_reason = run_batches(pass);
  finish(pass, stop_reason);
}

// The tuner for the pass, told the base's result, and the start event.
// False (an event says why) when no round is left to tune in.
bool TuneStrategy::start(Pass& pass) {
  SearchContext& ctx = pass.ctx;
  const TaskSpec& spec = ctx.task().spec();
  TunerOptions topts;
  for (const auto& w : spec.workloads) topts.workload_dims.emplace_back(w.dims.begin(), w.dims.end());
  topts.stall_evaluations = options_.stall_rounds;
  topts.min_improvement = options_.min_improvement;
  topts.initial_samples = options_.initial_samples;
  // The base's own configuration is a measured point, unless it already
  // carries per-shape values (then its latency belongs to no single one).
  if (pass.base.params.per_workload.empty()) {
    try {
      pass.base_config = pass.space.resolve(pass.base.params, "", {});
    } catch (const Error&) {
      pass.base_config.reset();  // an inadmissible base says nothing about the space
    }
  }
  pass.plan_end = planned_rounds(ctx, pass.base.id);
  const int rounds = pass.plan_left();
  if (rounds <= 0 || ctx.should_stop()) {
    emit(ctx, events::TuneSkipped{pass.base.id, "no rounds left to tune in"});
    return false;
  }
  // The rounds left plus the base's own result; a practically unlimited run gives an unlimited tuner.
  topts.max_evaluations = rounds >= std::numeric_limits<int>::max() - 1 ? 0 : rounds + (pass.base_config ? 1 : 0);
  const std::uint64_t seed = ctx.config().seed ^ hash_text(pass.base.id);
  pass.search = make_config_search(options_.method, pass.space, topts, seed);
  ConfigSearch& search = *pass.search;
  if (pass.base_config) {
    if (!search.space().admissible(search.space().to_point(*pass.base_config))) {
      pass.base_config.reset();
    } else if (pass.base_eval.passed() && pass.base_eval.latency_ms > 0) {
      search.tell(*pass.base_config, pass.base_eval.latency_ms);
      record(*pass.base_config, pass.base_eval);
    } else {
      search.tell_failure(*pass.base_config);
    }
  }
  pass.batch = tune_batch_size(ctx.config());
  const auto admissible = search.admissible_count();
  const auto* tuner = dynamic_cast<const Tuner*>(&search);
  events::TuneStart ev;
  ev.base = pass.base.id;
  ev.base_name = pass.base.name;
  ev.method = search.name();
  for (const auto& p : pass.space.params()) ev.params.push_back({p.name, static_cast<std::int64_t>(p.values.size())});
  ev.constraints = static_cast<std::int64_t>(pass.space.constraints().size());
  ev.grid_size = pass.space.grid_size() <= std::uint64_t{1} << 62 ? Json(pass.space.grid_size())
                                                                   : Json(static_cast<double>(pass.space.grid_size()));
  ev.admissible = admissible ? Json(*admissible) : Json();
  ev.initial_samples = tuner ? tuner->initial_samples() : 0;
  ev.seed = static_cast<std::int64_t>(seed);
  ev.stall_rounds = options_.stall_rounds;
  ev.batch = pass.batch;
  if (pass.base_config) ev.base_config = describe(pass.space, *pass.base_config);
  if (pass.base_eval.passed()) ev.base_latency_ms = pass.base_eval.latency_ms;
  emit(ctx, ev);
  return true;
}

// Asks, evaluates and tells, a batch at a time, until the plan, the run or
// the tuner ends; returns why.
std::string TuneStrategy::run_batches(Pass& pass) {
  SearchContext& ctx = pass.ctx;
  ConfigSearch& search = *pass.search;
  for (;;) {
    if (ctx.should_stop() || pass.plan_left() <= 0)
      return std::string("run stopped: ") + to_string(ctx.stop_reason().value_or(StopReason::max_rounds));
    if (pass.plan_left() == 1 && !per_shape_values(search, pass.space).empty())
      return "last round kept for per-shape values";
    // A batch never spends the plan's last round while per-shape values may
    // still become due: that round is decided alone, with every result known.
    int count = std::min(pass.batch, pass.plan_left());
    if (count > 1 && count == pass.plan_left() && benchmark_names_.size() >= 2) --count;
    // A budget lowered on resume ends the run inside the plan: only the
    // batch's first configurations are measured (a batch is asked one
    // configuration after another, so they are the same).
    count = std::min(count, std::max(1, ctx.rounds_left()));
    const std::vector<Proposal> proposals = search.ask_batch(count);
    if (proposals.empty()) return to_string(search.stop_reason());
    ++pass.batches;
    std::vector<Solution> candidates;
    std::vector<std::string> actions;
    for (const auto& p : proposals) {
      candidates.push_back(
          make_candidate(pass.base, pass.space, p.config, Json(), "tune: " + describe(pass.space, p.config)));
      actions.push_back(candidates.back().name);
    }
    // One candidate goes through evaluate(), as before batches existed; a
    // batch is compiled together and measured one after another, and the
    // run records each of its candidates as a round of its own.
    // A batch is compiled and measured before any of its rounds is reported
    // (20-70 s for a GPU kernel's batch of 4): while it runs, a line every
    // kTuneHeartbeat, so a long batch never passes in silence. (Not a line
    // per batch: a resumed run replays its batches at once.)
    const int first = ctx.rounds_used() + 1, last = first + static_cast<int>(candidates.size()) - 1;
    const std::string what = candidates.size() == 1
                                 ? fmt::format("round {} of {}", first, pass.plan_end)
                                 : fmt::format("rounds {}-{} of {}, a batch of {} configurations", first, last,
                                               pass.plan_end, candidates.size());
    log_message(LogLevel::debug, fmt::format("tune: {}: evaluating", what));
    std::vector<EvalResult> results;
    {
      const LogHeartbeat heartbeat(LogLevel::info, kTuneHeartbeat, [&what](auto elapsed) {
        return fmt::format("tune: {}: still evaluating ({:.0f} s so far)", what,
                           std::chrono::duration<double>(elapsed).count());
      });
      if (candidates.size() == 1) results.push_back(ctx.evaluate(candidates.front(), actions.front()));
      else results = ctx.evaluate_batch(candidates, actions);
    }
    for (std::size_t i = 0; i < proposals.size(); ++i)
      tell(pass, proposals[i], candidates[i], results.at(i), static_cast<std::int64_t>(proposals.size()));
  }
}

// One proposal's result to the tuner, its round event and the state.
void TuneStrategy::tell(Pass& pass, const Proposal& proposal, const Solution& candidate, const EvalResult& r,
                        std::int64_t batch_size) {
  ConfigSearch& search = *pass.search;
  const util::Vars& config = proposal.config;
  const TunerDecision& decision = proposal.decision;
  const double before = search.best_objective();
  if (r.passed() && r.latency_ms > 0) {
    search.tell(config, r.latency_ms);
    record(config, r);
  } else {
    search.tell_failure(config);
  }
  events::TuneRound round{describe(pass.space, config),
                          candidate.id,
                          decision.phase,
                          decision.candidates,
                          std::string(to_string(r.status)),
                          std::nullopt,
                          search.best_objective() < before,
                          std::nullopt,
                          events::TuneRound::Batch{pass.batches, batch_size,
                                                   decision.pending}};
  if (r.passed()) round.latency_ms = r.latency_ms;
  if (decision.phase == "model" || decision.phase == "exploit") {
    round.model = events::TuneRound::Model{finite(decision.expected_improvement), finite(decision.feasibility),
                                           finite(decision.predicted), finite(decision.predicted_log_sd), Json()};
    const auto* tuner = dynamic_cast<const Tuner*>(&search);
    if (tuner && tuner->surrogate()) round.model->surrogate = surrogate_json(*tuner->surrogate());
  }
  emit(pass.ctx, round);
  pass.state(decision.phase);
}

// The stop event, then, where every evaluation timed each benchmark
// workload well enough, one more round for the best values per shape.
void TuneStrategy::finish(Pass& pass, const std::string& stop_reason) {
  SearchContext& ctx = pass.ctx;
  ConfigSearch& search = *pass.search;
  const std::optional<util::Vars> best = search.best();
  events::TuneStop stop{stop_reason, search.evaluations(), search.failures(), std::nullopt, std::nullopt,
                        std::nullopt};
  if (best) {
    stop.best_config = describe(pass.space, *best);
    stop.best_latency_ms = finite(search.best_objective());
  }
  if (pass.base_eval.passed()) stop.base_latency_ms = pass.base_eval.latency_ms;
  emit(ctx, stop);
  pass.state("done");

  const Json per_shape = per_shape_values(search, pass.space);
  if (!best || per_shape.empty()) return;
  events::TuneVariants variants{describe(pass.space, *best), per_shape, std::nullopt, ""};
  if (ctx.should_stop() || pass.plan_left() <= 0) {
    variants.why = "no round left";
    emit(ctx, variants);
    return;
  }
  Solution candidate =
      make_candidate(pass.base, pass.space, *best, per_shape,
                     fmt::format("tune: {} + per-shape values for {} of {} shapes", describe(pass.space, *best),
                                 per_shape.size(), benchmark_names_.size()));
  const EvalResult r = ctx.evaluate(candidate, candidate.name);
  variants.evaluation = events::TuneVariants::Evaluation{candidate.id, std::string(to_string(r.status)),
                                                         std::nullopt, finite(search.best_objective())};
  if (r.passed()) variants.evaluation->latency_ms = r.latency_ms;
  emit(ctx, variants);
}

}  // namespace

std::optional<int> recorded_tune_plan(const Json& state) {
  if (!state.is_object() || state.get_string("strategy") != "tune") return std::nullopt;
  const Json* plan = state.find("planned_rounds");
  if (!plan) plan = state.find("max_rounds");
  if (!plan) return std::nullopt;
  if (!plan->is_int() || plan->as_int() < 0 || plan->as_int() > std::numeric_limits<int>::max())
    throw Error(Status::parse, fmt::format("state.json: the tune pass's planned rounds must be a round count, not {}",
                                           plan->dump()));
  return static_cast<int>(plan->as_int());
}

int tune_batch_size(const SearchConfig& config) {
  if (config.tune.batch > 0) return std::min(config.tune.batch, kMaxTuneBatch);
  if (config.parallel > 1) return std::min(config.parallel, kMaxTuneBatch);
  return kDefaultTuneBatch;
}

std::unique_ptr<SearchStrategy> make_tune_strategy() { return make_tune_strategy(TuneStrategyOptions{}); }

std::unique_ptr<SearchStrategy> make_tune_strategy(TuneStrategyOptions options) {
  if (options.stall_rounds < 0 || options.initial_samples < 0 ||
      !(options.min_improvement >= 0 && options.min_improvement < 1) ||
      !(options.variant_min_gain >= 0 && options.variant_min_gain < 1))
    throw Error(Status::invalid_argument,
                "tune: strategy options out of range (stall_rounds and initial_samples >= 0, "
                "min_improvement and variant_min_gain in [0, 1))");
  if (options.method != "gp-ei" && options.method != "random")
    throw Error(Status::not_found,
                fmt::format("tune: unknown search method \"{}\" (known: gp-ei, random)", options.method));
  return std::make_unique<TuneStrategy>(std::move(options));
}

// The tune strategy's rows of the settings table (ksearch/search_settings.hpp).
std::vector<SettingSpec> tune_setting_rows() {
  return {
      field_setting([](SearchConfig& c) -> int& { return c.tune.rounds; },
                    {.key = "tune_rounds", .component = "tune", .min = 0,
                     .help = "After the search, tune the best kernel's declared parameters for N more rounds.",
                     .flag = "tune-rounds", .placeholder = "N", .replay = true}),
      // Absent in a manifest written before tune evaluated batches: that run
      // tuned one configuration at a time, and its resume must too.
      field_setting([](SearchConfig& c) -> int& { return c.tune.batch; },
                    {.key = "tune_batch", .component = "tune", .min = 0, .max = kMaxTuneBatch,
                     .min_note = "automatic",
                     .help = "tune: configurations evaluated together (compiled at once, measured one after "
                             "another; each is a round); 1: one at a time; 0: --parallel when above 1, else 4 "
                             "(docs/tuning.md).",
                     .flag = "tune-batch", .placeholder = "N", .default_text = "--parallel when above 1, else 4",
                     .replay = true, .when_absent = [](const SearchConfig&) { return Json(1); }}),
  };
}

}  // namespace ks::core
