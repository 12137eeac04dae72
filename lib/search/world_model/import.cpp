#include "search/world_model/import.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "search/world_model/tree.hpp"
#include "ksearch/error.hpp"

namespace ks::core::wm {

namespace {

// A value as it reads in a repair sentence, cut to a readable length.
std::string shown(const Json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

std::string trimmed(std::string s) {
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

// Reads one K-Search node (or the top level) leniently, as the original
// does, and says what it changed.
class Lenient {
 public:
  Lenient(const Json& j, std::string where, std::vector<std::string>& repairs)
      : j_(j), where_(std::move(where)), repairs_(repairs) {}

  const Json* get(std::string_view key) const {
    const Json* v = j_.is_object() ? j_.find(key) : nullptr;
    return v && !v->is_null() ? v : nullptr;
  }

  // A string; another type is dropped (the default stays).
  std::optional<std::string> text(std::string_view key) {
    const Json* v = get(key);
    if (!v) return std::nullopt;
    if (v->is_string()) return v->as_string();
    repair(fmt::format("{} {} is not a string ({}): dropped", key, shown(*v), json_type_name(v->type())));
    return std::nullopt;
  }

  // A number clamped to lo..hi, as the original clamps it.
  std::optional<double> clamped(std::string_view key, double lo, double hi) {
    const Json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_number() || !std::isfinite(v->as_number())) {
      repair(fmt::format("{} {} is not a number: the default is used", key, shown(*v)));
      return std::nullopt;
    }
    double d = v->as_number();
    double c = std::clamp(d, lo, hi);
    if (c != d) repair(fmt::format("{} {} clamped to {}", key, shown(*v), c));
    return c;
  }

  // An integer clamped to lo..hi; a fraction is cut as int() cuts it.
  std::optional<int> integer(std::string_view key, int lo, int hi) {
    std::optional<double> d = clamped(key, lo, hi);
    if (!d) return std::nullopt;
    double t = std::trunc(*d);
    if (t != *d) repair(fmt::format("{} {} is not an integer: {} is used", key, *d, t));
    return static_cast<int>(t);
  }

  const Json* object(std::string_view key) {
    const Json* v = get(key);
    if (v && !v->is_object()) {
      repair(fmt::format("{} is not an object ({}): dropped", key, json_type_name(v->type())));
      return nullptr;
    }
    return v;
  }

  // Drops, with one repair, the fields outside `known`.
  void drop_unknown(std::initializer_list<std::string_view> known) {
    if (!j_.is_object()) return;
    std::string dropped;
    for (const auto& [key, value] : j_.as_object())
      if (std::find(known.begin(), known.end(), key) == known.end()) dropped += (dropped.empty() ? "" : ", ") + key;
    if (!dropped.empty()) repair(fmt::format("unknown field(s) dropped: {}", dropped));
  }

  void repair(const std::string& what) { repairs_.push_back(fmt::format("{}: {}", where_, what)); }

 private:
  const Json& j_;
  std::string where_;
  std::vector<std::string>& repairs_;
};

// A well-formed id (check_node_id): spaces, quotes, backslashes and
// control characters become '_', and it is cut to 64 characters.
std::string well_formed_id(std::string id) {
  for (char& c : id) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isspace(u) || std::iscntrl(u) || c == '"' || c == '\\') c = '_';
  }
  if (id.size() > 64) id.resize(64);
  return id;
}

void read_impacts(const Json& j, Node& n, const std::string& where, std::vector<std::string>& repairs) {
  Lenient r(j, where + ".impacts", repairs);
  r.drop_unknown({kImpactKeys[0], kImpactKeys[1], kImpactKeys[2]});
  for (std::size_t i = 0; i < kImpactKeys.size(); ++i) {
    const Json* axis = r.object(kImpactKeys[i]);
    if (!axis) continue;
    Lenient ar(*axis, fmt::format("{}.impacts.{}", where, kImpactKeys[i]), repairs);
    if (i == kHardwareFitImpact) ar.drop_unknown({"rating_0_to_10", "risk", "notes", "hw_notes"});
    else ar.drop_unknown({"rating_0_to_10", "risk", "notes"});
    Impact& imp = n.impacts[i];
    if (auto v = ar.clamped("rating_0_to_10", 0, 10)) imp.rating = *v;
    if (auto v = ar.text("risk")) imp.risk = *v;
    if (auto v = ar.text("notes")) imp.notes = *v;
    if (i == kHardwareFitImpact)
      if (auto v = ar.text("hw_notes")) imp.hw_notes = *v;
  }
}

// Returns whether score_0_to_1 was given.
bool read_action(const Json& j, Node& n, const std::string& where, std::vector<std::string>& repairs) {
  Lenient r(j, where + ".action", repairs);
  r.drop_unknown({"title", "description", "difficulty_1_to_5", "difficulty_0_to_3", "score_0_to_1",
                  "expected_vs_baseline_factor", "rationale"});
  Action& a = n.action;
  if (auto v = r.text("title")) a.title = trimmed(*v);
  if (auto v = r.text("description")) a.description = *v;
  if (auto v = r.text("rationale")) a.rationale = *v;
  auto modern = r.integer("difficulty_1_to_5", 1, 5);
  if (modern) {
    a.difficulty = *modern;
    if (r.get("difficulty_0_to_3")) r.repair("the legacy difficulty_0_to_3 is ignored beside difficulty_1_to_5");
  } else if (auto legacy = r.integer("difficulty_0_to_3", 0, 3)) {
    a.difficulty = *legacy + 1;
    r.repair(fmt::format("the legacy difficulty_0_to_3 {} read as difficulty_1_to_5 {}", *legacy, *legacy + 1));
  }
  auto score = r.clamped("score_0_to_1", 0, 1);
  if (score) a.score = *score;
  if (const Json* f = r.get("expected_vs_baseline_factor")) {
    if (f->is_number() && std::isfinite(f->as_number()) && f->as_number() > 0)
      a.expected_factor = f->as_number();
    else
      r.repair(fmt::format("expected_vs_baseline_factor {} is not a positive factor: null", shown(*f)));
  }
  return score.has_value();
}

std::optional<double> number_in(const Json& j, std::string_view key) {
  const Json* v = j.is_object() ? j.find(key) : nullptr;
  if (v && v->is_number() && std::isfinite(v->as_number())) return v->as_number();
  return std::nullopt;
}

// A K-Search node as read, with the ids it was written with (parents refer
// to those).
struct ReadNode {
  Node node;
  std::string written_id;
  std::optional<std::string> written_parent;  // null or absent: none
  bool typed_root = false;
};

// The ids handed out so far.
struct IdTable {
  std::set<std::string> used;
  std::map<std::string, int> next_suffix;      // base id -> the next suffix to try
  std::map<std::string, std::string> renamed;  // written id -> id (the first node that had it)
};

// One K-Search node, read leniently; nullopt when it is not an object.
std::optional<ReadNode> read_ksearch_node(const Json& nj, std::size_t i, IdTable& ids,
                                          std::vector<std::string>& repairs) {
  std::string where = fmt::format("decision_tree.nodes[{}]", i);
  if (!nj.is_object()) {
    repairs.push_back(fmt::format("{} is not an object ({}): dropped", where, json_type_name(nj.type())));
    return std::nullopt;
  }
  if (const Json* id = nj.find("node_id"); id && id->is_string()) where = fmt::format("node \"{}\"", id->as_string());
  Lenient r(nj, where, repairs);
  r.drop_unknown({"node_id", "parent_id", "node_type", "decision", "choice", "solution_ref", "impacts",
                  "overall_rating_0_to_10", "confidence_0_to_1", "last_updated_round", "notes", "action"});
  ReadNode rd;
  Node& n = rd.node;
  rd.written_id = r.text("node_id").value_or("");
  std::string id = well_formed_id(rd.written_id);
  if (id.empty()) id = fmt::format("n{}", i);
  if (ids.used.count(id)) {
    // The next free suffix, counted on from the last one this base took,
    // so many copies of one id cost one step each.
    std::string base = id.substr(0, 60);
    int& k = ids.next_suffix.try_emplace(base, 2).first->second;
    while (ids.used.count(fmt::format("{}_{}", base, k))) ++k;
    id = fmt::format("{}_{}", base, k++);
  }
  if (id != rd.written_id)
    r.repair(rd.written_id.empty() ? fmt::format("it has no node_id: \"{}\" is used", id)
                                   : fmt::format("node_id \"{}\" {} \"{}\"", rd.written_id,
                                                 ids.renamed.count(rd.written_id) ? "is used twice; this one is"
                                                                                  : "is not a well-formed id; read as",
                                                 id));
  ids.used.insert(id);
  if (!rd.written_id.empty()) ids.renamed.emplace(rd.written_id, id);
  n.id = id;
  rd.written_parent = r.text("parent_id");
  if (auto v = r.text("node_type")) {
    if (*v == "root") rd.typed_root = true;
    else if (*v != "decision") r.repair(fmt::format("node_type \"{}\" read as \"decision\"", *v));
  }
  if (auto v = r.text("decision")) n.decision = *v;
  if (auto v = r.text("choice")) n.choice = *v;
  if (const Json* sol = r.object("solution_ref")) {
    Lenient sr(*sol, where + ".solution_ref", repairs);
    // The original rebuilds solution_ref from these three keys alone.
    sr.drop_unknown({"solution_id", "parent_solution_id", "eval"});
    if (auto v = sr.text("solution_id")) n.solution.solution_id = *v;
    if (auto v = sr.text("parent_solution_id")) n.solution.parent_solution_id = *v;
    if (const Json* e = sr.get("eval")) {
      n.solution.eval = compact_recorded_eval(*e);
      if (n.solution.eval.is_null()) sr.repair(fmt::format("eval {} has no status: dropped", shown(*e)));
    }
  }
  if (const Json* imp = r.object("impacts")) read_impacts(*imp, n, where, repairs);
  if (auto v = r.clamped("overall_rating_0_to_10", 0, 10)) n.overall_rating = *v;
  if (auto v = r.clamped("confidence_0_to_1", 0, 1)) n.confidence = *v;
  if (auto v = r.integer("last_updated_round", 0, 1 << 30)) n.last_updated_round = *v;
  if (auto v = r.text("notes")) n.notes = *v;
  bool score_given = false;
  if (const Json* act = r.object("action")) score_given = read_action(*act, n, where, repairs);
  if (!score_given && n.has_action()) n.action.score = n.overall_rating / 10.0;
  return rd;
}

// Picks the root (the node root_id names, else the one typed "root", else a
// new one) and points every other node at its parent's id, then moves the
// nodes into `t`.
void link_nodes(std::vector<ReadNode>& read, IdTable& ids, Tree& t, std::vector<std::string>& repairs) {
  auto root_it = std::find_if(read.begin(), read.end(), [&](const ReadNode& r) { return r.node.id == t.root_id; });
  if (root_it == read.end()) {
    root_it = std::find_if(read.begin(), read.end(), [](const ReadNode& r) { return r.typed_root; });
    if (root_it != read.end()) {
      repairs.push_back(fmt::format("decision_tree: root_id \"{}\" names no node; the node of node_type \"root\", "
                                    "\"{}\", is the root",
                                    t.root_id, root_it->node.id));
      t.root_id = root_it->node.id;
    } else {
      ReadNode root;
      root.node.id = t.root_id;
      while (ids.used.count(root.node.id)) root.node.id += "_";
      t.root_id = root.node.id;
      repairs.push_back(fmt::format("decision_tree: no root node; an empty root \"{}\" is added", t.root_id));
      ids.renamed.emplace(t.root_id, t.root_id);  // nodes that name it as their parent keep it
      read.insert(read.begin(), std::move(root));
      root_it = read.begin();
    }
  }
  for (auto& r : read) {
    Node& n = r.node;
    if (&r == &*root_it) {
      n.is_root = true;
      if (r.written_parent)
        repairs.push_back(fmt::format("node \"{}\": the root's parent_id \"{}\" is dropped", n.id, *r.written_parent));
      n.parent_id.clear();
      if (n.has_action()) {
        repairs.push_back(fmt::format("node \"{}\": the root cannot carry an action; its action \"{}\" is dropped",
                                      n.id, n.action.title));
        n.action = Action{};
      }
      continue;
    }
    if (r.typed_root)
      repairs.push_back(fmt::format("node \"{}\": a second node of node_type \"root\" is read as a decision", n.id));
    if (!r.written_parent) {
      repairs.push_back(fmt::format("node \"{}\" has no parent: re-parented to the root", n.id));
      n.parent_id = t.root_id;
    } else if (auto it = ids.renamed.find(*r.written_parent); it != ids.renamed.end() && it->second != n.id) {
      n.parent_id = it->second;
    } else {
      repairs.push_back(fmt::format("node \"{}\": parent_id \"{}\" {}: re-pointed to the root", n.id,
                                    *r.written_parent,
                                    it != ids.renamed.end() ? "is the node itself" : "does not exist"));
      n.parent_id = t.root_id;
    }
  }
  for (auto& r : read) t.nodes.push_back(std::move(r.node));
}

// Cycles (the original walks them forever): the first node found on one
// is re-pointed to the root. Each walk up stops at a node an earlier walk
// settled (it reaches the root by then), so every node is walked over once.
void break_cycles(Tree& t, std::vector<std::string>& repairs) {
  const TreeIndex idx(t);
  const std::size_t root = idx.position(t.root_id);
  std::vector<std::size_t> parent(t.nodes.size());
  for (std::size_t i = 0; i < parent.size(); ++i) parent[i] = idx.parent(i);
  enum : char { unseen, walking, settled };
  std::vector<char> state(t.nodes.size(), unseen);
  std::vector<std::size_t> walk;
  for (std::size_t start = 0; start < t.nodes.size(); ++start) {
    walk.clear();
    for (std::size_t j = start; j != TreeIndex::npos && !t.nodes[j].is_root && state[j] != settled; j = parent[j]) {
      if (state[j] == walking) {
        Node& cycle = t.nodes[j];
        repairs.push_back(fmt::format("node \"{}\" is on a parent cycle: re-pointed to the root", cycle.id));
        cycle.parent_id = t.root_id;
        parent[j] = root;
        break;
      }
      state[j] = walking;
      walk.push_back(j);
    }
    for (std::size_t w : walk) state[w] = settled;
  }
}

// Lineage: an open node starts from its parent's kernel.
void follow_lineage(Tree& t, const TreeIndex& idx, std::vector<std::string>& repairs) {
  for (std::size_t i = 0; i < t.nodes.size(); ++i) {
    Node& n = t.nodes[i];
    if (n.is_root || n.solved()) continue;
    const std::size_t parent = idx.parent(i);
    const std::string want = parent != TreeIndex::npos ? t.nodes[parent].solution.solution_id : "";
    if (!n.solution.parent_solution_id.empty() && n.solution.parent_solution_id != want)
      repairs.push_back(fmt::format("node \"{}\": parent_solution_id \"{}\" is not its parent's solution; \"{}\" is "
                                    "used",
                                    n.id, n.solution.parent_solution_id, want));
    n.solution.parent_solution_id = want;
  }
}

}  // namespace

