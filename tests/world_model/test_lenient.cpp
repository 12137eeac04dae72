// Lenient edits (EditRules::lenient): what is repaired, each repair recorded
// word for word, what stays a rejection, and the purpose rule after repairs.
// Strict mode, the default, is covered by test_edits.cpp; here it appears only
// beside the lenient result of the same answer.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "wm_fixtures.hpp"
#include "ksearch/sys/world_model.hpp"

using namespace wmtest;
using ks::EditRules;

namespace {

EditRules lenient(EditRules r) {
  r.lenient = true;
  return r;
}

EditRules lenient_propose(int round = 1) { return lenient(propose_rules(round)); }

const Json& node_json(const Json& wm, std::string_view id) {
  for (const auto& n : wm["decision_tree"]["nodes"].as_array())
    if (n["node_id"].as_string() == id) return n;
  FAIL("node not found: " << id);
  static Json none;
  return none;
}

bool has_node(const ks::WorldModel& wm, std::string_view id) {
  Json j = wm.to_json();
  for (const auto& n : j["decision_tree"]["nodes"].as_array())
    if (n["node_id"].as_string() == id) return true;
  return false;
}

std::string lines(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

// Applies a lenient edit that must be committed with exactly `repairs`.
ks::EditOutcome expect_repaired(ks::WorldModel& wm, const std::string& answer, const EditRules& rules,
                                const std::vector<std::string>& repairs) {
  auto out = wm.apply_edits(answer, rules);
  REQUIRE_MESSAGE(out.ok, all_errors(out));
  CHECK(out.errors.empty());
  CHECK_MESSAGE(out.repairs == repairs, "repairs:\n" << lines(out.repairs) << "expected:\n" << lines(repairs));
  return out;
}

std::string four_inserts_under_root() {
  std::string ops;
  for (int i = 1; i <= 4; ++i)
    ops += std::string(i > 1 ? "," : "") + R"({"op": "insert_node", "parent_id": "root", "node": {"node_id": "x)" +
           std::to_string(i) + R"(", "action": {"title": "t", "score_0_to_1": 0.7}}})";
  return ops;
}

}  // namespace

TEST_CASE("lenient edits: every kind of number out of range is clamped, and each repair is recorded") {
  const std::string answer = edit(R"(
      {"op": "update_node", "node_id": "n2", "patch": {
        "overall_rating_0_to_10": 11, "confidence_0_to_1": -0.1, "last_updated_round": -2,
        "impacts": {"register_pressure": {"rating_0_to_10": 12}},
        "action": {"difficulty_1_to_5": 2.5, "score_0_to_1": 1.4}}},
      {"op": "update_node", "node_id": "n3", "patch": {"action": {"difficulty_1_to_5": 6}}},
      {"op": "update_node", "node_id": "n1", "patch": {"action": {"difficulty_0_to_3": 7}}},
      {"op": "update_node", "node_id": "n4", "patch": {"action": {"difficulty_1_to_5": 0.4}}})");
  SUBCASE("strict, the default: the answer is rejected and nothing is repaired") {
    auto wm = initialized_model();
    auto out = wm->apply_edits(answer, propose_rules());
    CHECK_FALSE(out.ok);
    CHECK(out.repairs.empty());
    CHECK(has_error(out, "op 1 (update_node): patch: overall_rating_0_to_10 must be within 0..10, found 11"));
    CHECK(has_error(out, "op 2 (update_node): patch.action: difficulty_1_to_5 must be an integer within 1..5, found 6"));
  }
  SUBCASE("lenient: clamped (an integer rounded first), recorded in reading order") {
    auto wm = initialized_model();
    auto out = expect_repaired(*wm, answer, lenient_propose(7),
                               {"op 1 (update_node): patch: overall_rating_0_to_10 11 clamped to 10",
                                "op 1 (update_node): patch: confidence_0_to_1 -0.1 clamped to 0",
                                "op 1 (update_node): patch: last_updated_round -2 clamped to 0",
                                "op 1 (update_node): patch.impacts.register_pressure: rating_0_to_10 12 clamped to 10",
                                "op 1 (update_node): patch.action: difficulty_1_to_5 2.5 rounded to 3",
                                "op 1 (update_node): patch.action: score_0_to_1 1.4 clamped to 1",
                                "op 2 (update_node): patch.action: difficulty_1_to_5 6 clamped to 5",
                                "op 3 (update_node): patch.action: difficulty_0_to_3 7 clamped to 3",
                                "op 4 (update_node): patch.action: difficulty_1_to_5 0.4 clamped to 1"});
    CHECK(out.applied_ops == 4);
    Json j = wm->to_json();
    const Json& n2 = node_json(j, "n2");
    CHECK(n2["overall_rating_0_to_10"].as_number() == 10);
    CHECK(n2["confidence_0_to_1"].as_number() == 0);
    CHECK(n2["last_updated_round"].as_int() == 0);
    CHECK(n2["impacts"]["register_pressure"]["rating_0_to_10"].as_number() == 10);
    CHECK(wm->action("n2").difficulty == 3);
    CHECK(wm->action("n2").score == 1);
    CHECK(wm->action("n3").difficulty == 5);
    CHECK(wm->action("n1").difficulty == 4);  // legacy 0..3, clamped to 3, plus 1
    CHECK(wm->action("n4").difficulty == 1);
    CHECK(node_json(j, "n3")["last_updated_round"].as_int() == 7);  // stamped as in strict mode
  }
}

