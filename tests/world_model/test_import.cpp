// K-Search's world_model.json normalised as the original normalises it
// (--continue-from-world-model), with every repair said.
#include <doctest/doctest.h>

#include <algorithm>

#include "search/world_model/import.hpp"
#include "ksearch/error.hpp"
#include "ksearch/world_model.hpp"
#include "ksearch/sys/world_model.hpp"

using ks::Json;
using ks::core::wm::normalize_ksearch_world_model;

namespace {

const Json* node(const Json& tree, const std::string& id) {
  for (const auto& n : tree["decision_tree"]["nodes"].as_array())
    if (n.get_string("node_id") == id) return &n;
  return nullptr;
}

// The repair that mentions every one of `parts`, or "" when none does.
std::string repair_with(const std::vector<std::string>& repairs, std::initializer_list<std::string> parts) {
  for (const auto& r : repairs)
    if (std::all_of(parts.begin(), parts.end(), [&](const std::string& p) { return r.find(p) != std::string::npos; }))
      return r;
  return "";
}

std::string all(const std::vector<std::string>& repairs) {
  std::string out;
  for (const auto& r : repairs) out += r + "\n";
  return out;
}

// As the original writes it: dump_world_model_obj, keys sorted, solution_ref
// with three keys, eval in its EvalResult form.
Json ksearch_tree() {
  return Json::parse(R"({
    "computed_signals": {"round_index": 7, "trace": {"status": "passed", "latency_ms": 1.5}},
    "decision_tree": {
      "active_leaf_id": "n1",
      "nodes": [
        {"action": null, "choice": null, "confidence_0_to_1": 0.5, "decision": null, "impacts": {},
         "last_updated_round": 0, "node_id": "root", "node_type": "root", "notes": "", "overall_rating_0_to_10": 5,
         "parent_id": null, "solution_ref": {"eval": null, "parent_solution_id": null, "solution_id": null}},
        {"action": {"title": "  Tiled kernel ", "description": "d", "difficulty_1_to_5": 2, "score_0_to_1": 0.8,
                    "expected_vs_baseline_factor": 1.4, "rationale": "r"},
         "choice": "tiles", "confidence_0_to_1": 0.7, "decision": "layout", "last_updated_round": 3,
         "impacts": {"memory_bandwidth": {"rating_0_to_10": 8, "risk": "low", "notes": "reuse"},
                     "compute_intensity_and_hw_fit": {"rating_0_to_10": 6, "risk": "mid", "notes": "n",
                                                      "hw_notes": "smem"}},
         "node_id": "n1", "node_type": "decision", "notes": "CURRENT: tiled", "overall_rating_0_to_10": 8,
         "parent_id": "root",
         "solution_ref": {"solution_id": "ks_abc", "parent_solution_id": null,
                          "eval": {"status": "PASSED", "latency_ms": 2.5, "reference_latency_ms": 5.0,
                                   "speedup_factor": 2.0, "mean_vs_baseline_factor": 0.9,
                                   "log_excerpt": "ok", "metrics": {"score": 0.9, "score_name": "vs_base"}}}},
        {"action": {"title": "Vectorise the loads", "difficulty_0_to_3": 1, "score_0_to_1": 1.7},
         "node_id": "n2", "node_type": "decision", "overall_rating_0_to_10": 14, "confidence_0_to_1": -0.2,
         "parent_id": "n1", "solution_ref": {"solution_id": null, "parent_solution_id": "stale", "eval": null}},
        {"action": {"title": "Orphan idea", "difficulty_1_to_5": 9}, "node_id": "n3", "node_type": "decision",
         "parent_id": null, "favourite": true},
        {"action": {"title": "Dangling idea", "expected_vs_baseline_factor": -1}, "node_id": "n4",
         "parent_id": "gone"}
      ],
      "root_id": "root"
    },
    "kernel_summary": "memory-bound",
    "open_questions": ["q1", 5, "q2"]
  })");
}

}  // namespace

