// The world model's data: a flat list of nodes whose parent links form a
// tree, in K-Search's JSON schema (see docs/world-model.md).
//
// Reading collects every problem as a sentence the LLM can act on, instead of
// stopping at the first, because a rejected edit goes back to the model with
// all of its reasons at once.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/world_model_file.hpp"
#include "ksearch/json.hpp"

namespace ks::core::wm {

// Problems found while reading or validating, each a full sentence.
//
// A lenient one (EditRules::lenient) repairs what has a safe repair instead
// (a number clamped, an unknown field dropped): repair() records what was
// done, and the caller applies it. A strict one makes every such problem an
// error, as before.
class Problems {
 public:
  Problems() = default;
  explicit Problems(bool lenient) : lenient_(lenient) {}

  void add(std::string sentence) { list_.push_back(std::move(sentence)); }
  // A problem that no mode repairs: in lenient mode it rejects the whole
  // answer instead of skipping the operation it came from.
  void add_unrepairable(std::string sentence) {
    unrepairable_ = true;
    add(std::move(sentence));
  }
  // Strict: `problem` is an error and this returns false. Lenient: `repair`
  // (what is done about it) is recorded and this returns true, so the caller
  // applies the repair.
  bool repair(std::string problem, std::string repair) {
    if (!lenient_) {
      add(std::move(problem));
      return false;
    }
    repairs_.push_back(std::move(repair));
    return true;
  }
  // A repair only lenient mode makes (the caller checks lenient()).
  void repaired(std::string sentence) { repairs_.push_back(std::move(sentence)); }
  // Takes over another's errors, repairs and unrepairable mark.
  void absorb(const Problems& other) {
    list_.insert(list_.end(), other.list_.begin(), other.list_.end());
    repairs_.insert(repairs_.end(), other.repairs_.begin(), other.repairs_.end());
    unrepairable_ = unrepairable_ || other.unrepairable_;
  }

  bool lenient() const { return lenient_; }
  bool empty() const { return list_.empty(); }
  std::size_t size() const { return list_.size(); }
  const std::vector<std::string>& list() const { return list_; }
  bool unrepairable() const { return unrepairable_; }
  const std::vector<std::string>& repairs() const { return repairs_; }

 private:
  bool lenient_ = false;
  bool unrepairable_ = false;
  std::vector<std::string> list_;
  std::vector<std::string> repairs_;
};

// The three impact axes of the original schema, in its order.
inline constexpr std::array<std::string_view, 3> kImpactKeys = {
    "memory_bandwidth", "register_pressure", "compute_intensity_and_hw_fit"};
// Only this axis carries hw_notes.
inline constexpr std::size_t kHardwareFitImpact = 2;

struct Impact {
  std::optional<double> rating;  // 0..10
  std::string risk;
  std::string notes;
  std::string hw_notes;
  bool operator==(const Impact&) const = default;
};

// The action payload: a node with a non-empty title is an action.
struct Action {
  std::string title;
  std::string description;
  std::string rationale;
  int difficulty = 3;                     // 1..5
  double score = 0.5;                     // priority V, 0..1
  std::optional<double> expected_factor;  // expected speedup vs the base, > 0
  bool operator==(const Action&) const = default;
};

// solution_ref: written by the library only, never by the LLM.
struct SolutionLink {
  std::string solution_id;
  std::string parent_solution_id;
  std::string solution_name;
  std::optional<int> round_index;
  Json eval;  // null when nothing is attached
  bool operator==(const SolutionLink&) const = default;
};

struct Node {
  std::string id;
  std::string parent_id;  // empty only for the root
  bool is_root = false;
  std::optional<std::string> decision;  // null on the dummy root
  std::optional<std::string> choice;
  SolutionLink solution;
  std::array<Impact, 3> impacts;
  double overall_rating = 5;  // 0..10
  double confidence = 0.5;    // 0..1
  int last_updated_round = 0;
  std::string notes;
  Action action;

  bool solved() const { return !solution.solution_id.empty(); }
  bool has_action() const { return !action.title.empty(); }
  bool operator==(const Node&) const = default;
};

// What a world model may hold (docs/world-model.md, "Limits"). K-Search's
// trees hold tens to a few hundred nodes; the caps leave ten times that,
// and bound every check, prompt and snapshot. An answer, a file or an
// import over one is refused with a sentence naming the cap.
inline constexpr std::size_t kMaxNodes = 4096;
// Edges from the root to the deepest node.
inline constexpr std::size_t kMaxDepth = 512;
// A snapshot as the run folder stores it (WorldModel::to_json().dump(2)),
// checked on what an init or edit answer makes. The kernels and signals the
// library attaches later add a few hundred bytes a node at most.
inline constexpr std::size_t kMaxSnapshotBytes = std::size_t{8} << 20;
static_assert(2 * kMaxSnapshotBytes <= kMaxWorldModelFileBytes, "a snapshot at the cap must read back");
// Operations in one edit answer.
inline constexpr std::size_t kMaxEditOps = 128;

// One lookup is a linear scan: a flat vector keeps the copy-validate-commit
// cycle of an edit a plain value copy. Work over many nodes builds a
// TreeIndex once instead.
struct Tree {
  std::string kernel_summary;
  std::vector<std::string> open_questions;
  std::string root_id = "root";
  std::string active_id = "root";
  std::vector<Node> nodes;
  Json computed_signals = Json::object();

