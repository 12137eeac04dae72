// The session following a recording (session.hpp, Recording): exact
// reproduction from a run folder, divergences (kind, prompt, evaluation),
// the end of a partial recording, skip and live modes, a resumed replay, and
// a transcript whose candidates are measured again.
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
using ks::core::Recording;
using ks::core::Session;

namespace {

// Asks for a kernel, evaluates it, then chooses the next request by the
// round's latency against a threshold from the configuration (in ms, taken
// from wm_stagnation_window): improve when at or under it, debug otherwise.
// The prompt names debug_rounds_label and a nonzero seed is written into the
// candidate, so one setting each changes the kind, the prompt or the candidate.
class Chooser : public SearchStrategy {
 public:
  std::string name() const override { return "chooser"; }
  void run(SearchContext& ctx) override {
    const SearchConfig& cfg = ctx.config();
    PromptKind next = PromptKind::generate;
    while (!ctx.should_stop()) {
      LlmRequest req;
      req.kind = next;
      req.prompt = fmt::format("round {}\nlabel {}\nbest {:.3f}", ctx.rounds_used() + 1, cfg.debug_rounds_label,
                               ctx.best() ? ctx.best()->eval.latency_ms : 0.0);
      LlmResponse r = ctx.llm(req);
      EvalResult e;
      if (!r.ok) {
        e = ctx.record_failed_round("chooser", r.error, "");
      } else {
        try {
          Solution s = core::parse_candidate(r.text, Language::cpp);
          if (cfg.seed != 0) s.sources[0].content += fmt::format("\n// seed {}\n", cfg.seed);
          e = ctx.evaluate(s, "chooser");
        } catch (const Error& err) {
          e = ctx.record_failed_round("chooser", err.what(), r.text);
        }
      }
      double threshold = cfg.world_model.stagnation_window;
      bool fast = e.passed() && e.latency_ms <= threshold;
      next = fast ? PromptKind::improve : PromptKind::debug;
      ctx.event("decision", Json::obj({{"decision", fast ? "fast" : "slow"},
                                       {"next", to_string(next)},
                                       {"why", fmt::format("round {} took {:.2f} ms against the threshold of {} ms",
                                                           ctx.rounds_used(), e.latency_ms, threshold)}}));
    }
  }
};

// Measures everything `factor` times slower: another machine.
class ScaledEvaluator : public test::MarkerEvaluator {
 public:
  explicit ScaledEvaluator(double factor) : factor_(factor) {}
  EvalResult evaluate(const Task& task, const Solution& s) override {
    EvalResult r = MarkerEvaluator::evaluate(task, s);
    for (auto& w : r.workloads) w.timing.mean_ms *= factor_;
    r.compute_summary();
    return r;
  }

 private:
  double factor_;
};

struct Fixture {
  SpecTask task{test::tiny_task_spec()};
  test::MarkerEvaluator evaluator;
  NoWorldModel wm;
};

SearchConfig config(int rounds, int threshold_ms = 2) {
  SearchConfig c;
  c.strategy = StrategyKind::greedy;
  c.language = Language::cpp;
  c.max_rounds = rounds;
  c.world_model.stagnation_window = threshold_ms;
  return c;
}

// Round latencies 3.0, 1.5, 1.8, 2.5, 1.0, 1.2 (ms): with the threshold of
// 2 ms the kinds asked are generate, debug, improve, improve, debug, improve.
std::vector<std::string> script() {
  return {test::answer("passed 3.0", "a"), test::answer("passed 1.5", "b"), test::answer("passed 1.8", "c"),
          test::answer("passed 2.5", "d"), test::answer("passed 1.0", "e"), test::answer("passed 1.2", "f")};
}

void record(const std::filesystem::path& dir, SearchConfig c, std::vector<std::string> answers = script()) {
  Fixture f;
  test::ScriptedLlm llm(std::move(answers));
  RunStore store = RunStore::create(dir, Json::object());
  Session s(f.task, f.evaluator, llm, f.wm, store, std::move(c));
  Chooser chooser;
  s.run(chooser);
}

// A run folder as a recording, as the engine reads it.
Recording from_run(const std::filesystem::path& dir, Recording::Mode mode = Recording::Mode::stop) {
  RunStore src = RunStore::open_read_only(dir);
  Recording r;
  r.source = dir.string();
  r.answers = src.transcript();
  r.has_evaluations = true;
  r.attempts = src.attempts();
  r.strategy_events = 0;
  for (const auto& e : src.events()) {
    if (!e.contains("journal_seq")) continue;
    ++r.strategy_events;
    if (e.get_string("type") == "decision") r.decisions.push_back(e);
  }
  r.mode = mode;
  r.check_prompts = true;
  return r;
}

std::string file(const std::filesystem::path& p) { return util::read_file(p); }

std::vector<Json> events_of(const RunStore& store, const std::string& type) {
  std::vector<Json> out;
  for (const auto& e : store.events())
    if (e.get_string("type") == type) out.push_back(e);
  return out;
}

}  // namespace

