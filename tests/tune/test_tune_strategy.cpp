// The `tune` strategy against a fake context.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "core/run_events.hpp"
#include "core/param_space.hpp"
#include "search/tune/tune_strategy.hpp"
#include "search/tune/tuner.hpp"
#include "ksearch/error.hpp"
#include "tune/fake_context.hpp"
#include "tune/tunable_task.hpp"

using ks::EvalResult;
using ks::EvalStatus;
using ks::Json;
using ks::LaunchPlan;
using ks::Solution;
using ks::util::Vars;
using ks::test::FakeContext;
using ks::test::make_tunable_task;
using ks::test::tunable_eval;

namespace {

ks::SearchConfig config(int rounds, std::uint64_t seed = 7) {
  ks::SearchConfig c;
  c.strategy = ks::StrategyKind::tune;
  c.max_rounds = rounds;
  c.seed = seed;
  return c;
}

ks::util::Vars values_of(const Solution& s) {
  return s.params.values;
}

}  // namespace

TEST_CASE("tune strategy: evaluates the starting point, never repeats, skips failures, adds per-shape values") {
  FakeContext ctx(make_tunable_task(), config(30), tunable_eval);
  auto strategy = ks::core::make_tune_strategy();
  CHECK(strategy->name() == "tune");
  strategy->run(ctx);

  REQUIRE(ctx.attempts.size() >= 3);
  // The starting point comes first, as given.
  Solution start = make_tunable_task().starting_points[0];
  start.task = "test/tunable";
  start.finalize();
  CHECK(ctx.attempts[0].solution.id == start.id);
  CHECK(ctx.attempts[0].action == "tune: evaluate starting point");

  // Admissible for every workload: BLOCK in {32, 64, 128, 256} with BLOCK >= 32 VEC: 10 points,
  // the default (32, 1) among them. The space is exhausted, then per-shape values are tried.
  std::set<std::string> ids;
  std::set<ks::util::Vars> configs{{{"BLOCK", 32}, {"VEC", 1}}};
  int failures = 0;
  for (std::size_t i = 1; i + 1 < ctx.attempts.size(); ++i) {
    const auto& a = ctx.attempts[i];
    CAPTURE(a.action);
    CHECK(a.solution.parent_id == start.id);
    CHECK(a.action == a.solution.name);
    CHECK(a.action.rfind("tune: BLOCK=", 0) == 0);
    const ks::util::Vars v = values_of(a.solution);
    CHECK(v.at("BLOCK") <= 256);  // 512 breaks N >= BLOCK on "tiny"
    CHECK(v.at("BLOCK") >= v.at("VEC") * 32);
    CHECK(configs.insert(v).second);  // never the same configuration twice
    CHECK(ids.insert(a.solution.id).second);
    failures += a.result.status == EvalStatus::compile_error;
  }
  CHECK(configs.size() == 10);
  CHECK(failures == 1);  // BLOCK=256 VEC=8, once

  // The last round: the best single configuration plus per-shape values.
  const auto& last = ctx.attempts.back();
  CHECK(values_of(last.solution) == ks::util::Vars{{"BLOCK", 128}, {"VEC", 2}});
  const auto& pw = last.solution.params.per_workload;
  CHECK(pw.at("small").at("BLOCK") == 64);
  CHECK(pw.at("large").at("BLOCK") == 256);
  CHECK_FALSE(pw.count("tiny"));
  CHECK(last.result.passed());
  REQUIRE(ctx.best());
  CHECK(ctx.best()->solution.id == last.solution.id);  // faster than any single configuration

  CHECK(ctx.rounds_used() == static_cast<int>(ctx.attempts.size()));
  CHECK(ctx.rounds_used() == 11);
  const auto* start_event = ctx.find_event("tune_start");
  REQUIRE(start_event);
  CHECK(start_event->data.at("admissible").as_int() == 10);
  CHECK(start_event->data.at("base_config").as_string() == "BLOCK=32 VEC=1");
  const auto* stop = ctx.find_event("tune_stop");
  REQUIRE(stop);
  CHECK(stop->data.at("reason").as_string() == "exhausted");
  CHECK(stop->data.at("best_config").as_string() == "BLOCK=128 VEC=2");
  const auto* variants = ctx.find_event("tune_variants");
  REQUIRE(variants);
  CHECK(variants->data.at("evaluated").as_bool());
  CHECK(ctx.state.at("strategy").as_string() == "tune");
  CHECK(ctx.state.at("evaluations").as_int() == 10);
  CHECK(ctx.state.at("failures").as_int() == 1);
  // Every event is its catalogue struct, field for field (lib/core/run_events.hpp).
  std::set<std::string> types;
  for (const auto& e : ctx.events) {
    CAPTURE(e.type);
    const auto p = ks::core::events::payload_from(e.type, e.data);
    CHECK_FALSE(std::holds_alternative<ks::core::events::StrategyEvent>(p));
    CHECK(ks::core::events::fields_of(p) == e.data);
    types.insert(e.type);
  }
  CHECK(types == std::set<std::string>{"tune_start", "tune_round", "tune_stop", "tune_variants"});
  const auto round = std::get<ks::core::events::TuneRound>(
      ks::core::events::payload_from("tune_round", ctx.find_event("tune_round")->data));
  CHECK_FALSE(round.config.empty());
}

