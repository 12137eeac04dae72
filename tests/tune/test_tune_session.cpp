// The tune strategy in the journaling session the engine runs it in
// (lib/search/session.hpp): its batches go through evaluate_batch, a run
// stopped inside a batch and resumed ends exactly as the uninterrupted run,
// and a wall-time budget that runs out during a batch keeps the batch.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "search/session.hpp"
#include "search/tune/tune_strategy.hpp"
#include "search/fakes.hpp"
#include "support/test_util.hpp"
#include "tune/tunable_task.hpp"

using namespace ks;

namespace {

// Evaluates with tunable_eval (a result that depends on the parameters
// only) and notes the size of each call; a batch may take a while.
class TunableEvaluator : public test::FakeDeviceEvaluator {
 public:
  EvalResult evaluate(const Task& task, const Solution& s) override {
    calls.push_back(1);
    return result(task, s);
  }
  std::vector<EvalResult> evaluate_batch(const Task& task, const std::vector<Solution>& solutions) override {
    calls.push_back(solutions.size());
    if (batch_wait_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(batch_wait_s));
    std::vector<EvalResult> out;
    for (const auto& s : solutions) out.push_back(result(task, s));
    return out;
  }

  std::vector<std::size_t> calls;  // solutions per call
  double batch_wait_s = 0;

 private:
  static EvalResult result(const Task& task, const Solution& s) {
    EvalResult r = test::tunable_eval(task, s);
    r.solution_id = s.id;
    return r;
  }
};

SearchConfig tune_config(int rounds) {
  SearchConfig c = test::search_config("tune", Language::cuda, rounds);
  c.seed = 5;
  return c;
}

// Runs the tune strategy in a session on `store`; returns why it stopped.
std::string run_tune(RunStore& store, TunableEvaluator& evaluator, const SearchConfig& config,
                     ProgressCallback progress = {}) {
  SpecTask task{test::make_tunable_task()};
  test::ScriptedLlm llm({});  // tune asks no model
  test::NoWorldModel wm;
  core::Session session(task, evaluator, llm, wm, store, config, std::move(progress));
  auto strategy = core::make_tune_strategy();
  return to_string(session.run(*strategy));
}

// What two runs of one search share: the journal without its times, the
// strategy's events, the state and the best.
struct Outcome {
  std::vector<std::string> attempts;
  std::vector<std::string> events;
  std::string state;
  std::string best;
};

Outcome outcome(const RunStore& store) {
  Outcome o;
  for (const auto& a : store.attempts()) {
    Json j = a.to_json();
    j.erase("time");
    o.attempts.push_back(j.dump());
  }
  for (const auto& e : store.events())
    if (e.contains("journal_seq")) {
      Json j = e;
      j.erase("seq");
      j.erase("time");
      o.events.push_back(j.dump());
    }
  if (auto s = store.state()) o.state = s->dump();
  if (auto b = store.best()) o.best = b->solution.id;
  return o;
}

}  // namespace

TEST_CASE("tune in a session: a run stopped inside a batch and resumed ends as the uninterrupted run") {
  const auto base = test::scratch_dir("tune_session_resume");
  const SearchConfig config = tune_config(14);

  TunableEvaluator whole_eval;
  RunStore whole = RunStore::create(base / "whole", Json::object());
  CHECK(run_tune(whole, whole_eval, config) == "strategy_done");
  // The starting point alone, two batches of 4, the last configuration, per-shape values alone.
  CHECK(whole_eval.calls == std::vector<std::size_t>{1, 4, 4, 1, 1});
  const Outcome expected = outcome(whole);
  REQUIRE(expected.attempts.size() == 11);
  CHECK(expected.state.find("\"batches\":3") != std::string::npos);

  // Stopped after round 3: the starting point and two of the first batch's
  // four candidates are journaled, the other two were measured and dropped.
  const auto dir = base / "stopped";
  {
    TunableEvaluator eval;
    RunStore store = RunStore::create(dir, Json::object());
    CHECK(run_tune(store, eval, config, [](const RoundReport& r) { return r.round < 3; }) == "cancelled");
    CHECK(store.attempts().size() == 3);
  }
  // Resumed: the journal answers for those three; the batch's other two are
  // measured together, and the search goes on as if it had never stopped.
  TunableEvaluator eval;
  RunStore store = RunStore::open(dir);
  CHECK(run_tune(store, eval, config) == "strategy_done");
  CHECK(eval.calls == std::vector<std::size_t>{2, 4, 1, 1});
  const Outcome got = outcome(store);
  CHECK(got.attempts == expected.attempts);
  CHECK(got.events == expected.events);
  CHECK(got.state == expected.state);
  CHECK(got.best == expected.best);
}

