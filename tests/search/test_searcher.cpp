// A host's Searcher (ksearch/sys/searcher.hpp) run by run_search through
// make_searcher_strategy, on the host fixture task scale3: one that proposes
// ready candidates (a sweep, as a tuner would), one that proposes prompts
// (read as candidates, failed rounds handed back); each stopped on its
// round budget and resumed to the journal of an uninterrupted run.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <random>

#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/run_store.hpp"
#include "ksearch/search.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "ksearch/sys/llm_policy.hpp"
#include "ksearch/sys/search_strategy.hpp"
#include "ksearch/sys/searcher.hpp"
#include "support/test_util.hpp"

using namespace ks;

namespace {

// scale3 as variant `v`: the comment makes each variant's id its own; a
// negative variant computes 2 * x, which the task's check refuses.
std::string kernel_source(int v) {
  return fmt::format(R"(#include <cstdint>
// variant {}
void scale3(const float* x, float* y, std::int64_t n) {{
  for (std::int64_t i = 0; i < n; ++i) y[i] = {}f * x[i];
}}
)",
                     v, v < 0 ? "2.0" : "3.0");
}

std::string answer_of(int v) {
  return fmt::format("```cpp kernel.cpp\n{}```\n```json launch_plan\n{{\"calls\": [{{\"fn\": \"scale3\", \"args\": "
                     "[\"x\", \"y\", \"N\"]}}]}}\n```\n",
                     kernel_source(v));
}

// The host backend's verdicts, with timings made a function of the code
// ("variant V" runs in V ms, the reference in 10 ms): the runs of one test
// then journal the same numbers, so their journals compare byte for byte.
class SteadyEvaluator final : public Evaluator {
 public:
  SteadyEvaluator() {
    EvaluatorConfig c;
    c.options.max_time_per_workload_s = 0.2;
    inner_ = make_evaluator(c);
  }
  EvalResult evaluate(const Task& t, const Solution& s) override {
    ++calls;
    EvalResult r = inner_->evaluate(t, s);
    const std::string& code = s.sources.at(0).content;
    const auto at = code.find("// variant ");
    const double ms = at == std::string::npos ? 10.0 : std::abs(std::stoi(code.substr(at + 11)));
    for (auto& w : r.workloads) {
      if (w.timing.count == 0) continue;
      w.timing = TimingStats{ms, ms, ms, ms, 0, 0, 1};
      w.reference_ms = 10.0;
    }
    r.compute_summary();
    return r;
  }
  DeviceInfo device() const override { return inner_->device(); }
  EvalOptions& options() override { return inner_->options(); }
  std::atomic<int> calls{0};

 private:
  std::unique_ptr<Evaluator> inner_;
};

// Answers by the prompt: "variant V" gets that kernel, "words" an answer
// without code, "outage" a failed request.
class PromptModel final : public LlmPolicy {
 public:
  LlmResponse complete(const LlmRequest& req) override {
    ++calls;
    LlmResponse r;
    r.ok = true;
    if (req.prompt == "outage") {
      r.ok = false;
      r.error = "HTTP 503";
    } else if (req.prompt == "words") {
      r.text = "no code here";
    } else {
      r.text = answer_of(std::stoi(req.prompt.substr(req.prompt.find(' ') + 1)));
    }
    return r;
  }
  std::string describe() const override { return "host:prompt-model"; }
  std::atomic<int> calls{0};
};

// Tries the variants of a list, two at a time, in an order drawn from the
// run's rng; done when the list is.
class Sweep final : public Searcher {
 public:
  explicit Sweep(std::vector<int> variants) : variants_(std::move(variants)) {}
  std::string name() const override { return "sweep"; }
  void initialize(SearcherView& view) override {
    order_ = variants_;
    for (std::size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[view.rng()() % i]);
    next_ = 0;
    seen_.clear();
    task_ = view.task().name();
  }
  SearcherStep next(const std::vector<ProposalResult>& last) override {
    for (const auto& r : last) seen_.push_back(r);
    SearcherStep step;
    for (int k = 0; k < 2 && next_ < order_.size(); ++k, ++next_) {
      Solution s;
      s.language = Language::cpp;
      s.name = fmt::format("sweep-{}", order_[next_]);
      s.sources = {{"kernel.cpp", kernel_source(order_[next_])}};
      s.launch_plan = LaunchPlan::from_json(Json::parse(R"({"calls": [{"fn": "scale3", "args": ["x", "y", "N"]}]})"));
      step.proposals.push_back(Proposal::candidate(std::move(s), fmt::format("variant {}", order_[next_])));
    }
    if (!step.proposals.empty())
      step.decision = Json::obj({{"decision", "sweep"}, {"next", "variants"}, {"why", fmt::format("{} of {} tried on {}", next_, order_.size(), task_)}});
    step.state = Json::obj({{"strategy", "sweep"}, {"tried", static_cast<std::int64_t>(next_)}});
    return step;
  }
  std::vector<int> variants_, order_;
  std::size_t next_ = 0;
  std::string task_;
  std::vector<ProposalResult> seen_;  // every result handed back, in order
};

