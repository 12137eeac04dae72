#include <doctest/doctest.h>

#include "core/response/parse.hpp"
#include "search/session.hpp"
#include "ksearch/error.hpp"
#include "ksearch/sys/search_strategy.hpp"
#include "search/fakes.hpp"
#include "support/test_util.hpp"
#include "util/fs.hpp"

using namespace ks;
using ks::test::NoWorldModel;
using ks::core::Session;

namespace {

// Asks for a kernel, evaluates it, repeats; an unusable answer is a failed round.
class ToyStrategy : public SearchStrategy {
 public:
  std::string name() const override { return "toy"; }
  void run(SearchContext& ctx) override {
    while (!ctx.should_stop()) {
      LlmRequest req;
      req.kind = PromptKind::generate;
      req.prompt = fmt::format("round {}; best {:.3f}", ctx.rounds_used() + 1,
                               ctx.best() ? ctx.best()->eval.latency_ms : 0.0);
      LlmResponse r = ctx.llm(req);
      if (!r.ok) {
        ctx.record_failed_round("toy", r.error, "");
        continue;
      }
      try {
        Solution s = core::parse_candidate(r.text, Language::cpp);
        ctx.evaluate(s, "toy");
      } catch (const Error& e) {
        ctx.record_failed_round("toy", e.what(), r.text);
      }
      ctx.event("toy_step", Json::obj({{"round", ctx.rounds_used()}}));
    }
  }
};

struct Fixture {
  SpecTask task{test::tiny_task_spec()};
  test::MarkerEvaluator evaluator;
  NoWorldModel wm;
};

SearchConfig config(int rounds) { return test::search_config("greedy", Language::cpp, rounds); }

std::vector<std::string> script() {
  return {test::answer("passed 3.0", "a"), test::answer("compile_error", "b"), "no code here",
          "!FAIL:HTTP 503", test::answer("passed 1.5", "c"), test::answer("passed 2.0", "d")};
}

// Records an uninterrupted run of `rounds` rounds of script() into `dir`.
void record_run(const std::filesystem::path& dir, int rounds) {
  Fixture f;
  test::ScriptedLlm llm(script());
  RunStore store = RunStore::create(dir, Json::object());
  Session s(f.task, f.evaluator, llm, f.wm, store, config(rounds));
  ToyStrategy toy;
  s.run(toy);
}

// Rewrites line `i` of the run's transcript through `edit`.
template <class Edit>
void edit_transcript(const std::filesystem::path& dir, std::size_t i, Edit edit) {
  auto lines = util::read_lines(dir / "transcript.jsonl");
  Json entry = Json::parse(lines.at(i));
  edit(entry);
  lines[i] = entry.dump();
  std::string all;
  for (auto& l : lines) all += l + "\n";
  util::write_file_atomic(dir / "transcript.jsonl", all);
}

}  // namespace

TEST_CASE("session: rounds, failures and the best solution are journaled") {
  auto dir = test::scratch_dir("session_basic");
  Fixture f;
  test::ScriptedLlm llm(script());
  RunStore store = RunStore::create(dir, Json::object());
  std::vector<RoundReport> reports;
  Session s(f.task, f.evaluator, llm, f.wm, store, config(6), [&](const RoundReport& r) {
    reports.push_back(r);
    return true;
  });
  ToyStrategy toy;
  CHECK(s.run(toy) == StopReason::max_rounds);
  CHECK(s.rounds_used() == 6);
  CHECK(f.evaluator.evaluations == 4);  // two rounds had no usable candidate
  REQUIRE(s.best().has_value());
  CHECK(s.best()->eval.latency_ms == doctest::Approx(1.5));
  CHECK(s.best()->round == 5);
  REQUIRE(reports.size() == 6);
  CHECK(reports[2].status == EvalStatus::generation_failed);
  CHECK(reports[3].status == EvalStatus::generation_failed);
  CHECK(reports[4].improved);
  CHECK(reports[5].best_latency_ms == doctest::Approx(1.5));
  auto attempts = store.attempts();
  REQUIRE(attempts.size() == 6);
  CHECK(attempts[2].raw_answer == "no code here");
  CHECK(attempts[3].eval.log.find("HTTP 503") != std::string::npos);
  CHECK(store.transcript().size() == 6);
  CHECK(store.best()->solution.id == s.best()->solution.id);
  CHECK(s.usage().cost_usd == doctest::Approx(0.06));
}

