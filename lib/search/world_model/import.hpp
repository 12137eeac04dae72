// Reading another search's world model (--continue-from-world-model):
// K-Search's own world_model.json, normalised as the original normalises it
// (_normalize_world_model_obj), into this library's schema, with every
// repair said in a sentence. This library's own snapshots are read strictly
// (WorldModel::load_json) and need none of this.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ksearch/json.hpp"

namespace ks::core::wm {

struct NormalizedTree {
  Json tree;                         // this library's schema: loads with WorldModel::load_json
  std::vector<std::string> repairs;  // one sentence per change that was not a plain default
};

// K-Search's world model (kernel_summary, open_questions, decision_tree
// {root_id, active_leaf_id, nodes}, computed_signals) as the original reads
// it: numbers clamped to their ranges, the legacy difficulty_0_to_3 read
// as difficulty_1_to_5 - 1, a non-root node without a parent or with one
// that does not exist re-pointed to the root, solution_ref read as
// {solution_id, parent_solution_id, eval} (its eval in the original's form,
// "PASSED" and metrics.score, kept as this library's compact one), unknown
// fields dropped. Beyond the original, what this library's invariants need:
// node ids made well-formed and unique, one root without an action,
// cycles broken, an open node's lineage following its parent, and an
// active_leaf_id that exists. A field that is absent takes its default
// without a repair. Throws ks::Error(invalid_argument) when `j` is not an
// object.
NormalizedTree normalize_ksearch_world_model(const Json& j);

// Replaces every solution_ref.solution_id and parent_solution_id found in
// `ids` (K-Search's hashes -> this library's content ids) in a tree of
// this library's schema.
void remap_solution_ids(Json& tree, const std::map<std::string, std::string>& ids);

// K-Search's evaluation ({"status": "PASSED", "latency_ms",
// "speedup_factor", "mean_vs_baseline_factor", "metrics": {"score"}}) or
// this library's, as this library's compact form {status, latency_ms,
// speedup, score, mean_vs_baseline_factor?}; null for anything else.
Json compact_recorded_eval(const Json& eval);

}  // namespace ks::core::wm