TEST_CASE("import: a K-Search world model is normalised as the original does, and every repair is said") {
  auto out = normalize_ksearch_world_model(ksearch_tree());
  const Json& t = out.tree;
  INFO(all(out.repairs));

  // It loads in this library's strict reader, as the strategy loads it.
  auto wm = ks::make_tree_world_model();
  REQUIRE_NOTHROW(wm->load_json(t));

  // Kept: summary, questions that are strings, signals, the active leaf.
  CHECK(t.get_string("kernel_summary") == "memory-bound");
  CHECK(t["open_questions"] == Json::arr({"q1", "q2"}));
  CHECK(!repair_with(out.repairs, {"open_questions[1]", "dropped"}).empty());
  CHECK(t["computed_signals"].get_int("round_index") == 7);
  CHECK(t["decision_tree"].get_string("active_leaf_id") == "n1");

  // A closed node: its title trimmed, its eval in this library's compact form.
  const Json* n1 = node(t, "n1");
  REQUIRE(n1);
  CHECK((*n1)["action"].get_string("title") == "Tiled kernel");
  const Json& eval = (*n1)["solution_ref"]["eval"];
  CHECK(eval.get_string("status") == "passed");
  CHECK(eval.get_number("latency_ms") == doctest::Approx(2.5));
  CHECK(eval.get_number("speedup") == doctest::Approx(2.0));
  CHECK(eval.get_number("score") == doctest::Approx(0.9));
  CHECK(eval.get_number("mean_vs_baseline_factor") == doctest::Approx(0.9));
  CHECK_FALSE(eval.contains("log_excerpt"));
  CHECK((*n1)["solution_ref"].get_string("solution_id") == "ks_abc");
  CHECK((*n1)["impacts"]["compute_intensity_and_hw_fit"].get_string("hw_notes") == "smem");
  CHECK(wm->action("n1").solution_id == "ks_abc");

  // Numbers clamped, the legacy difficulty mapped, lineage following its parent.
  const Json* n2 = node(t, "n2");
  REQUIRE(n2);
  CHECK((*n2)["action"].get_int("difficulty_1_to_5") == 2);
  CHECK(!repair_with(out.repairs, {"n2", "difficulty_0_to_3 1", "difficulty_1_to_5 2"}).empty());
  CHECK((*n2)["action"].get_number("score_0_to_1") == doctest::Approx(1.0));
  CHECK(!repair_with(out.repairs, {"n2", "score_0_to_1 1.7 clamped to 1"}).empty());
  CHECK((*n2).get_number("overall_rating_0_to_10") == doctest::Approx(10));
  CHECK((*n2).get_number("confidence_0_to_1") == doctest::Approx(0));
  CHECK((*n2)["solution_ref"].get_string("parent_solution_id") == "ks_abc");
  CHECK(!repair_with(out.repairs, {"n2", "parent_solution_id \"stale\""}).empty());

  // An orphan and a dangling parent are re-pointed to the root; unknown fields dropped.
  const Json* n3 = node(t, "n3");
  const Json* n4 = node(t, "n4");
  REQUIRE(n3);
  REQUIRE(n4);
  CHECK(n3->get_string("parent_id") == "root");
  CHECK(!repair_with(out.repairs, {"n3", "no parent", "root"}).empty());
  CHECK(n4->get_string("parent_id") == "root");
  CHECK(!repair_with(out.repairs, {"n4", "\"gone\" does not exist", "root"}).empty());
  CHECK(!repair_with(out.repairs, {"n3", "unknown field", "favourite"}).empty());
  CHECK((*n3)["action"].get_int("difficulty_1_to_5") == 5);
  CHECK(!repair_with(out.repairs, {"n3", "difficulty_1_to_5 9 clamped to 5"}).empty());
  // A factor that is no factor is null; a missing score falls back to the rating / 10.
  CHECK((*n4)["action"]["expected_vs_baseline_factor"].is_null());
  CHECK(!repair_with(out.repairs, {"n4", "expected_vs_baseline_factor -1"}).empty());
  CHECK((*n4)["action"].get_number("score_0_to_1") == doctest::Approx(0.5));

  // Plain defaults are not repairs: the root's missing fields, n4's missing node_type.
  CHECK(repair_with(out.repairs, {"node \"root\""}).empty());
  CHECK(repair_with(out.repairs, {"n4", "node_type"}).empty());
}