// Asks the prompts of a script, a step at a time; each improves the best so far.
class Prompter final : public Searcher {
 public:
  explicit Prompter(std::vector<std::vector<std::string>> script) : script_(std::move(script)) {}
  std::string name() const override { return "prompter"; }
  void initialize(SearcherView& view) override {
    view_ = &view;
    step_ = 0;
    handed.clear();
  }
  SearcherStep next(const std::vector<ProposalResult>& last) override {
    if (step_ > 0) handed.push_back(last);
    SearcherStep step;
    if (step_ >= script_.size()) return step;
    const auto& best = view_->best();
    for (const auto& prompt : script_[step_]) {
      LlmRequest req;
      req.kind = best ? PromptKind::improve : PromptKind::generate;
      req.prompt = prompt;
      step.proposals.push_back(
          Proposal::prompt(req, fmt::format("step {}: {}", step_ + 1, prompt), best ? best->solution.id : ""));
    }
    step.decision = Json::obj({{"decision", "prompt"}, {"next", to_string(step.proposals[0].request->kind)},
                               {"step", static_cast<std::int64_t>(step_ + 1)}, {"why", "the script says so"}});
    ++step_;
    return step;
  }
  std::vector<std::vector<std::string>> script_;
  SearcherView* view_ = nullptr;
  std::size_t step_ = 0;
  std::vector<std::vector<ProposalResult>> handed;  // what each step after the first was handed
};

SearchOptions options(const std::filesystem::path& dir, std::shared_ptr<Searcher> searcher,
                      std::shared_ptr<LlmPolicy> model, std::shared_ptr<Evaluator> evaluator, int rounds) {
  SearchOptions o;
  o.task = (test::source_dir() / "tests/fixtures/tasks/scale3").string();
  o.config.language = Language::cpp;
  o.config.max_rounds = rounds;
  o.config.seed = 7;
  o.llm.kind = LlmSource::custom;
  o.llm.custom = std::move(model);
  o.custom_evaluator = std::move(evaluator);
  o.custom_strategy = make_searcher_strategy(std::move(searcher));
  o.weak_check = false;
  o.run_dir = dir;
  return o;
}

// What a run journalled, without what differs between two runs of it (the
// clock, the event numbers that count the run-level events too).
struct Journal {
  std::vector<std::string> attempts, transcript, events;
  std::string state;
};

Journal journal_of(const std::filesystem::path& dir) {
  RunStore store = RunStore::open_read_only(dir);
  Journal j;
  for (const auto& a : store.attempts())
    j.attempts.push_back(fmt::format("{} {} {} {} {} {:.3f} {}", a.round, a.action, a.solution.id, a.solution.name,
                                     a.solution.parent_id, a.eval.latency_ms, to_string(a.eval.status)));
  for (Json t : store.transcript()) {
    t.erase("time");
    j.transcript.push_back(t.dump());
  }
  for (Json e : store.events()) {
    if (!e.contains("journal_seq")) continue;  // run-level: not replayed
    e.erase("seq");
    e.erase("time");
    j.events.push_back(e.dump());
  }
  if (auto s = store.state()) j.state = s->dump();
  return j;
}

void check_same(const Journal& a, const Journal& b) {
  CHECK(a.attempts == b.attempts);
  CHECK(a.transcript == b.transcript);
  CHECK(a.events == b.events);
  CHECK(a.state == b.state);
}

int count_type(const std::filesystem::path& dir, const std::string& type) {
  int n = 0;
  for (const auto& e : RunStore::open_read_only(dir).events()) n += e.get_string("type") == type;
  return n;
}

}  // namespace

