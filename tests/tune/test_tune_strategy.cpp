// The `tune` strategy against a fake context.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "core/run_events.hpp"
#include "core/tune/params.hpp"
#include "core/tune/tune_strategy.hpp"
#include "ksearch/error.hpp"
#include "tune/fake_context.hpp"

using ks::EvalResult;
using ks::EvalStatus;
using ks::Json;
using ks::LaunchPlan;
using ks::Solution;
using ks::util::Vars;
using ks::test::FakeContext;

namespace {

// Two benchmark shapes whose best BLOCK differs (64 for "small", 256 for
// "large"; 128 is the best single value) and a correctness shape "tiny"
// (N = 256) that rules out BLOCK = 512 through the constraint N >= BLOCK.
ks::TaskSpec make_task(bool with_params = true) {
  ks::TaskSpec t;
  t.name = "test/tunable";
  t.languages = {ks::Language::cuda};
  t.dims = {"N"};
  auto workload = [](const char* name, std::int64_t n, bool bench) {
    ks::WorkloadSpec w;
    w.name = name;
    w.dims = {{"N", n}};
    w.benchmark = bench;
    return w;
  };
  t.workloads = {workload("tiny", 256, false), workload("small", 1024, true), workload("large", 65536, true)};
  ks::TensorSpec x, y;
  x.name = "x";
  x.shape = {"N"};
  y.name = "y";
  y.shape = {"N"};
  y.is_output = true;
  t.tensors = {x, y};
  Solution ref;
  ref.name = "reference";
  ref.language = ks::Language::cuda;
  ref.sources = {{"ref.cu", "extern \"C\" __global__ void ref() {}"}};
  t.references[ks::Language::cuda] = ref;
  Solution sp;
  sp.name = "tunable start";
  sp.language = ks::Language::cuda;
  sp.sources = {{"kernel.cu", "extern \"C\" __global__ void k() {}"}};
  sp.launch_plan = LaunchPlan::from_json(Json::parse(
      R"j({"kernels": [{"name": "k", "grid": ["cdiv(N, BLOCK)"], "block": ["BLOCK"], "args": []}]})j"));
  if (with_params)
    sp.params = Json::parse(R"({
        "space": {"BLOCK": {"values": [32, 64, 128, 256, 512]}, "VEC": {"values": [1, 2, 4, 8]}},
        "constraints": ["BLOCK >= VEC * 32", "N >= BLOCK"]})");
  t.starting_points = {sp};
  return t;
}

// Evaluates like a real backend would see it: per workload, the resolved
// values decide the latency; VEC = 8 fails to compile.
EvalResult fake_eval(const ks::Task& task, const Solution& s) {
  EvalResult r;
  for (const auto& w : task.spec().workloads) {
    ks::WorkloadResult wr;
    wr.name = w.name;
    wr.benchmark = w.benchmark;
    ks::util::Vars dims(w.dims.begin(), w.dims.end());
    ks::util::Vars v;
    try {
      v = ks::core::resolve_param_values(s.params, w.name, dims);
    } catch (const ks::Error& e) {
      r.status = EvalStatus::invalid;
      r.log = e.what();
      return r;
    }
    if (v.count("VEC") && v.at("VEC") == 8) {
      r.status = EvalStatus::compile_error;
      r.log = "too many registers";
      return r;
    }
    if (w.benchmark) {
      const double b = v.count("BLOCK") ? std::log2(double(v.at("BLOCK"))) : 5;
      const double vec = v.count("VEC") ? std::log2(double(v.at("VEC"))) : 0;
      const double centre = w.name == "small" ? 6 : 8, scale = w.name == "small" ? 1 : 10;
      wr.timing.mean_ms = scale * std::exp(0.3 * (b - centre) * (b - centre) + 0.1 * (vec - 1) * (vec - 1));
      wr.timing.count = 10;
    }
    r.workloads.push_back(wr);
  }
  r.status = EvalStatus::passed;
  r.compute_summary();
  return r;
}

ks::SearchConfig config(int rounds, std::uint64_t seed = 7) {
  ks::SearchConfig c;
  c.strategy = "tune";
  c.max_rounds = rounds;
  c.seed = seed;
  return c;
}

