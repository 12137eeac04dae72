// The world_model strategy with lenient edits (SearchConfig::wm_lenient_edits):
// the repairs reach the world_model_edited events and the run's totals, a
// resumed run counts the same from its replayed events, and the strict default
// rejects the same answers.
#include <doctest/doctest.h>

#include <map>

#include "search/session.hpp"
#include "search/strategies.hpp"
#include "ksearch/error.hpp"
#include "ksearch/sys/llm_policy.hpp"
#include "ksearch/sys/world_model.hpp"
#include "search/fakes.hpp"
#include "support/test_util.hpp"

using namespace ks;
using ks::core::Session;

namespace {

// Answers each kind of request from its own list, in order, repeating the
// list's last answer when it runs out.
class ByKindLlm : public LlmPolicy {
 public:
  explicit ByKindLlm(std::map<PromptKind, std::vector<std::string>> answers) : answers_(std::move(answers)) {}
  LlmResponse complete(const LlmRequest& req) override {
    asked.push_back(req.kind);
    auto it = answers_.find(req.kind);
    if (it == answers_.end() || it->second.empty())
      throw Error(Status::llm, fmt::format("no scripted answer for {}", to_string(req.kind)));
    std::size_t& i = next_[req.kind];
    LlmResponse r;
    r.ok = true;
    r.text = it->second[std::min(i, it->second.size() - 1)];
    ++i;
    return r;
  }
  std::string describe() const override { return "by kind"; }
  std::vector<PromptKind> asked;

 private:
  std::map<PromptKind, std::vector<std::string>> answers_;
  std::map<PromptKind, std::size_t> next_;
};

// Three actions under the root; two repairs: an unknown top-level field and a
// confidence above 1.
const char* kInit = R"({"kernel_summary": "copy", "notes_to_self": "x", "open_questions": ["q"],
  "decision_tree": {"root_id": "root", "active_leaf_id": "root", "nodes": [
    {"node_id": "root", "node_type": "root"},
    {"node_id": "a", "parent_id": "root", "confidence_0_to_1": 1.4,
     "action": {"title": "vectorized copy", "score_0_to_1": 0.8, "difficulty_1_to_5": 2}},
    {"node_id": "b", "parent_id": "root", "action": {"title": "unrolled copy", "score_0_to_1": 0.6}},
    {"node_id": "c", "parent_id": "root", "action": {"title": "plain copy", "score_0_to_1": 0.5}}]}})";

// Refine after a's cycle: the first answer deletes the root (a rejection in
// either mode), the second needs two repairs.
const char* kRefineRejected = R"({"ops": [{"op": "delete_node", "node_id": "root"}]})";
const char* kRefineRepaired = R"({"ops": [
  {"op": "insert_node", "parent_id": "a", "node": {"node_id": "a1", "action": {"title": "wider loads", "score_0_to_1": 1.5, "difficulty_1_to_5": 2}}},
  {"op": "update_node", "node_id": "b", "patch": {"colour": "red"}}]})";
// Refine after a1's cycle (the resumed part): one repair.
const char* kRefineAfterResume = R"({"ops": [
  {"op": "insert_node", "parent_id": "a1", "node": {"node_id": "a2", "action": {"title": "prefetch", "difficulty_1_to_5": 0}}}]})";

std::map<PromptKind, std::vector<std::string>> script() {
  return {{PromptKind::wm_init, {kInit}},
          {PromptKind::wm_refine, {kRefineRejected, kRefineRepaired}},
          {PromptKind::generate, {test::answer("passed 2.0", "g1"), test::answer("passed 1.0", "g2")}},
          {PromptKind::improve, {test::answer("passed 3.0", "i1")}}};
}

SearchConfig config(int rounds, bool lenient) {
  SearchConfig c;
  c.strategy = StrategyKind::world_model;
  c.language = Language::cpp;
  c.max_rounds = rounds;
  c.world_model.stagnation_window = 1;  // a cycle ends at its first attempt that does not improve
  c.world_model.lenient_edits = lenient;
  c.world_model.propose_every = 0;  // the edits counted here are init and refine only
  return c;
}

struct Run {
  SpecTask task{test::tiny_task_spec()};
  test::MarkerEvaluator evaluator;
  std::unique_ptr<WorldModel> wm = make_tree_world_model();
};

std::vector<Json> events_of(const RunStore& store, const std::string& type) {
  std::vector<Json> out;
  for (const auto& e : store.events())
    if (e.get_string("type") == type) out.push_back(e);
  return out;
}

Json last_totals(const RunStore& store) {
  auto finished = events_of(store, "run_finished");
  REQUIRE_FALSE(finished.empty());
  return finished.back()["totals"]["world_model"];
}

Json counts(long long edits, long long rejected, long long fallbacks, long long repairs, long long repaired) {
  return Json::obj({{"edits", edits},
                    {"rejected", rejected},
                    {"fallbacks", fallbacks},
                    {"repairs", repairs},
                    {"repaired_edits", repaired}});
}

std::vector<std::string> strings(const Json& arr) {
  std::vector<std::string> out;
  for (const auto& s : arr.as_array()) out.push_back(s.as_string());
  return out;
}

}  // namespace