TEST_CASE("tune in a session: a wall-time budget that runs out during a batch keeps the batch") {
  const auto dir = test::scratch_dir("tune_session_wall");
  SearchConfig config = tune_config(14);
  config.max_wall_s = 1.0;
  TunableEvaluator eval;
  eval.batch_wait_s = 1.2;  // the first batch starts within the budget and ends past it
  RunStore store = RunStore::create(dir, Json::object());
  CHECK(run_tune(store, eval, config) == "max_wall_time");
  REQUIRE(eval.calls == std::vector<std::size_t>{1, 4});
  // The starting point and the whole batch are rounds of the run; nothing after.
  const auto attempts = store.attempts();
  REQUIRE(attempts.size() == 5);
  for (int i = 0; i < 5; ++i) CHECK(attempts[static_cast<std::size_t>(i)].round == i + 1);
}

TEST_CASE("tune in a session: resumed with a lower budget it replays its plan and stops there, and goes on later") {
  const auto base = test::scratch_dir("tune_session_lower_budget");
  TunableEvaluator whole_eval;
  RunStore whole = RunStore::create(base / "whole", Json::object());
  CHECK(run_tune(whole, whole_eval, tune_config(14)) == "strategy_done");
  const Outcome expected = outcome(whole);
  REQUIRE(expected.attempts.size() == 11);

  // Stopped after round 3, inside the first batch.
  const auto dir = base / "stopped";
  {
    TunableEvaluator eval;
    RunStore store = RunStore::create(dir, Json::object());
    CHECK(run_tune(store, eval, tune_config(14), [](const RoundReport& r) { return r.round < 3; }) == "cancelled");
    REQUIRE(store.attempts().size() == 3);
    // The plan is recorded with the state, before the first candidate.
    REQUIRE(store.state().has_value());
    CHECK(core::recorded_tune_plan(*store.state()) == 14);
  }
  // Resumed with 6 rounds: the plan of 14 is replayed (the seed design made
  // for 14 rounds, the first batch whole), and the run stops at round 6
  // with the uninterrupted run's first six attempts.
  {
    TunableEvaluator eval;
    RunStore store = RunStore::open(dir);
    CHECK(run_tune(store, eval, tune_config(6)) == "max_rounds");
    CHECK(eval.calls == std::vector<std::size_t>{2, 1});  // the first batch's other two, then one of the second
    const Outcome got = outcome(store);
    REQUIRE(got.attempts.size() == 6);
    CHECK(std::equal(got.attempts.begin(), got.attempts.end(), expected.attempts.begin()));
    REQUIRE(store.state().has_value());
    CHECK(core::recorded_tune_plan(*store.state()) == 14);
    CHECK(store.state()->get_int("max_rounds") == 6);
  }
  // Resumed with the planned 14 again: it ends as the uninterrupted run.
  TunableEvaluator eval;
  RunStore store = RunStore::open(dir);
  CHECK(run_tune(store, eval, tune_config(14)) == "strategy_done");
  const Outcome got = outcome(store);
  CHECK(got.attempts == expected.attempts);
  CHECK(got.best == expected.best);
  CHECK(got.state == expected.state);
}

TEST_CASE("tune in a session: the recorded plan is read from a tune state only, and must be a round count") {
  CHECK_FALSE(core::recorded_tune_plan(Json::parse(R"({"strategy": "world_model", "max_rounds": 9})")));
  CHECK(core::recorded_tune_plan(Json::parse(R"({"strategy": "tune", "max_rounds": 9})")) == 9);  // before the field
  CHECK(core::recorded_tune_plan(Json::parse(R"({"strategy": "tune", "max_rounds": 9, "planned_rounds": 12})")) == 12);
  CHECK_THROWS_WITH_AS(core::recorded_tune_plan(Json::parse(R"({"strategy": "tune", "planned_rounds": "many"})")),
                       doctest::Contains("planned rounds must be a round count"), Error);
}