TEST_CASE("lenient edits: values that cannot be used are dropped, the rest of the op applies") {
  auto wm = initialized_model();
  expect_repaired(*wm, edit(R"(
      {"op": "update_node", "node_id": "n2", "patch": {"notes": 5, "choice": "gemm, then epilogue",
        "action": {"expected_vs_baseline_factor": -1, "score_0_to_1": "high", "title": "GEMM + epilogue"}}},
      {"op": "update_node", "node_id": "n3", "patch": {"action": {"difficulty_1_to_5": 3, "difficulty_0_to_3": 0}}})"),
                  lenient_propose(),
                  {"op 1 (update_node): patch: notes must be a string, found integer 5; dropped",
                   "op 1 (update_node): patch.action: score_0_to_1 must be a number, found string \"high\"; dropped",
                   "op 1 (update_node): patch.action: expected_vs_baseline_factor must be a positive speedup factor "
                   "(e.g. 1.3), found -1; dropped",
                   "op 2 (update_node): patch.action: the legacy difficulty_0_to_3 (0) disagrees with "
                   "difficulty_1_to_5 (3); dropped"});
  Json j = wm->to_json();
  CHECK(node_json(j, "n2")["choice"].as_string() == "gemm, then epilogue");
  CHECK(node_json(j, "n2")["notes"].as_string().empty());  // dropped: the old value stays
  CHECK(wm->action("n2").title == "GEMM + epilogue");
  CHECK(wm->action("n2").score == doctest::Approx(0.6));
  CHECK_FALSE(wm->action("n2").expected_factor.has_value());
  CHECK(wm->action("n3").difficulty == 3);  // difficulty_1_to_5 wins
}

TEST_CASE("lenient edits: unknown fields are dropped at every level") {
  auto wm = initialized_model();
  auto out = expect_repaired(
      *wm, R"({"thoughts": "...", "ops": [
        {"op": "update_node", "node_id": "n2", "why": "x", "patch": {"node_id": "n2", "colour": "red",
          "impacts": {"memory_bandwidth": {"rating_0_to_10": 3, "hw_notes": "n/a"}, "latency": {}},
          "action": {"titel": "typo"}}},
        {"op": "insert_node", "parent_id": "root", "node": {"node_id": "n9", "tags": ["a"],
          "solution_ref": {"kernel": "k"}, "action": {"title": "new", "score_0_to_1": 0.7, "cost": 2}}}]})",
      lenient_propose(),
      {"the answer's unknown top-level field \"thoughts\" dropped",
       "op 1 (update_node): unknown field \"why\" dropped",
       "op 1 (update_node): patch: field \"node_id\" cannot be patched; dropped",
       "op 1 (update_node): patch: unknown field \"colour\" dropped",
       "op 1 (update_node): patch.impacts: unknown field \"latency\" dropped",
       "op 1 (update_node): patch.impacts.memory_bandwidth: unknown field \"hw_notes\" dropped",
       "op 1 (update_node): patch.action: unknown field \"titel\" dropped",
       "op 2 (insert_node): node: unknown field \"tags\" dropped",
       "op 2 (insert_node): node.solution_ref: unknown field \"kernel\" dropped",
       "op 2 (insert_node): node.action: unknown field \"cost\" dropped"});
  CHECK(out.applied_ops == 2);
  CHECK(out.new_nodes == 1);
  Json j = wm->to_json();
  CHECK(node_json(j, "n2")["impacts"]["memory_bandwidth"]["rating_0_to_10"].as_number() == 3);
  CHECK(wm->action("n9").title == "new");
}

