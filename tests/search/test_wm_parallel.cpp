// The world-model strategy with parallel cycles: N actions worked on at
// once, their requests and candidates sent together, and the run as
// deterministic as a sequential one (the same journal after a stop and a
// resume as without).
#include <doctest/doctest.h>

#include <regex>
#include <set>

#include "search/session.hpp"
#include "search/strategies.hpp"
#include "search/fakes.hpp"
#include "support/test_util.hpp"
#include "ksearch/sys/llm_policy.hpp"
#include "ksearch/sys/world_model.hpp"

using namespace ks;
using ks::core::Session;

namespace {

std::string node_json(const std::string& id, const std::string& parent, const std::string& title, double score,
                      const std::string& notes = "SELF_CHECK: a distinct approach") {
  return fmt::format(
      R"({{"node_id": "{}", "parent_id": "{}", "node_type": "decision", "decision": "approach", "choice": "{}",
          "overall_rating_0_to_10": 6, "confidence_0_to_1": 0.5, "notes": "{}",
          "action": {{"title": "{}", "description": "{}", "difficulty_1_to_5": 2, "score_0_to_1": {},
                      "expected_vs_baseline_factor": 1.5, "rationale": "fewer passes"}}}})",
      id, parent, title, notes, title, title, score);
}

std::string without_search_state(std::string p) {
  for (const char* tag : {"## Search state\n", "[SEARCH_STATE]\n"}) {
    const std::size_t at = p.find(tag);
    if (at == std::string::npos) continue;
    const std::size_t end = p.find("\n\n", at);
    p.erase(at, end == std::string::npos ? std::string::npos : end - at);
  }
  return p;
}

// Answers by prompt kind, like a model that follows the rules: a tree of four
// actions, a proposal under the root, a refinement under each solved node, a
// lower score for a failed one; kernels from a fixed schedule. The answer
// rests on the prompt alone (as a resumed run needs: a fresh double must
// answer the prompts after the journal as the first one would have).
// Records the size of every batch it is sent.
class KindLlm : public LlmPolicy {
 public:
  LlmResponse complete(const LlmRequest& req) override {
    kinds.push_back(req.kind);
    LlmResponse r;
    r.ok = true;
    r.usage.cost_usd = 0.01;
    std::smatch m;
    // The search state (the round budget and what is left of it) is left
    // out: runs with other budgets must be answered alike for their
    // journals to be compared.
    const std::size_t h = std::hash<std::string>{}(without_search_state(req.prompt));
    switch (req.kind) {
      case PromptKind::wm_init:
        r.text = R"({"kernel_summary": "copy", "open_questions": ["a?", "b?", "c?"], "decision_tree": {"root_id": "root",
                    "active_leaf_id": "root", "nodes": [{"node_id": "root", "parent_id": null, "node_type": "root",
                    "decision": null, "choice": null, "notes": "1 2 3 4 5 6 7"}, )" +
                 node_json("a1", "root", "One", 0.9) + ", " + node_json("a2", "root", "Two", 0.8) + ", " +
                 node_json("a3", "root", "Three", 0.7) +
                 (init_actions > 3 ? ", " + node_json("a4", "root", "Four", 0.6) : "") + "]}}";
        break;
      case PromptKind::wm_propose:
        ++proposals;
        // Under the root (free at once), or under a1 (not executable until a1 has a kernel).
        r.text = fmt::format(R"({{"ops": [{{"op": "insert_node", "parent_id": "{}", "node": )",
                             propose_under) +
                 node_json(fmt::format("p{:x}", h % 0xffffff), propose_under, fmt::format("Proposal {:x}", h % 0xffffff),
                           0.65) +
                 "}]}";
        break;
      case PromptKind::wm_refine: {
        REQUIRE(std::regex_search(req.prompt, m, std::regex("The action \"([^\"]+)\" just produced")));
        const std::string id = m[1];
        r.text = R"({"ops": [{"op": "update_node", "node_id": ")" + id +
                 R"(", "patch": {"notes": "CURRENT: a loop\nFOLLOW_THROUGH: aligned_with_intent=yes\nUPDATE_BELIEF: ok",
                    "action": {"score_0_to_1": 0.3}}}, {"op": "insert_node", "parent_id": ")" + id +
                 R"(", "node": )" + node_json(id + "_next", id, "Refine " + id, 0.85, "SELF_CHECK: refines it") +
                 "}]}";
        break;
      }
      case PromptKind::wm_too_hard: {
        REQUIRE(std::regex_search(req.prompt, m, std::regex("The action \"([^\"]+)\" produced no passing kernel")));
        r.text = R"({"ops": [{"op": "update_node", "node_id": ")" + std::string(m[1]) +
                 R"(", "patch": {"action": {"score_0_to_1": 0.05}}}]})";
        break;
      }
      default: {
        static const char* kSchedule[] = {"passed 5.0", "passed 4.0", "compile_error", "passed 6.0",
                                          "passed 3.0", "runtime_error", "passed 4.5", "passed 2.0"};
        r.text = test::answer(kSchedule[h % 8], fmt::format("answer {:x}", h));
        ++code_answers;
      }
    }
    return r;
  }
  std::vector<LlmResponse> complete_batch(const std::vector<LlmRequest>& requests) override {
    batch_sizes.push_back(requests.size());
    return LlmPolicy::complete_batch(requests);
  }
  std::string describe() const override { return "kinds"; }

  int init_actions = 4;  // 3 or 4
  std::string propose_under = "root";
  std::vector<PromptKind> kinds;
  std::vector<std::size_t> batch_sizes;
  int proposals = 0;
  int code_answers = 0;
};