ks::util::Vars values_of(const Solution& s) {
  ks::util::Vars v;
  if (const Json* j = s.params.find("values"))
    for (const auto& [k, x] : j->as_object()) v[k] = x.as_int();
  return v;
}

}  // namespace

TEST_CASE("tune strategy: evaluates the starting point, never repeats, skips failures, adds per-shape values") {
  FakeContext ctx(make_task(), config(30), fake_eval);
  auto strategy = ks::core::make_tune_strategy();
  CHECK(strategy->name() == "tune");
  strategy->run(ctx);

  REQUIRE(ctx.attempts.size() >= 3);
  // The starting point comes first, as given.
  Solution start = make_task().starting_points[0];
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
  const Json& pw = last.solution.params.at("per_workload");
  CHECK(pw.at("small").at("BLOCK").as_int() == 64);
  CHECK(pw.at("large").at("BLOCK").as_int() == 256);
  CHECK_FALSE(pw.contains("tiny"));
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
    FakeContext ctx(make_task(), config(rounds), fake_eval);
    ks::core::make_tune_strategy()->run(ctx);
    // 10 admissible configurations: the budget runs out before the space does.
    CHECK(ctx.rounds_used() == rounds);
    CHECK(ctx.rounds_used() == static_cast<int>(ctx.attempts.size()));
    // Per-shape values, when tried, take the last round.
    for (std::size_t i = 0; i + 1 < ctx.attempts.size(); ++i)
      CHECK_FALSE(ctx.attempts[i].solution.params.contains("per_workload"));
    if (rounds == 8) CHECK(ctx.attempts.back().solution.params.contains("per_workload"));
    // One round only evaluates the starting point, and says why nothing was tuned.
    if (rounds == 1) CHECK(ctx.find_event("tune_skipped") != nullptr);
  }
}

TEST_CASE("tune strategy: deterministic given the evaluation results") {
  auto run = [](std::uint64_t seed) {
    FakeContext ctx(make_task(), config(7, seed), fake_eval);
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
  FakeContext ctx(make_task(), config(6), fake_eval);
  Solution best = make_task().starting_points[0];
  best.name = "r3-improve";
  best.params["values"] = Json::obj({{"BLOCK", 64}, {"VEC", 1}});
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
  ks::TaskSpec task = make_task();
  task.starting_points[0].params["values"] = Json::obj({{"BLOCK", 256}, {"VEC", 8}});  // fails to compile
  FakeContext ctx(task, config(30), fake_eval);
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
  FakeContext ctx(make_task(), config(30), fake_eval);
  ks::core::make_tune_strategy(o)->run(ctx);
  CHECK(ctx.find_event("tune_start")->data.at("method").as_string() == "random");
  CHECK(ctx.rounds_used() == 11);  // the same 10 configurations plus per-shape values
}

TEST_CASE("tune strategy: nothing to tune") {
  // A base without parameters: evaluated, then a clear event.
  FakeContext plain(make_task(false), config(5), fake_eval);
  ks::core::make_tune_strategy()->run(plain);
  CHECK(plain.attempts.size() == 1);
  REQUIRE(plain.find_event("tune_skipped"));
  CHECK(plain.find_event("tune_skipped")->data.at("reason").as_string().find("no tunable parameters") !=
        std::string::npos);

  // No passing solution and no starting point: an error that says so.
  ks::TaskSpec empty = make_task();
  empty.starting_points.clear();
  FakeContext none(empty, config(5), fake_eval);
  try {
    ks::core::make_tune_strategy()->run(none);
    FAIL("expected an error");
  } catch (const ks::Error& e) {
    CHECK(e.status() == ks::Status::invalid_argument);
    CHECK(std::string(e.what()).find("no starting point") != std::string::npos);
  }

  // A malformed declaration in a task is refused when the task is checked,
  // naming the solution (LLM-written ones are checked by the strategy).
  ks::TaskSpec broken = make_task();
  broken.starting_points[0].params = Json::parse(R"({"space": {"B": {"values": []}}})");
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