TEST_CASE("replay: a run folder reproduced with its settings gives the same files, asking and measuring nothing") {
  auto src = test::scratch_dir("replay_exact_src");
  auto dst = test::scratch_dir("replay_exact_dst");
  std::filesystem::remove_all(dst);
  record(src, config(6));
  Fixture f;
  test::ScriptedLlm llm({});  // throws if asked
  RunStore store = RunStore::create(dst, Json::object());
  Session s(f.task, f.evaluator, llm, f.wm, store, config(6));
  s.follow(from_run(src));
  Chooser chooser;
  CHECK(s.run(chooser) == StopReason::max_rounds);
  CHECK(f.evaluator.evaluations == 0);
  CHECK(s.recording_answers_used() == 6);
  CHECK(s.recording_evaluations_used() == 6);
  CHECK(s.divergence().is_null());
  for (const char* name : {"attempts.jsonl", "transcript.jsonl", "best.json"})
    CHECK_MESSAGE(file(dst / name) == file(src / name), name, " differs");
  auto started = events_of(store, "replay_started");
  REQUIRE(started.size() == 1);
  CHECK(started[0].get_string("evaluations") == "recorded");
}

TEST_CASE("replay: another setting stops where the search asks for another kind, naming the decision") {
  auto src = test::scratch_dir("replay_kind_src");
  auto dst = test::scratch_dir("replay_kind_dst");
  std::filesystem::remove_all(dst);
  record(src, config(6, 2));
  Fixture f;
  test::ScriptedLlm llm({});
  RunStore store = RunStore::create(dst, Json::object());
  // Threshold 4 ms: round 1's 3.0 ms is now fast, so call 2 asks improve (debug recorded).
  Session s(f.task, f.evaluator, llm, f.wm, store, config(6, 4));
  s.follow(from_run(src));
  Chooser chooser;
  CHECK(s.run(chooser) == StopReason::replay_diverged);
  CHECK(s.rounds_used() == 1);
  const Json& d = s.divergence();
  CHECK(d.get_string("what") == "kind");
  CHECK(d.get_int("after_round") == 1);
  CHECK(d.get_int("llm_call") == 1);
  CHECK(d.get_string("asked") == "improve");
  CHECK(d.get_string("recorded") == "debug");
  CHECK(d.get_bool("stopped"));
  CHECK(d["decision"].get_int("index") == 0);
  CHECK(d["decision"]["now"].get_string("decision") == "fast");
  CHECK(d["decision"]["recorded"].get_string("decision") == "slow");
  std::string m = d.get_string("message");
  CHECK(m.find("After round 1, at LLM call 2") != std::string::npos);
  CHECK(m.find("round 1 took 3.00 ms against the threshold of 4 ms") != std::string::npos);
  CHECK(m.find("round 1 took 3.00 ms against the threshold of 2 ms") != std::string::npos);
  // The new folder holds what was reproduced, and an event that says why it stopped.
  CHECK(store.attempts().size() == 1);
  CHECK(store.transcript().size() == 1);
  REQUIRE(events_of(store, "replay_diverged").size() == 1);
  CHECK(events_of(store, "replay_diverged")[0].get_string("message") == m);
}