TEST_CASE("session: resume replays the journal and continues live") {
  auto dir = test::scratch_dir("session_resume");
  std::string best_id;
  int events_after_first = 0;
  {
    Fixture f;
    test::ScriptedLlm llm(script());
    RunStore store = RunStore::create(dir, Json::object());
    Session s(f.task, f.evaluator, llm, f.wm, store, config(4));
    ToyStrategy toy;
    s.run(toy);
    events_after_first = static_cast<int>(store.events().size());
  }
  // Resume with a larger budget: the first 4 rounds come from the journal.
  Fixture f;
  auto all = script();
  test::ScriptedLlm llm({all[4], all[5]});
  RunStore store = RunStore::open(dir);
  Session s(f.task, f.evaluator, llm, f.wm, store, config(6));
  ToyStrategy toy;
  s.run(toy);
  CHECK(s.replayed_llm_calls() == 4);
  CHECK(s.replayed_evaluations() == 4);
  CHECK(llm.used() == 2);                 // only the new rounds asked the LLM
  CHECK(f.evaluator.evaluations == 2);    // and only they were evaluated
  CHECK(s.best()->eval.latency_ms == doctest::Approx(1.5));
  // The resumed prompts saw the same state as an uninterrupted run would.
  CHECK(llm.requests[0].prompt == "round 5; best 3.000");
  // Strategy events are not duplicated: each journal_seq appears once.
  std::map<std::int64_t, int> seen;
  for (const auto& e : store.events())
    if (e.contains("journal_seq")) ++seen[e["journal_seq"].as_int()];
  for (const auto& [k, n] : seen) CHECK_MESSAGE(n == 1, "journal_seq ", k, " appears ", n, " times");
  CHECK(static_cast<int>(store.events().size()) > events_after_first);
  CHECK(store.attempts().size() == 6);
}

TEST_CASE("session: a journal from a different strategy path is refused, not silently mixed") {
  auto dir = test::scratch_dir("session_diverge");
  record_run(dir, 2);
  // Edit the journal so LLM answer 0 differs: the strategy now produces a
  // solution the evaluation journal does not hold.
  edit_transcript(dir, 0, [](Json& e) { e["response"]["text"] = test::answer("passed 9.0", "edited"); });
  Fixture f;
  test::ScriptedLlm llm({});
  RunStore store = RunStore::open(dir);
  Session s(f.task, f.evaluator, llm, f.wm, store, config(3));
  ToyStrategy toy;
  CHECK_THROWS_WITH(s.run(toy), doctest::Contains("cannot resume"));
}

TEST_CASE("session: a journal whose LLM calls differ in kind is refused") {
  auto dir = test::scratch_dir("session_diverge_kind");
  record_run(dir, 2);
  edit_transcript(dir, 0, [](Json& e) { e["kind"] = "wm_init"; });
  Fixture f;
  test::ScriptedLlm llm({});
  RunStore store = RunStore::open(dir);
  Session s(f.task, f.evaluator, llm, f.wm, store, config(3));
  ToyStrategy toy;
  CHECK_THROWS_WITH(s.run(toy), doctest::Contains("\"wm_init\" in the journal"));
}

TEST_CASE("session: a resume that stops at a journal mismatch leaves best/ as it was") {
  auto dir = test::scratch_dir("session_diverge_best");
  std::string best_id;
  {
    Fixture f;
    test::ScriptedLlm llm(script());
    RunStore store = RunStore::create(dir, Json::object());
    Session s(f.task, f.evaluator, llm, f.wm, store, config(6));
    ToyStrategy toy;
    s.run(toy);
    REQUIRE(store.best().has_value());
    best_id = store.best()->solution.id;  // round 5's, after round 1's
  }
  // LLM call 4 (the best kernel's answer) now differs in kind: the replay
  // passes round 1's improvement, then stops.
  edit_transcript(dir, 4, [](Json& e) { e["kind"] = "wm_init"; });
  Fixture f;
  test::ScriptedLlm llm({});
  RunStore store = RunStore::open(dir);
  Session s(f.task, f.evaluator, llm, f.wm, store, config(6));
  ToyStrategy toy;
  CHECK_THROWS_WITH(s.run(toy), doctest::Contains("cannot resume"));
  REQUIRE(store.best().has_value());
  CHECK(store.best()->solution.id == best_id);
  CHECK(store.best()->round == 5);
}

