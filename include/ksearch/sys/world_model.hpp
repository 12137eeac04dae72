// Extension interface (less stable: it may change in a minor release; see
// docs/api.md). The world model: a search tree of design
// hypotheses, edited by the LLM.
//
// The JSON schema is K-Search's (kernel_summary, open_questions,
// decision_tree.nodes with action {title, description, difficulty_1_to_5,
// score_0_to_1, expected_vs_baseline_factor, rationale}, impacts, ratings,
// confidence, solution_ref). Unlike the original, an edit that breaks an
// invariant is rejected as a whole and its reasons go back to the LLM; it is
// never committed. Lenient edits (EditRules::lenient, an option) repair what
// can be repaired safely instead, and record each repair. See
// docs/world-model.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ksearch/export.h"
#include "ksearch/json.hpp"
#include "ksearch/llm.hpp"

KS_NAMESPACE_BEGIN

// How the next action is chosen from the frontier: rank by priority score
// (descending), then difficulty (ascending), then overall rating
// (descending), then node id; only actions with difficulty <= the cap are
// eligible unless none is.
struct KS_API SelectionPolicy {
  int max_difficulty = 4;  // --wm-max-difficulty, 1..5
  // Once the best attached passing solution reaches this factor over the
  // task's baseline (mean_vs_baseline_factor: baseline latency over its
  // own, on tasks scored against a baseline, as FlashInfer's), the cap is
  // raised to relaxed_max_difficulty (never lowered: the original also
  // lowered a user cap of 5; we do not). Without a baseline: no relaxing.
  // (Keyed on the speedup over the reference instead, a 4x TriMul kernel
  // would pass at once.)
  double relax_if_best_vs_baseline_ge = 0.5;
  int relaxed_max_difficulty = 4;
  // Actions that concurrent cycles are working on (--parallel): never
  // selected again while they are.
  std::vector<std::string> in_progress;
};

// An open or closed action node as the strategy sees it.
struct KS_API ActionInfo {
  std::string node_id;
  std::string parent_id;
  std::string title;
  std::string description;
  std::string rationale;
  int difficulty = 3;                       // 1..5
  double score = 0.5;                       // priority V, 0..1
  std::optional<double> expected_factor;    // expected speedup vs the base
  double overall_rating = 5;                // 0..10
  double confidence = 0.5;                  // 0..1
  std::string parent_solution_id;           // the base kernel to start from; empty if none
  std::string solution_id;                  // set once the action is closed
};

// What gets attached to a node when its cycle produced a passing kernel.
struct KS_API SolutionRef {
  std::string solution_id;
  std::string parent_solution_id;
  int round = 0;
  Json eval;  // compact: {status, latency_ms, speedup, score}
  std::string solution_name;  // the solution's human label, kept in the tree (the original dropped it)
};

// The result of parsing and applying an LLM answer to the tree.
struct KS_API EditOutcome {
  bool ok = false;
  std::vector<std::string> errors;  // each phrased so the LLM can fix it
  int applied_ops = 0;
  int new_nodes = 0;
  Json report = Json::object();     // per-op details, for the event log
  // Lenient edits: what a committed edit repaired, one sentence each
  // ("op 2 (insert_node): node: confidence_0_to_1 1.4 clamped to 1"). A
  // rejected answer lists its repairs among its errors instead.
  std::vector<std::string> repairs;
};

// Rules an edit must satisfy beyond the structural invariants.
struct KS_API EditRules {
  enum class Purpose { propose, refine, too_hard };
  Purpose purpose = Purpose::propose;
  int round = 0;
  // refine: the node whose cycle just closed; it must end with >= 1 open
  // child action of difficulty < 5 (the continuation rule).
  std::string solved_node_id;
  // too_hard: the node whose cycle failed; it must be downgraded (lower
  // score) or get a smaller recovery child.
  std::string failed_node_id;
  int max_new_nodes = 3;
  // propose: afterwards >= 1 executable frontier action must have a score
  // above this.
  double min_open_action_score = 0.5;
  // Actions that concurrent cycles are working on (--parallel): deleting
  // one is an error, since its cycle will attach its kernel there.
  std::vector<std::string> in_progress;
  // SearchConfig::world_model.lenient_edits: repair what can be repaired safely
  // (numbers clamped, unknown fields dropped, an op that breaks a rule or
  // exceeds max_new_nodes skipped) instead of rejecting the answer. A damaged
  // root or attached kernel, an answer that does not parse and a purpose rule
  // that fails after the repairs are still rejections.
  bool lenient = false;
};