TEST_CASE("lenient edits: ops beyond the new-node cap are skipped, the first ones applied") {
  SUBCASE("insert_node") {
    auto wm = initialized_model();
    auto out = expect_repaired(*wm, edit(four_inserts_under_root()), lenient_propose(),
                               {"op 4 (insert_node) skipped: at most 3 new nodes per edit"});
    CHECK(out.new_nodes == 3);
    CHECK(out.applied_ops == 3);
    CHECK(out.report["ops"][3]["status"].as_string() == "skipped");
    CHECK(has_node(*wm, "x3"));
    CHECK_FALSE(has_node(*wm, "x4"));
    // Strict: the same answer is rejected whole.
    auto strict = initialized_model();
    expect_rejected(*strict, edit(four_inserts_under_root()), propose_rules(),
                    "the edit inserts 4 new nodes; at most 3 are allowed per edit");
  }
  SUBCASE("split_node children count against the cap one by one") {
    auto wm = initialized_model();
    auto out = expect_repaired(*wm, edit(R"(
        {"op": "insert_node", "parent_id": "root", "node": {"node_id": "x1", "action": {"title": "t", "score_0_to_1": 0.7}}},
        {"op": "split_node", "node_id": "n2", "children": [
          {"node_id": "c1", "action": {"title": "a"}}, {"node_id": "c2", "action": {"title": "b"}},
          {"node_id": "c3", "action": {"title": "c"}}]})"),
                               lenient_propose(), {"op 2 (split_node): children[2] skipped: at most 3 new nodes per edit"});
    CHECK(out.new_nodes == 3);
    CHECK(out.report["ops"][1]["status"].as_string() == "applied");
    CHECK(has_node(*wm, "c2"));
    CHECK_FALSE(has_node(*wm, "c3"));
  }
  SUBCASE("more than 8 split children: the rest are dropped") {
    auto wm = initialized_model();
    std::string children;
    for (int i = 0; i < 10; ++i) children += std::string(i ? "," : "") + R"({"action": {"title": "c"}})";
    auto rules = lenient_propose(3);
    rules.max_new_nodes = 20;
    auto out = expect_repaired(*wm, edit(R"({"op": "split_node", "node_id": "n2", "children": [)" + children + "]}"),
                               rules, {"op 1 (split_node): children[8..9] dropped (split_node takes at most 8 children)"});
    CHECK(out.new_nodes == 8);
  }
}