TEST_CASE("tune strategy: respects the round budget and keeps the last round for per-shape values") {
  for (int rounds : {1, 2, 3, 5, 8}) {
    CAPTURE(rounds);
    FakeContext ctx(make_tunable_task(), config(rounds), tunable_eval);
    ks::core::make_tune_strategy()->run(ctx);
    // 10 admissible configurations: the budget runs out before the space does.
    CHECK(ctx.rounds_used() == rounds);
    CHECK(ctx.rounds_used() == static_cast<int>(ctx.attempts.size()));
    // Per-shape values, when tried, take the last round.
    for (std::size_t i = 0; i + 1 < ctx.attempts.size(); ++i)
      CHECK_FALSE(ctx.attempts[i].solution.params.per_workload.size() > 0);
    if (rounds == 8) CHECK(ctx.attempts.back().solution.params.per_workload.size() > 0);
    // One round only evaluates the starting point, and says why nothing was tuned.
    if (rounds == 1) CHECK(ctx.find_event("tune_skipped") != nullptr);
  }
}

TEST_CASE("tune strategy: evaluates batches together, each candidate a round of its own") {
  // Automatic: 4 at a time. 10 admissible configurations, the starting
  // point's among them: 9 more in batches of 4, 4 and 1, then per-shape values.
  FakeContext ctx(make_tunable_task(), config(30), tunable_eval);
  ks::core::make_tune_strategy()->run(ctx);
  CHECK(ctx.batch_sizes == std::vector<std::size_t>{4, 4});  // a batch of one goes through evaluate()
  CHECK(ctx.rounds_used() == 11);
  CHECK(ctx.rounds_used() == static_cast<int>(ctx.attempts.size()));
  CHECK(ctx.find_event("tune_start")->data.at("batch").as_int() == 4);
  std::vector<std::int64_t> index, size, pending;
  std::set<Vars> configs;
  for (const auto& e : ctx.events) {
    if (e.type != "tune_round") continue;
    index.push_back(e.data.at("batch").as_int());
    size.push_back(e.data.at("batch_size").as_int());
    pending.push_back(e.data.at("pending").as_int());
  }
  CHECK(index == std::vector<std::int64_t>{1, 1, 1, 1, 2, 2, 2, 2, 3});
  CHECK(size == std::vector<std::int64_t>{4, 4, 4, 4, 4, 4, 4, 4, 1});
  CHECK(pending == std::vector<std::int64_t>{0, 1, 2, 3, 0, 1, 2, 3, 0});
  // Every configuration once, in the order the events name them.
  std::size_t round = 0;
  for (std::size_t i = 1; i + 1 < ctx.attempts.size(); ++i) {
    CHECK(configs.insert(values_of(ctx.attempts[i].solution)).second);
    while (round < ctx.events.size() && ctx.events[round].type != "tune_round") ++round;
    REQUIRE(round < ctx.events.size());
    CHECK(ctx.events[round].data.at("solution").as_string() == ctx.attempts[i].solution.id);
    ++round;
  }
  CHECK(configs.size() == 9);
  CHECK(ctx.attempts.back().solution.params.per_workload.size() > 0);
  CHECK(ctx.state.at("batch").as_int() == 4);
  CHECK(ctx.state.at("batches").as_int() == 3);

  // --parallel sets the batch, unless tune_batch does.
  ks::SearchConfig c = config(30);
  c.parallel = 3;
  FakeContext three(make_tunable_task(), c, tunable_eval);
  ks::core::make_tune_strategy()->run(three);
  CHECK(three.batch_sizes == std::vector<std::size_t>{3, 3, 3});
  CHECK(three.find_event("tune_start")->data.at("batch").as_int() == 3);
  c.tune.batch = 2;
  FakeContext two(make_tunable_task(), c, tunable_eval);
  ks::core::make_tune_strategy()->run(two);
  CHECK(two.batch_sizes == std::vector<std::size_t>{2, 2, 2, 2});
  CHECK(ks::core::tune_batch_size(c) == 2);
  c.tune.batch = 0;
  c.parallel = 1;
  CHECK(ks::core::tune_batch_size(c) == ks::core::kDefaultTuneBatch);

  // The run's last round is never part of a batch: with 5 rounds the
  // starting point takes one, a batch three, and the last is decided alone
  // (here: per-shape values, due by then).
  FakeContext five(make_tunable_task(), config(5), tunable_eval);
  ks::core::make_tune_strategy()->run(five);
  CHECK(five.batch_sizes == std::vector<std::size_t>{3});
  CHECK(five.rounds_used() == 5);
  CHECK(five.attempts.back().solution.params.per_workload.size() > 0);
}

