// A host program's own parts in run_search: a strategy, a world model, an
// LLM policy and an evaluator of its own, all through the public C++ API
// (ksearch/search.hpp and the ksearch/sys interfaces); the run records that
// it used them, and resumes only when they are given again.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>

#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/run_store.hpp"
#include "ksearch/search.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "ksearch/sys/llm_policy.hpp"
#include "ksearch/sys/search_strategy.hpp"
#include "ksearch/sys/world_model.hpp"
#include "ksearch/tasks.hpp"
#include "support/test_util.hpp"

using namespace ks;

namespace {

const char* kGood = R"(```cpp kernel.cpp
#include <cstdint>
void scale3(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = 3.0f * x[i];
}
```
```json launch_plan
{"calls": [{"fn": "scale3", "args": ["x", "y", "N"]}]}
```
)";

class FixedModel final : public LlmPolicy {
 public:
  LlmResponse complete(const LlmRequest&) override {
    ++calls;
    LlmResponse r;
    r.ok = true;
    r.text = kGood;
    return r;
  }
  std::string describe() const override { return "host:fixed"; }
  int calls = 0;
};

class CountingEvaluator final : public Evaluator {
 public:
  CountingEvaluator() {
    EvaluatorConfig c;
    c.backend = ks::EvalBackend::host;
    c.options.max_time_per_workload_s = 0.2;
    inner_ = make_evaluator(c);
  }
  EvalResult evaluate(const Task& t, const Solution& s) override {
    ++calls;
    return inner_->evaluate(t, s);
  }
  DeviceInfo device() const override { return inner_->device(); }
  EvalOptions& options() override { return inner_->options(); }
  std::atomic<int> calls{0};

 private:
  std::unique_ptr<Evaluator> inner_;
};

// Asks once, evaluates what it got, then evaluates the task's reference
// beside it (uncounted); it reads the world model it was given.
class OneShot final : public SearchStrategy {
 public:
  std::string name() const override { return "one_shot"; }
  void run(SearchContext& ctx) override {
    saw_world_model = &ctx.world_model();
    while (!ctx.should_stop()) {
      ctx.event("one_shot_round", Json::obj({{"round", ctx.rounds_used() + 1}}));
      LlmRequest req;
      req.prompt = "write scale3";
      LlmResponse r = ctx.llm(req);
      Solution s = parse_solution_text(r.text, ctx.task().spec());
      ctx.evaluate(s, "one shot");
    }
  }
  const WorldModel* saw_world_model = nullptr;
};

}  // namespace

TEST_CASE("a host's strategy, world model, LLM policy and evaluator run in run_search") {
  auto model = std::make_shared<FixedModel>();
  auto evaluator = std::make_shared<CountingEvaluator>();
  auto strategy = std::make_shared<OneShot>();
  std::shared_ptr<WorldModel> wm = make_tree_world_model();
  const auto dir = test::scratch_dir("custom_parts") / "run";

  SearchOptions o;
  o.task = (test::source_dir() / "tests/fixtures/tasks/scale3").string();
  o.config.language = Language::cpp;
  o.config.max_rounds = 2;
  o.llm.kind = LlmSource::custom;
  o.llm.custom = model;
  o.custom_evaluator = evaluator;
  o.custom_strategy = strategy;
  o.custom_world_model = wm;
  o.run_dir = dir;
  std::vector<std::string> events;
  o.on_event = [&](const Json& e) { events.push_back(e.get_string("type")); };
  SearchOutcome out = run_search(o);
  CHECK(out.rounds == 2);
  REQUIRE(out.best.has_value());
  CHECK(model->calls == 2);
  CHECK(evaluator->calls == 1);  // the same code twice is evaluated once
  CHECK(strategy->saw_world_model == wm.get());
  CHECK(std::count(events.begin(), events.end(), "one_shot_round") == 2);  // its own events, journalled

  Json m = RunStore::open_read_only(dir).manifest();
  CHECK(m["config"].get_string("strategy") == "one_shot");
  CHECK(m.get_bool("custom_strategy"));
  CHECK(m.get_bool("custom_world_model"));

  // Resuming needs the same parts: the strategy cannot be recreated by name.
  ResumeOptions r;
  r.custom_llm = model;
  r.max_rounds = 3;
  try {
    resume_search(dir, r);
    FAIL("resumed without the strategy");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("search strategy supplied by the host program") != std::string::npos);
  }
  r.custom_strategy = strategy;
  r.custom_world_model = wm;
  r.custom_evaluator = evaluator;
  SearchOutcome again = resume_search(dir, r);
  CHECK(again.rounds == 3);
  CHECK(again.replayed_rounds == 2);
  CHECK(model->calls == 3);  // the first two answers came from the journal

  // A kernel to continue from is read by the built-in world_model strategy
  // only: a host's strategy would ignore it, so the run refuses it first.
  o.run_dir = test::scratch_dir("custom_parts_continue") / "run";
  o.custom_world_model = make_tree_world_model();
  o.config.continue_from_solution = out.best->solution;
  try {
    run_search(o);
    FAIL("a custom strategy took continue_from_solution");
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    CHECK(std::string(e.what()).find("not by a custom one") != std::string::npos);
  }
  CHECK(model->calls == 3);  // refused before anything ran
}