TEST_CASE("lenient edits: an op that breaks a rule is skipped and named; the others apply") {
  auto wm = initialized_model();
  wm->attach_solution("n2", passing("sol-n2", 1.5, 2.0));
  auto out = expect_repaired(
      *wm, R"({"ops": [
        {"op": "insert_node", "parent_id": "n7", "node": {"node_id": "lost", "action": {"title": "x"}}},
        {"op": "update_node", "node_id": "lost", "patch": {"notes": "follows the skipped op"}},
        {"op": "delete_node", "node_id": "n1"},
        {"op": "move_node", "node_id": "n4"},
        "lower n3",
        {"op": "insert_node", "parent_id": "n2", "parent_solution_id": "sol-other", "node": {"action": {"title": "y"}}},
        {"op": "update_node", "node_id": "n3", "patch": {"solution_ref": {"parent_solution_id": "sol-n2"}}},
        {"op": "insert_node", "parent_id": "n2", "node": {"node_id": "has space", "action": {"title": "z"}}},
        {"op": "update_node", "node_id": "n3", "patch": {"notes": "kept"}}],
        "active_leaf_id": "lost"})",
      lenient_propose(4),
      {"op 1 (insert_node) skipped: parent_id \"n7\" does not exist; existing ids: root, n1, n2, n3, n4",
       "op 2 (update_node) skipped: node_id \"lost\" does not exist; existing ids: root, n1, n2, n3, n4",
       "op 3 (delete_node) skipped: node \"n1\" has children (n4); only leaves can be deleted, so lower its score "
       "instead",
       "op 4 skipped: field \"op\" must be one of update_node, insert_node, split_node, delete_node; found \"move_node\"",
       "op 5 skipped: it must be an object, found string \"lower n3\"",
       "op 6 (insert_node) skipped: parent_solution_id \"sol-other\" does not match parent \"n2\"'s solution "
       "(\"sol-n2\"); leave it out and it is filled in",
       "op 7 (update_node) skipped: node \"n3\": solution_ref.parent_solution_id \"sol-n2\" does not match its parent "
       "\"root\"'s solution_id \"\"",
       "op 8 (insert_node): node: node id \"has space\" may not contain spaces, quotes or backslashes; the node got "
       "\"r4_n1\"",
       "active_leaf_id \"lost\" does not exist after the ops; ignored (the active node stays \"root\")"});
  CHECK(out.applied_ops == 2);
  CHECK(out.new_nodes == 1);
  std::vector<std::string> statuses;
  for (const auto& op : out.report["ops"].as_array()) statuses.push_back(op["status"].as_string());
  CHECK(statuses == std::vector<std::string>{"skipped", "skipped", "skipped", "skipped", "skipped", "skipped",
                                             "skipped", "applied", "applied"});
  CHECK(out.report["ops"][7]["note"].as_string() == "node_id \"has space\" is not a valid id; the node got \"r4_n1\"");
  CHECK(has_node(*wm, "n1"));
  CHECK(wm->action("r4_n1").parent_solution_id == "sol-n2");
  CHECK(wm->action("n3").parent_solution_id.empty());
  Json j = wm->to_json();
  CHECK(node_json(j, "n3")["notes"].as_string() == "kept");
  CHECK(j["decision_tree"]["active_leaf_id"].as_string() == "root");
}