TEST_CASE("session: a replay that reaches the journal's end restores a missing best.json") {
  auto dir = test::scratch_dir("session_restore_best");
  record_run(dir, 6);
  std::filesystem::remove(dir / "best.json");
  Fixture f;
  test::ScriptedLlm llm({});
  RunStore store = RunStore::open(dir);
  Session s(f.task, f.evaluator, llm, f.wm, store, config(6));
  ToyStrategy toy;
  CHECK(s.run(toy) == StopReason::max_rounds);
  REQUIRE(store.best().has_value());
  CHECK(store.best()->round == 5);
}

// Does "post-stop" work after its loop, as a careless strategy might.
class TidyingStrategy : public ToyStrategy {
 public:
  void run(SearchContext& ctx) override {
    ToyStrategy::run(ctx);
    ctx.event("tidy_up", Json::object());  // must not reach the journal
    LlmRequest req;
    req.kind = PromptKind::wm_refine;
    ctx.llm(req);                          // must not be asked
  }
};

TEST_CASE("session: after a stop nothing more reaches the journal, so a resume continues cleanly") {
  auto dir = test::scratch_dir("session_stop_prefix");
  {
    Fixture f;
    test::ScriptedLlm llm(script());
    RunStore store = RunStore::create(dir, Json::object());
    Session s(f.task, f.evaluator, llm, f.wm, store, config(6), [](const RoundReport& r) { return r.round < 2; });
    TidyingStrategy t;
    CHECK(s.run(t) == StopReason::cancelled);
    CHECK(llm.used() == 2);
    for (const auto& e : store.events()) CHECK(e["type"].as_string() != "tidy_up");
  }
  // Resumed with the callback gone: the journal is a clean prefix of the longer run.
  Fixture f;
  auto all = script();
  test::ScriptedLlm llm({all[2], all[3], all[4], all[5]});
  RunStore store = RunStore::open(dir);
  Session s(f.task, f.evaluator, llm, f.wm, store, config(6));
  ToyStrategy toy;
  CHECK(s.run(toy) == StopReason::max_rounds);
  CHECK(s.rounds_used() == 6);
  CHECK(s.replayed_evaluations() == 2);
  std::vector<std::int64_t> seqs;
  for (const auto& e : store.events())
    if (e.contains("journal_seq")) seqs.push_back(e["journal_seq"].as_int());
  for (std::size_t i = 0; i < seqs.size(); ++i) CHECK(seqs[i] == static_cast<std::int64_t>(i));
}

TEST_CASE("session: a policy that cancels ends the run without a failed round") {
  auto dir = test::scratch_dir("session_policy_cancel");
  struct Cancelling : test::ScriptedLlm {
    using ScriptedLlm::ScriptedLlm;
    LlmResponse complete(const LlmRequest& r) override {
      if (used() == 1) throw Error(Status::cancelled, "host says stop");
      return ScriptedLlm::complete(r);
    }
  };
  Fixture f;
  Cancelling llm(script());
  RunStore store = RunStore::create(dir, Json::object());
  Session s(f.task, f.evaluator, llm, f.wm, store, config(6));
  ToyStrategy toy;
  CHECK(s.run(toy) == StopReason::cancelled);
  CHECK(s.rounds_used() == 1);
  CHECK(store.transcript().size() == 1);
}

TEST_CASE("session: code the run has already evaluated is not measured again") {
  auto dir = test::scratch_dir("session_reuse");
  Fixture f;
  auto a = test::answer("passed 2.0", "same");
  test::ScriptedLlm llm({a, a, test::answer("passed 1.0", "other")});
  RunStore store = RunStore::create(dir, Json::object());
  Session s(f.task, f.evaluator, llm, f.wm, store, config(3));
  ToyStrategy toy;
  s.run(toy);
  CHECK(s.rounds_used() == 3);
  CHECK(f.evaluator.evaluations == 2);
  auto at = store.attempts();
  REQUIRE(at.size() == 3);
  CHECK(at[1].solution.id == at[0].solution.id);
  CHECK(at[1].eval.metrics.get_bool("reused_evaluation"));
}