TEST_CASE("replay: a prompt that differs is a divergence, unless prompt changes are allowed") {
  auto src = test::scratch_dir("replay_prompt_src");
  record(src, config(4));
  SearchConfig changed = config(4);
  changed.debug_rounds_label = 9;
  {
    auto dst = test::scratch_dir("replay_prompt_dst");
    std::filesystem::remove_all(dst);
    Fixture f;
    test::ScriptedLlm llm({});
    RunStore store = RunStore::create(dst, Json::object());
    Session s(f.task, f.evaluator, llm, f.wm, store, changed);
    s.follow(from_run(src));
    Chooser chooser;
    CHECK(s.run(chooser) == StopReason::replay_diverged);
    CHECK(s.rounds_used() == 0);
    CHECK(s.divergence().get_string("what") == "prompt");
    CHECK(s.divergence().get_string("detail") == "line 3:\n  recorded: label 5\n  now:      label 9");
  }
  auto dst = test::scratch_dir("replay_prompt_allowed");
  std::filesystem::remove_all(dst);
  Fixture f;
  test::ScriptedLlm llm({});
  RunStore store = RunStore::create(dst, Json::object());
  Session s(f.task, f.evaluator, llm, f.wm, store, changed);
  Recording r = from_run(src);
  r.check_prompts = false;
  s.follow(r);
  Chooser chooser;
  CHECK(s.run(chooser) == StopReason::max_rounds);
  CHECK(f.evaluator.evaluations == 0);
  CHECK(events_of(store, "replay_prompt_changed").size() == 1);  // noted once
  CHECK(file(dst / "attempts.jsonl") == file(src / "attempts.jsonl"));
}

TEST_CASE("replay: a candidate the recording did not evaluate there is a divergence") {
  auto src = test::scratch_dir("replay_eval_src");
  auto dst = test::scratch_dir("replay_eval_dst");
  std::filesystem::remove_all(dst);
  record(src, config(4));
  SearchConfig changed = config(4);
  changed.seed = 7;  // the same answers make other candidates
  Fixture f;
  test::ScriptedLlm llm({});
  RunStore store = RunStore::create(dst, Json::object());
  Session s(f.task, f.evaluator, llm, f.wm, store, changed);
  s.follow(from_run(src));
  Chooser chooser;
  CHECK(s.run(chooser) == StopReason::replay_diverged);
  CHECK(s.divergence().get_string("what") == "evaluation");
  CHECK(s.divergence().get_int("attempt") == 0);
  CHECK(s.divergence().get_string("recorded") == RunStore::open_read_only(src).attempts()[0].solution.id);
  CHECK(store.attempts().empty());
  CHECK(f.evaluator.evaluations == 0);
}

TEST_CASE("replay: a partial recording is reproduced up to where it stops, and no further") {
  auto src = test::scratch_dir("replay_partial_src");
  auto dst = test::scratch_dir("replay_partial_dst");
  std::filesystem::remove_all(dst);
  {
    // Stopped after round 3 (Ctrl-C): a partial run folder.
    Fixture f;
    test::ScriptedLlm llm(script());
    RunStore store = RunStore::create(src, Json::object());
    Session s(f.task, f.evaluator, llm, f.wm, store, config(6), [](const RoundReport& r) { return r.round < 3; });
    Chooser chooser;
    REQUIRE(s.run(chooser) == StopReason::cancelled);
  }
  Fixture f;
  test::ScriptedLlm llm({});
  RunStore store = RunStore::create(dst, Json::object());
  Session s(f.task, f.evaluator, llm, f.wm, store, config(6));
  s.follow(from_run(src));
  Chooser chooser;
  CHECK(s.run(chooser) == StopReason::recording_ended);
  CHECK(s.rounds_used() == 3);
  CHECK(s.divergence().is_null());
  for (const char* name : {"attempts.jsonl", "transcript.jsonl", "best.json"})
    CHECK_MESSAGE(file(dst / name) == file(src / name), name, " differs");
  // The same strategy events (no more, no fewer).
  auto strategy_events = [](const RunStore& st) {
    std::vector<Json> out;
    for (auto e : st.events())
      if (e.contains("journal_seq")) {
        e.erase("time");
        e.erase("seq");
        out.push_back(e);
      }
    return out;
  };
  CHECK(strategy_events(store) == strategy_events(RunStore::open_read_only(src)));
  CHECK(events_of(store, "replay_recording_ended").size() == 1);
}

