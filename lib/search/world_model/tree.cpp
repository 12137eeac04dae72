#include "search/world_model/tree.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "ksearch/error.hpp"

namespace ks::core::wm {

// ---------------------------------------------------------------------------
// Tree lookups

const Node* Tree::find(std::string_view id) const {
  for (const auto& n : nodes)
    if (n.id == id) return &n;
  return nullptr;
}

Node* Tree::find(std::string_view id) {
  for (auto& n : nodes)
    if (n.id == id) return &n;
  return nullptr;
}

const Node& Tree::root() const {
  const Node* r = find(root_id);
  if (!r) throw Error(Status::state, fmt::format("world model: root node \"{}\" is missing", root_id));
  return *r;
}

std::vector<const Node*> Tree::children_of(std::string_view id) const {
  std::vector<const Node*> out;
  for (const auto& n : nodes)
    if (!n.is_root && n.parent_id == id) out.push_back(&n);
  return out;
}

bool Tree::is_executable(const Node& n) const {
  if (!is_open_action(n)) return false;
  if (n.parent_id == root_id) return true;
  const Node* parent = find(n.parent_id);
  return parent && parent->solved();
}

std::vector<const Node*> Tree::path_to(std::string_view id) const {
  const TreeIndex idx(*this);
  std::vector<const Node*> path;
  // Bounded by the node count so a cycle in unvalidated input cannot hang us.
  for (std::size_t i = idx.position(id); i != TreeIndex::npos && path.size() <= nodes.size(); i = idx.parent(i))
    path.push_back(&nodes[i]);
  std::reverse(path.begin(), path.end());
  return path;
}

std::string Tree::id_list(std::size_t max) const {
  std::string out;
  for (std::size_t i = 0; i < nodes.size() && i < max; ++i) out += (i ? ", " : "") + nodes[i].id;
  if (nodes.size() > max) out += fmt::format(", ... ({} more)", nodes.size() - max);
  return out;
}

// ---------------------------------------------------------------------------
// The index

TreeIndex::TreeIndex(const Tree& t) : t_(t) {
  const std::size_t n = t.nodes.size();
  by_id_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) by_id_.emplace(t.nodes[i].id, i);  // the first holder stays
  parent_.assign(n, npos);
  children_.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Node& node = t.nodes[i];
    if (node.is_root || node.parent_id.empty()) continue;
    parent_[i] = position(node.parent_id);
    if (parent_[i] != npos) children_[parent_[i]].push_back(i);
  }
  link_depths();
}

std::size_t TreeIndex::position(std::string_view id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? npos : it->second;
}

const Node* TreeIndex::find(std::string_view id) const {
  std::size_t i = position(id);
  return i == npos ? nullptr : &t_.nodes[i];
}

// Each node's depth and whether its parent walk loops, by walking up from
// each node not yet settled until a settled node, a root, a missing parent
// or a node of the same walk (a cycle), then settling the walk on the way
// back. Every node is walked over once, so the whole is linear.
void TreeIndex::link_depths() {
  const std::size_t n = parent_.size();
  depth_.assign(n, npos);
  cyclic_.assign(n, 0);
  enum : char { unseen, walking, settled };
  std::vector<char> state(n, unseen);
  std::vector<std::size_t> walk;
  for (std::size_t start = 0; start < n; ++start) {
    walk.clear();
    std::size_t base = npos;  // the depth of the node the walk stopped at
    bool loops = false;
    for (std::size_t j = start; j != npos; j = parent_[j]) {
      if (state[j] == settled) {
        base = depth_[j];
        loops = cyclic_[j] != 0;
        break;
      }
      if (state[j] == walking) {
        loops = true;
        break;
      }
      if (t_.nodes[j].is_root) {
        depth_[j] = base = 0;
        state[j] = settled;
        break;
      }
      state[j] = walking;
      walk.push_back(j);
    }
    for (std::size_t k = walk.size(); k-- > 0;) {
      const std::size_t w = walk[k];
      state[w] = settled;
      cyclic_[w] = loops;
      if (base != npos) depth_[w] = ++base;
    }
  }
  for (std::size_t i = 0; i < n; ++i)
    if (depth_[i] != npos && (deepest_ == npos || depth_[i] > depth_[deepest_])) deepest_ = i;
}