// Inputs for the prompts of the world-model LLM calls. Section budgets (in
// characters) follow the original: definition 1600, WM 2600, path 800, eval
// 800, prediction 800, status 900, frontier 1200, action 500, targets 900.
struct KS_API WmPromptInputs {
  std::string task_spec;        // the task's specification text
  std::string code_format;      // how candidates must be written
  std::string targets;          // performance targets text, may be empty
  // Where and in what the kernels run, for wording and a [TARGET] section:
  // the device's backend ("cuda", "host"), its description (name, compute
  // units, features, caches, how a call is timed) and the run's language.
  std::string backend;
  std::string device;
  std::string language;
  std::string workloads;        // the workloads' shapes and how the score is made
  std::string search_state;     // rounds used and left, cycles, the cycle's stagnation rule
  std::string attempts;         // refine / too_hard: every attempt of the cycle, compactly
  bool lenient_edits = false;   // the edit rules' mode, so the prompt says what happens to a slip
  std::string chosen_node_id;   // refine / too_hard: the cycle's action
  std::string prediction;       // refine: what the action was expected to achieve
  std::string eval_summary;     // refine / too_hard: the cycle's best or last evaluation
  // refine: the cycle-best kernel; too_hard: the cycle's last attempt;
  // propose: the last cycle's kernel (its best, else its last attempt).
  std::string kernel_code;
  int debug_rounds = 0;         // too_hard: attempts made in the cycle
  int round = 0;
  std::vector<std::string> validation_errors;  // a retry carries the last rejection
};

class KS_API WorldModel {
 public:
  virtual ~WorldModel() = default;

  virtual bool initialized() const = 0;

  // Builds the tree from the answer to a wm_init prompt. Commits only when the
  // answer parses and validates.
  virtual EditOutcome initialize(const std::string& llm_answer, int round) = 0;
  // initialize() under the mode of `rules`: with rules.lenient the init
  // answer gets the repairs of a lenient edit. Only rules.round and
  // rules.lenient are read. The default, for a world model without a lenient
  // mode, is initialize(llm_answer, rules.round).
  virtual EditOutcome initialize_with(const std::string& llm_answer, const EditRules& rules) {
    return initialize(llm_answer, rules.round);
  }
  // A deterministic starting tree (root plus a few generic actions), used
  // when the LLM cannot produce a valid one.
  virtual void initialize_fallback(const std::string& task_summary, int round) = 0;

  // Parses edit operations (update_node, insert_node, split_node,
  // delete_node) from an LLM answer and applies them all or none.
  virtual EditOutcome apply_edits(const std::string& llm_answer, const EditRules& rules) = 0;

  // Deterministic repairs when the LLM fails to produce a valid edit after
  // its retries, so the search always has somewhere to go.
  virtual void fallback_after_propose(int round) = 0;
  virtual void fallback_after_refine(const std::string& solved_node_id, int round) = 0;
  virtual void fallback_after_too_hard(const std::string& failed_node_id, int round) = 0;

  // Open actions whose parent is the root or has a solution.
  virtual std::vector<std::string> frontier() const = 0;
  // The next action to execute, or nullopt when the frontier is empty.
  virtual std::optional<std::string> select_action(const SelectionPolicy& policy) const = 0;
  // Whether a wm_propose call is due: fewer than 3 frontier actions, or the
  // best solved node has no open child.
  virtual bool needs_proposals() const = 0;
  virtual ActionInfo action(const std::string& node_id) const = 0;

  virtual void set_active(const std::string& node_id) = 0;
  virtual void attach_solution(const std::string& node_id, const SolutionRef& ref) = 0;
  // Machine-written signals (round index, last trace) kept beside the tree.
  virtual void set_computed_signals(const Json& signals) = 0;

  // The prompt for one world-model LLM call (wm_init, wm_propose, wm_refine,
  // wm_too_hard).
  virtual std::string build_prompt(PromptKind kind, const WmPromptInputs& inputs) const = 0;
  // The compact view for code-generation prompts, at most max_chars long.
  virtual std::string render_compact(std::size_t max_chars) const = 0;
  // A human-readable tree for `ksearch show`.
  virtual std::string render_tree() const = 0;

  virtual Json to_json() const = 0;
  virtual void load_json(const Json& j) = 0;
  // Increments on every committed change; names the snapshot files.
  virtual std::uint64_t version() const = 0;
};

KS_NAMESPACE_END
