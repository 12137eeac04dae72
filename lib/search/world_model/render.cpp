#include "search/world_model/render.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "search/world_model/selection.hpp"

namespace ks::core::wm {

namespace {

// Backs `n` off to a UTF-8 sequence boundary.
std::size_t utf8_floor(std::string_view s, std::size_t n) {
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return n;
}

std::string node_title(const Node& n) {
  if (n.has_action()) return n.action.title;
  if (n.decision && n.choice && !n.decision->empty()) return *n.decision + " -> " + *n.choice;
  if (n.choice && !n.choice->empty()) return *n.choice;
  if (n.decision && !n.decision->empty()) return *n.decision;
  return n.is_root ? "(root)" : "(untitled)";
}

std::string path_ids(const Tree& t, std::string_view id) {
  std::string out;
  for (const Node* n : t.path_to(id)) out += (out.empty() ? "" : " > ") + n->id;
  return out;
}

Json compact_eval(const Json& eval) {
  if (!eval.is_object()) return Json();
  Json out = Json::object();
  if (const Json* s = eval.find("status")) out["status"] = *s;
  if (auto v = eval_latency_ms(eval)) out["latency_ms"] = *v;
  // A task scored against a baseline (FlashInfer's) speaks in its factor.
  if (auto b = eval_vs_baseline(eval)) out["mean_vs_baseline_factor"] = *b;
  else if (auto v = eval_speedup(eval)) out["speedup"] = *v;
  if (auto v = eval_score(eval)) out["score"] = *v;
  return out;
}

Json compact_node(const Node& n) {
  Json j = Json::obj({{"node_id", n.id},
                      {"parent_id", n.is_root ? Json() : Json(n.parent_id)},
                      {"node_type", n.is_root ? "root" : "decision"},
                      {"decision", n.decision ? Json(*n.decision) : Json()},
                      {"choice", n.choice ? Json(*n.choice) : Json()},
                      {"overall_rating_0_to_10", n.overall_rating},
                      {"confidence_0_to_1", n.confidence}});
  if (n.solved() || !n.solution.parent_solution_id.empty()) {
    Json s = Json::obj({{"solution_id", n.solved() ? Json(n.solution.solution_id) : Json()},
                        {"parent_solution_id", n.solution.parent_solution_id.empty()
                                                   ? Json()
                                                   : Json(n.solution.parent_solution_id)}});
    if (n.solution.round_index) s["round_index"] = *n.solution.round_index;
    if (n.solved()) s["eval"] = compact_eval(n.solution.eval);
    j["solution_ref"] = std::move(s);
  }
  if (n.has_action()) {
    j["action"] = Json::obj({{"title", n.action.title},
                             {"difficulty_1_to_5", n.action.difficulty},
                             {"score_0_to_1", n.action.score},
                             {"expected_vs_baseline_factor",
                              n.action.expected_factor ? Json(*n.action.expected_factor) : Json()}});
  }
  return j;
}

// How much of the compact view to keep; each step down drops detail.
struct CompactLevel {
  std::size_t questions = 6;
  std::size_t summary_chars = std::string::npos;
  std::size_t siblings = 2;
  std::size_t path_tail = std::string::npos;  // keep the root and the last this-many path nodes (>= 1: the active one)
  bool signals = true;
};

std::string compact_text(const Tree& t, const CompactLevel& level) {
  Json questions = Json::array();
  for (std::size_t i = 0; i < t.open_questions.size() && i < level.questions; ++i)
    questions.push_back(t.open_questions[i]);

  auto path = t.path_to(t.active_id);
  if (level.path_tail != std::string::npos && path.size() > level.path_tail + 1)
    path.erase(path.begin() + 1, path.end() - static_cast<std::ptrdiff_t>(level.path_tail));
  Json nodes = Json::array();
  for (const Node* n : path) nodes.push_back(compact_node(*n));
  if (const Node* active = t.find(t.active_id); active && !active->is_root && level.siblings > 0) {
    std::vector<const Node*> siblings;
    for (const Node* s : t.children_of(active->parent_id))
      if (s->id != active->id) siblings.push_back(s);
    std::stable_sort(siblings.begin(), siblings.end(),
                     [](const Node* a, const Node* b) { return a->overall_rating > b->overall_rating; });
    for (std::size_t i = 0; i < siblings.size() && i < level.siblings; ++i) nodes.push_back(compact_node(*siblings[i]));
  }
  std::string summary = t.kernel_summary;
  if (summary.size() > level.summary_chars) summary = clip(summary, level.summary_chars);
  Json j = Json::obj({{"kernel_summary", summary},
                      {"open_questions", std::move(questions)},
                      {"computed_signals", level.signals ? t.computed_signals : Json::object()},
                      {"decision_tree", Json::obj({{"root_id", t.root_id},
                                                   {"active_leaf_id", t.active_id},
                                                   {"nodes", std::move(nodes)}})}});
  return j.dump();
}

}  // namespace

std::string clip(std::string_view text, std::size_t budget) {
  if (text.size() <= budget) return std::string(text);
  std::string marker = fmt::format("\n[... cut: {} of {} characters shown]", 0, text.size());
  // The marker's digits depend on the cut; size it for the widest case.
  std::size_t reserve = marker.size() + fmt::format("{}", text.size()).size();
  if (budget <= reserve) return std::string(text.substr(0, utf8_floor(text, budget)));
  std::size_t keep = utf8_floor(text, budget - reserve);
  // Prefer a line end when one is within the last quarter of what we keep.
  std::size_t nl = text.rfind('\n', keep);
  if (nl != std::string_view::npos && nl > keep * 3 / 4) keep = nl;
  std::string out(text.substr(0, keep));
  out += fmt::format("\n[... cut: {} of {} characters shown]", keep, text.size());
  return out;
}

std::string render_compact(const Tree& t, std::size_t max_chars) {
  if (t.nodes.empty()) return clip("(no world model yet)", max_chars);
  const CompactLevel levels[] = {
      {},
      {.siblings = 0},
      {.questions = 3, .summary_chars = 600, .siblings = 0},
      {.questions = 3, .summary_chars = 600, .siblings = 0, .path_tail = 3},
      {.questions = 0, .summary_chars = 300, .siblings = 0, .path_tail = 1, .signals = false},
      {.questions = 0, .summary_chars = 0, .siblings = 0, .path_tail = 1, .signals = false},
  };
  std::string text;
  for (const auto& level : levels) {
    text = compact_text(t, level);
    if (text.size() <= max_chars) return text;
  }
  return clip(text, max_chars);
}

std::string eval_brief(const Json& eval) {
  if (!eval.is_object()) return "no evaluation";
  std::string out = eval.get_string("status", "unknown");
  if (auto v = eval_latency_ms(eval)) out += fmt::format(" {:.4g} ms", *v);
  if (auto b = eval_vs_baseline(eval)) out += fmt::format(", {:.2f}x vs baseline", *b);
  else if (auto v = eval_speedup(eval)) out += fmt::format(", {:.2f}x vs reference", *v);
  return out;
}

namespace {

// Lines deeper than this are indented as deep as this and say their depth:
// indenting each line by its depth would make the view of a deep chain
// quadratic in its length.
constexpr std::size_t kMaxIndentLevels = 32;

std::string tree_line(const Tree& t, const Node& n, std::size_t depth) {
  std::string line = std::string(std::min(depth, kMaxIndentLevels) * 2, ' ');
  if (depth > kMaxIndentLevels) line += fmt::format("[depth {}] ", depth);
  line += fmt::format("{}{} {}", n.id == t.active_id ? "* " : "- ", n.id, node_title(n));
  if (n.has_action() || n.solved()) {
    line += fmt::format("  [{}]", n.solved() ? "closed" : "open");
    if (n.has_action()) line += fmt::format(" score {:.2f} difficulty {}", n.action.score, n.action.difficulty);
  }
  if (n.solved())
    line += fmt::format("  solution {} ({})", n.solution.solution_id.substr(0, 12), eval_brief(n.solution.eval));
  return line + "\n";
}

}  // namespace

std::string render_tree(const Tree& t) {
  if (t.nodes.empty()) return "(no world model yet)\n";
  const TreeIndex idx(t);
  std::string out;
  // Depth-first from the root, children in node order, on a stack of our
  // own (a chain thousands deep would overflow the call stack); the visited
  // marks guard against malformed input.
  std::vector<char> visited(t.nodes.size(), 0);
  std::vector<std::pair<std::size_t, std::size_t>> stack;  // (position, depth)
  auto visit_from = [&](std::size_t start) {
    stack.emplace_back(start, 0);
    while (!stack.empty()) {
      const auto [i, depth] = stack.back();
      stack.pop_back();
      if (visited[i]) continue;
      visited[i] = 1;
      out += tree_line(t, t.nodes[i], depth);
      const auto& kids = idx.children(i);
      for (auto k = kids.rbegin(); k != kids.rend(); ++k) stack.emplace_back(*k, depth + 1);
    }
  };
  if (std::size_t root = idx.position(t.root_id); root != TreeIndex::npos) visit_from(root);
  for (std::size_t i = 0; i < t.nodes.size(); ++i)  // anything unreachable still shows
    if (!visited[i]) visit_from(i);
  return out;
}

std::string path_text(const Tree& t, std::string_view id) {
  std::string out;
  for (const Node* n : t.path_to(id)) {
    std::string line = n->is_root && !n->decision && !n->choice
                           ? fmt::format("{}: (root)", n->id)
                           : fmt::format("{}: {} -> {}", n->id, n->decision.value_or("-"), n->choice.value_or("-"));
    if (n->solved()) line += fmt::format(" [solution {}: {}]", n->solution.solution_id.substr(0, 12), eval_brief(n->solution.eval));
    out += line + "\n";
  }
  return out;
}

std::string status_text(const Tree& t) {
  std::size_t solved = 0, open = 0;
  for (const auto& n : t.nodes) {
    solved += n.solved();
    open += t.is_open_action(n);
  }
  std::string out = fmt::format("nodes: {}, with a kernel: {}, open actions: {} (executable now: {})\n",
                                t.nodes.size(), solved, open, ranked_frontier(t).size());
  out += fmt::format("active path: {}\n", path_ids(t, t.active_id));
  if (const Node* best = best_solved_node(t))
    out += fmt::format("best node: {} \"{}\" ({}); path {}\n", best->id, node_title(*best),
                       eval_brief(best->solution.eval), path_ids(t, best->id));
  else
    out += "best node: none yet (no passing kernel attached)\n";
  // Root children with no kernel anywhere below them: ideas not yet tested.
  // A node is tested when it holds a kernel or one below it does; each walk
  // up from a kernel stops at a node an earlier walk marked, so the marking
  // is linear however deep the tree (and ends on a cycle).
  const TreeIndex idx(t);
  std::vector<char> tested(t.nodes.size(), 0);
  for (std::size_t i = 0; i < t.nodes.size(); ++i) {
    if (!t.nodes[i].solved()) continue;
    for (std::size_t j = idx.position(t.nodes[i].id); j != TreeIndex::npos && !tested[j]; j = idx.parent(j))
      tested[j] = 1;
  }
  std::string unexplored;
  for (const Node* c : t.children_of(t.root_id))
    if (!tested[static_cast<std::size_t>(c - t.nodes.data())]) unexplored += (unexplored.empty() ? "" : ", ") + c->id;
  out += fmt::format("under-explored root children: {}\n", unexplored.empty() ? "none" : unexplored);
  if (const Json* trace = t.computed_signals.find("trace")) out += "last trace: " + trace->dump() + "\n";
  return out;
}

std::string frontier_text(const Tree& t, std::size_t max_items) {
  auto ranked = ranked_frontier(t);
  if (ranked.empty()) return "(no executable open actions)\n";
  std::string out;
  for (std::size_t i = 0; i < ranked.size() && i < max_items; ++i) {
    const Node& n = *ranked[i];
    const Node* parent = t.find(n.parent_id);
    std::string base = parent && parent->solved() ? eval_brief(parent->solution.eval) : "no base kernel";
    out += fmt::format("- {} under {} ({}): \"{}\" difficulty {}, score {:.2f}", n.id, n.parent_id, base,
                       n.action.title, n.action.difficulty, n.action.score);
    if (n.action.expected_factor) out += fmt::format(", expected {:.2f}x", *n.action.expected_factor);
    out += "\n";
  }
  if (ranked.size() > max_items) out += fmt::format("({} more)\n", ranked.size() - max_items);
  return out;
}

std::string chosen_action_text(const Tree& t, std::string_view id) {
  const Node* n = t.find(id);
  if (!n) return fmt::format("(node \"{}\" not found)", id);
  std::string out = fmt::format("node_id: {}\nbase_node_id: {}\ntitle: {}\ndifficulty_1_to_5: {}\n", n->id,
                                n->parent_id, n->action.title, n->action.difficulty);
  out += fmt::format("score_0_to_1: {:.2f}\n", n->action.score);
  if (n->action.expected_factor) out += fmt::format("expected_vs_baseline_factor: {}\n", *n->action.expected_factor);
  if (!n->action.description.empty()) out += "description: " + n->action.description + "\n";
  if (!n->action.rationale.empty()) out += "rationale: " + n->action.rationale + "\n";
  return out;
}

}  // namespace ks::core::wm