TEST_CASE("tune strategy: batches of one make the sequential tuner's choices") {
  ks::SearchConfig c = config(12);
  c.tune.batch = 1;
  c.parallel = 4;  // tune_batch decides
  FakeContext ctx(make_tunable_task(), c, tunable_eval);
  ks::core::make_tune_strategy()->run(ctx);
  CHECK(ctx.batch_sizes.empty());
  const Json& start = ctx.find_event("tune_start")->data;
  CHECK(start.at("batch").as_int() == 1);

  // The tuner on its own, as the strategy sets it up (docs/tuning.md): every
  // workload's dimensions, 16 stalled rounds at 0.5 %, 11 rounds after the
  // starting point plus its result, the seed the strategy reports; told the
  // starting point's result, then asked and told one configuration at a time.
  const ks::TaskSpec spec = make_tunable_task();
  ks::core::TunerOptions o;
  for (const auto& w : spec.workloads) o.workload_dims.emplace_back(w.dims.begin(), w.dims.end());
  o.stall_evaluations = 16;
  o.min_improvement = 0.005;
  o.max_evaluations = 12;
  ks::core::Tuner tuner(ks::core::ParamSpace(spec.starting_points[0].params), o,
                        static_cast<std::uint64_t>(start.at("seed").as_int()));
  REQUIRE(ctx.attempts[0].result.passed());
  tuner.tell({{"BLOCK", 32}, {"VEC", 1}}, ctx.attempts[0].result.latency_ms);
  std::vector<const Json*> rounds;
  for (const auto& e : ctx.events)
    if (e.type == "tune_round") rounds.push_back(&e.data);
  REQUIRE(rounds.size() == 9);  // the space is exhausted within the budget
  std::set<std::string> phases;
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    CAPTURE(i);
    const auto& a = ctx.attempts.at(i + 1);
    const auto next = tuner.ask();
    REQUIRE(next);
    CHECK(*next == values_of(a.solution));
    CHECK(tuner.last_decision().phase == rounds[i]->at("phase").as_string());
    CHECK(rounds[i]->at("batch_size").as_int() == 1);
    CHECK(rounds[i]->at("pending").as_int() == 0);
    phases.insert(tuner.last_decision().phase);
    if (a.result.passed()) tuner.tell(*next, a.result.latency_ms);
    else tuner.tell_failure(*next);
  }
  CHECK(phases.count("seed"));
  CHECK(phases.count("model"));
}

TEST_CASE("tune strategy: the batch setting is checked and recorded") {
  ks::SearchConfig c = config(10);
  c.tune.batch = -1;
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("tune_batch must be between 0 (automatic) and 64, is -1"),
                       ks::Error);
  c.tune.batch = 65;
  CHECK_THROWS_AS(c.validate(), ks::Error);
  c.tune.batch = 3;
  CHECK(ks::SearchConfig::from_json(c.to_json()).tune.batch == 3);
  c.tune.batch = 0;
  CHECK(ks::SearchConfig::from_json(c.to_json()).tune.batch == 0);
  // A manifest written before batches: that run tuned one at a time, and so does its resume.
  Json old = c.to_json();
  old.erase("tune_batch");
  CHECK(ks::SearchConfig::from_json(old).tune.batch == 1);
}

