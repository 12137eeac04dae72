// resume_search on a tune run with a changed budget, through the public C++
// API and real run folders (the tunable test task, the offline tuner and an
// evaluator whose results depend on the parameters only): a refused resume
// changes nothing in the folder; a lower budget replays the tuner's plan and
// stops there; a resume that fails before it records anything new puts the
// folder back as it was, one that fails later says so in the manifest; and
// what a kill left (temporary files of atomic writes) is gone after the
// next open.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "ksearch/error.hpp"
#include "ksearch/run_store.hpp"
#include "ksearch/search.hpp"
#include "search/fakes.hpp"
#include "support/test_util.hpp"
#include "tune/tunable_task.hpp"

using namespace ks;
namespace fs = std::filesystem;

namespace {

class TunableEvaluator : public test::FakeDeviceEvaluator {
 public:
  EvalResult evaluate(const Task& task, const Solution& s) override {
    if (fail_from >= 0 && calls >= fail_from) throw Error(Status::subprocess, "the worker cannot start (a test)");
    ++calls;
    EvalResult r = test::tunable_eval(task, s);
    r.solution_id = s.id;
    return r;
  }
  std::vector<EvalResult> evaluate_batch(const Task& task, const std::vector<Solution>& solutions) override {
    std::vector<EvalResult> out;
    for (const auto& s : solutions) out.push_back(evaluate(task, s));
    return out;
  }
  int calls = 0;
  int fail_from = -1;  // evaluations from this one on throw
};

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The tunable task as a task file the run records by path.
fs::path tunable_task_dir(const fs::path& base) {
  const fs::path dir = base / "task";
  fs::create_directories(dir);
  std::ofstream(dir / "task.json") << test::make_tunable_task().to_json().dump(2);
  return dir;
}

SearchOptions tune_options(const fs::path& task, const fs::path& run, std::shared_ptr<Evaluator> evaluator,
                           int rounds) {
  SearchOptions o;
  o.task = task.string();
  o.config.strategy = StrategyKind::tune;
  o.config.max_rounds = rounds;
  o.config.seed = 5;
  o.llm.kind = LlmSource::offline;
  o.custom_evaluator = std::move(evaluator);
  o.weak_check = false;
  o.run_dir = run;
  return o;
}

std::vector<std::string> attempt_ids(const fs::path& run) {
  std::vector<std::string> out;
  for (const auto& a : RunStore::open_read_only(run).attempts()) out.push_back(a.solution.id);
  return out;
}

std::string refusal(const fs::path& run, ResumeOptions r) {
  try {
    resume_search(run, r);
  } catch (const Error& e) {
    return e.what();
  }
  return "(not refused)";
}

}  // namespace

