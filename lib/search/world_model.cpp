// The default ks::WorldModel: K-Search's decision tree, with edits that are
// validated (in lenient mode, repaired) on a copy and committed all or
// nothing.
#include <fmt/format.h>

#include <algorithm>

#include "core/response/json_extract.hpp"
#include "search/world_model/edits.hpp"
#include "search/world_model/prompts.hpp"
#include "search/world_model/render.hpp"
#include "search/world_model/selection.hpp"
#include "search/world_model/tree.hpp"
#include "ksearch/error.hpp"
#include "ksearch/world_model.hpp"
#include "ksearch/sys/world_model.hpp"

KS_NAMESPACE_BEGIN

namespace {

// The init prompt asks for this many open actions under the root.
constexpr std::size_t kMinInitActions = 3;

std::string join_errors(const std::vector<std::string>& errors, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < errors.size() && i < max; ++i) out += (i ? "; " : "") + errors[i];
  if (errors.size() > max) out += fmt::format("; ... ({} more)", errors.size() - max);
  return out;
}

core::wm::Action make_action(std::string title, std::string description, int difficulty, double score,
                       std::string rationale) {
  core::wm::Action a;
  a.title = std::move(title);
  a.description = std::move(description);
  a.difficulty = difficulty;
  a.score = score;
  a.rationale = std::move(rationale);
  return a;
}

// The node `id`, or ks::Error(not_found) listing the ids that exist.
template <class TreeT>
auto& require_node(TreeT& t, const std::string& id) {
  auto* n = t.find(id);
  if (!n)
    throw Error(Status::not_found,
                fmt::format("world model: node \"{}\" does not exist; existing ids: {}", id, t.id_list()));
  return *n;
}

class TreeWorldModel final : public WorldModel {
 public:
  bool initialized() const override { return tree_.has_value(); }

  EditOutcome initialize(const std::string& llm_answer, int round) override {
    EditRules rules;
    rules.round = round;
    return initialize_with(llm_answer, rules);
  }

  EditOutcome initialize_with(const std::string& llm_answer, const EditRules& rules) override {
    const int round = rules.round;
    require_uninitialized();
    EditOutcome out;
    std::string parse_error;
    auto parsed = core::extract_json_object(llm_answer, &parse_error);
    if (!parsed) {
      out.errors.push_back(fmt::format("the answer could not be read as JSON: {}. Answer with the world-model JSON "
                                       "object only",
                                       parse_error));
      out.report = Json::obj({{"purpose", "init"}, {"committed", false}});
      return out;
    }
    core::wm::Problems problems(rules.lenient);
    // Over the node cap the cap is the one error: no node is read.
    const bool over_cap = !core::wm::node_count_problem(*parsed).empty();
    core::wm::Tree t = core::wm::read_tree(*parsed, /*from_llm=*/true, round, problems);
    if (!over_cap) {
      core::wm::fill_lineage(t);
      core::wm::check_structure(t, problems);
      core::wm::check_snapshot_size(t, problems);
    }
    std::size_t actions = 0;
    if (problems.empty()) actions = core::wm::ranked_frontier(t).size();
    if (problems.empty() && actions < kMinInitActions)
      problems.add(fmt::format("the tree needs at least {} open action nodes (non-empty action.title) directly under "
                               "the root \"{}\" so the search can start; found {}",
                               kMinInitActions, t.root_id, actions));
    out.ok = problems.empty();
    out.errors = problems.list();
    // As for an edit: a rejected answer goes back with its repairs.
    if (out.ok) out.repairs = problems.repairs();
    else out.errors.insert(out.errors.end(), problems.repairs().begin(), problems.repairs().end());
    out.new_nodes = out.ok ? static_cast<int>(t.nodes.size()) : 0;
    Json errors = Json::array();
    for (const auto& e : out.errors) errors.push_back(e);
    out.report = Json::obj({{"purpose", "init"},
                            {"round", round},
                            {"committed", out.ok},
                            {"nodes", static_cast<long long>(t.nodes.size())},
                            {"open_actions", static_cast<long long>(actions)},
                            {"errors", std::move(errors)}});
    if (out.ok) {
      tree_ = std::move(t);
      ++version_;
    }
    return out;
  }