Json compact_recorded_eval(const Json& eval) {
  if (!eval.is_object()) return Json();
  const Json* st = eval.find("status");
  if (!st || !st->is_string()) return Json();
  std::string status = st->as_string();
  std::transform(status.begin(), status.end(), status.begin(), [](unsigned char c) { return std::tolower(c); });
  Json out = Json::obj({{"status", status}});
  if (auto v = eval_latency_ms(eval)) out["latency_ms"] = *v;
  // K-Search's speedup_factor is over the reference, as this library's speedup.
  if (auto v = number_in(eval, "speedup")) out["speedup"] = *v;
  else if (auto w = number_in(eval, "speedup_factor")) out["speedup"] = *w;
  if (auto v = eval_score(eval)) out["score"] = *v;
  if (auto v = eval_vs_baseline(eval)) out["mean_vs_baseline_factor"] = *v;
  return out;
}

NormalizedTree normalize_ksearch_world_model(const Json& j) {
  if (!j.is_object())
    throw Error(Status::invalid_argument,
                fmt::format("a K-Search world model must be a JSON object, found {}", json_type_name(j.type())));
  // Before any node is read: an oversized tree costs its parse alone.
  if (std::string cap = node_count_problem(j); !cap.empty()) throw Error(Status::invalid_argument, cap);
  NormalizedTree out;
  std::vector<std::string>& repairs = out.repairs;
  Tree t;
  Lenient top(j, "the world model", repairs);
  for (const char* legacy : {"plan_tree", "policy_table", "dimensions"})
    if (top.get(legacy))
      top.repair(fmt::format("the legacy \"{}\" (a format older than the decision tree) is not migrated: dropped",
                             legacy));
  top.drop_unknown({"kernel_summary", "open_questions", "decision_tree", "computed_signals", "version",
                    "plan_tree", "policy_table", "dimensions"});
  if (auto v = top.text("kernel_summary")) t.kernel_summary = *v;
  if (const Json* qs = top.get("open_questions")) {
    if (!qs->is_array()) {
      top.repair(fmt::format("open_questions is not a list ({}): dropped", json_type_name(qs->type())));
    } else {
      for (std::size_t i = 0; i < qs->size(); ++i) {
        if ((*qs)[i].is_string()) t.open_questions.push_back((*qs)[i].as_string());
        else top.repair(fmt::format("open_questions[{}] is not a string: dropped", i));
      }
    }
  }
  if (const Json* cs = top.object("computed_signals")) t.computed_signals = *cs;

  const Json* dt = top.object("decision_tree");
  if (!dt) top.repair("it has no decision_tree: a tree of a root alone is used");
  Json empty_tree = Json::object();
  Lenient tree(dt ? *dt : empty_tree, "decision_tree", repairs);
  tree.drop_unknown({"root_id", "active_leaf_id", "nodes"});
  std::optional<std::string> root_given = tree.text("root_id");
  t.root_id = "root";
  if (root_given) {
    t.root_id = well_formed_id(*root_given);
    if (t.root_id.empty()) t.root_id = "root";
    if (t.root_id != *root_given) tree.repair(fmt::format("root_id \"{}\" read as \"{}\"", *root_given, t.root_id));
  }
  const Json* nodes = tree.get("nodes");
  if (nodes && !nodes->is_array()) {
    tree.repair(fmt::format("nodes is not a list ({}): dropped", json_type_name(nodes->type())));
    nodes = nullptr;
  }

  std::vector<ReadNode> read;
  IdTable ids;
  for (std::size_t i = 0; nodes && i < nodes->size(); ++i)
    if (auto rd = read_ksearch_node((*nodes)[i], i, ids, repairs)) read.push_back(std::move(*rd));
  link_nodes(read, ids, t, repairs);

  break_cycles(t, repairs);
  const TreeIndex idx(t);
  follow_lineage(t, idx, repairs);
  if (std::size_t d = idx.deepest(); d != TreeIndex::npos && idx.depth(d) > kMaxDepth)
    throw Error(Status::invalid_argument,
                fmt::format("node \"{}\" is {} levels below the root; at most {} are accepted (the world model's depth "
                            "cap, docs/world-model.md \"Limits\")",
                            t.nodes[d].id, idx.depth(d), kMaxDepth));
  t.active_id = t.root_id;
  if (auto a = tree.text("active_leaf_id")) {
    auto it = ids.renamed.find(*a);
    if (it != ids.renamed.end()) t.active_id = it->second;
    else tree.repair(fmt::format("active_leaf_id \"{}\" names no node: the root is active", *a));
  }

  Problems left;
  check_structure(t, left);
  if (!left.empty())  // every rule above is one check_structure makes; a miss is this code's bug
    throw Error(Status::internal, fmt::format("normalising a K-Search world model left problems: {}",
                                              left.list().front()));
  out.tree = tree_to_json(t);
  return out;
}

void remap_solution_ids(Json& tree, const std::map<std::string, std::string>& ids) {
  Json* dt = tree.find("decision_tree");
  Json* nodes = dt ? dt->find("nodes") : nullptr;
  if (!nodes || !nodes->is_array()) return;
  for (auto& n : nodes->as_array()) {
    Json* ref = n.find("solution_ref");
    if (!ref || !ref->is_object()) continue;
    for (const char* key : {"solution_id", "parent_solution_id"}) {
      Json* v = ref->find(key);
      if (!v || !v->is_string()) continue;
      if (auto it = ids.find(v->as_string()); it != ids.end()) *v = it->second;
    }
  }
}

}  // namespace ks::core::wm