TEST_CASE("resume of a tune run: refusals change nothing, a lower budget stops early, a kill's temporaries go") {
  const fs::path base = test::scratch_dir("resume_budget_tune");
  const fs::path task = tunable_task_dir(base);
  const auto uninterrupted = run_search(tune_options(task, base / "whole", std::make_shared<TunableEvaluator>(), 14));
  CHECK(uninterrupted.stop_reason == StopReason::strategy_done);
  const std::vector<std::string> whole = attempt_ids(base / "whole");
  REQUIRE(whole.size() == 11);

  // Stopped after round 3, inside the tuner's first batch.
  const fs::path run = base / "run";
  auto evaluator = std::make_shared<TunableEvaluator>();
  SearchOptions o = tune_options(task, run, evaluator, 14);
  o.progress = [](const RoundReport& r) { return r.round < 3; };
  CHECK(run_search(o).stop_reason == StopReason::cancelled);
  REQUIRE(attempt_ids(run).size() == 3);

  // What a kill between an atomic write and its rename leaves, and names
  // that only look alike, which stay.
  const fs::path attempt = run / "attempts" / fs::directory_iterator(run / "attempts")->path().filename();
  std::ofstream(run / "manifest.json.tmp.4242.4243.0") << "{";
  std::ofstream(attempt / "eval.json.tmp.4242.4243.1") << "{";
  std::ofstream(run / "notes.tmp.txt") << "mine";
  const fs::path outside = base / "outside.tmp.1.2.3";
  std::ofstream(outside) << "not the run's";
  fs::create_symlink(outside, run / "link.tmp.1.2.3");

  const std::string manifest = bytes_of(run / "manifest.json");
  const std::string events = bytes_of(run / "events.jsonl");
  ResumeOptions r;
  r.custom_evaluator = evaluator;
  r.max_rounds = 2;
  std::string why = refusal(run, r);
  CHECK(why.find("below the 3 rounds this run has already done") != std::string::npos);
  CHECK(why.find("between 3 and 14") != std::string::npos);
  r.max_rounds = 20;
  why = refusal(run, r);
  CHECK(why.find("above the 14 rounds this tune run planned") != std::string::npos);
  CHECK(bytes_of(run / "manifest.json") == manifest);
  CHECK(bytes_of(run / "events.jsonl") == events);
  CHECK_FALSE(fs::exists(run / "manifest.json.tmp.4242.4243.0"));
  CHECK_FALSE(fs::exists(attempt / "eval.json.tmp.4242.4243.1"));
  CHECK(fs::exists(run / "notes.tmp.txt"));
  CHECK(fs::is_symlink(run / "link.tmp.1.2.3"));
  CHECK(bytes_of(outside) == "not the run's");

  // Between the rounds done and the plan: the plan's first rounds, then a stop.
  r.max_rounds = 6;
  SearchOutcome lower = resume_search(run, r);
  CHECK(lower.stop_reason == StopReason::max_rounds);
  CHECK(lower.rounds == 6);
  std::vector<std::string> got = attempt_ids(run);
  REQUIRE(got.size() == 6);
  CHECK(std::equal(got.begin(), got.end(), whole.begin()));
  Json m = RunStore::open_read_only(run).manifest();
  CHECK(m["config"].get_int("max_rounds") == 6);
  CHECK(m.get_string("status") == "finished");

  // Back to the plan's budget: it ends as the uninterrupted run did.
  r.max_rounds = 14;
  SearchOutcome rest = resume_search(run, r);
  CHECK(rest.stop_reason == StopReason::strategy_done);
  CHECK(attempt_ids(run) == whole);
}

TEST_CASE("resume: a failure before anything new is recorded leaves the folder as it was; a later one is recorded") {
  const fs::path base = test::scratch_dir("resume_budget_failure");
  const fs::path task = tunable_task_dir(base);
  const fs::path run = base / "run";
  auto evaluator = std::make_shared<TunableEvaluator>();
  SearchOptions o = tune_options(task, run, evaluator, 14);
  o.progress = [](const RoundReport& r) { return r.round < 3; };
  CHECK(run_search(o).stop_reason == StopReason::cancelled);

  // The journal replays; the first live evaluation (the batch's other two
  // candidates) fails: nothing new was recorded.
  const std::string manifest = bytes_of(run / "manifest.json");
  const std::string events = bytes_of(run / "events.jsonl");
  const std::string state = bytes_of(run / "state.json");
  auto broken = std::make_shared<TunableEvaluator>();
  broken->fail_from = 0;
  ResumeOptions r;
  r.custom_evaluator = broken;
  r.max_rounds = 10;
  CHECK(refusal(run, r).find("the worker cannot start") != std::string::npos);
  CHECK(bytes_of(run / "manifest.json") == manifest);
  CHECK(bytes_of(run / "events.jsonl") == events);
  CHECK(bytes_of(run / "state.json") == state);

  // It fails after two new rounds: that is the run's failure, and the
  // manifest says so (with the budget the resume ran under).
  broken->calls = 0;
  broken->fail_from = 2;
  CHECK(refusal(run, r).find("the worker cannot start") != std::string::npos);
  CHECK(attempt_ids(run).size() == 5);
  const Json m = RunStore::open_read_only(run).manifest();
  CHECK(m.get_string("status") == "failed");
  CHECK(m.get_string("error").find("the worker cannot start") != std::string::npos);
  CHECK(m["config"].get_int("max_rounds") == 10);
}