  void initialize_fallback(const std::string& task_summary, int round) override {
    require_uninitialized();
    core::wm::Tree t;
    t.kernel_summary = "Deterministic starting tree (no valid world model came from the LLM). Task: " +
                       core::wm::clip(task_summary, 1200);
    t.open_questions = {"Is the kernel memory-bound or compute-bound at the benchmark shapes?",
                        "Which data layout gives coalesced loads and stores for every tensor?",
                        "How much of the computation can be fused into one pass over the data?"};
    core::wm::Node root;
    root.id = t.root_id;
    root.is_root = true;
    root.last_updated_round = round;
    root.notes = "Task summary (excerpt):\n" + core::wm::clip(task_summary, 1800);
    t.nodes.push_back(std::move(root));
    const std::string self_check = "SELF_CHECK: generic starting families of increasing ambition; they differ in "
                                   "how much data reuse and fusion they attempt.";
    core::wm::insert_action(t, t.root_id,
                      make_action("Correct baseline: a straightforward kernel",
                                  "Write a simple, clearly correct kernel (one thread per output element or a plain "
                                  "loop nest) to get a passing base to refine.",
                                  1, 0.7, "A passing kernel gives the search a base and a first measurement."),
                      round, self_check);
    core::wm::insert_action(t, t.root_id,
                      make_action("Memory-efficient tiled kernel",
                                  "Stage reused inputs through shared memory with coalesced global loads and stores; "
                                  "size the tiles to the task's shapes.",
                                  2, 0.6, "Most kernels are limited by memory traffic before compute."),
                      round, self_check);
    core::wm::insert_action(t, t.root_id,
                      make_action("Fused single-pass kernel",
                                  "Fuse the operation's stages into one kernel so intermediates stay in registers or "
                                  "shared memory.",
                                  3, 0.5, "Fusion removes round trips through global memory."),
                      round, self_check);
    tree_ = std::move(t);
    ++version_;
  }

  EditOutcome apply_edits(const std::string& llm_answer, const EditRules& rules) override {
    core::wm::Tree& t = tree();
    Json before = core::wm::tree_to_json(t);
    EditOutcome out = core::wm::apply_edit_answer(t, llm_answer, rules);
    if (out.ok && core::wm::tree_to_json(t) != before) ++version_;
    return out;
  }

  void fallback_after_propose(int round) override {
    core::wm::Tree& t = tree();
    const core::wm::Node* best = core::wm::best_solved_node(t);
    if (best && core::wm::open_children(t, best->id).empty()) {
      insert_fallback(best->id, "Refine best solution: target the top bottleneck",
                      "Profile-guided refinement of the best kernel so far: find its largest remaining cost and "
                      "remove it.",
                      0.6, round);
    } else if (core::wm::ranked_frontier(t).empty()) {
      // Not in the original, which could end a run here: with nothing
      // executable, give the search one step to take.
      if (best)
        insert_fallback(best->id, "Refine best solution: target the top bottleneck",
                        "Profile-guided refinement of the best kernel so far: find its largest remaining cost and "
                        "remove it.",
                        0.6, round);
      else
        insert_fallback(t.root_id, "Correct baseline: a straightforward kernel",
                        "Write a simple, clearly correct kernel to get a passing base to refine.", 0.6, round);
    }
  }