// ---------------------------------------------------------------------------
// Reading fields

namespace {

// Reads one JSON object's fields, adding a problem for each wrong type or
// out-of-range value. Absent and null fields read as nullopt. In lenient
// mode a field of the wrong type or an unknown field is dropped, and a
// number out of range is clamped (an integer is rounded first).
class Reader {
 public:
  Reader(const Json& j, std::string where, Problems& p) : j_(j), where_(std::move(where)), p_(p) {}

  const Json* get(std::string_view key) const {
    const Json* v = j_.find(key);
    return v && !v->is_null() ? v : nullptr;
  }

  std::optional<std::string> string(std::string_view key) {
    const Json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) return wrong(key, "a string", *v), std::nullopt;
    return v->as_string();
  }

  std::optional<double> number(std::string_view key, double lo, double hi) {
    const Json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) return wrong(key, "a number", *v), std::nullopt;
    double d = v->as_number();
    if (d < lo || d > hi) {
      const double clamped = std::clamp(d, lo, hi);
      if (p_.repair(fmt::format("{}: {} must be within {}..{}, found {} (out-of-range values are rejected, not "
                                "clamped)",
                                where_, key, lo, hi, v->dump()),
                    fmt::format("{}: {} {} clamped to {}", where_, key, v->dump(), clamped)))
        return clamped;
      return std::nullopt;
    }
    return d;
  }

  std::optional<int> integer(std::string_view key, int lo, int hi) {
    const Json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) return wrong(key, "an integer", *v), std::nullopt;
    double d = v->as_number();
    const bool whole = std::floor(d) == d;
    const bool in_range = d >= lo && d <= hi;
    if (whole && in_range) return static_cast<int>(d);
    const double fixed = std::clamp(std::round(d), static_cast<double>(lo), static_cast<double>(hi));
    std::string problem =
        whole ? fmt::format("{}: {} must be an integer within {}..{}, found {} (out-of-range values are rejected, "
                            "not clamped)",
                            where_, key, lo, hi, v->dump())
              : fmt::format("{}: {} must be an integer, found {}", where_, key, found_text(*v));
    if (p_.repair(std::move(problem), fmt::format("{}: {} {} {} to {}", where_, key, v->dump(),
                                                  in_range ? "rounded" : "clamped", fixed)))
      return static_cast<int>(fixed);
    return std::nullopt;
  }

  const Json* object(std::string_view key) {
    const Json* v = get(key);
    if (v && !v->is_object()) return wrong(key, "an object", *v), nullptr;
    return v;
  }

  const Json* array(std::string_view key) {
    const Json* v = get(key);
    if (v && !v->is_array()) return wrong(key, "an array", *v), nullptr;
    return v;
  }

  // Flags fields outside `known` (lenient: they are dropped).
  template <std::size_t N>
  void allow(const std::array<std::string_view, N>& known, std::string_view what = "fields") {
    for (const auto& [key, value] : j_.as_object()) {
      if (std::find(known.begin(), known.end(), key) != known.end()) continue;
      std::string list;
      for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      p_.repair(fmt::format("{}: unknown field \"{}\" (known {}: {})", where_, key, what, list),
                fmt::format("{}: unknown field \"{}\" dropped", where_, key));
    }
  }

  const std::string& where() const { return where_; }
  Problems& problems() { return p_; }

 private:
  void wrong(std::string_view key, std::string_view wanted, const Json& found) {
    std::string problem = fmt::format("{}: {} must be {}, found {}", where_, key, wanted, found_text(found));
    p_.repair(problem, problem + "; dropped");
  }

  const Json& j_;
  std::string where_;
  Problems& p_;
};