TEST_CASE("lenient edits: a damaged root or attached kernel, or no readable edit, is still a rejection") {
  auto wm = model_of({[] {
                        Json r = node("root", "");
                        r["decision"] = "kernel";
                        return r;
                      }(),
                      with_solution(node("a", "root", "A", 0.8, 2), "sol-a", 1.2, 2.0),
                      node("b", "root", "B", 0.7, 2), node("c", "a", "C", 0.6, 2)});
  auto rules = lenient_propose();
  // Each answer also holds a repairable op, so the rejection is not for want of
  // anything to repair.
  const std::string fine = R"({"op": "update_node", "node_id": "b", "patch": {"confidence_0_to_1": 3}})";
  auto with_fine = [&](std::string_view op) { return edit(fine + "," + std::string(op)); };
  SUBCASE("no JSON") { expect_rejected(*wm, "I would lower b.", rules, "could not be read as JSON"); }
  SUBCASE("no ops") { expect_rejected(*wm, R"({"edits": []})", rules, "the answer has no \"ops\" array"); }
  SUBCASE("ops not an array") { expect_rejected(*wm, R"({"ops": {"op": "delete_node"}})", rules, "\"ops\" must be an array"); }
  SUBCASE("deleting the root") {
    expect_rejected(*wm, with_fine(R"({"op": "delete_node", "node_id": "root"})"), rules, "the root cannot be deleted");
  }
  SUBCASE("the root's decision") {
    expect_rejected(*wm, with_fine(R"({"op": "update_node", "node_id": "root", "patch": {"decision": "other"}})"), rules,
                    "the root's decision is fixed");
  }
  SUBCASE("an action on the root") {
    expect_rejected(*wm, with_fine(R"({"op": "update_node", "node_id": "root", "patch": {"action": {"title": "go"}}})"),
                    rules, "the root cannot carry an action");
    expect_rejected(*wm, with_fine(R"({"op": "split_node", "node_id": "root", "parent_patch": {"action": {"title": "go"}},
                                       "children": [{"action": {"title": "k"}}]})"),
                    rules, "the root cannot carry an action");
  }
  SUBCASE("deleting an attached kernel") {
    expect_rejected(*wm, with_fine(R"({"op": "delete_node", "node_id": "c"}, {"op": "delete_node", "node_id": "a"})"),
                    rules, "has the attached solution \"sol-a\" and cannot be deleted");
  }
  SUBCASE("changing an attached kernel") {
    expect_rejected(*wm, with_fine(R"({"op": "update_node", "node_id": "a", "patch": {"solution_ref": {"solution_id": "sol-x"}}})"),
                    rules, "solution_id \"sol-a\" is attached and cannot be changed");
    expect_rejected(*wm, with_fine(R"({"op": "update_node", "node_id": "a", "patch": {"solution_ref": {"eval": {"status": "passed"}}}})"),
                    rules, "eval is written by the library");
    expect_rejected(*wm, with_fine(R"({"op": "update_node", "node_id": "a", "patch": {"solution_ref": {"parent_solution_id": "p"}}})"),
                    rules, "parent_solution_id of a solved node cannot be changed");
  }
  SUBCASE("a rejected lenient answer lists its repairs among its errors and commits none") {
    auto out = wm->apply_edits(with_fine(R"({"op": "delete_node", "node_id": "root"})"), rules);
    CHECK_FALSE(out.ok);
    CHECK(out.repairs.empty());
    CHECK(out.errors == std::vector<std::string>{"op 2 (delete_node): the root cannot be deleted",
                                                 "op 1 (update_node): patch: confidence_0_to_1 3 clamped to 1"});
    CHECK(out.report["ops"][0]["status"].as_string() == "applied");
    CHECK(out.report["ops"][1]["status"].as_string() == "rejected");
    CHECK(out.report["errors"].size() == 2);
    CHECK(wm->action("b").confidence == doctest::Approx(0.5));
  }
}

TEST_CASE("lenient edits: what a model writes on a node without a kernel is dropped, not a rejection") {
  auto wm = initialized_model();
  expect_repaired(*wm, edit(R"(
      {"op": "update_node", "node_id": "n2", "patch": {"solution_ref": {"solution_id": "fake", "eval": {"status": "passed"},
        "round_index": 3, "solution_name": "mine"}}},
      {"op": "insert_node", "parent_id": "n3", "parent_solution_id": 7, "node": {"node_id": "n9", "action": {"title": "t"}}})"),
                  lenient_propose(),
                  {"op 1 (update_node): patch.solution_ref: solution_id \"fake\" dropped (the library attaches kernels)",
                   "op 1 (update_node): patch.solution_ref: eval dropped (written by the library)",
                   "op 1 (update_node): patch.solution_ref: round_index dropped (written by the library)",
                   "op 1 (update_node): patch.solution_ref: solution_name dropped (written by the library)",
                   "op 2 (insert_node): parent_solution_id must be a string or null, found integer 7; dropped (it is "
                   "filled in from the parent)"});
  CHECK(wm->action("n2").solution_id.empty());
  CHECK(wm->action("n9").parent_id == "n3");
}