TEST_CASE("lenient world-model edits: the events record each repair and the totals count them, also after a resume") {
  auto dir = test::scratch_dir("wm_lenient_resume");
  {
    Run r;
    ByKindLlm llm(script());
    RunStore store = RunStore::create(dir, Json::object());
    Session s(r.task, r.evaluator, llm, *r.wm, store, config(3, true));
    auto strategy = core::make_world_model_strategy();
    CHECK(s.run(*strategy) == StopReason::max_rounds);
    CHECK(llm.asked == std::vector<PromptKind>{PromptKind::wm_init, PromptKind::generate, PromptKind::improve,
                                               PromptKind::wm_refine, PromptKind::wm_refine, PromptKind::generate});

    auto edited = events_of(store, "world_model_edited");
    REQUIRE(edited.size() == 2);
    CHECK(edited[0].get_string("kind") == "wm_init");
    CHECK(strings(edited[0]["repairs"]) == std::vector<std::string>{
                                               "the world model: unknown field \"notes_to_self\" dropped",
                                               "node \"a\": confidence_0_to_1 1.4 clamped to 1"});
    CHECK(edited[1].get_string("kind") == "wm_refine");
    CHECK(edited[1].get_int("attempt") == 2);
    CHECK(strings(edited[1]["repairs"]) == std::vector<std::string>{
                                               "op 1 (insert_node): node.action: score_0_to_1 1.5 clamped to 1",
                                               "op 2 (update_node): patch: unknown field \"colour\" dropped"});
    auto rejected = events_of(store, "world_model_edit_rejected");
    REQUIRE(rejected.size() == 1);
    CHECK_FALSE(rejected[0].contains("repairs"));  // nothing of it was committed
    CHECK(strings(rejected[0]["errors"]).front() == "op 1 (delete_node): the root cannot be deleted");

    CHECK(last_totals(store) == counts(2, 1, 0, 4, 2));
    CHECK(s.totals()["world_model"] == counts(2, 1, 0, 4, 2));
    CHECK(r.wm->action("a").confidence == 1);
    CHECK(r.wm->action("a1").score == 1);
  }
  // The resume replays the journal: the strategy runs again from the start,
  // its events are recounted (not appended twice), and the live part adds one
  // repaired refine.
  Run r;
  // Only the calls past the journal reach the model.
  ByKindLlm llm({{PromptKind::improve, {test::answer("passed 1.5", "i2")}},
                 {PromptKind::wm_refine, {kRefineAfterResume}},
                 {PromptKind::generate, {test::answer("passed 0.9", "g3")}}});
  RunStore store = RunStore::open(dir);
  Session s(r.task, r.evaluator, llm, *r.wm, store, config(5, true));
  auto strategy = core::make_world_model_strategy();
  CHECK(s.run(*strategy) == StopReason::max_rounds);
  CHECK(s.replayed_llm_calls() == 6);
  CHECK(llm.asked == std::vector<PromptKind>{PromptKind::improve, PromptKind::wm_refine, PromptKind::generate});
  CHECK(events_of(store, "world_model_edited").size() == 3);
  CHECK(strings(events_of(store, "world_model_edited").back()["repairs"]) ==
        std::vector<std::string>{"op 1 (insert_node): node.action: difficulty_1_to_5 0 clamped to 1"});
  CHECK(last_totals(store) == counts(3, 1, 0, 5, 3));
  CHECK(r.wm->action("a2").difficulty == 1);
}

TEST_CASE("lenient world-model edits: the strict default rejects the same init answer and falls back") {
  auto dir = test::scratch_dir("wm_lenient_strict");
  Run r;
  ByKindLlm llm(script());
  RunStore store = RunStore::create(dir, Json::object());
  Session s(r.task, r.evaluator, llm, *r.wm, store, config(1, false));
  auto strategy = core::make_world_model_strategy();
  s.run(*strategy);
  auto rejected = events_of(store, "world_model_edit_rejected");
  REQUIRE(rejected.size() == 3);  // wm_edit_retries
  for (const auto& e : rejected) {
    CHECK_FALSE(e.contains("repairs"));
    CHECK(strings(e["errors"]).front().find("unknown field \"notes_to_self\"") != std::string::npos);
  }
  CHECK(events_of(store, "world_model_fallback").size() == 1);
  CHECK(last_totals(store) == counts(0, 3, 1, 0, 0));
}

TEST_CASE("lenient world-model edits: the setting is in the configuration's JSON, off by default") {
  SearchConfig c;
  CHECK_FALSE(c.world_model.lenient_edits);
  CHECK(c.to_json()["wm_lenient_edits"].as_bool() == false);
  c.world_model.lenient_edits = true;
  CHECK(SearchConfig::from_json(c.to_json()).world_model.lenient_edits);
  // A configuration written before the setting existed reads as strict.
  Json old = c.to_json();
  old.erase("wm_lenient_edits");
  CHECK_FALSE(SearchConfig::from_json(old).world_model.lenient_edits);
  Json bad = c.to_json();
  bad["wm_lenient_edits"] = "yes";
  CHECK_THROWS_WITH(SearchConfig::from_json(bad), doctest::Contains("wm_lenient_edits must be true or false"));
}