class BatchEvaluator : public test::MarkerEvaluator {
 public:
  std::vector<EvalResult> evaluate_batch(const Task& task, const std::vector<Solution>& s) override {
    batch_sizes.push_back(s.size());
    return test::MarkerEvaluator::evaluate_batch(task, s);
  }
  std::vector<std::size_t> batch_sizes;
};

SearchConfig wm_config(int rounds, int parallel) {
  SearchConfig c;
  c.strategy = StrategyKind::world_model;
  c.language = Language::cpp;
  c.max_rounds = rounds;
  c.parallel = parallel;
  c.world_model.stagnation_window = 2;
  return c;
}

struct Run {
  std::vector<Json> events;    // the deterministic sequence, without times
  std::vector<std::string> attempts;
  Json tree;
  std::vector<std::size_t> llm_batches, eval_batches;
  std::string stop;
};

std::vector<Json> journal_events(const RunStore& store) {
  std::vector<Json> out;
  for (Json e : store.events()) {
    if (!e.contains("journal_seq")) continue;
    e.erase("time");
    e.erase("seq");  // counts run-level events too (a resume adds its run_started)
    out.push_back(std::move(e));
  }
  return out;
}

// Runs (or resumes, when the folder exists) a world-model search.
Run run_wm(const std::filesystem::path& dir, int rounds, int parallel, ProgressCallback progress = {},
           KindLlm llm = {}) {
  SpecTask task{test::tiny_task_spec()};
  BatchEvaluator evaluator;
  auto wm = make_tree_world_model();
  RunStore store = std::filesystem::exists(dir / "manifest.json") ? RunStore::open(dir)
                                                                    : RunStore::create(dir, Json::object());
  Session s(task, evaluator, llm, *wm, store, wm_config(rounds, parallel), std::move(progress));
  auto strategy = core::make_world_model_strategy();
  Run r;
  r.stop = to_string(s.run(*strategy));
  r.events = journal_events(store);
  for (const auto& a : store.attempts()) r.attempts.push_back(a.solution.id + " " + a.action);
  r.tree = wm->to_json();
  r.llm_batches = llm.batch_sizes;
  r.eval_batches = evaluator.batch_sizes;
  return r;
}

}  // namespace

TEST_CASE("world model, parallel 2: two cycles at once on different actions, requests and candidates in pairs") {
  Run r = run_wm(test::scratch_dir("wm_parallel_two"), 16, 2);
  CHECK(r.stop == "max_rounds");
  CHECK(r.attempts.size() == 16);
  // Code requests of both cycles went out together, and so did their candidates.
  CHECK(std::count(r.llm_batches.begin(), r.llm_batches.end(), 2u) >= 5);
  CHECK(std::count(r.eval_batches.begin(), r.eval_batches.end(), 2u) >= 4);
  // The first two cycles started before either finished, on the two best actions.
  std::vector<std::string> started;
  bool finished_before_second = false;
  std::set<std::string> open;
  int max_open = 0;
  for (const auto& e : r.events) {
    const std::string type = e["type"].as_string();
    if (type == "cycle_started") {
      started.push_back(e["node_id"].as_string());
      open.insert(e["node_id"].as_string());
      CHECK_MESSAGE(open.size() <= 2, "more than two cycles at once");
      max_open = std::max(max_open, static_cast<int>(open.size()));
    } else if (type == "cycle_finished") {
      if (started.size() < 2) finished_before_second = true;
      open.erase(e["node_id"].as_string());
    }
  }
  REQUIRE(started.size() >= 4);
  CHECK(started[0] == "a1");
  CHECK(started[1] == "a2");
  CHECK_FALSE(finished_before_second);
  CHECK(max_open == 2);
  // Decisions name their slot; a node is never worked on by two cycles at once
  // (checked above through `open`, a set).
  bool slot1 = false;
  for (const auto& e : r.events)
    if (e["type"].as_string() == "decision" && e.contains("slot") && e["slot"].as_int() == 1) slot1 = true;
  CHECK(slot1);
}

