// Frontier and action selection, as in the original: an open action is
// executable when its base kernel exists (its parent is the root or has a
// solution); the next action is the best-ranked executable one within the
// difficulty gate.
#pragma once

#include <vector>

#include "search/world_model/tree.hpp"
#include "ksearch/world_model.hpp"
#include "ksearch/sys/world_model.hpp"

namespace ks::core::wm {

// The selection order: score descending, difficulty ascending, overall rating
// descending, node id ascending. Deterministic, so a replayed run picks the
// same actions.
bool ranks_before(const Node& a, const Node& b);

// Executable open actions in selection order (no difficulty gate).
std::vector<const Node*> ranked_frontier(const Tree& t);

// The difficulty cap in force: the policy's cap, raised (never lowered) to
// relaxed_max_difficulty once the best attached passing factor over the
// task's baseline reaches relax_if_best_vs_baseline_ge; a task without a
// baseline keeps the policy's cap.
int effective_max_difficulty(const Tree& t, const SelectionPolicy& policy);

// The best-ranked frontier action within the cap; when none is within it,
// the best-ranked of all. nullptr when the frontier is empty.
const Node* select_action(const Tree& t, const SelectionPolicy& policy);

// The solved node with the highest attached passing score (ties: first in
// the tree), or nullptr.
const Node* best_solved_node(const Tree& t);
// The best mean_vs_baseline_factor of an attached passing kernel, or nullopt.
std::optional<double> best_passing_vs_baseline(const Tree& t);

// Open action children of `id`.
std::vector<const Node*> open_children(const Tree& t, std::string_view id);

// The original's skip rule inverted: proposals are due unless there are >= 3
// frontier actions and the best solved node (if any) already has an open
// child.
bool needs_proposals(const Tree& t);

}  // namespace ks::core::wm