TEST_CASE("tune strategy: deterministic given the evaluation results") {
  auto run = [](std::uint64_t seed) {
    FakeContext ctx(make_tunable_task(), config(7, seed), tunable_eval);
    ks::core::make_tune_strategy()->run(ctx);
    std::vector<std::string> ids;
    for (const auto& a : ctx.attempts) ids.push_back(a.solution.id);
    return std::pair{ids, ctx.find_event("tune_start")->data.at("seed").as_int()};
  };
  const auto a = run(3), b = run(3), c = run(4);
  CHECK(a.first == b.first);
  CHECK(a.second == b.second);
  // The tuner's seed follows the run's seed (this small space is explored
  // the same way from any seed, so only the seed itself can differ).
  CHECK(a.second != c.second);
}

TEST_CASE("tune strategy: tunes the run's best solution without evaluating it again") {
  FakeContext ctx(make_tunable_task(), config(6), tunable_eval);
  Solution best = make_tunable_task().starting_points[0];
  best.name = "r3-improve";
  best.params.values = {{"BLOCK", 64}, {"VEC", 1}};
  ctx.set_best(best);
  const std::string best_id = ctx.best()->solution.id;
  ks::core::make_tune_strategy()->run(ctx);
  REQUIRE_FALSE(ctx.attempts.empty());
  for (const auto& a : ctx.attempts) {
    CHECK(a.solution.id != best_id);
    CHECK(a.solution.parent_id == best_id);
    CHECK(values_of(a.solution) != ks::util::Vars{{"BLOCK", 64}, {"VEC", 1}});
  }
  CHECK(ctx.find_event("tune_start")->data.at("base").as_string() == best_id);
}

TEST_CASE("tune strategy: a failing starting point is still tuned, its configuration never retried") {
  ks::TaskSpec task = make_tunable_task();
  task.starting_points[0].params.values = {{"BLOCK", 256}, {"VEC", 8}};  // fails to compile
  FakeContext ctx(task, config(30), tunable_eval);
  ks::core::make_tune_strategy()->run(ctx);
  REQUIRE(ctx.attempts.size() > 2);
  CHECK(ctx.attempts[0].result.status == EvalStatus::compile_error);
  for (std::size_t i = 1; i < ctx.attempts.size(); ++i)
    CHECK(values_of(ctx.attempts[i].solution) != ks::util::Vars{{"BLOCK", 256}, {"VEC", 8}});
  REQUIRE(ctx.best());
  CHECK(ctx.best()->eval.passed());
  CHECK(ctx.find_event("tune_start")->data.find("base_latency_ms")->is_null());
}

TEST_CASE("tune strategy: random search through the same strategy") {
  ks::core::TuneStrategyOptions o;
  o.method = "random";
  FakeContext ctx(make_tunable_task(), config(30), tunable_eval);
  ks::core::make_tune_strategy(o)->run(ctx);
  CHECK(ctx.find_event("tune_start")->data.at("method").as_string() == "random");
  CHECK(ctx.rounds_used() == 11);  // the same 10 configurations plus per-shape values
}

TEST_CASE("tune strategy: nothing to tune") {
  // A base without parameters: evaluated, then a clear event.
  FakeContext plain(make_tunable_task(false), config(5), tunable_eval);
  ks::core::make_tune_strategy()->run(plain);
  CHECK(plain.attempts.size() == 1);
  REQUIRE(plain.find_event("tune_skipped"));
  CHECK(plain.find_event("tune_skipped")->data.at("reason").as_string().find("no tunable parameters") !=
        std::string::npos);

  // No passing solution and no starting point: an error that says so.
  ks::TaskSpec empty = make_tunable_task();
  empty.starting_points.clear();
  FakeContext none(empty, config(5), tunable_eval);
  try {
    ks::core::make_tune_strategy()->run(none);
    FAIL("expected an error");
  } catch (const ks::Error& e) {
    CHECK(e.status() == ks::Status::invalid_argument);
    CHECK(std::string(e.what()).find("no starting point") != std::string::npos);
  }

  // A malformed declaration in a task is refused when the task is checked,
  // naming the solution (LLM-written ones are checked by the strategy).
  ks::TaskSpec broken = make_tunable_task();
  broken.starting_points[0].params = ks::Params::as_written(Json::parse(R"({"space": {"B": {"values": []}}})"));
  try {
    broken.validate();
    FAIL("expected an error");
  } catch (const ks::Error& e) {
    CHECK(e.status() == ks::Status::invalid_argument);
    CHECK(std::string(e.what()).find("tunable start") != std::string::npos);
  }

  ks::core::TuneStrategyOptions o;
  o.method = "grid";
  CHECK_THROWS_AS(ks::core::make_tune_strategy(o), ks::Error);
}