std::string trim(std::string s) {
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

std::string join_path(const std::string& where, std::string_view field) {
  return fmt::format("{}.{}", where, field);
}

bool is_object_or_report(const Json& j, const std::string& where, Problems& p) {
  if (j.is_object()) return true;
  p.add(fmt::format("{} must be a JSON object, found {}", where, found_text(j)));
  return false;
}

constexpr std::array<std::string_view, 12> kNodeFields = {
    "node_id", "parent_id", "node_type", "decision", "choice", "solution_ref", "impacts",
    "overall_rating_0_to_10", "confidence_0_to_1", "last_updated_round", "notes", "action"};
constexpr std::array<std::string_view, 9> kPatchableFields = {
    "decision", "choice", "solution_ref", "impacts", "overall_rating_0_to_10",
    "confidence_0_to_1", "last_updated_round", "notes", "action"};
constexpr std::array<std::string_view, 7> kActionFields = {
    "title", "description", "difficulty_1_to_5", "difficulty_0_to_3", "score_0_to_1",
    "expected_vs_baseline_factor", "rationale"};
constexpr std::array<std::string_view, 5> kSolutionFields = {
    "solution_id", "parent_solution_id", "eval", "round_index", "solution_name"};
constexpr std::array<std::string_view, 3> kImpactFields = {"rating_0_to_10", "risk", "notes"};
constexpr std::array<std::string_view, 4> kHardwareImpactFields = {"rating_0_to_10", "risk", "notes",
                                                                   "hw_notes"};

void read_impacts(const Json& j, Node& n, const std::string& where, Problems& p) {
  Reader r(j, where, p);
  r.allow(kImpactKeys, "impact axes");
  for (std::size_t i = 0; i < kImpactKeys.size(); ++i) {
    const Json* axis = r.get(kImpactKeys[i]);
    if (!axis) continue;
    std::string axis_where = join_path(where, kImpactKeys[i]);
    if (!axis->is_object()) {
      std::string problem = fmt::format("{} must be a JSON object, found {}", axis_where, found_text(*axis));
      p.repair(problem, problem + "; dropped");
      continue;
    }
    Reader ar(*axis, axis_where, p);
    if (i == kHardwareFitImpact) ar.allow(kHardwareImpactFields);
    else ar.allow(kImpactFields);
    Impact& imp = n.impacts[i];
    if (auto v = ar.number("rating_0_to_10", 0, 10)) imp.rating = *v;
    if (auto v = ar.string("risk")) imp.risk = *v;
    if (auto v = ar.string("notes")) imp.notes = *v;
    if (auto v = ar.string("hw_notes")) imp.hw_notes = *v;
  }
}

// Returns whether score_0_to_1 was given.
bool read_action(const Json& j, Node& n, const std::string& where, Problems& p) {
  Reader r(j, where, p);
  r.allow(kActionFields);
  Action& a = n.action;
  if (auto v = r.string("title")) a.title = trim(*v);
  if (auto v = r.string("description")) a.description = *v;
  if (auto v = r.string("rationale")) a.rationale = *v;
  auto modern = r.integer("difficulty_1_to_5", 1, 5);
  // The original's older prompts used a 0..3 scale; it maps to 1..4.
  auto legacy = r.integer("difficulty_0_to_3", 0, 3);
  if (modern && legacy && *modern != *legacy + 1)
    p.repair(fmt::format("{}: difficulty_1_to_5 ({}) and the legacy difficulty_0_to_3 ({}) disagree; give only "
                         "difficulty_1_to_5",
                         where, *modern, *legacy),
             fmt::format("{}: the legacy difficulty_0_to_3 ({}) disagrees with difficulty_1_to_5 ({}); dropped", where,
                         *legacy, *modern));
  if (modern) a.difficulty = *modern;
  else if (legacy) a.difficulty = *legacy + 1;
  auto score = r.number("score_0_to_1", 0, 1);
  if (score) a.score = *score;
  if (const Json* f = r.get("expected_vs_baseline_factor")) {
    std::string problem;
    if (!f->is_number())
      problem = fmt::format("{}: expected_vs_baseline_factor must be a number or null, found {}", where,
                            found_text(*f));
    else if (!(f->as_number() > 0))
      problem = fmt::format("{}: expected_vs_baseline_factor must be a positive speedup factor (e.g. 1.3), found {}",
                            where, f->dump());
    if (problem.empty()) a.expected_factor = f->as_number();
    else p.repair(problem, problem + "; dropped");
  }
  return r.get("score_0_to_1") != nullptr;
}

// solution_ref from a file: read as is.
void read_solution_from_file(const Json& j, Node& n, const std::string& where, Problems& p) {
  Reader r(j, where, p);
  r.allow(kSolutionFields);
  SolutionLink& s = n.solution;
  if (auto v = r.string("solution_id")) s.solution_id = *v;
  if (auto v = r.string("parent_solution_id")) s.parent_solution_id = *v;
  if (auto v = r.string("solution_name")) s.solution_name = *v;
  if (auto v = r.integer("round_index", 0, 1 << 30)) s.round_index = *v;
  if (const Json* e = r.get("eval")) {
    if (e->is_object()) s.eval = *e;
    else p.add(fmt::format("{}: eval must be an object or null, found {}", where, found_text(*e)));
  }
}

// solution_ref from the LLM: the library owns it. Echoing the current values
// back is fine; anything else is rejected. parent_solution_id on a node
// without a solution is checked against the parent by the caller. Lenient
// mode drops what the model wrote on a node without a kernel, but a change
// to an attached kernel stays a rejection of the whole answer: the model
// believes something else about the tree than what it holds.
void read_solution_from_llm(const Json& j, Node& n, const std::string& where, Problems& p) {
  Reader r(j, where, p);
  r.allow(kSolutionFields);
  SolutionLink& s = n.solution;
  if (auto v = r.string("solution_id"); v && *v != s.solution_id) {
    if (s.solution_id.empty())
      p.repair(fmt::format("{}: solution_id is attached by the library when a kernel passes; leave it null", where),
               fmt::format("{}: solution_id \"{}\" dropped (the library attaches kernels)", where, *v));
    else
      p.add_unrepairable(fmt::format("{}: solution_id \"{}\" is attached and cannot be changed", where, s.solution_id));
  }
  if (auto v = r.string("parent_solution_id")) {
    if (!s.solution_id.empty() && *v != s.parent_solution_id)
      p.add_unrepairable(fmt::format("{}: parent_solution_id of a solved node cannot be changed (it is \"{}\")", where,
                                     s.parent_solution_id));
    else if (s.solution_id.empty())
      s.parent_solution_id = *v;
  }
  auto must_match = [&](std::string_view key, const Json& current) {
    const Json* v = r.get(key);
    if (!v || *v == current) return;
    std::string problem = fmt::format("{}: {} is written by the library; leave it out", where, key);
    if (s.solution_id.empty()) p.repair(problem, fmt::format("{}: {} dropped (written by the library)", where, key));
    else p.add_unrepairable(problem);
  };
  must_match("eval", s.eval);
  must_match("round_index", s.round_index ? Json(*s.round_index) : Json());
  must_match("solution_name", Json(s.solution_name));
}

std::string node_cap_sentence(std::size_t nodes) {
  return fmt::format("the world model has {} nodes; at most {} are accepted (the world model's node cap, "
                     "docs/world-model.md \"Limits\")",
                     nodes, kMaxNodes);
}

}  // namespace