  void fallback_after_refine(const std::string& solved_node_id, int round) override {
    core::wm::Tree& t = tree();
    require_node(t, solved_node_id);
    auto kids = core::wm::open_children(t, solved_node_id);
    bool continues = std::any_of(kids.begin(), kids.end(), [](const core::wm::Node* k) { return k->action.difficulty < 5; });
    if (!continues)
      insert_fallback(solved_node_id, "Next-step refinement: target the top bottleneck operation",
                      "Find the operation that dominates this kernel's time and make it cheaper.", 0.35, round);
  }

  void fallback_after_too_hard(const std::string& failed_node_id, int round) override {
    core::wm::Tree& t = tree();
    core::wm::Node* n = t.find(failed_node_id);
    // Already deleted or closed: nothing can re-select it.
    if (!n || !t.is_open_action(*n)) return;
    n->action.score *= 0.5;
    n->last_updated_round = round;
    n->notes += fmt::format("{}[round {}] no passing kernel and no valid too-hard edit: score halved to {:.3f}.",
                            n->notes.empty() ? "" : "\n", round, n->action.score);
    ++version_;
  }

  std::vector<std::string> frontier() const override {
    std::vector<std::string> ids;
    for (const core::wm::Node* n : core::wm::ranked_frontier(tree())) ids.push_back(n->id);
    return ids;
  }

  std::optional<std::string> select_action(const SelectionPolicy& policy) const override {
    if (policy.max_difficulty < 1 || policy.max_difficulty > 5 || policy.relaxed_max_difficulty < 1 ||
        policy.relaxed_max_difficulty > 5)
      throw Error(Status::invalid_argument,
                  fmt::format("selection policy: max_difficulty ({}) and relaxed_max_difficulty ({}) must be within "
                              "1..5",
                              policy.max_difficulty, policy.relaxed_max_difficulty));
    if (const core::wm::Node* n = core::wm::select_action(tree(), policy)) return n->id;
    return std::nullopt;
  }

  bool needs_proposals() const override { return core::wm::needs_proposals(tree()); }

  ActionInfo action(const std::string& node_id) const override {
    const core::wm::Tree& t = tree();
    const core::wm::Node& n = require_node(t, node_id);
    ActionInfo a;
    a.node_id = n.id;
    a.parent_id = n.parent_id;
    a.title = n.action.title;
    a.description = n.action.description;
    a.rationale = n.action.rationale;
    a.difficulty = n.action.difficulty;
    a.score = n.action.score;
    a.expected_factor = n.action.expected_factor;
    a.overall_rating = n.overall_rating;
    a.confidence = n.confidence;
    a.parent_solution_id = n.solution.parent_solution_id;
    if (a.parent_solution_id.empty() && !n.is_root)
      if (const core::wm::Node* parent = t.find(n.parent_id)) a.parent_solution_id = parent->solution.solution_id;
    a.solution_id = n.solution.solution_id;
    return a;
  }

  void set_active(const std::string& node_id) override {
    core::wm::Tree& t = tree();
    require_node(t, node_id);
    if (t.active_id == node_id) return;
    t.active_id = node_id;
    ++version_;
  }

  void attach_solution(const std::string& node_id, const SolutionRef& ref) override {
    core::wm::Tree& t = tree();
    core::wm::Node& n = require_node(t, node_id);
    if (ref.solution_id.empty())
      throw Error(Status::invalid_argument, fmt::format("world model: attaching to \"{}\" needs a solution_id", node_id));
    if (n.solved() && n.solution.solution_id != ref.solution_id)
      throw Error(Status::state, fmt::format("world model: node \"{}\" already has the solution \"{}\"; an attached "
                                             "solution is never replaced",
                                             node_id, n.solution.solution_id));
    if (!ref.eval.is_null() && !ref.eval.is_object())
      throw Error(Status::invalid_argument, "world model: SolutionRef.eval must be an object or null");
    n.solution.solution_id = ref.solution_id;
    if (!ref.parent_solution_id.empty()) n.solution.parent_solution_id = ref.parent_solution_id;
    n.solution.eval = ref.eval;
    n.solution.round_index = ref.round;
    n.solution.solution_name = ref.solution_name;
    n.last_updated_round = ref.round;
    // Open children inserted before this kernel existed now build on it.
    for (auto& c : t.nodes)
      if (!c.is_root && c.parent_id == node_id && !c.solved()) c.solution.parent_solution_id = ref.solution_id;
    ++version_;
  }