TEST_CASE("lenient edits: the purpose rule must hold after the repairs") {
  SUBCASE("propose: the good action's op is skipped, so the answer is rejected with the reason") {
    auto wm = initialized_model();
    auto out = wm->apply_edits(edit(R"(
        {"op": "update_node", "node_id": "n1", "patch": {"action": {"score_0_to_1": 0.4}}},
        {"op": "update_node", "node_id": "n2", "patch": {"action": {"score_0_to_1": 0.5}}},
        {"op": "insert_node", "parent_id": "rot", "node": {"action": {"title": "better", "score_0_to_1": 0.9}}})"),
                               lenient_propose());
    CHECK_FALSE(out.ok);
    CHECK(out.repairs.empty());
    REQUIRE(out.errors.size() == 2);
    CHECK(out.errors[0].find("[ACTION_NODE_REQUIREMENT]") == 0);
    CHECK(out.errors[1] == "op 3 (insert_node) skipped: parent_id \"rot\" does not exist; existing ids: root, n1, n2, "
                           "n3, n4");
    CHECK(wm->action("n1").score == doctest::Approx(0.8));
  }
  SUBCASE("propose: a clamped score still counts") {
    auto wm = initialized_model();
    expect_repaired(*wm, edit(R"(
        {"op": "update_node", "node_id": "n1", "patch": {"action": {"score_0_to_1": 0.4}}},
        {"op": "update_node", "node_id": "n2", "patch": {"action": {"score_0_to_1": 0.5}}},
        {"op": "insert_node", "parent_id": "root", "node": {"node_id": "b", "action": {"title": "better", "score_0_to_1": 3}}})"),
                    lenient_propose(), {"op 3 (insert_node): node.action: score_0_to_1 3 clamped to 1"});
  }
  SUBCASE("refine: a continuation child beyond the cap is skipped, so the rule fails") {
    auto wm = initialized_model();
    wm->attach_solution("n2", passing("sol-n2", 1.1, 1.0));
    EditRules rules;
    rules.purpose = EditRules::Purpose::refine;
    rules.solved_node_id = "n2";
    rules.round = 3;
    std::string ops = four_inserts_under_root();
    ops.replace(ops.rfind(R"("parent_id": "root")"), 19, R"("parent_id": "n2")");
    auto out = wm->apply_edits(edit(ops), lenient(rules));
    CHECK_FALSE(out.ok);
    CHECK(has_error(out, "continuation rule: the solved node \"n2\" needs at least one open child action"));
    CHECK(has_error(out, "op 4 (insert_node) skipped: at most 3 new nodes per edit"));
    // Put first, the same child makes the edit pass and the last sibling is skipped.
    std::string first = four_inserts_under_root();
    first.replace(first.find(R"("parent_id": "root")"), 19, R"("parent_id": "n2")");
    expect_repaired(*wm, edit(first), lenient(rules), {"op 4 (insert_node) skipped: at most 3 new nodes per edit"});
    CHECK(wm->action("x1").parent_id == "n2");
  }
  SUBCASE("too_hard: a score clamped below the old one is a downgrade; a skipped recovery step is not") {
    EditRules rules;
    rules.purpose = EditRules::Purpose::too_hard;
    rules.failed_node_id = "n2";  // score 0.6, difficulty 3
    rules.round = 2;
    auto wm = initialized_model();
    auto out = wm->apply_edits(edit(R"({"op": "insert_node", "parent_id": "n22", "node": {"action": {"title": "smaller", "difficulty_1_to_5": 1}}})"),
                               lenient(rules));
    CHECK_FALSE(out.ok);
    CHECK(has_error(out, "the failed action \"n2\" must be downgraded"));
    CHECK(has_error(out, "op 1 (insert_node) skipped: parent_id \"n22\" does not exist"));
    expect_repaired(*wm, edit(R"({"op": "update_node", "node_id": "n2", "patch": {"action": {"score_0_to_1": -0.2}}})"),
                    lenient(rules), {"op 1 (update_node): patch.action: score_0_to_1 -0.2 clamped to 0"});
    CHECK(wm->action("n2").score == 0);
  }
}

TEST_CASE("lenient edits: a committed edit without repairs reports none, in either mode") {
  for (bool lenient_mode : {false, true}) {
    CAPTURE(lenient_mode);
    auto wm = initialized_model();
    auto rules = propose_rules();
    rules.lenient = lenient_mode;
    auto out = wm->apply_edits(edit(R"({"op": "update_node", "node_id": "n2", "patch": {"notes": "x"}})"), rules);
    CHECK(out.ok);
    CHECK(out.repairs.empty());
  }
}

// ---------------------------------------------------------------------------
// The init answer