TEST_CASE("a Searcher of ready candidates runs in run_search, and a stopped run resumes to the same journal") {
  const std::vector<int> variants = {5, 3, -1, 4, 2};
  auto model = std::make_shared<PromptModel>();
  auto evaluator = std::make_shared<SteadyEvaluator>();
  auto sweep = std::make_shared<Sweep>(variants);

  const auto whole = test::scratch_dir("searcher_sweep_whole") / "run";
  SearchOutcome out = run_search(options(whole, sweep, model, evaluator, 10));
  CHECK(out.stop_reason == StopReason::strategy_done);  // the sweep ran out before the budget
  CHECK(out.rounds == 5);
  CHECK(model->calls == 0);
  CHECK(evaluator->calls == 5);
  REQUIRE(out.best.has_value());
  CHECK(out.best->solution.name == "sweep-2");  // 2 ms, the fastest that passes
  CHECK(out.best->eval.latency_ms == doctest::Approx(2.0));

  // The order is the run's seeded rng's: a Fisher-Yates on mt19937_64(seed).
  std::vector<int> expected = variants;
  std::mt19937_64 rng(7);
  for (std::size_t i = expected.size(); i > 1; --i) std::swap(expected[i - 1], expected[rng() % i]);
  RunStore store = RunStore::open_read_only(whole);
  std::vector<AttemptRecord> attempts = store.attempts();
  REQUIRE(attempts.size() == 5);
  for (std::size_t i = 0; i < attempts.size(); ++i) {
    CHECK(attempts[i].round == static_cast<int>(i) + 1);
    CHECK(attempts[i].action == fmt::format("variant {}", expected[i]));
    CHECK(attempts[i].solution.name == fmt::format("sweep-{}", expected[i]));  // a ready candidate keeps its name
    CHECK((attempts[i].eval.status == EvalStatus::passed) == (expected[i] > 0));
  }
  // What the sweep was handed back: every candidate with its id and result, in order.
  REQUIRE(sweep->seen_.size() == 5);
  for (std::size_t i = 0; i < 5; ++i) {
    REQUIRE(sweep->seen_[i].evaluated());
    CHECK(sweep->seen_[i].candidate->id == attempts[i].solution.id);
    CHECK(sweep->seen_[i].eval.status == attempts[i].eval.status);
    CHECK(sweep->seen_[i].proposal.action == attempts[i].action);
    CHECK_FALSE(sweep->seen_[i].answer.has_value());
  }
  CHECK(count_type(whole, "decision") == 3);
  CHECK(count_type(whole, "search_exhausted") == 1);
  Json m = store.manifest();
  CHECK(m["config"].get_string("strategy") == "sweep");
  CHECK(m.get_bool("custom_strategy"));
  REQUIRE(store.state().has_value());
  CHECK(store.state()->get_int("tried") == 5);

  // Three rounds: the second step's two proposals are cut to the one round left.
  const auto cut = test::scratch_dir("searcher_sweep_cut") / "run";
  SearchOutcome stopped = run_search(options(cut, sweep, model, evaluator, 3));
  CHECK(stopped.stop_reason == StopReason::max_rounds);
  CHECK(stopped.rounds == 3);
  CHECK(RunStore::open_read_only(cut).attempts().size() == 3);
  CHECK(evaluator->calls == 8);
  CHECK(count_type(cut, "search_exhausted") == 0);

  ResumeOptions r;
  r.custom_llm = model;
  r.custom_evaluator = evaluator;
  r.max_rounds = 10;
  r.custom_strategy = make_searcher_strategy(sweep);
  SearchOutcome resumed = resume_search(cut, r);
  CHECK(resumed.stop_reason == StopReason::strategy_done);
  CHECK(resumed.rounds == 5);
  CHECK(resumed.replayed_rounds == 3);
  CHECK(evaluator->calls == 10);  // the first three came from the journal
  check_same(journal_of(cut), journal_of(whole));
}