TEST_CASE("session: the progress callback stops the run cleanly") {
  auto dir = test::scratch_dir("session_cancel");
  Fixture f;
  test::ScriptedLlm llm(script());
  RunStore store = RunStore::create(dir, Json::object());
  Session s(f.task, f.evaluator, llm, f.wm, store, config(6), [](const RoundReport& r) { return r.round < 2; });
  ToyStrategy toy;
  CHECK(s.run(toy) == StopReason::cancelled);
  CHECK(s.rounds_used() == 2);
}

TEST_CASE("session: the cost budget stops new LLM requests") {
  auto dir = test::scratch_dir("session_cost");
  Fixture f;
  test::ScriptedLlm llm(script());
  llm.cost_per_call = 0.5;
  RunStore store = RunStore::create(dir, Json::object());
  SearchConfig c = config(6);
  c.max_cost_usd = 1.0;
  Session s(f.task, f.evaluator, llm, f.wm, store, c);
  ToyStrategy toy;
  CHECK(s.run(toy) == StopReason::max_cost);
  CHECK(llm.used() == 2);
}

namespace {

// Starts from a kernel whose evaluation was recorded elsewhere, knows
// another one by its code only, then runs the toy loop.
class WarmToyStrategy : public ToyStrategy {
 public:
  void run(SearchContext& ctx) override {
    Solution seed = core::parse_candidate(test::answer("passed 2.0", "seed"), Language::cpp);
    EvalResult recorded;
    recorded.status = EvalStatus::passed;
    recorded.solution_id = seed.id;
    recorded.latency_ms = 2.0;
    recorded.score = 0.5;
    adopted = ctx.adopt_recorded(seed, recorded, "/elsewhere/attempts/0001-x");
    known = core::parse_candidate(test::answer("passed 0.1", "known"), Language::cpp);
    ctx.add_solution(known);
    found_known = ctx.find_solution(known.id).has_value();
    known_has_eval = ctx.find_eval(known.id).has_value();
    ToyStrategy::run(ctx);
  }
  EvalResult adopted;
  Solution known;
  bool found_known = false;
  bool known_has_eval = true;
};

}  // namespace

TEST_CASE("session: an adopted recorded evaluation is an uncounted attempt that may be the best; resume replays it") {
  auto dir = test::scratch_dir("session_adopt");
  {
    Fixture f;
    test::ScriptedLlm llm({test::answer("passed 3.0", "a")});
    RunStore store = RunStore::create(dir, Json::object());
    Session s(f.task, f.evaluator, llm, f.wm, store, config(1));
    WarmToyStrategy warm;
    s.run(warm);
    CHECK(f.evaluator.evaluations == 1);  // round 1 only: the recorded one is not measured
    CHECK(s.rounds_used() == 1);
    CHECK(warm.adopted.metrics.get_string("recorded_from") == "/elsewhere/attempts/0001-x");
    // Known by its code, with no result: never compared with, never the best.
    CHECK(warm.found_known);
    CHECK_FALSE(warm.known_has_eval);
    REQUIRE(s.best().has_value());
    CHECK(s.best()->round == 0);  // the recorded kernel (2.0 ms) beats round 1's (3.0 ms)
    CHECK(s.best()->eval.latency_ms == doctest::Approx(2.0));
    auto at = store.attempts();
    REQUIRE(at.size() == 2);
    CHECK(at[0].round == 0);
    CHECK(at[0].eval.metrics.get_string("recorded_from") == "/elsewhere/attempts/0001-x");
    CHECK(at[1].round == 1);
    CHECK(store.best()->solution.id == at[0].solution.id);
    CHECK(store.manifest()["totals"]["best"].get_string("solution_id") == at[0].solution.id);
  }
  // Resumed with one more round: the adopted attempt comes from the journal.
  Fixture f;
  test::ScriptedLlm llm({test::answer("passed 1.0", "b")});
  RunStore store = RunStore::open(dir);
  Session s(f.task, f.evaluator, llm, f.wm, store, config(2));
  WarmToyStrategy warm;
  s.run(warm);
  CHECK(s.replayed_evaluations() == 2);
  CHECK(f.evaluator.evaluations == 1);  // round 2 only
  CHECK(store.attempts().size() == 3);
  CHECK(s.best()->round == 2);
  CHECK(s.best()->eval.latency_ms == doctest::Approx(1.0));
}