std::string node_count_problem(const Json& j) {
  const Json* dt = j.is_object() ? j.find("decision_tree") : nullptr;
  const Json* nodes = dt && dt->is_object() ? dt->find("nodes") : nullptr;
  if (!nodes || !nodes->is_array() || nodes->size() <= kMaxNodes) return {};
  return node_cap_sentence(nodes->size());
}

std::string found_text(const Json& v) {
  if (v.is_null()) return "null";
  std::string dump = v.dump();
  if (dump.size() > 80) {
    std::size_t cut = 77;
    while (cut > 0 && (static_cast<unsigned char>(dump[cut]) & 0xC0) == 0x80) --cut;  // whole UTF-8 characters
    dump = dump.substr(0, cut) + "...";
  }
  return fmt::format("{} {}", json_type_name(v.type()), dump);
}

std::string check_node_id(std::string_view id) {
  if (id.empty()) return "a node id must not be empty";
  if (id.size() > 64) return fmt::format("node id \"{}...\" is longer than 64 characters", id.substr(0, 24));
  for (unsigned char c : id)
    if (std::isspace(c) || std::iscntrl(c) || c == '"' || c == '\\')
      return fmt::format("node id \"{}\" may not contain spaces, quotes or backslashes", id);
  return {};
}

bool read_node_fields(const Json& j, Node& n, NodeRead mode, const std::string& where, Problems& p) {
  if (!is_object_or_report(j, where, p)) return false;
  Reader r(j, where, p);
  if (mode == NodeRead::patch_from_llm) {
    for (const auto& [key, value] : j.as_object()) {
      if (std::find(kPatchableFields.begin(), kPatchableFields.end(), key) != kPatchableFields.end()) continue;
      std::string list;
      for (auto k : kPatchableFields) list += (list.empty() ? "" : ", ") + std::string(k);
      if (std::find(kNodeFields.begin(), kNodeFields.end(), key) != kNodeFields.end())
        p.repair(fmt::format("{}: field \"{}\" cannot be patched (patchable fields: {})", where, key, list),
                 fmt::format("{}: field \"{}\" cannot be patched; dropped", where, key));
      else
        p.repair(fmt::format("{}: unknown field \"{}\" (patchable fields: {})", where, key, list),
                 fmt::format("{}: unknown field \"{}\" dropped", where, key));
    }
  } else {
    r.allow(kNodeFields);
    if (auto v = r.string("node_id")) n.id = *v;
    if (auto v = r.string("parent_id")) n.parent_id = *v;
    if (auto v = r.string("node_type")) {
      if (*v == "root") n.is_root = true;
      else if (*v != "decision")
        p.repair(fmt::format("{}: node_type must be \"root\" or \"decision\", found \"{}\"", where, *v),
                 fmt::format("{}: node_type \"{}\" read as \"decision\"", where, *v));
    }
  }

  auto set_text = [&](std::string_view key, std::optional<std::string>& field) {
    if (const Json* v = r.get(key)) {
      if (v->is_string()) {
        field = v->as_string();
      } else {
        std::string problem = fmt::format("{}: {} must be a string, found {}", where, key, found_text(*v));
        p.repair(problem, problem + "; dropped");
      }
    }
  };
  // A patch may not touch the root's decision and choice (checked here so the
  // error names the op rather than a later invariant).
  if (mode == NodeRead::patch_from_llm && n.is_root) {
    for (std::string_view key : {"decision", "choice"}) {
      const Json* v = r.get(key);
      const auto& current = key == "decision" ? n.decision : n.choice;
      if (v && !(v->is_string() && current && v->as_string() == *current))
        p.add_unrepairable(fmt::format("{}: the root's {} is fixed and cannot be patched", where, key));
    }
  } else {
    set_text("decision", n.decision);
    set_text("choice", n.choice);
  }

  if (auto v = r.number("overall_rating_0_to_10", 0, 10)) n.overall_rating = *v;
  if (auto v = r.number("confidence_0_to_1", 0, 1)) n.confidence = *v;
  if (auto v = r.integer("last_updated_round", 0, 1 << 30)) n.last_updated_round = *v;
  if (auto v = r.string("notes")) n.notes = *v;
  if (const Json* imp = r.object("impacts")) read_impacts(*imp, n, join_path(where, "impacts"), p);
  if (const Json* sol = r.object("solution_ref")) {
    if (mode == NodeRead::from_file) read_solution_from_file(*sol, n, join_path(where, "solution_ref"), p);
    else read_solution_from_llm(*sol, n, join_path(where, "solution_ref"), p);
  }
  bool score_given = false;
  if (const Json* act = r.object("action")) score_given = read_action(*act, n, join_path(where, "action"), p);
  return score_given;
}