TEST_CASE("import: what the strict reader needs beyond the original, repaired and said") {
  SUBCASE("ids that are not well formed, or used twice") {
    auto out = normalize_ksearch_world_model(Json::parse(R"({"decision_tree": {"nodes": [
      {"node_id": "root", "node_type": "root"},
      {"node_id": "my idea", "parent_id": "root", "action": {"title": "a"}},
      {"node_id": "dup", "parent_id": "root", "action": {"title": "b"}},
      {"node_id": "dup", "parent_id": "my idea", "action": {"title": "c"}},
      {"node_id": "child", "parent_id": "dup", "action": {"title": "d"}}]}})"));
    INFO(all(out.repairs));
    REQUIRE_NOTHROW(ks::make_tree_world_model()->load_json(out.tree));
    CHECK(node(out.tree, "my_idea"));
    CHECK(node(out.tree, "dup_2"));
    CHECK(node(out.tree, "dup_2")->get_string("parent_id") == "my_idea");
    CHECK(node(out.tree, "child")->get_string("parent_id") == "dup");  // the first node of that id
    CHECK(!repair_with(out.repairs, {"\"my idea\"", "my_idea"}).empty());
    CHECK(!repair_with(out.repairs, {"\"dup\" is used twice", "dup_2"}).empty());
  }
  SUBCASE("no root: the node typed root becomes it; a second one is a decision; the root's action goes") {
    auto out = normalize_ksearch_world_model(Json::parse(R"({"decision_tree": {"root_id": "top", "nodes": [
      {"node_id": "r", "node_type": "root", "action": {"title": "not for a root"}},
      {"node_id": "r2", "node_type": "root", "parent_id": "r"},
      {"node_id": "a", "parent_id": "r", "action": {"title": "a"}}]}})"));
    INFO(all(out.repairs));
    REQUIRE_NOTHROW(ks::make_tree_world_model()->load_json(out.tree));
    CHECK(out.tree["decision_tree"].get_string("root_id") == "r");
    CHECK(node(out.tree, "r2")->get_string("node_type") == "decision");
    CHECK(node(out.tree, "r")->at("action").get_string("title").empty());
    CHECK(!repair_with(out.repairs, {"root_id \"top\" names no node"}).empty());
    CHECK(!repair_with(out.repairs, {"r2", "second node of node_type \"root\""}).empty());
    CHECK(!repair_with(out.repairs, {"the root cannot carry an action"}).empty());
  }
  SUBCASE("no root at all, a cycle, an active leaf that is gone, legacy keys") {
    auto out = normalize_ksearch_world_model(Json::parse(R"({"plan_tree": {}, "extra": 1,
      "decision_tree": {"active_leaf_id": "zz", "nodes": [
      {"node_id": "a", "parent_id": "b", "action": {"title": "a"}},
      {"node_id": "b", "parent_id": "a", "action": {"title": "b"}},
      {"node_id": "c", "parent_id": "root", "action": {"title": "c"}}]}})"));
    INFO(all(out.repairs));
    auto wm = ks::make_tree_world_model();
    REQUIRE_NOTHROW(wm->load_json(out.tree));
    CHECK(node(out.tree, "root"));
    CHECK(node(out.tree, "c")->get_string("parent_id") == "root");  // the added root keeps its children
    CHECK(!repair_with(out.repairs, {"no root node", "added"}).empty());
    CHECK(!repair_with(out.repairs, {"parent cycle", "re-pointed to the root"}).empty());
    CHECK(!repair_with(out.repairs, {"active_leaf_id \"zz\""}).empty());
    CHECK(!repair_with(out.repairs, {"plan_tree", "not migrated"}).empty());
    CHECK(!repair_with(out.repairs, {"unknown field", "extra"}).empty());
    CHECK(node(out.tree, "a")->get_string("parent_id") == "root");  // the cycle is broken at its first node
    CHECK(node(out.tree, "b")->get_string("parent_id") == "a");
    CHECK(wm->frontier() == std::vector<std::string>{"a", "c"});  // b waits for a's kernel
  }
  SUBCASE("values of the wrong type take their defaults, said") {
    auto out = normalize_ksearch_world_model(Json::parse(R"({"kernel_summary": 3, "decision_tree": {"nodes": [
      {"node_id": "root", "node_type": "root", "notes": ["x"]},
      {"node_id": "a", "parent_id": "root", "overall_rating_0_to_10": "high", "impacts": [],
       "action": {"title": "a", "difficulty_1_to_5": 2.6}}]}})"));
    INFO(all(out.repairs));
    REQUIRE_NOTHROW(ks::make_tree_world_model()->load_json(out.tree));
    CHECK(node(out.tree, "a")->get_number("overall_rating_0_to_10") == doctest::Approx(5));
    CHECK(node(out.tree, "a")->at("action").get_int("difficulty_1_to_5") == 2);
    CHECK(!repair_with(out.repairs, {"kernel_summary", "not a string"}).empty());
    CHECK(!repair_with(out.repairs, {"\"root\"", "notes", "not a string"}).empty());
    CHECK(!repair_with(out.repairs, {"\"a\"", "overall_rating_0_to_10", "not a number"}).empty());
    CHECK(!repair_with(out.repairs, {"\"a\"", "impacts is not an object"}).empty());
    CHECK(!repair_with(out.repairs, {"\"a\"", "difficulty_1_to_5 2.6 is not an integer"}).empty());
  }
  SUBCASE("not an object at all is an error, not a repair") {
    CHECK_THROWS_AS(normalize_ksearch_world_model(Json::parse("[1, 2]")), ks::Error);
  }
}

TEST_CASE("import: K-Search's solution ids are remapped to this library's in every solution_ref") {
  auto out = normalize_ksearch_world_model(ksearch_tree());
  ks::core::wm::remap_solution_ids(out.tree, {{"ks_abc", "0123456789abcdef"}});
  CHECK((*node(out.tree, "n1"))["solution_ref"].get_string("solution_id") == "0123456789abcdef");
  CHECK((*node(out.tree, "n2"))["solution_ref"].get_string("parent_solution_id") == "0123456789abcdef");
  auto wm = ks::make_tree_world_model();
  REQUIRE_NOTHROW(wm->load_json(out.tree));
  CHECK(wm->action("n2").parent_solution_id == "0123456789abcdef");
}

TEST_CASE("import: recorded evaluations in either form become the compact one") {
  using ks::core::wm::compact_recorded_eval;
  Json k = compact_recorded_eval(Json::parse(
      R"({"status": "PASSED", "latency_ms": 1.0, "speedup_factor": 3.0, "metrics": {"score": 0.5}})"));
  CHECK(k == Json::parse(R"({"status": "passed", "latency_ms": 1.0, "speedup": 3.0, "score": 0.5})"));
  Json mine =
      compact_recorded_eval(Json::parse(R"({"status": "incorrect", "latency_ms": 0, "speedup": 0, "score": 0})"));
  CHECK(mine.get_string("status") == "incorrect");
  CHECK(compact_recorded_eval(Json::parse(R"({"latency_ms": 1})")).is_null());
}