  void set_computed_signals(const Json& signals) override {
    core::wm::Tree& t = tree();
    if (!signals.is_object())
      throw Error(Status::invalid_argument, fmt::format("world model: computed_signals must be a JSON object, found {}",
                                                        json_type_name(signals.type())));
    if (t.computed_signals == signals) return;
    t.computed_signals = signals;
    ++version_;
  }

  std::string build_prompt(PromptKind kind, const WmPromptInputs& inputs) const override {
    return core::wm::build_prompt(tree_ ? &*tree_ : nullptr, kind, inputs);
  }

  std::string render_compact(std::size_t max_chars) const override {
    return tree_ ? core::wm::render_compact(*tree_, max_chars) : core::wm::clip("(no world model yet)", max_chars);
  }

  std::string render_tree() const override { return tree_ ? core::wm::render_tree(*tree_) : "(no world model yet)\n"; }

  Json to_json() const override {
    if (!tree_) return Json();
    Json j = core::wm::tree_to_json(*tree_);
    j["version"] = static_cast<unsigned long long>(version_);
    return j;
  }

  void load_json(const Json& j) override {
    if (j.is_null()) {
      tree_.reset();
      version_ = 0;
      return;
    }
    core::wm::Problems problems;
    core::wm::Tree t = core::wm::read_tree(j, /*from_llm=*/false, 0, problems);
    core::wm::fill_lineage(t);
    if (problems.empty()) core::wm::check_structure(t, problems);
    std::uint64_t version = 1;
    if (const Json* v = j.is_object() ? j.find("version") : nullptr; v && !v->is_null()) {
      if (!v->is_int() || v->as_int() < 0) problems.add("the world model: version must be a non-negative integer");
      else version = static_cast<std::uint64_t>(v->as_int());
    }
    if (!problems.empty())
      throw Error(Status::invalid_argument,
                  "world model JSON is invalid: " + join_errors(problems.list(), core::wm::kMaxErrorsInPrompt));
    tree_ = std::move(t);
    version_ = version;
  }

  std::uint64_t version() const override { return version_; }

 private:
  core::wm::Tree& tree() {
    if (!tree_) throw not_initialized();
    return *tree_;
  }
  const core::wm::Tree& tree() const {
    if (!tree_) throw not_initialized();
    return *tree_;
  }
  static Error not_initialized() {
    return Error(Status::state,
                 "world model: not initialized; call initialize(), initialize_fallback() or load_json() first");
  }
  void require_uninitialized() const {
    if (tree_)
      throw Error(Status::state, "world model: already initialized (load_json(null) clears it)");
  }
  void insert_fallback(const std::string& parent_id, std::string title, std::string description, double score,
                       int round) {
    // At the node or depth cap a fallback inserts nothing: the tree stays one
    // that load_json accepts, and the search goes on with the actions it has
    // (or ends, when none is left).
    if (tree_->nodes.size() >= core::wm::kMaxNodes || tree_->path_to(parent_id).size() > core::wm::kMaxDepth) return;
    core::wm::insert_action(*tree_, parent_id,
                      make_action(std::move(title), std::move(description), 2, score,
                                  "Deterministic fallback: the LLM gave no valid edit."),
                      round, fmt::format("[round {}] inserted by the deterministic fallback.", round));
    ++version_;
  }

  std::optional<core::wm::Tree> tree_;
  std::uint64_t version_ = 0;
};

}  // namespace

std::unique_ptr<WorldModel> make_tree_world_model() { return std::make_unique<TreeWorldModel>(); }

KS_NAMESPACE_END
