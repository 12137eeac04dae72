// A world-model snapshot read for display: each node with a status word and
// the few numbers a picture of the tree needs. Reads the JSON leniently (a
// missing or odd field is left empty), since a report must draw whatever a
// run left behind, also snapshots written by older versions.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ksearch/json.hpp"

namespace ks::report {

struct ViewNode {
  std::string id;
  std::string parent;  // empty for the root
  // root | solved (a passing kernel attached) | active (being worked on) |
  // open (executable: its parent is the root or solved) | waiting (its
  // parent has no kernel yet) | too_hard (a cycle on it ended without a
  // passing kernel) | decision (no action: a design choice only)
  std::string status;
  std::string title, decision, choice, description, rationale, notes;
  std::optional<double> score;       // priority V, 0..1
  int difficulty = 0;                // 1..5; 0 when the node has no action
  std::optional<double> rating;      // overall_rating_0_to_10
  std::optional<double> confidence;  // 0..1
  std::optional<double> expected_factor;
  int last_updated_round = 0;
  std::string solution_id, solution_name;
  int solution_round = 0;
  double latency_ms = 0, speedup = 0;
};

struct TreeView {
  std::string root_id;
  std::string active_id;
  std::uint64_t version = 0;
  std::string kernel_summary;
  std::vector<std::string> open_questions;
  std::vector<ViewNode> nodes;  // in the snapshot's order
};

// `failed` names nodes whose cycle ended without a passing kernel (from the
// event log); they show as too_hard while they have no kernel.
TreeView read_tree(const Json& world_model, const std::set<std::string>& failed = {});

// The tree in Graphviz dot; `failed` as for read_tree.
std::string tree_dot(const Json& world_model, const std::string& title, const std::set<std::string>& failed);

// Lenient field access: the value when present with the right type, else
// the default.
std::string str_field(const Json& j, std::string_view key, std::string def = {});
std::optional<double> num_field(const Json& j, std::string_view key);

}  // namespace ks::report