namespace {

std::string init_needing_repairs() {
  return R"({"kernel_summary": "s", "thoughts": "x", "open_questions": ["q", 3],
    "decision_tree": {"root_id": "root", "active_leaf_id": "gone", "nodes": [
      {"node_id": "root", "node_type": "root"},
      {"node_id": "a", "parent_id": "root", "confidence_0_to_1": 1.4,
       "solution_ref": {"solution_id": "made-up", "parent_solution_id": "root-kernel"},
       "action": {"title": "A", "score_0_to_1": 0.7, "difficulty_1_to_5": 2}},
      {"node_id": "b", "parent_id": "root", "tags": ["x"], "action": {"title": "B", "score_0_to_1": 0.6}},
      {"node_id": "c", "parent_id": "root", "action": {"title": "C", "difficulty_1_to_5": 9}}]}})";
}

ks::EditRules init_rules(bool lenient_mode) {
  ks::EditRules r;
  r.round = 0;
  r.lenient = lenient_mode;
  return r;
}

}  // namespace

TEST_CASE("lenient edits: an init answer gets the same repairs") {
  SUBCASE("strict: rejected") {
    auto wm = ks::make_tree_world_model();
    auto out = wm->initialize_with(init_needing_repairs(), init_rules(false));
    CHECK_FALSE(out.ok);
    CHECK(out.repairs.empty());
    CHECK(has_error(out, "the world model: unknown field \"thoughts\""));
    CHECK(has_error(out, "node \"a\": confidence_0_to_1 must be within 0..1, found 1.4"));
    CHECK_FALSE(wm->initialized());
    // initialize() is the strict mode too.
    CHECK_FALSE(wm->initialize(init_needing_repairs(), 0).ok);
  }
  SUBCASE("lenient: committed, each repair recorded") {
    auto wm = ks::make_tree_world_model();
    auto out = wm->initialize_with(init_needing_repairs(), init_rules(true));
    REQUIRE_MESSAGE(out.ok, all_errors(out));
    CHECK(out.repairs == std::vector<std::string>{
                             "the world model: unknown field \"thoughts\" dropped",
                             "the world model: open_questions[1] must be a string, found integer 3; dropped",
                             "node \"a\": confidence_0_to_1 1.4 clamped to 1",
                             "node \"a\".solution_ref: solution_id \"made-up\" dropped (the library attaches kernels)",
                             "node \"a\": solution_ref.parent_solution_id \"root-kernel\" dropped (no node has a kernel "
                             "yet)",
                             "node \"b\": unknown field \"tags\" dropped",
                             "node \"c\".action: difficulty_1_to_5 9 clamped to 5",
                             "decision_tree: active_leaf_id \"gone\" does not exist; the root \"root\" is active"});
    CHECK(wm->initialized());
    CHECK(wm->frontier().size() == 3);
    CHECK(wm->action("a").solution_id.empty());
    CHECK(wm->action("a").confidence == 1);
    CHECK(wm->action("c").difficulty == 5);
  }
  SUBCASE("lenient: a broken structure or too few actions is still a rejection") {
    auto wm = ks::make_tree_world_model();
    std::string dup = init_needing_repairs();
    dup.replace(dup.find(R"("node_id": "b")"), 14, R"("node_id": "a")");
    auto out = wm->initialize_with(dup, init_rules(true));
    CHECK_FALSE(out.ok);
    CHECK(has_error(out, "node id \"a\" is used by more than one node"));
    CHECK(has_error(out, "node \"a\": confidence_0_to_1 1.4 clamped to 1"));  // its repairs come back too
    std::string two = init_needing_repairs();
    two.replace(two.find(R"({"node_id": "c")"), std::string(R"({"node_id": "c", "parent_id": "root", "action": {"title": "C", "difficulty_1_to_5": 9}})").size(),
                R"({"node_id": "c", "parent_id": "a", "action": {"title": "C"}})");
    out = wm->initialize_with(two, init_rules(true));
    CHECK_FALSE(out.ok);
    CHECK(has_error(out, "needs at least 3 open action nodes"));
    CHECK_FALSE(wm->initialized());
  }
}