Tree read_tree(const Json& j, bool from_llm, int round, Problems& p) {
  Tree t;
  if (!is_object_or_report(j, "the world model", p)) return t;
  if (std::string cap = node_count_problem(j); !cap.empty()) {
    p.add_unrepairable(std::move(cap));
    return t;
  }
  Reader r(j, "the world model", p);
  r.allow(std::array<std::string_view, 5>{"kernel_summary", "open_questions", "decision_tree",
                                          "computed_signals", "version"});
  if (auto v = r.string("kernel_summary")) t.kernel_summary = *v;
  if (from_llm && trim(t.kernel_summary).empty())
    p.add("the world model: kernel_summary is required (one paragraph: kernel class, bottleneck hypotheses, "
          "constraints)");
  if (const Json* qs = r.array("open_questions")) {
    for (std::size_t i = 0; i < qs->size(); ++i) {
      const Json& q = (*qs)[i];
      if (q.is_string()) {
        t.open_questions.push_back(q.as_string());
      } else {
        std::string problem =
            fmt::format("the world model: open_questions[{}] must be a string, found {}", i, found_text(q));
        p.repair(problem, problem + "; dropped");
      }
    }
  }
  // Machine-written: kept from files, ignored in an LLM answer.
  if (const Json* cs = r.object("computed_signals"); cs && !from_llm) t.computed_signals = *cs;

  const Json* dt = r.get("decision_tree");
  if (!dt) {
    p.add("the world model: decision_tree is required ({\"root_id\", \"active_leaf_id\", \"nodes\": [...]})");
    return t;
  }
  if (!is_object_or_report(*dt, "decision_tree", p)) return t;
  Reader dr(*dt, "decision_tree", p);
  dr.allow(std::array<std::string_view, 3>{"root_id", "active_leaf_id", "nodes"});
  if (auto v = dr.string("root_id")) t.root_id = *v;
  const Json* nodes = dr.array("nodes");
  if (!nodes) {
    if (!dr.get("nodes")) p.add("decision_tree: nodes is required (a list of node objects)");
    return t;
  }
  for (std::size_t i = 0; i < nodes->size(); ++i) {
    const Json& nj = (*nodes)[i];
    std::string where = fmt::format("decision_tree.nodes[{}]", i);
    if (nj.is_object()) {
      if (const Json* id = nj.find("node_id"); id && id->is_string())
        where = fmt::format("node \"{}\"", id->as_string());
    }
    Node n;
    n.last_updated_round = round;
    bool score_given =
        read_node_fields(nj, n, from_llm ? NodeRead::new_from_llm : NodeRead::from_file, where, p);
    if (!nj.is_object()) continue;
    if (n.id.empty()) p.add(fmt::format("{}: node_id is required", where));
    if (n.id == t.root_id) n.is_root = true;
    if (n.is_root) n.parent_id.clear();
    if (from_llm && n.solved())
      p.add(fmt::format("{}: solution_ref.solution_id is attached by the library; leave it null", where));
    // No node of an init answer has a kernel yet, so any base kernel it names
    // is wrong (strict: a lineage error of check_structure).
    if (from_llm && p.lenient() && !n.solution.parent_solution_id.empty()) {
      p.repaired(fmt::format("{}: solution_ref.parent_solution_id \"{}\" dropped (no node has a kernel yet)", where,
                             n.solution.parent_solution_id));
      n.solution.parent_solution_id.clear();
    }
    if (!score_given && n.has_action()) n.action.score = n.overall_rating / 10.0;
    t.nodes.push_back(std::move(n));
  }
  t.active_id = t.root_id;
  if (auto v = dr.string("active_leaf_id")) t.active_id = *v;
  if (from_llm && p.lenient() && !t.find(t.active_id) && t.find(t.root_id)) {
    p.repaired(fmt::format("decision_tree: active_leaf_id \"{}\" does not exist; the root \"{}\" is active",
                           t.active_id, t.root_id));
    t.active_id = t.root_id;
  }
  return t;
}

