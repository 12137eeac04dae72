// The four edit operations (update_node, insert_node, split_node,
// delete_node) and the all-or-nothing rule: an edit is applied to a copy,
// every invariant is checked, and the copy replaces the tree only when all
// hold. In lenient mode (EditRules::lenient) the copy is repaired first:
// numbers clamped, unknown fields dropped, ops that break a rule skipped,
// each repair recorded.
#pragma once

#include <string>
#include <string_view>

#include "search/world_model/tree.hpp"
#include "ksearch/world_model.hpp"
#include "ksearch/sys/world_model.hpp"

namespace ks::core::wm {

// At most this many children per split_node, as in the original.
inline constexpr std::size_t kMaxSplitChildren = 8;

// Parses `answer` ({"active_leaf_id"?: id, "ops": [...]}, possibly wrapped in
// prose) and applies it to `tree` when every invariant and the purpose rule
// of `rules` hold (after the repairs, in lenient mode); otherwise `tree` is
// left untouched and the outcome lists every problem. Throws ks::Error(invalid_argument) when `rules` names a node
// that does not exist (a caller bug, not the LLM's).
EditOutcome apply_edit_answer(Tree& tree, std::string_view answer, const EditRules& rules);

// A fresh id "r<round>_n<k>" (smallest k not in use): deterministic, so a
// replayed run builds the same tree.
std::string next_node_id(const Tree& t, int round);

// Inserts an open action under `parent_id` (the deterministic fallbacks);
// returns its id.
std::string insert_action(Tree& t, const std::string& parent_id, Action action, int round,
                          std::string notes);

}  // namespace ks::core::wm