TEST_CASE("world model, parallel 1: one request at a time, no batches, no slots in the decisions") {
  Run r = run_wm(test::scratch_dir("wm_parallel_one"), 10, 1);
  CHECK(r.attempts.size() == 10);
  CHECK(r.llm_batches.empty());
  CHECK(r.eval_batches.empty());
  for (const auto& e : r.events) CHECK_FALSE(e.contains("slot"));
}

TEST_CASE("world model, parallel 3: the same run twice is the same run; stopped mid-step and resumed, too") {
  Run a = run_wm(test::scratch_dir("wm_parallel_a"), 20, 3);
  Run b = run_wm(test::scratch_dir("wm_parallel_b"), 20, 3);
  CHECK(a.attempts == b.attempts);
  CHECK(a.events == b.events);
  CHECK(a.tree == b.tree);

  // Stopped by the host after round 7 (inside a step of three), then resumed:
  // the journal replays and the run ends where the uninterrupted one did.
  auto dir = test::scratch_dir("wm_parallel_resumed");
  Run stopped = run_wm(dir, 20, 3, [](const RoundReport& rep) { return rep.round < 7; });
  CHECK(stopped.stop == "cancelled");
  CHECK(stopped.attempts.size() < a.attempts.size());
  Run resumed = run_wm(dir, 20, 3);
  CHECK(resumed.stop == a.stop);
  CHECK(resumed.attempts == a.attempts);
  CHECK(resumed.tree == a.tree);
  REQUIRE(resumed.events.size() == a.events.size());
  for (std::size_t i = 0; i < a.events.size(); ++i) CHECK_MESSAGE(resumed.events[i] == a.events[i], "event ", i);
}

TEST_CASE("world model, parallel 4 on three actions: the free slot asks for a proposal, once until a cycle closes") {
  auto started_before_first_finish = [](const Run& r) {
    std::vector<std::string> ids;
    for (const auto& e : r.events) {
      if (e["type"].as_string() == "cycle_finished") break;
      if (e["type"].as_string() == "cycle_started") ids.push_back(e["node_id"].as_string());
    }
    return ids;
  };
  auto proposals_before_first_finish = [](const Run& r) {
    int n = 0;
    for (const auto& e : r.events) {
      if (e["type"].as_string() == "cycle_finished") break;
      if (e["type"].as_string() == "world_model_edited" && e["kind"].as_string() == "wm_propose") ++n;
    }
    return n;
  };
  KindLlm free_proposals;
  free_proposals.init_actions = 3;
  Run r = run_wm(test::scratch_dir("wm_parallel_four_free"), 12, 4, {}, free_proposals);
  auto ids = started_before_first_finish(r);
  REQUIRE(ids.size() == 4);  // the fourth slot's proposal was free: it runs at once
  CHECK(ids[3].rfind("p", 0) == 0);
  CHECK(proposals_before_first_finish(r) == 1);

  KindLlm never_free = free_proposals;
  never_free.propose_under = "a1";  // a child of an action without a kernel cannot run yet
  Run w = run_wm(test::scratch_dir("wm_parallel_four_waiting"), 12, 4, {}, never_free);
  CHECK(started_before_first_finish(w).size() == 3);  // the fourth slot waits
  CHECK(proposals_before_first_finish(w) == 1);       // and asks once, not at every step
}

TEST_CASE("world model, parallel 3: stopped mid-step and resumed with a lower budget, the journal replays") {
  Run a = run_wm(test::scratch_dir("wm_parallel_lower_a"), 20, 3);
  auto base = test::scratch_dir("wm_parallel_lower");
  auto dir = base / "stopped";
  Run stopped = run_wm(dir, 20, 3, [](const RoundReport& rep) { return rep.round < 7; });
  REQUIRE(stopped.stop == "cancelled");
  const int done = static_cast<int>(stopped.attempts.size());
  for (int n = done; n <= done + 3; ++n) {
    CAPTURE(n);
    const auto copy = base / fmt::format("lower_{}", n);
    std::filesystem::copy(dir, copy, std::filesystem::copy_options::recursive);
    Run lower = run_wm(copy, n, 3);
    CHECK(lower.stop == "max_rounds");
    REQUIRE(lower.attempts.size() == static_cast<std::size_t>(n));
    CHECK(std::equal(lower.attempts.begin(), lower.attempts.end(), a.attempts.begin()));
  }
}