TEST_CASE("replay: live mode goes on with the model and the evaluator where the recording is left") {
  auto src = test::scratch_dir("replay_live_src");
  auto dst = test::scratch_dir("replay_live_dst");
  std::filesystem::remove_all(dst);
  record(src, config(6, 2));
  Fixture f;
  test::ScriptedLlm llm({test::answer("passed 0.5", "live1"), test::answer("passed 0.7", "live2"),
                         test::answer("passed 0.9", "live3")});
  RunStore store = RunStore::create(dst, Json::object());
  // Threshold 1 ms: round 2's 1.5 ms is now slow, so call 3 asks debug (improve recorded).
  Session s(f.task, f.evaluator, llm, f.wm, store, config(5, 1));
  s.follow(from_run(src, Recording::Mode::live));
  Chooser chooser;
  CHECK(s.run(chooser) == StopReason::max_rounds);
  const Json& d = s.divergence();
  CHECK(d.get_string("what") == "kind");
  CHECK(d.get_int("after_round") == 2);
  CHECK_FALSE(d.get_bool("stopped"));
  CHECK(s.recording_evaluations_used() == 2);
  CHECK(f.evaluator.evaluations == 3);  // rounds 3-5, measured live
  CHECK(llm.used() == 3);
  CHECK(llm.requests[0].kind == PromptKind::debug);
  CHECK(events_of(store, "replay_went_live").size() == 1);
  CHECK(store.attempts().size() == 5);
}

TEST_CASE("replay: skip mode answers each request with the next recorded answer of its kind") {
  auto dir = test::scratch_dir("replay_skip");
  Fixture f;
  test::ScriptedLlm llm({});
  RunStore store = RunStore::create(dir, Json::object());
  // A transcript: generate, improve, debug, improve. The chooser asks generate,
  // then (3.0 ms is slow at 2 ms) debug: the improve answer is skipped.
  Recording r;
  r.source = "handwritten.jsonl";
  auto entry = [](const char* kind, const std::string& text) {
    return Json::obj({{"kind", kind}, {"response", Json::obj({{"ok", true}, {"text", text}})}});
  };
  r.answers = {entry("generate", test::answer("passed 3.0", "g")), entry("improve", test::answer("passed 1.0", "i1")),
               entry("debug", test::answer("passed 1.5", "d")), entry("improve", test::answer("passed 1.2", "i2"))};
  r.mode = Recording::Mode::skip;
  Session s(f.task, f.evaluator, llm, f.wm, store, config(6));
  s.follow(r);
  Chooser chooser;
  // generate (3.0 ms: slow) -> debug, skipping answer 2 (improve) -> 1.5 ms: fast ->
  // improve, answer 4 -> 1.2 ms: fast -> improve: none left, the run stops.
  CHECK(s.run(chooser) == StopReason::recording_ended);
  CHECK(s.rounds_used() == 3);
  CHECK(f.evaluator.evaluations == 3);  // a transcript holds no evaluations
  auto skipped = events_of(store, "replay_skipped");
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0].get_string("asked") == "debug");
  CHECK(skipped[0].get_string("recorded") == "improve");
  REQUIRE(skipped[0]["skipped"].size() == 1);
  CHECK(skipped[0]["skipped"][0].get_int("answer") == 2);
  CHECK_FALSE(s.divergence().get_bool("stopped"));
  std::vector<std::string> kinds;
  for (const auto& e : store.transcript()) kinds.push_back(e.get_string("kind"));
  CHECK(kinds == std::vector<std::string>{"generate", "debug", "improve"});
  CHECK(events_of(store, "replay_recording_ended").size() == 1);
}

