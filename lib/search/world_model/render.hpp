// Text views of the tree: the compact JSON for prompts, the indented tree
// for `ksearch show`, and the blocks the world-model prompts are built from.
#pragma once

#include <string>
#include <string_view>

#include "search/world_model/tree.hpp"

namespace ks::core::wm {

// `text` cut to at most `budget` bytes, at a line end where one is near,
// never inside a UTF-8 sequence, with a marker saying how much was cut.
std::string clip(std::string_view text, std::size_t budget);

// The original's compact view: kernel_summary, the first 6 open questions,
// computed_signals and the active path plus the 2 top-rated siblings of the
// active node, each node reduced to ids, type, decision, choice, rating,
// confidence, a short solution_ref and a short action. At most `max_chars`
// long: detail is dropped step by step, and only as a last resort is the
// text cut.
std::string render_compact(const Tree& t, std::size_t max_chars);

// An indented tree, one node per line: id, title, open/closed, score,
// difficulty, the attached solution and its latency; the active node is
// marked with '*'. Below 32 levels lines stay at that indent and say their
// depth ("[depth 40] - n40 ..."), so the text is linear in the tree's size.
std::string render_tree(const Tree& t);

// Prompt blocks.
std::string path_text(const Tree& t, std::string_view id);            // "root: ...\n n1: decision -> choice"
std::string status_text(const Tree& t);                               // counts, active path, best node, gaps
std::string frontier_text(const Tree& t, std::size_t max_items = 10);  // ranked executable actions
std::string chosen_action_text(const Tree& t, std::string_view id);   // the cycle's action
std::string eval_brief(const Json& eval);                             // "passed 0.812 ms, 2.10x"

}  // namespace ks::core::wm