void check_structure(const Tree& t, Problems& p) {
  if (t.nodes.size() > kMaxNodes) p.add(node_cap_sentence(t.nodes.size()));
  const TreeIndex idx(t);
  int roots = 0;
  for (std::size_t i = 0; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (std::string e = check_node_id(n.id); !e.empty() && !n.id.empty()) p.add(e);
    if (idx.position(n.id) != i) p.add(fmt::format("node id \"{}\" is used by more than one node", n.id));
    if (n.is_root) {
      ++roots;
      if (n.id != t.root_id)
        p.add(fmt::format("node \"{}\" has node_type \"root\" but root_id is \"{}\"", n.id, t.root_id));
      if (n.has_action()) p.add(fmt::format("the root \"{}\" cannot carry an action (leave action.title empty)", n.id));
    }
  }
  if (!idx.find(t.root_id)) p.add(fmt::format("the root node \"{}\" (root_id) is missing from nodes", t.root_id));
  if (roots > 1) p.add("the tree has more than one node of node_type \"root\"");

  for (const auto& n : t.nodes) {
    if (n.is_root) continue;
    if (n.parent_id.empty()) {
      p.add(fmt::format("node \"{}\" has no parent_id; every node but the root needs one", n.id));
      continue;
    }
    if (n.parent_id == n.id) {
      p.add(fmt::format("node \"{}\" is its own parent", n.id));
      continue;
    }
    const Node* parent = idx.find(n.parent_id);
    if (!parent) {
      p.add(fmt::format("node \"{}\": parent_id \"{}\" does not exist; existing ids: {}", n.id, n.parent_id,
                        t.id_list()));
      continue;
    }
    // Lineage: an open node starts from its parent's kernel.
    if (!n.solved() && n.solution.parent_solution_id != parent->solution.solution_id)
      p.add(fmt::format("node \"{}\": solution_ref.parent_solution_id \"{}\" does not match its parent \"{}\"'s "
                        "solution_id \"{}\"",
                        n.id, n.solution.parent_solution_id, parent->id, parent->solution.solution_id));
  }
  for (std::size_t i = 0; i < t.nodes.size(); ++i)
    if (idx.cyclic(i))
      p.add(fmt::format("node \"{}\" is part of a parent cycle (it never reaches the root)", t.nodes[i].id));
  if (std::size_t d = idx.deepest(); d != TreeIndex::npos && idx.depth(d) > kMaxDepth)
    p.add(fmt::format("node \"{}\" is {} levels below the root; at most {} are accepted (the world model's depth "
                      "cap, docs/world-model.md \"Limits\")",
                      t.nodes[d].id, idx.depth(d), kMaxDepth));
  if (!idx.find(t.active_id))
    p.add(fmt::format("active_leaf_id \"{}\" does not exist; existing ids: {}", t.active_id, t.id_list()));
}

