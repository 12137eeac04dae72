// Shared fixtures for the world-model tests: a valid init answer, small
// trees built node by node, and helpers to check outcomes.
#pragma once

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/json.hpp"
#include "ksearch/world_model.hpp"
#include "ksearch/sys/world_model.hpp"

namespace wmtest {

using ks::Json;

// A valid wm_init answer: root, three actions under it (n1 0.8/d2, n2
// 0.6/d3, n3 0.5/d1) and one deeper action n4 under n1, wrapped in prose the
// way models often answer.
inline std::string init_answer() {
  return R"(Here is the world model.
{
  "kernel_summary": "Batched triangular multiplication; memory-bound at small N, compute-bound at large N.",
  "open_questions": ["q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8"],
  "decision_tree": {
    "root_id": "root",
    "active_leaf_id": "root",
    "nodes": [
      {"node_id": "root", "parent_id": null, "node_type": "root", "decision": null, "choice": null,
       "notes": "1. class 2. math 3. layout 4. regimes 5. knobs 6. skeleton 7. families"},
      {"node_id": "n1", "parent_id": "root", "node_type": "decision", "decision": "family", "choice": "fused tiled",
       "overall_rating_0_to_10": 8, "confidence_0_to_1": 0.6,
       "impacts": {"memory_bandwidth": {"rating_0_to_10": 7, "risk": "low", "notes": "reuse"}},
       "notes": "SELF_CHECK: one kernel, unlike n2",
       "action": {"title": "Fused tiled kernel", "description": "tile and fuse", "difficulty_1_to_5": 2,
                  "score_0_to_1": 0.8, "expected_vs_baseline_factor": 2.0, "rationale": "fewer passes"}},
      {"node_id": "n2", "parent_id": "root", "decision": "family", "choice": "gemm + epilogue",
       "overall_rating_0_to_10": 6,
       "action": {"title": "GEMM stage plus epilogue", "difficulty_1_to_5": 3, "score_0_to_1": 0.6}},
      {"node_id": "n3", "parent_id": "root", "decision": "family", "choice": "naive",
       "overall_rating_0_to_10": 5,
       "action": {"title": "Straightforward kernel", "difficulty_0_to_3": 0, "score_0_to_1": 0.5}},
      {"node_id": "n4", "parent_id": "n1", "decision": "staging", "choice": "cp.async",
       "action": {"title": "Pipeline loads", "difficulty_1_to_5": 3, "score_0_to_1": 0.9}}
    ]
  }
}
Good luck.)";
}

inline std::unique_ptr<ks::WorldModel> initialized_model(int round = 0) {
  auto wm = ks::make_tree_world_model();
  auto out = wm->initialize(init_answer(), round);
  REQUIRE_MESSAGE(out.ok, (out.errors.empty() ? "" : out.errors.front()));
  return wm;
}

// A node for hand-built trees.
inline Json node(std::string id, std::string parent, std::string title = "", double score = 0.5,
                 int difficulty = 3, double rating = 5) {
  Json n = Json::obj({{"node_id", id},
                      {"parent_id", parent.empty() ? Json() : Json(parent)},
                      {"node_type", parent.empty() ? "root" : "decision"},
                      {"overall_rating_0_to_10", rating}});
  if (!title.empty())
    n["action"] = Json::obj({{"title", title}, {"difficulty_1_to_5", difficulty}, {"score_0_to_1", score}});
  return n;
}

inline Json with_solution(Json n, std::string solution_id, double speedup, double score,
                          std::string status = "passed") {
  n["solution_ref"] = Json::obj({{"solution_id", solution_id},
                                 {"eval", Json::obj({{"status", status},
                                                     {"latency_ms", 1.0 / score},
                                                     {"speedup", speedup},
                                                     {"score", score}})},
                                 {"round_index", 1}});
  return n;
}

inline Json tree_of(std::vector<Json> nodes, std::string active = "root") {
  Json arr = Json::array();
  for (auto& n : nodes) arr.push_back(std::move(n));
  return Json::obj({{"kernel_summary", "summary"},
                    {"open_questions", Json::arr({"q"})},
                    {"decision_tree", Json::obj({{"root_id", "root"}, {"active_leaf_id", active}, {"nodes", arr}})},
                    {"computed_signals", Json::object()}});
}

inline std::unique_ptr<ks::WorldModel> model_of(std::vector<Json> nodes, std::string active = "root") {
  auto wm = ks::make_tree_world_model();
  wm->load_json(tree_of(std::move(nodes), std::move(active)));
  return wm;
}

inline ks::SolutionRef passing(std::string id, double speedup, double score, int round = 1) {
  ks::SolutionRef r;
  r.solution_id = std::move(id);
  r.round = round;
  r.solution_name = "r" + std::to_string(round) + "-kernel";
  r.eval = Json::obj({{"status", "passed"}, {"latency_ms", 1.0 / score}, {"speedup", speedup}, {"score", score}});
  return r;
}

inline std::string edit(std::string_view ops) { return std::string(R"({"ops": [)") + std::string(ops) + "]}"; }

inline ks::EditRules propose_rules(int round = 1) {
  ks::EditRules r;
  r.purpose = ks::EditRules::Purpose::propose;
  r.round = round;
  return r;
}

inline bool has_error(const ks::EditOutcome& out, std::string_view needle) {
  for (const auto& e : out.errors)
    if (e.find(needle) != std::string::npos) return true;
  return false;
}

inline std::string all_errors(const ks::EditOutcome& out) {
  std::string s;
  for (const auto& e : out.errors) s += e + "\n";
  return s;
}

// Applies `answer` expecting a rejection whose errors mention `needle`, and
// checks that nothing was committed.
inline void expect_rejected(ks::WorldModel& wm, const std::string& answer, const ks::EditRules& rules,
                            std::string_view needle) {
  Json before = wm.to_json();
  auto version = wm.version();
  auto out = wm.apply_edits(answer, rules);
  CHECK_FALSE(out.ok);
  CHECK_MESSAGE(has_error(out, needle), "expected an error mentioning \"" << needle << "\", got:\n" << all_errors(out));
  CHECK(out.applied_ops == 0);
  CHECK(wm.to_json() == before);
  CHECK(wm.version() == version);
}

}  // namespace wmtest