  const Node* find(std::string_view id) const;
  Node* find(std::string_view id);
  const Node& root() const;  // throws ks::Error(state) when missing
  std::vector<const Node*> children_of(std::string_view id) const;
  // An action that has no kernel yet.
  bool is_open_action(const Node& n) const { return !n.is_root && n.has_action() && !n.solved(); }
  // An open action whose base exists: its parent is the root or has a kernel.
  bool is_executable(const Node& n) const;
  // Root first, `id` last; empty when `id` is unknown. Safe on cyclic input.
  // Linear in the tree's size.
  std::vector<const Node*> path_to(std::string_view id) const;
  // "root, n1, n2" (at most `max` ids, then "...").
  std::string id_list(std::size_t max = 24) const;
};

// A tree's links, computed once in linear time (a hash of the ids, the
// children of each node, each node's depth) without recursion or a walk to
// the root per node, so a 30 000-deep chain costs what 30 000 flat nodes do.
// Positions are indices into tree.nodes; the index holds pointers into the
// tree and is stale once its node list changes.
class TreeIndex {
 public:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  explicit TreeIndex(const Tree& t);

  // The first node with this id (as Tree::find), or npos / nullptr.
  std::size_t position(std::string_view id) const;
  const Node* find(std::string_view id) const;
  // The parent's position; npos for a root or a parent that does not exist.
  std::size_t parent(std::size_t i) const { return parent_[i]; }
  // The non-root nodes whose parent_id names node i (its first holder), in
  // node order.
  const std::vector<std::size_t>& children(std::size_t i) const { return children_[i]; }
  // Edges up to a root node; npos when the node's parent walk ends
  // elsewhere (a missing parent, a cycle).
  std::size_t depth(std::size_t i) const { return depth_[i]; }
  // The node's parent walk never ends: it is on a parent cycle or below one.
  bool cyclic(std::size_t i) const { return cyclic_[i] != 0; }
  // The deepest node that reaches a root (npos when none does).
  std::size_t deepest() const { return deepest_; }

 private:
  void link_depths();

  const Tree& t_;
  std::unordered_map<std::string_view, std::size_t> by_id_;
  std::vector<std::size_t> parent_;
  std::vector<std::vector<std::size_t>> children_;
  std::vector<std::size_t> depth_;
  std::vector<char> cyclic_;
  std::size_t deepest_ = npos;
};

// How a node object is read: a whole node from a file (everything allowed),
// a new node from the LLM (no solution data), or a patch from the LLM
// (patchable fields only; solution data must stay as it is).
enum class NodeRead { from_file, new_from_llm, patch_from_llm };

// Merges the fields present in `j` into `n`. `where` prefixes every problem;
// a lenient `p` repairs what it can (see Problems). Returns whether the
// object set action.score_0_to_1 (new actions without a score take
// overall_rating / 10, as in the original).
bool read_node_fields(const Json& j, Node& n, NodeRead mode, const std::string& where, Problems& p);

// The node cap's refusal when `j` (a world model) lists more than kMaxNodes
// nodes, else "". Checked before the nodes are read, so an oversized answer
// or file costs no more than its parse.
std::string node_count_problem(const Json& j);

// Reads a whole world model. `from_llm`: an init answer (nodes may not carry
// solutions; computed_signals is machine-written and ignored). Over the node
// cap it reads no node and reports node_count_problem.
Tree read_tree(const Json& j, bool from_llm, int round, Problems& p);

// The structural invariants: one root, unique well-formed ids, every parent
// exists, no cycles, node types consistent, the active node exists, lineage
// (an open node's parent_solution_id is its parent's solution), and the
// node and depth caps. Linear in the tree's size.
void check_structure(const Tree& t, Problems& p);

// The tree as the run folder writes a snapshot of it (tree_to_json,
// indented), in bytes.
std::size_t snapshot_bytes(const Tree& t);

// The snapshot cap: `t` as a snapshot is at most kMaxSnapshotBytes, or, for
// an edit of a tree already over it (`before`: imported, or grown by the
// kernels the library attached), no larger than `before`.
void check_snapshot_size(const Tree& t, Problems& p, const Tree* before = nullptr);

// Fills an open node's empty parent_solution_id from its parent, so lineage
// follows a parent that got its kernel after the child was inserted.
void fill_lineage(Tree& t);

// A problem with a node id as the LLM wrote it, or "" when it is fine.
std::string check_node_id(std::string_view id);

// What an error says was found: the JSON type and the value, cut short
// ("number 7", "string \"fast\"", "array [1,2]"), so one answer's every
// slip can be fixed from the error alone.
std::string found_text(const Json& v);

Json node_to_json(const Node& n);
Json tree_to_json(const Tree& t);

// Values from an attached evaluation, in this library's compact form
// ({status, latency_ms, speedup, score}) or the original's (metrics.score,
// "PASSED").
bool eval_passed(const Json& eval);
std::optional<double> eval_score(const Json& eval);
std::optional<double> eval_speedup(const Json& eval);
// The factor over the task's baseline (mean_vs_baseline_factor), where the
// task is scored against one; nullopt otherwise.
std::optional<double> eval_vs_baseline(const Json& eval);
std::optional<double> eval_latency_ms(const Json& eval);

}  // namespace ks::core::wm
