#include "search/world_model/edits.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>
#include <set>
#include <utility>

#include "core/response/json_extract.hpp"
#include "search/world_model/selection.hpp"
#include "ksearch/error.hpp"
#include "ksearch/sys/world_model.hpp"

namespace ks::core::wm {

std::string next_node_id(const Tree& t, int round) {
  // One pass marks the k in use; n nodes leave one of 1..n+1 free.
  const std::string prefix = fmt::format("r{}_n", round);
  std::vector<char> used(t.nodes.size() + 2, 0);
  for (const auto& n : t.nodes) {
    if (!n.id.starts_with(prefix)) continue;
    std::string_view digits = std::string_view(n.id).substr(prefix.size());
    if (digits.empty() || digits.size() > 9 || digits[0] == '0' ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    std::size_t k = std::stoul(std::string(digits));
    if (k < used.size()) used[k] = 1;
  }
  std::size_t k = 1;
  while (used[k]) ++k;
  return prefix + std::to_string(k);
}

std::string insert_action(Tree& t, const std::string& parent_id, Action action, int round,
                          std::string notes) {
  const Node* parent = t.find(parent_id);
  if (!parent) throw Error(Status::not_found, fmt::format("world model: node \"{}\" does not exist", parent_id));
  Node n;
  n.id = next_node_id(t, round);
  n.parent_id = parent_id;
  n.decision = action.title;
  n.choice = action.description;
  n.solution.parent_solution_id = parent->solution.solution_id;
  n.overall_rating = action.score * 10;
  n.last_updated_round = round;
  n.notes = std::move(notes);
  n.action = std::move(action);
  std::string id = n.id;
  t.nodes.push_back(std::move(n));
  return id;
}

namespace {

const char* purpose_name(EditRules::Purpose p) {
  switch (p) {
    case EditRules::Purpose::propose: return "propose";
    case EditRules::Purpose::refine: return "refine";
    case EditRules::Purpose::too_hard: return "too_hard";
  }
  return "?";
}

constexpr std::array<std::string_view, 4> kOpKinds = {"update_node", "insert_node", "split_node",
                                                      "delete_node"};

template <std::size_t N>
std::string join(const std::array<std::string_view, N>& items) {
  std::string out;
  for (auto s : items) out += (out.empty() ? "" : ", ") + std::string(s);
  return out;
}

// Flags op fields outside `known` (lenient: they are dropped).
template <std::size_t N>
void allow_fields(const Json& op, const std::array<std::string_view, N>& known, const std::string& where,
                  Problems& p) {
  for (const auto& [key, value] : op.as_object())
    if (std::find(known.begin(), known.end(), key) == known.end())
      p.repair(fmt::format("{}: unknown field \"{}\" (fields of this op: {})", where, key, join(known)),
               fmt::format("{}: unknown field \"{}\" dropped", where, key));
}

std::string score_text(double v) { return fmt::format("{:.2f}", v); }

// "op 4 (insert_node) skipped: <reasons>", each reason without the `where`
// prefix it repeats.
std::string skipped(const std::string& where, const std::vector<std::string>& reasons) {
  const std::string prefix = where + ": ";
  std::string out;
  for (const auto& r : reasons) {
    std::string_view text = r;
    if (text.starts_with(prefix)) text.remove_prefix(prefix.size());
    out += (out.empty() ? "" : "; ") + std::string(text);
  }
  return fmt::format("{} skipped: {}", where, out);
}

// One edit being applied to a working copy of the tree.
class EditRun {
 public:
  EditRun(const Tree& tree, const EditRules& rules)
      : before_(tree), work_(tree), rules_(rules), problems_(rules.lenient) {}

  void apply(const Json& answer);
  // Whether apply() refused the answer whole (over the op cap): the
  // invariants of an untouched tree would only add noise.
  bool over_cap() const { return over_cap_; }
  void check_invariants();
  bool ok() const { return problems_.empty(); }
  Tree& result() { return work_; }
  EditOutcome outcome() const;

 private:
  void apply_op(const Json& op, std::size_t number);
  void update_node(const Json& op, const std::string& where, Problems& p, Json& rep);
  void insert_node(const Json& op, const std::string& where, Problems& p, Json& rep);
  void split_node(const Json& op, const std::string& where, Problems& p, Json& rep);
  void delete_node(const Json& op, const std::string& where, Problems& p, Json& rep);
  // Shared by insert_node and split_node; returns the new id or "".
  std::string insert_child(const std::string& parent_id, const Json& node_json, const Json* op_parent_solution,
                           const std::string& op_where, const std::string& where, Problems& p);
  Node* existing(const Json& op, std::string_view field, const std::string& where, Problems& p);
  // Replaces an existing node, keeping the old one for undo().
  void replace(Node& node, Node updated);
  // Puts the tree back as it was before the op (what undo_ recorded).
  void undo();
  // Lenient: whether one more new node would exceed the cap (then `p` says so).
  bool over_new_node_cap(const std::string& where, Problems& p) const;
  void check_purpose();

  const Tree& before_;
  Tree work_;
  const EditRules& rules_;
  // Every error (rejects the answer) and, in lenient mode, every repair.
  Problems problems_;
  bool over_cap_ = false;
  // What the op being applied changed: the node count before it (it may
  // append nodes), the active node, the nodes it replaced and the one it
  // erased. Undoing that costs what the op did, where a copy of the tree per
  // op would cost the tree.
  struct Undo {
    std::size_t size = 0;
    std::string active_id;
    std::vector<std::pair<std::size_t, Node>> replaced;  // position, node before
    std::optional<std::pair<std::size_t, Node>> erased;  // position, node
  };
  Undo undo_;
  int applied_ops_ = 0;
  int new_nodes_ = 0;
  std::vector<std::string> new_ids_;
  Json op_reports_ = Json::array();
};

void EditRun::apply(const Json& answer) {
  const Json* ops = answer.find("ops");
  for (const auto& [key, value] : answer.as_object()) {
    if (key == "ops" || key == "active_leaf_id") continue;
    problems_.repair(fmt::format("the answer has an unknown top-level field \"{}\"; an edit is {{\"active_leaf_id\": "
                                 "optional id, \"ops\": [...]}}",
                                 key),
                     fmt::format("the answer's unknown top-level field \"{}\" dropped", key));
  }
  if (!ops) {
    std::string hint = answer.contains("decision_tree")
                           ? " (this looks like a whole world model; send edit operations instead)"
                           : "";
    problems_.add(fmt::format("the answer has no \"ops\" array; an edit is {{\"ops\": [{{\"op\": \"insert_node\", "
                              "...}}, ...]}}{}",
                              hint));
    return;
  }
  if (!ops->is_array()) {
    problems_.add(fmt::format("\"ops\" must be an array of operations, found {}", found_text(*ops)));
    return;
  }
  // Refused whole, before any op runs: each op works on a copy of the tree.
  if (ops->size() > kMaxEditOps) {
    problems_.add_unrepairable(fmt::format("the answer has {} ops; at most {} are accepted in one edit (the world "
                                           "model's op cap, docs/world-model.md \"Limits\"): send the few that matter "
                                           "most",
                                           ops->size(), kMaxEditOps));
    over_cap_ = true;
    return;
  }
  for (std::size_t i = 0; i < ops->size(); ++i) apply_op((*ops)[i], i + 1);

  if (const Json* active = answer.find("active_leaf_id"); active && !active->is_null()) {
    const std::string kept = fmt::format("; ignored (the active node stays \"{}\")", work_.active_id);
    if (!active->is_string()) {
      std::string problem =
          fmt::format("active_leaf_id must be a node id string, found {}", found_text(*active));
      problems_.repair(problem, problem + kept);
    } else if (!work_.find(active->as_string())) {
      problems_.repair(fmt::format("active_leaf_id \"{}\" does not exist after the ops; existing ids: {}",
                                   active->as_string(), work_.id_list()),
                       fmt::format("active_leaf_id \"{}\" does not exist after the ops{}", active->as_string(), kept));
    } else {
      work_.active_id = active->as_string();
    }
  }
}

void EditRun::apply_op(const Json& op, std::size_t number) {
  Json rep = Json::obj({{"op_index", static_cast<long long>(number)}});
  // An op that cannot be read: lenient mode skips it, strict mode rejects.
  auto unreadable = [&](std::string problem, std::string reason) {
    bool skip = problems_.repair(std::move(problem), fmt::format("op {} skipped: {}", number, reason));
    rep["status"] = skip ? "skipped" : "rejected";
    op_reports_.push_back(std::move(rep));
  };
  if (!op.is_object()) {
    unreadable(fmt::format("op {} must be an object like {{\"op\": \"update_node\", ...}}, found {}", number,
                           found_text(op)),
               fmt::format("it must be an object, found {}", found_text(op)));
    return;
  }
  const Json* kind = op.find("op");
  if (!kind || !kind->is_string() ||
      std::find(kOpKinds.begin(), kOpKinds.end(), kind->as_string()) == kOpKinds.end()) {
    std::string found = !kind ? "it is missing"
                        : kind->is_string() ? fmt::format("found \"{}\"", kind->as_string())
                                            : fmt::format("found {}", found_text(*kind));
    std::string reason = fmt::format("field \"op\" must be one of {}; {}", join(kOpKinds), found);
    unreadable(fmt::format("op {}: {}", number, reason), reason);
    return;
  }
  const std::string& name = kind->as_string();
  rep["op"] = name;
  std::string where = fmt::format("op {} ({})", number, name);
  // Each op works on the copy and is undone if it has a problem, so later
  // ops see a consistent tree and report their own problems, not echoes.
  undo_ = Undo{work_.nodes.size(), work_.active_id, {}, std::nullopt};
  int new_nodes_before = new_nodes_;
  std::size_t new_ids_before = new_ids_.size();
  Problems p(rules_.lenient);
  if (name == "update_node") update_node(op, where, p, rep);
  else if (name == "insert_node") insert_node(op, where, p, rep);
  else if (name == "split_node") split_node(op, where, p, rep);
  else delete_node(op, where, p, rep);
  // Lenient: an op that leaves the tree broken (a patched base kernel that
  // is not the parent's) is skipped like any other that breaks a rule.
  if (p.empty() && rules_.lenient) check_structure(work_, p);

  if (p.empty()) {
    ++applied_ops_;
    rep["status"] = "applied";
    for (const auto& r : p.repairs()) problems_.repaired(r);
  } else if (!rules_.lenient) {
    // Strict: the answer is rejected anyway. What the op could do stays on
    // the copy, so the ops after it are checked against the tree it meant
    // (not against its absence) and the one rejection lists every problem.
    rep["status"] = "rejected";
    for (const auto& e : p.list()) problems_.add(e);
  } else {
    undo();
    new_nodes_ = new_nodes_before;
    new_ids_.resize(new_ids_before);
    if (!p.unrepairable()) {
      rep["status"] = "skipped";
      problems_.repaired(skipped(where, p.list()));
    } else {
      rep["status"] = "rejected";
      for (const auto& e : p.list()) problems_.add(e);
    }
  }
  op_reports_.push_back(std::move(rep));
}

void EditRun::replace(Node& node, Node updated) {
  undo_.replaced.emplace_back(static_cast<std::size_t>(&node - work_.nodes.data()), node);
  node = std::move(updated);
}

void EditRun::undo() {
  auto& nodes = work_.nodes;
  if (undo_.erased) nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(undo_.erased->first),
                                 std::move(undo_.erased->second));
  nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(undo_.size), nodes.end());
  for (auto it = undo_.replaced.rbegin(); it != undo_.replaced.rend(); ++it) nodes[it->first] = std::move(it->second);
  work_.active_id = undo_.active_id;
}

bool EditRun::over_new_node_cap(const std::string& where, Problems& p) const {
  if (!rules_.lenient || new_nodes_ < rules_.max_new_nodes) return false;
  p.add(fmt::format("{}: at most {} new nodes per edit", where, rules_.max_new_nodes));
  return true;
}

Node* EditRun::existing(const Json& op, std::string_view field, const std::string& where, Problems& p) {
  const Json* id = op.find(field);
  if (!id || !id->is_string()) {
    p.add(fmt::format("{}: {} is required and must be a node id string{}", where, field,
                      id ? fmt::format(", found {}", found_text(*id)) : ""));
    return nullptr;
  }
  Node* n = work_.find(id->as_string());
  if (!n)
    p.add(fmt::format("{}: {} \"{}\" does not exist; existing ids: {}", where, field, id->as_string(),
                      work_.id_list()));
  return n;
}

void EditRun::update_node(const Json& op, const std::string& where, Problems& p, Json& rep) {
  allow_fields(op, std::array<std::string_view, 3>{"op", "node_id", "patch"}, where, p);
  Node* node = existing(op, "node_id", where, p);
  const Json* patch = op.find("patch");
  if (!patch || !patch->is_object()) {
    p.add(fmt::format("{}: patch is required and must be an object of fields to change{}", where,
                      patch ? fmt::format(", found {}", found_text(*patch)) : ""));
    return;
  }
  if (!node) return;
  rep["node_id"] = node->id;
  Node updated = *node;
  read_node_fields(*patch, updated, NodeRead::patch_from_llm, where + ": patch", p);
  if (updated.is_root && updated.has_action())
    p.add_unrepairable(fmt::format("{}: the root cannot carry an action (its action.title must stay empty)", where));
  if (!patch->contains("last_updated_round")) updated.last_updated_round = rules_.round;
  replace(*node, std::move(updated));
}

std::string EditRun::insert_child(const std::string& parent_id, const Json& node_json,
                                  const Json* op_parent_solution, const std::string& op_where,
                                  const std::string& where, Problems& p) {
  const Node* parent = work_.find(parent_id);
  if (!parent) {
    p.add(fmt::format("{}: parent_id \"{}\" does not exist; existing ids: {}", op_where, parent_id,
                      work_.id_list()));
    return {};
  }
  Node n;
  n.last_updated_round = rules_.round;
  bool score_given = read_node_fields(node_json, n, NodeRead::new_from_llm, where, p);
  if (!node_json.is_object()) return {};
  if (n.is_root)
    p.add(fmt::format("{}: node_type \"root\" is reserved for the root; new nodes are \"decision\" nodes", where));
  if (!n.parent_id.empty() && n.parent_id != parent_id)
    p.add(fmt::format("{}: node.parent_id \"{}\" contradicts the parent \"{}\" this op inserts under", where,
                      n.parent_id, parent_id));
  n.parent_id = parent_id;

  // parent_solution_id is filled in from the parent; a different value means
  // the model is confused about which kernel the action builds on.
  const std::string& expected = parent->solution.solution_id;
  auto check_parent_solution = [&](const std::string& given, const std::string& at, std::string_view field) {
    if (!given.empty() && given != expected)
      p.add(fmt::format("{}: {} \"{}\" does not match parent \"{}\"'s solution ({}); leave it out and it is "
                        "filled in",
                        at, field, given, parent_id, expected.empty() ? "none" : "\"" + expected + "\""));
  };
  if (op_parent_solution && !op_parent_solution->is_null()) {
    if (!op_parent_solution->is_string()) {
      std::string problem = fmt::format("{}: parent_solution_id must be a string or null, found {}", op_where,
                                        found_text(*op_parent_solution));
      p.repair(problem, problem + "; dropped (it is filled in from the parent)");
    } else {
      check_parent_solution(op_parent_solution->as_string(), op_where, "parent_solution_id");
    }
  }
  check_parent_solution(n.solution.parent_solution_id, where, "solution_ref.parent_solution_id");
  n.solution.parent_solution_id = expected;

  if (n.id.empty() || work_.find(n.id)) {
    n.id = next_node_id(work_, rules_.round);
  } else if (std::string e = check_node_id(n.id); !e.empty()) {
    std::string generated = next_node_id(work_, rules_.round);
    if (p.repair(fmt::format("{}: {}", where, e), fmt::format("{}: {}; the node got \"{}\"", where, e, generated)))
      n.id = generated;
  }
  if (!score_given && n.has_action()) n.action.score = n.overall_rating / 10.0;
  // Strict: a node with a bad field still goes in (without that field) when
  // it can stand in the tree, so later ops that name it are checked too.
  if (!p.empty() && (rules_.lenient || n.is_root || !check_node_id(n.id).empty())) return {};
  std::string id = n.id;
  work_.nodes.push_back(std::move(n));
  ++new_nodes_;
  new_ids_.push_back(id);
  return id;
}

void EditRun::insert_node(const Json& op, const std::string& where, Problems& p, Json& rep) {
  allow_fields(op, std::array<std::string_view, 4>{"op", "parent_id", "parent_solution_id", "node"}, where, p);
  const Json* parent = op.find("parent_id");
  const Json* node = op.find("node");
  if (!parent || !parent->is_string()) {
    p.add(fmt::format("{}: parent_id is required and must be a node id string", where));
    return;
  }
  if (!node) {
    p.add(fmt::format("{}: node is required (the new node's fields)", where));
    return;
  }
  if (over_new_node_cap(where, p)) return;
  std::string requested = node->is_object() && node->find("node_id") && node->find("node_id")->is_string()
                              ? node->find("node_id")->as_string()
                              : "";
  std::string id = insert_child(parent->as_string(), *node, op.find("parent_solution_id"), where, where + ": node", p);
  if (id.empty()) return;
  rep["node_id"] = id;
  if (!requested.empty() && requested != id)
    rep["note"] = fmt::format("node_id \"{}\" {}; the node got \"{}\"", requested,
                              check_node_id(requested).empty() ? "was taken" : "is not a valid id", id);
}

void EditRun::split_node(const Json& op, const std::string& where, Problems& p, Json& rep) {
  allow_fields(op, std::array<std::string_view, 4>{"op", "node_id", "parent_patch", "children"}, where, p);
  Node* node = existing(op, "node_id", where, p);
  const Json* children = op.find("children");
  if (!children || !children->is_array() || children->empty()) {
    p.add(fmt::format("{}: children is required and must be a non-empty array of nodes", where));
    return;
  }
  if (children->size() > kMaxSplitChildren)
    p.repair(fmt::format("{}: split_node takes at most {} children, found {}", where, kMaxSplitChildren,
                         children->size()),
             fmt::format("{}: children[{}..{}] dropped (split_node takes at most {} children)", where,
                         kMaxSplitChildren, children->size() - 1, kMaxSplitChildren));
  if (!node) return;
  std::string id = node->id;
  rep["node_id"] = id;
  if (const Json* patch = op.find("parent_patch"); patch && !patch->is_null()) {
    Node updated = *node;
    read_node_fields(*patch, updated, NodeRead::patch_from_llm, where + ": parent_patch", p);
    if (updated.is_root && updated.has_action())
      p.add_unrepairable(fmt::format("{}: the root cannot carry an action (its action.title must stay empty)", where));
    if (!patch->contains("last_updated_round")) updated.last_updated_round = rules_.round;
    replace(*node, std::move(updated));
  }
  Json ids = Json::array();
  for (std::size_t i = 0; i < children->size() && i < kMaxSplitChildren; ++i) {
    std::string child_where = fmt::format("{}: children[{}]", where, i);
    if (!rules_.lenient) {
      std::string child = insert_child(id, (*children)[i], nullptr, where, child_where, p);
      if (!child.empty()) ids.push_back(child);
      continue;
    }
    // Lenient: a child that breaks a rule is skipped, not the whole split.
    Problems cp(true);
    std::string child;
    if (!over_new_node_cap(child_where, cp)) child = insert_child(id, (*children)[i], nullptr, where, child_where, cp);
    if (!cp.empty() && !cp.unrepairable()) {
      p.repaired(skipped(child_where, cp.list()));
      continue;
    }
    p.absorb(cp);
    if (!child.empty()) ids.push_back(child);
  }
  rep["children"] = std::move(ids);
}

void EditRun::delete_node(const Json& op, const std::string& where, Problems& p, Json& rep) {
  allow_fields(op, std::array<std::string_view, 2>{"op", "node_id"}, where, p);
  Node* node = existing(op, "node_id", where, p);
  if (!node) return;
  rep["node_id"] = node->id;
  if (node->is_root) {
    p.add_unrepairable(fmt::format("{}: the root cannot be deleted", where));
    return;
  }
  if (node->solved()) {
    p.add_unrepairable(fmt::format("{}: node \"{}\" has the attached solution \"{}\" and cannot be deleted; lower its "
                      "action.score_0_to_1 instead",
                      where, node->id, node->solution.solution_id));
    return;
  }
  if (std::find(rules_.in_progress.begin(), rules_.in_progress.end(), node->id) != rules_.in_progress.end()) {
    p.add(fmt::format("{}: node \"{}\" is being worked on by a concurrent cycle and cannot be deleted; lower its "
                      "action.score_0_to_1 instead",
                      where, node->id));
    return;
  }
  auto kids = work_.children_of(node->id);
  if (!kids.empty()) {
    std::string list;
    for (const Node* k : kids) list += (list.empty() ? "" : ", ") + k->id;
    p.add(fmt::format("{}: node \"{}\" has children ({}); only leaves can be deleted, so lower its score instead",
                      where, node->id, list));
    return;
  }
  if (work_.active_id == node->id) work_.active_id = node->parent_id;
  const std::size_t pos = static_cast<std::size_t>(node - work_.nodes.data());
  undo_.erased.emplace(pos, std::move(*node));
  work_.nodes.erase(work_.nodes.begin() + static_cast<std::ptrdiff_t>(pos));
}

void EditRun::check_invariants() {
  check_structure(work_, problems_);
  check_snapshot_size(work_, problems_, &before_);
  const TreeIndex now_idx(work_);
  const Node& old_root = before_.root();
  const Node* new_root = now_idx.find(before_.root_id);
  if (work_.root_id != before_.root_id || !new_root || !new_root->is_root)
    problems_.add(fmt::format("the root id must stay \"{}\"", before_.root_id));
  else if (new_root->decision != old_root.decision || new_root->choice != old_root.choice)
    problems_.add("the root's decision and choice must not change");
  for (const auto& old : before_.nodes) {
    if (!old.solved()) continue;
    const Node* now = now_idx.find(old.id);
    if (!now || now->solution.solution_id != old.solution.solution_id || now->solution.eval != old.solution.eval)
      problems_.add(fmt::format("node \"{}\" must keep its attached solution \"{}\"", old.id,
                                old.solution.solution_id));
  }
  if (new_nodes_ > rules_.max_new_nodes)
    problems_.add(fmt::format("the edit inserts {} new nodes; at most {} are allowed per edit", new_nodes_,
                              rules_.max_new_nodes));
  check_purpose();
}

void EditRun::check_purpose() {
  switch (rules_.purpose) {
    case EditRules::Purpose::propose: {
      auto frontier = ranked_frontier(work_);
      bool good = std::any_of(frontier.begin(), frontier.end(), [&](const Node* n) {
        return n->action.score > rules_.min_open_action_score;
      });
      if (good) return;
      std::string open, solved;
      for (const Node* n : frontier) open += fmt::format("{}{} ({})", open.empty() ? "" : ", ", n->id, score_text(n->action.score));
      for (const auto& n : work_.nodes)
        if (n.solved()) solved += (solved.empty() ? "" : ", ") + n.id;
      problems_.add(fmt::format(
          "[ACTION_NODE_REQUIREMENT] after this edit no executable open action has score_0_to_1 > {}; executable "
          "open actions: {}. Raise one's score or insert a new action under the root \"{}\"{}",
          score_text(rules_.min_open_action_score), open.empty() ? "none" : open, work_.root_id,
          solved.empty() ? "" : fmt::format(" or a solved node ({})", solved)));
      return;
    }
    case EditRules::Purpose::refine: {
      const std::string& id = rules_.solved_node_id;
      auto kids = open_children(work_, id);
      if (std::any_of(kids.begin(), kids.end(), [](const Node* k) { return k->action.difficulty < 5; })) return;
      problems_.add(fmt::format(
          "continuation rule: the solved node \"{}\" needs at least one open child action with difficulty_1_to_5 "
          "< 5 that refines its kernel; add one with {{\"op\": \"insert_node\", \"parent_id\": \"{}\", \"node\": "
          "{{...}}}}",
          id, id));
      return;
    }
    case EditRules::Purpose::too_hard: {
      const Node& old = *before_.find(rules_.failed_node_id);
      const Node* now = work_.find(old.id);
      if (!now) return;  // deleted: the strongest downgrade
      if (now->action.score < old.action.score) return;
      for (const auto& id : new_ids_) {
        const Node* n = work_.find(id);
        // A recovery step under the failed action, or beside it where it can
        // run right away (a child of an unsolved node is not executable).
        bool placed = n && (n->parent_id == old.id || n->parent_id == old.parent_id);
        if (placed && work_.is_open_action(*n) && n->action.difficulty < old.action.difficulty) return;
      }
      problems_.add(fmt::format(
          "the failed action \"{}\" must be downgraded: lower its action.score_0_to_1 below {}, delete it, or insert "
          "a smaller recovery action (difficulty_1_to_5 < {}) under it or beside it",
          old.id, score_text(old.action.score), old.action.difficulty));
      return;
    }
  }
}

EditOutcome EditRun::outcome() const {
  EditOutcome out;
  out.ok = problems_.empty();
  // Once each: a problem an op reported may be found again by the checks
  // of the whole tree.
  for (const auto& e : problems_.list())
    if (std::find(out.errors.begin(), out.errors.end(), e) == out.errors.end()) out.errors.push_back(e);
  // A rejected lenient answer goes back with its repairs too: a skipped op
  // is often why the purpose rule failed, and the model should know.
  if (out.ok) out.repairs = problems_.repairs();
  else out.errors.insert(out.errors.end(), problems_.repairs().begin(), problems_.repairs().end());
  out.applied_ops = out.ok ? applied_ops_ : 0;
  out.new_nodes = out.ok ? new_nodes_ : 0;
  Json ids = Json::array();
  for (const auto& id : new_ids_) ids.push_back(id);
  Json errors = Json::array();
  for (const auto& e : out.errors) errors.push_back(e);
  out.report = Json::obj({{"purpose", purpose_name(rules_.purpose)},
                          {"round", rules_.round},
                          {"committed", out.ok},
                          {"ops", op_reports_},
                          {"new_node_ids", std::move(ids)},
                          {"errors", std::move(errors)}});
  return out;
}

void require_rule_node(const Tree& t, const std::string& id, std::string_view field) {
  if (id.empty())
    throw Error(Status::invalid_argument, fmt::format("world model: EditRules.{} is required for this purpose", field));
  if (!t.find(id))
    throw Error(Status::invalid_argument,
                fmt::format("world model: EditRules.{} names node \"{}\", which does not exist", field, id));
}

}  // namespace

EditOutcome apply_edit_answer(Tree& tree, std::string_view answer, const EditRules& rules) {
  if (rules.purpose == EditRules::Purpose::refine) require_rule_node(tree, rules.solved_node_id, "solved_node_id");
  if (rules.purpose == EditRules::Purpose::too_hard) require_rule_node(tree, rules.failed_node_id, "failed_node_id");

  EditRun run(tree, rules);
  std::string parse_error;
  auto parsed = core::extract_json_object(answer, &parse_error);
  if (!parsed) {
    EditOutcome out;
    out.errors.push_back(fmt::format("the answer could not be read as JSON: {}. Answer with one bare JSON object "
                                     "{{\"ops\": [...]}} and nothing else",
                                     parse_error));
    out.report = Json::obj({{"purpose", purpose_name(rules.purpose)},
                            {"round", rules.round},
                            {"committed", false},
                            {"errors", Json::arr({out.errors.front()})}});
    return out;
  }
  run.apply(*parsed);
  if (!run.over_cap()) run.check_invariants();
  EditOutcome out = run.outcome();
  if (out.ok) tree = std::move(run.result());
  return out;
}

}  // namespace ks::core::wm
