#include "search/world_model/selection.hpp"
#include "ksearch/sys/world_model.hpp"

#include <algorithm>

namespace ks::core::wm {

bool ranks_before(const Node& a, const Node& b) {
  if (a.action.score != b.action.score) return a.action.score > b.action.score;
  if (a.action.difficulty != b.action.difficulty) return a.action.difficulty < b.action.difficulty;
  if (a.overall_rating != b.overall_rating) return a.overall_rating > b.overall_rating;
  return a.id < b.id;
}

std::vector<const Node*> ranked_frontier(const Tree& t) {
  // Tree::is_executable, with the parents looked up in one index.
  const TreeIndex idx(t);
  std::vector<const Node*> out;
  for (std::size_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (!t.is_open_action(n)) continue;
    const std::size_t parent = idx.parent(i);
    if (n.parent_id == t.root_id || (parent != TreeIndex::npos && t.nodes[parent].solved())) out.push_back(&n);
  }
  std::sort(out.begin(), out.end(), [](const Node* a, const Node* b) { return ranks_before(*a, *b); });
  return out;
}

std::optional<double> best_passing_vs_baseline(const Tree& t) {
  std::optional<double> best;
  for (const auto& n : t.nodes) {
    if (!n.solved() || !eval_passed(n.solution.eval)) continue;
    if (auto v = eval_vs_baseline(n.solution.eval); v && (!best || *v > *best)) best = v;
  }
  return best;
}

int effective_max_difficulty(const Tree& t, const SelectionPolicy& policy) {
  int cap = policy.max_difficulty;
  auto best = best_passing_vs_baseline(t);
  if (best && *best >= policy.relax_if_best_vs_baseline_ge) cap = std::max(cap, policy.relaxed_max_difficulty);
  return cap;
}

const Node* select_action(const Tree& t, const SelectionPolicy& policy) {
  auto ranked = ranked_frontier(t);
  std::erase_if(ranked, [&](const Node* n) {
    return std::find(policy.in_progress.begin(), policy.in_progress.end(), n->id) != policy.in_progress.end();
  });
  if (ranked.empty()) return nullptr;
  int cap = effective_max_difficulty(t, policy);
  for (const Node* n : ranked)
    if (n->action.difficulty <= cap) return n;
  // The gate is soft: with nothing under the cap, the search still moves.
  return ranked.front();
}

const Node* best_solved_node(const Tree& t) {
  const Node* best = nullptr;
  double best_score = 0;
  for (const auto& n : t.nodes) {
    if (!n.solved() || !eval_passed(n.solution.eval)) continue;
    double s = eval_score(n.solution.eval).value_or(0);
    if (!best || s > best_score) {
      best = &n;
      best_score = s;
    }
  }
  return best;
}

std::vector<const Node*> open_children(const Tree& t, std::string_view id) {
  std::vector<const Node*> out;
  for (const Node* c : t.children_of(id))
    if (t.is_open_action(*c)) out.push_back(c);
  return out;
}

bool needs_proposals(const Tree& t) {
  if (ranked_frontier(t).size() < 3) return true;
  const Node* best = best_solved_node(t);
  return best && open_children(t, best->id).empty();
}

}  // namespace ks::core::wm