TEST_CASE("replay: a transcript measured again on another machine stops where a timing flips a decision") {
  auto src = test::scratch_dir("replay_remeasured_src");
  auto dst = test::scratch_dir("replay_remeasured_dst");
  std::filesystem::remove_all(dst);
  record(src, config(6, 2));
  SpecTask task{test::tiny_task_spec()};
  ScaledEvaluator slower(1.5);  // round 2's 1.5 ms becomes 2.25 ms: slow
  NoWorldModel wm;
  test::ScriptedLlm llm({});
  RunStore store = RunStore::create(dst, Json::object());
  Recording r = from_run(src);
  r.has_evaluations = false;  // answers only, as --llm replay: reads them
  r.attempts.clear();
  r.check_prompts = false;
  Session s(task, slower, llm, wm, store, config(6, 2));
  s.follow(r);
  Chooser chooser;
  CHECK(s.run(chooser) == StopReason::replay_diverged);
  CHECK(slower.evaluations == 2);
  const Json& d = s.divergence();
  CHECK(d.get_string("evaluations") == "measured_again");
  CHECK(d.get_string("asked") == "debug");
  CHECK(d.get_string("recorded") == "improve");
  std::string m = d.get_string("message");
  CHECK(m.find("round 2 took 2.25 ms against the threshold of 2 ms") != std::string::npos);
  CHECK(m.find("round 2 took 1.50 ms against the threshold of 2 ms") != std::string::npos);
  CHECK(m.find("measured again") != std::string::npos);
  auto started = events_of(store, "replay_started");
  REQUIRE(started.size() == 1);
  CHECK(started[0].get_string("evaluations") == "measured_again");
}

TEST_CASE("replay: a reproduction resumed with a larger budget follows its recording in step with its journal") {
  auto src = test::scratch_dir("replay_resume_src");
  auto dst = test::scratch_dir("replay_resume_dst");
  std::filesystem::remove_all(dst);
  record(src, config(6));
  {
    Fixture f;
    test::ScriptedLlm llm({});
    RunStore store = RunStore::create(dst, Json::object());
    Session s(f.task, f.evaluator, llm, f.wm, store, config(3));
    s.follow(from_run(src));
    Chooser chooser;
    REQUIRE(s.run(chooser) == StopReason::max_rounds);
  }
  Fixture f;
  test::ScriptedLlm llm({});
  RunStore store = RunStore::open(dst);
  Session s(f.task, f.evaluator, llm, f.wm, store, config(6));
  s.follow(from_run(src));
  Chooser chooser;
  CHECK(s.run(chooser) == StopReason::max_rounds);
  CHECK(s.replayed_evaluations() == 3);
  CHECK(s.recording_evaluations_used() == 3);
  CHECK(f.evaluator.evaluations == 0);
  for (const char* name : {"attempts.jsonl", "transcript.jsonl", "best.json"})
    CHECK_MESSAGE(file(dst / name) == file(src / name), name, " differs");
}

TEST_CASE("replay: a recording with a gap in its attempts is refused") {
  auto src = test::scratch_dir("replay_gap_src");
  record(src, config(3));
  Recording r = from_run(src);
  r.attempts.erase(r.attempts.begin() + 1);
  Fixture f;
  test::ScriptedLlm llm({});
  auto dst = test::scratch_dir("replay_gap_dst");
  std::filesystem::remove_all(dst);
  RunStore store = RunStore::create(dst, Json::object());
  Session s(f.task, f.evaluator, llm, f.wm, store, config(3));
  CHECK_THROWS_WITH(s.follow(r), doctest::Contains("missing attempt 1"));
}