std::size_t snapshot_bytes(const Tree& t) {
  // As RunStore::write_world_model writes it, less the version field and the
  // final newline.
  return tree_to_json(t).dump(2).size();
}

void check_snapshot_size(const Tree& t, Problems& p, const Tree* before) {
  const std::size_t bytes = snapshot_bytes(t);
  if (bytes <= kMaxSnapshotBytes) return;
  std::string now;
  if (before) {
    const std::size_t was = snapshot_bytes(*before);
    if (bytes <= was) return;
    now = fmt::format("; it takes {} now, and an edit may not make it larger", was);
  }
  p.add(fmt::format("the world model would take {} bytes as a snapshot; at most {} are accepted (the world model's "
                    "snapshot cap, docs/world-model.md \"Limits\"){}: shorten the longest notes, descriptions and "
                    "rationales, or hold fewer nodes",
                    bytes, kMaxSnapshotBytes, now));
}

void fill_lineage(Tree& t) {
  const TreeIndex idx(t);
  // Only parent_solution_id changes, so the index stays valid.
  for (std::size_t i = 0; i < t.nodes.size(); ++i) {
    Node& n = t.nodes[i];
    if (n.is_root || n.solved() || !n.solution.parent_solution_id.empty()) continue;
    if (std::size_t parent = idx.parent(i); parent != TreeIndex::npos)
      n.solution.parent_solution_id = t.nodes[parent].solution.solution_id;
  }
}

// ---------------------------------------------------------------------------
// Writing