TEST_CASE("a Searcher of prompts: answers become candidates, failed rounds are handed back, a resume repeats it") {
  const std::vector<std::vector<std::string>> script = {
      {"variant 4", "words"}, {"outage", "variant 2"}, {"variant -1"}, {"variant 3", "variant 1"}};
  auto model = std::make_shared<PromptModel>();
  auto evaluator = std::make_shared<SteadyEvaluator>();
  auto prompter = std::make_shared<Prompter>(script);

  const auto whole = test::scratch_dir("searcher_prompts_whole") / "run";
  SearchOutcome out = run_search(options(whole, prompter, model, evaluator, 20));
  CHECK(out.stop_reason == StopReason::strategy_done);
  CHECK(out.rounds == 7);  // one per prompt, the failed ones too
  CHECK(model->calls == 7);
  REQUIRE(out.best.has_value());
  CHECK(out.best->eval.latency_ms == doctest::Approx(1.0));

  REQUIRE(prompter->handed.size() == 4);
  const auto& s1 = prompter->handed[0];
  REQUIRE(s1.size() == 2);
  REQUIRE(s1[0].evaluated());
  CHECK(s1[0].eval.passed());
  CHECK(s1[0].candidate->parent_id.empty());  // nothing had passed when it was asked for
  CHECK(s1[0].candidate->name == "r1-prompter");
  REQUIRE(s1[0].answer.has_value());
  CHECK(s1[0].answer->text == answer_of(4));
  CHECK(s1[0].proposal.request->kind == PromptKind::generate);
  CHECK_FALSE(s1[1].evaluated());  // an answer without code: a failed round, not an outage
  CHECK_FALSE(s1[1].outage());
  CHECK(s1[1].eval.status == EvalStatus::generation_failed);
  CHECK(s1[1].answer->text == "no code here");
  const std::string first_id = s1[0].candidate->id;

  const auto& s2 = prompter->handed[1];
  REQUIRE(s2.size() == 2);
  CHECK(s2[0].outage());
  CHECK(s2[0].eval.status == EvalStatus::generation_failed);
  CHECK(s2[0].eval.log.find("HTTP 503") != std::string::npos);
  REQUIRE(s2[1].evaluated());
  CHECK(s2[1].candidate->parent_id == first_id);  // it improves the best so far
  CHECK(s2[1].proposal.request->kind == PromptKind::improve);
  CHECK(s2[1].candidate->name == "r4-prompter");  // three rounds were used before it was read
  CHECK(prompter->handed[2][0].eval.status == EvalStatus::incorrect);

  RunStore store = RunStore::open_read_only(whole);
  std::vector<AttemptRecord> attempts = store.attempts();
  REQUIRE(attempts.size() == 7);
  CHECK(attempts[0].action == "step 1: words");  // failed rounds are recorded as the answers are read
  CHECK(attempts[0].raw_answer == "no code here");
  CHECK(attempts[1].action == "step 1: variant 4");
  CHECK(count_type(whole, "decision") == 4);
  CHECK(count_type(whole, "search_exhausted") == 1);

  // Stopped after four rounds (the second step's second answer), then resumed.
  const auto cut = test::scratch_dir("searcher_prompts_cut") / "run";
  SearchOutcome stopped = run_search(options(cut, prompter, model, evaluator, 4));
  CHECK(stopped.stop_reason == StopReason::max_rounds);
  CHECK(model->calls == 11);
  ResumeOptions r;
  r.custom_llm = model;
  r.custom_evaluator = evaluator;
  r.max_rounds = 20;
  r.custom_strategy = make_searcher_strategy(prompter);
  SearchOutcome resumed = resume_search(cut, r);
  CHECK(resumed.stop_reason == StopReason::strategy_done);
  CHECK(resumed.rounds == 7);
  CHECK(model->calls == 14);  // only the last three prompts were asked again
  check_same(journal_of(cut), journal_of(whole));
  CHECK(prompter->handed.size() == 4);  // initialize() started it afresh
}

TEST_CASE("a proposal must hold a solution or a request, not neither or both") {
  class Empty final : public Searcher {
   public:
    std::string name() const override { return "empty"; }
    SearcherStep next(const std::vector<ProposalResult>&) override {
      SearcherStep s;
      s.proposals.push_back(Proposal{});
      s.proposals.back().action = "nothing";
      return s;
    }
  };
  auto model = std::make_shared<PromptModel>();
  auto evaluator = std::make_shared<SteadyEvaluator>();
  const auto dir = test::scratch_dir("searcher_bad_proposal") / "run";
  try {
    run_search(options(dir, std::make_shared<Empty>(), model, evaluator, 3));
    FAIL("an empty proposal ran");
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    CHECK(std::string(e.what()).find("proposal 1 (\"nothing\") must hold either a solution or a request") !=
          std::string::npos);
  }
  CHECK(model->calls == 0);
  CHECK(evaluator->calls == 0);
  CHECK_THROWS_AS(make_searcher_strategy(nullptr), Error);
}