namespace {

Json text_or_null(const std::optional<std::string>& s) { return s ? Json(*s) : Json(); }
Json text_or_null(const std::string& s) { return s.empty() ? Json() : Json(s); }

}  // namespace

Json node_to_json(const Node& n) {
  Json impacts = Json::object();
  for (std::size_t i = 0; i < kImpactKeys.size(); ++i) {
    const Impact& imp = n.impacts[i];
    Json e = Json::obj({{"rating_0_to_10", imp.rating ? Json(*imp.rating) : Json()},
                        {"risk", imp.risk},
                        {"notes", imp.notes}});
    if (i == kHardwareFitImpact) e["hw_notes"] = imp.hw_notes;
    impacts[kImpactKeys[i]] = std::move(e);
  }
  const SolutionLink& s = n.solution;
  const Action& a = n.action;
  return Json::obj(
      {{"node_id", n.id},
       {"parent_id", n.is_root ? Json() : Json(n.parent_id)},
       {"node_type", n.is_root ? "root" : "decision"},
       {"decision", text_or_null(n.decision)},
       {"choice", text_or_null(n.choice)},
       {"solution_ref", Json::obj({{"solution_id", text_or_null(s.solution_id)},
                                   {"parent_solution_id", text_or_null(s.parent_solution_id)},
                                   {"eval", s.eval},
                                   {"round_index", s.round_index ? Json(*s.round_index) : Json()},
                                   {"solution_name", text_or_null(s.solution_name)}})},
       {"impacts", std::move(impacts)},
       {"overall_rating_0_to_10", n.overall_rating},
       {"confidence_0_to_1", n.confidence},
       {"last_updated_round", n.last_updated_round},
       {"notes", n.notes},
       {"action", Json::obj({{"title", a.title},
                             {"description", a.description},
                             {"difficulty_1_to_5", a.difficulty},
                             {"score_0_to_1", a.score},
                             {"expected_vs_baseline_factor", a.expected_factor ? Json(*a.expected_factor) : Json()},
                             {"rationale", a.rationale}})}});
}

Json tree_to_json(const Tree& t) {
  Json nodes = Json::array();
  for (const auto& n : t.nodes) nodes.push_back(node_to_json(n));
  Json questions = Json::array();
  for (const auto& q : t.open_questions) questions.push_back(q);
  return Json::obj({{"kernel_summary", t.kernel_summary},
                    {"open_questions", std::move(questions)},
                    {"decision_tree", Json::obj({{"root_id", t.root_id},
                                                 {"active_leaf_id", t.active_id},
                                                 {"nodes", std::move(nodes)}})},
                    {"computed_signals", t.computed_signals}});
}

// ---------------------------------------------------------------------------
// Evaluation values

namespace {

std::optional<double> number_at(const Json& j, std::string_view key) {
  const Json* v = j.is_object() ? j.find(key) : nullptr;
  if (v && v->is_number()) return v->as_number();
  return std::nullopt;
}

}  // namespace

bool eval_passed(const Json& eval) {
  const Json* s = eval.is_object() ? eval.find("status") : nullptr;
  if (!s || !s->is_string()) return false;
  std::string v = s->as_string();
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  return v == "passed";
}

std::optional<double> eval_score(const Json& eval) {
  if (auto v = number_at(eval, "score")) return v;
  if (const Json* m = eval.is_object() ? eval.find("metrics") : nullptr) return number_at(*m, "score");
  return std::nullopt;
}

std::optional<double> eval_speedup(const Json& eval) {
  for (std::string_view key : {"speedup", "speedup_factor", "mean_vs_baseline_factor"})
    if (auto v = number_at(eval, key)) return v;
  return std::nullopt;
}

std::optional<double> eval_vs_baseline(const Json& eval) {
  if (auto v = number_at(eval, "mean_vs_baseline_factor"); v && *v > 0) return v;
  return std::nullopt;
}

std::optional<double> eval_latency_ms(const Json& eval) {
  for (std::string_view key : {"latency_ms", "mean_latency_ms"})
    if (auto v = number_at(eval, key)) return v;
  return std::nullopt;
}

}  // namespace ks::core::wm
