#include "search/world_model/prompts.hpp"

#include <fmt/format.h>

#include "search/world_model/edits.hpp"
#include "search/world_model/render.hpp"
#include "search/world_model/selection.hpp"
#include "ksearch/error.hpp"
#include "ksearch/sys/world_model.hpp"

namespace ks::core::wm {

namespace {

using B = PromptBudgets;

// "[TAG]\n<body cut to budget>\n\n"; empty bodies are left out.
void section(std::string& out, std::string_view tag, std::string_view body, std::size_t budget) {
  while (!body.empty() && body.back() == '\n') body.remove_suffix(1);
  if (body.empty()) return;
  out += fmt::format("[{}]\n{}\n\n", tag, clip(body, budget));
}

// Fixed guidance text, never cut.
void guide(std::string& out, std::string_view tag, std::string_view body) {
  out += fmt::format("[{}]\n{}\n\n", tag, body);
}

constexpr std::string_view kSchemaGuide = R"TXT({
  "kernel_summary": "one paragraph: the class of kernel, where its time likely goes, hard constraints",
  "open_questions": ["3 to 8 unknowns that measurements should settle", "..."],
  "decision_tree": {
    "root_id": "root",
    "active_leaf_id": "root",
    "nodes": [
      {"node_id": "root", "parent_id": null, "node_type": "root", "decision": null, "choice": null,
       "notes": "the seven-part analysis"},
      {"node_id": "n1", "parent_id": "root", "node_type": "decision",
       "decision": "kernel family", "choice": "one fused tiled kernel",
       "solution_ref": null,
       "impacts": {
         "memory_bandwidth": {"rating_0_to_10": 7, "risk": "low", "notes": "..."},
         "register_pressure": {"rating_0_to_10": 5, "risk": "medium", "notes": "..."},
         "compute_intensity_and_hw_fit": {"rating_0_to_10": 6, "risk": "medium", "notes": "...", "hw_notes": "..."}
       },
       "overall_rating_0_to_10": 7, "confidence_0_to_1": 0.5, "last_updated_round": 0,
       "notes": "SELF_CHECK: ...",
       "action": {"title": "Fused tiled kernel, first version", "description": "what to write, concretely",
                  "difficulty_1_to_5": 2, "score_0_to_1": 0.7, "expected_vs_baseline_factor": 1.5,
                  "rationale": "why it should help"}}
    ]
  }
}
Fields: node_id is short, unique and without spaces; parent_id is null only on the root. decision is the design
question a node settles and choice the option taken. overall_rating_0_to_10 rates how promising the plan from the
root to this node is, confidence_0_to_1 how sure you are of it. impacts rate the plan per axis (risk: low, medium or
high). action makes the node an action, one implementation attempt: difficulty_1_to_5 is an integer from 1
(trivial) to 5 (a rewrite), score_0_to_1 its priority, expected_vs_baseline_factor the speedup expected over its base
kernel, not over the reference (or null). An action is open until the library attaches a passing kernel to it (solution_ref is written by
the library, never by you). An open action is executable when its parent is the root or has a passing kernel; deeper
actions wait for their parent's kernel.)TXT";

// The root notes' checklist; parts 3 and 5 name the device's units of work.
std::string init_checklist(bool gpu) {
  return fmt::format(
      R"TXT(Write the root's notes as seven numbered parts:
1. Problem class: what kind of computation this is (e.g. batched GEMM-like, reduction, stencil, attention-like).
2. Canonical math and dependencies: the exact formula, which outputs depend on which inputs, what can be fused.
3. Data layout and access patterns: strides, contiguity, reuse, {}.
4. Bottleneck hypotheses for at least three runtime regimes (e.g. the small, typical and large shapes of WORKLOADS_AND_SCORE): memory, latency or compute bound on the TARGET device, and why.
5. Design-space knobs: {}.
6. A code-free skeleton of a fast kernel: stages, loops and what lives where.
7. Two or three candidate kernel families, each with the reason it could win.)TXT",
      gpu ? "what each thread block and warp would read and write" : "what each thread and its vector lanes would read and write, and what stays in which cache level",
      gpu ? "tiling, work decomposition over SMs and thread blocks, data types and accumulation, staging through "
            "shared memory and registers, tensor cores, fusion boundaries"
          : "tiling and cache blocking, work decomposition over cores and threads, vector width and instruction-set "
            "extensions, data types and accumulation, loop order and unrolling, fusion boundaries");
}

// Siblings are alternatives (the original's rule); an optimized variant of
// a design is that design's child, so the tree records what it refines.
constexpr std::string_view kSiblingRule =
    "Siblings must be real alternatives, different designs: never a baseline and an optimized variant of one design "
    "side by side (an optimization of a design is its child). Start the notes of every node you insert beside others "
    "with a line \"SELF_CHECK: ...\" saying why it excludes its siblings.";

constexpr std::string_view kInitRules =
    R"TXT(- The root is a dummy: node_id "root", node_type "root", decision and choice null, no action.
- Level-1 children are kernel families named after their algorithmic structure (e.g. "one fused tiled kernel", "GEMM stage plus fused epilogue"), never after a tactic such as vectorization, pipelining or unrolling; tactics are refinements further down.
- At least 3 OPEN action nodes must sit directly under the root, each small enough for one implementation attempt; a family node may itself be the action that builds the family's first version.
- Fill every numeric field; as a prior use score_0_to_1 close to overall_rating_0_to_10 / 10.
- Keep doubtful ideas as nodes with a low score instead of leaving them out.
- Leave solution_ref null and leave computed_signals out: both are written by the library.)TXT";

// The rules of the tree's shape that hold for every edit, not only the
// first tree: the original's edit prompts repeat them.
constexpr std::string_view kEditTreeRules =
    R"TXT(- Kernel families (children of the root) are named after their algorithmic structure, never after a tactic such as vectorization, pipelining or unrolling; tactics are refinements further down.
- Prefer adding children to deleting: keep doubtful ideas as nodes with a low score.)TXT";

std::string edit_format_guide(const EditRules& defaults, bool lenient) {
  return fmt::format(
      R"TXT(Send one JSON object: {{"active_leaf_id": optional node id, "ops": [op, ...]}}. Ops run in order; a later op may use an id an earlier op created.
{{"op": "update_node", "node_id": ID, "patch": {{fields to change}}}}
   patchable: decision, choice (not on the root), overall_rating_0_to_10, confidence_0_to_1, notes, last_updated_round, impacts, action; impacts and action are merged field by field.
{{"op": "insert_node", "parent_id": ID, "parent_solution_id": optional (filled in from the parent), "node": {{node fields; node_id optional}}}}
{{"op": "split_node", "node_id": ID, "parent_patch": {{patch for the node}}, "children": [node, ...] (at most {})}}
{{"op": "delete_node", "node_id": ID}}   only open leaves: not the root, no kernel attached, no children.
Node fields: node_id, decision, choice, overall_rating_0_to_10, confidence_0_to_1, notes, impacts {{memory_bandwidth | register_pressure | compute_intensity_and_hw_fit: {{rating_0_to_10, risk, notes, hw_notes (last axis only)}}}}, action {{title, description, difficulty_1_to_5, score_0_to_1, expected_vs_baseline_factor, rationale}}. A node with a non-empty action.title is an action.
Rules: at most {} new nodes per edit; ratings 0..10, confidence and score 0..1, difficulty an integer 1..5 {}; solution_ref is written by the library; the root's decision and choice are fixed. {})TXT",
      kMaxSplitChildren, defaults.max_new_nodes,
      lenient ? "(out-of-range values are clamped, and the repair recorded)"
              : "(out-of-range values are rejected, not clamped)",
      lenient ? "An op that breaks a rule is skipped and the rest applied (unknown fields are dropped); every repair "
                "is recorded and reported. A changed root or attached kernel, or a purpose rule that still fails, "
                "rejects the whole edit, and it comes back to you with the reasons."
              : "An edit that breaks a rule is rejected as a whole and comes back to you with every problem found.");
}

void rejection_section(std::string& out, const std::vector<std::string>& errors) {
  if (errors.empty()) return;
  std::string body =
      "Your previous answer was rejected and nothing from it was applied. Fix every problem below and send the "
      "complete answer again:\n";
  for (std::size_t i = 0; i < errors.size() && i < kMaxErrorsInPrompt; ++i) body += "- " + errors[i] + "\n";
  if (errors.size() > kMaxErrorsInPrompt)
    body += fmt::format("({} more problems not shown)\n", errors.size() - kMaxErrorsInPrompt);
  section(out, "PREVIOUS_ANSWER_REJECTED", body, B::rejection);
}

bool gpu(const WmPromptInputs& in) { return in.backend == "cuda"; }

// "a GPU kernel search (NVIDIA H100 80GB HBM3, cuda)" in the intro lines.
std::string search_kind(const WmPromptInputs& in) {
  std::string kind = in.backend == "cuda" ? "GPU" : in.backend == "host" ? "CPU" : "";
  std::string device = in.device.substr(0, in.device.find('\n'));
  if (device.size() > 80) device = device.substr(0, 77) + "...";
  std::string lang = in.language.substr(0, in.language.find(':'));
  std::string what = kind.empty() ? "kernel search" : kind + " kernel search";
  if (device.empty() && lang.empty()) return "a " + what;
  return fmt::format("a {} ({}{}{})", what, device, !device.empty() && !lang.empty() ? ", " : "", lang);
}

// Where the kernels run and in what, the workloads, and where the search stands.
void target_sections(std::string& out, const WmPromptInputs& in) {
  std::string target;
  if (!in.device.empty()) target += "Device: " + in.device + "\n";
  if (!in.language.empty()) target += "Language: " + in.language + "\n";
  section(out, "TARGET", target, B::target);
  section(out, "WORKLOADS_AND_SCORE", in.workloads, B::workloads);
}

std::string init_prompt(const WmPromptInputs& in) {
  std::string out = fmt::format(
      "You are building the world model for {}: a persistent decision tree of design hypotheses that decides which "
      "kernel is written next, and is revised as measurements arrive. Analyse the task below in depth and put the "
      "analysis into the JSON, not into prose.\n\n",
      search_kind(in));
  section(out, "TASK_DEFINITION", in.task_spec, B::init_definition);
  target_sections(out, in);
  section(out, "SEARCH_STATE", in.search_state, B::search_state);
  section(out, "CANDIDATE_FORMAT", in.code_format, B::code_format);
  section(out, "PERFORMANCE_TARGETS", in.targets, B::targets);
  guide(out, "WORLD_MODEL_SCHEMA", kSchemaGuide);
  guide(out, "ROOT_NOTES_CHECKLIST", init_checklist(gpu(in)));
  guide(out, "TREE_RULES", std::string(kInitRules) + "\n- " + std::string(kSiblingRule));
  rejection_section(out, in.validation_errors);
  guide(out, "ANSWER_FORMAT",
        "Answer with the world-model JSON object only: no prose before or after it, no markdown fences.");
  return out;
}

const Node& chosen_node(const Tree& t, const WmPromptInputs& in) {
  const Node* n = t.find(in.chosen_node_id);
  if (!n)
    throw Error(Status::invalid_argument,
                fmt::format("world model prompt: chosen_node_id \"{}\" does not exist", in.chosen_node_id));
  return *n;
}

std::string edit_intro(const WmPromptInputs& in, std::string_view purpose) {
  return fmt::format(
      "You maintain the world model of {}: a decision tree of design hypotheses whose open actions decide which "
      "kernel is written next. {}\n\n",
      search_kind(in), purpose);
}

void common_context(std::string& out, const Tree& t, const WmPromptInputs& in) {
  section(out, "TASK_DEFINITION", in.task_spec, B::definition);
  target_sections(out, in);
  section(out, "SEARCH_STATE", in.search_state, B::search_state);
  section(out, "WORLD_MODEL", render_compact(t, B::world_model), B::world_model);
  section(out, "WORLD_MODEL_STATUS", status_text(t), B::status);
  section(out, "OPEN_FRONTIER", frontier_text(t), B::frontier);
}

void edit_tail(std::string& out, const WmPromptInputs& in) {
  guide(out, "TREE_RULES", std::string(kEditTreeRules) + "\n- " + std::string(kSiblingRule));
  guide(out, "EDIT_FORMAT", edit_format_guide(EditRules{}, in.lenient_edits));
  rejection_section(out, in.validation_errors);
  guide(out, "ANSWER_FORMAT", "Answer with the edit JSON object only: no prose before or after it, no markdown fences.");
}

std::string propose_prompt(const Tree& t, const WmPromptInputs& in) {
  EditRules defaults;
  std::string out = edit_intro(in, "Review the frontier against the evidence and make sure it holds good next steps "
                                    "before the next kernel is written.");
  common_context(out, t, in);
  section(out, "PERFORMANCE_TARGETS", in.targets, B::targets);
  // Where the search stands: the last cycle's node and the code it left.
  if (t.active_id != "root" && t.find(t.active_id)) section(out, "TREE_PATH", path_text(t, t.active_id), B::path);
  if (!in.kernel_code.empty()) section(out, "KERNEL_CODE", in.kernel_code, B::code_guard);
  std::string req = fmt::format(
      "After your edit at least one executable open action (its parent is the root or has a passing kernel) must "
      "have score_0_to_1 > {:.2f}. Add small actions that fit one implementation attempt, and re-score existing ones "
      "with what the tree now knows. At most {} new nodes.",
      defaults.min_open_action_score, defaults.max_new_nodes);
  if (const Node* best = best_solved_node(t); best && open_children(t, best->id).empty())
    req += fmt::format(
        "\nCRITICAL: the best node \"{}\" ({}) has no open child action: insert a child under \"{}\" that refines "
        "its kernel.",
        best->id, eval_brief(best->solution.eval), best->id);
  guide(out, "REQUIRED_REFLECTION",
        R"TXT(Review before you add: read WORLD_MODEL_STATUS and the evaluations in WORLD_MODEL (kernels attached, their latencies against their base kernels), then go through the open actions of OPEN_FRONTIER. You MUST update existing nodes with update_node, not only insert new ones: lower the score_0_to_1 of actions the evidence speaks against (a similar idea that lost, a bottleneck that turned out elsewhere), raise those it supports, correct difficulty_1_to_5 where an attempt showed the real cost, and add a line "UPDATE_BELIEF: ..." to the notes of each node you change saying why.)TXT");
  guide(out, "ACTION_NODE_REQUIREMENT", req);
  edit_tail(out, in);
  return out;
}

std::string refine_prompt(const Tree& t, const WmPromptInputs& in) {
  const Node& n = chosen_node(t, in);
  EditRules defaults;
  std::string out = edit_intro(in, fmt::format(
      "The action \"{}\" just produced a passing kernel. Update the tree with this evidence.", n.id));
  common_context(out, t, in);
  section(out, "CHOSEN_ACTION", chosen_action_text(t, n.id), B::action);
  section(out, "TREE_PATH", path_text(t, n.id), B::path);
  section(out, "PREDICTION", in.prediction, B::prediction);
  section(out, "EVALUATION", in.eval_summary, B::eval);
  section(out, "CYCLE_ATTEMPTS", in.attempts, B::attempts);
  section(out, "KERNEL_CODE", in.kernel_code, B::code_guard);
  guide(out, "REQUIRED_REFLECTION", fmt::format(
      R"TXT(Update the solved node "{0}" with update_node; its patch.notes must hold these lines:
CURRENT: what the kernel actually does, and which bottleneck class limits it now (memory, latency, compute, occupancy ...).
FOLLOW_THROUGH: aligned_with_intent=yes|no, and whether the code did what the action meant.
UPDATE_BELIEF: what this result changed in your beliefs, and the next bet; name what lost (CYCLE_ATTEMPTS shows every attempt, regressions against the base kernel marked) so the tree remembers it.
PERF_GAP: the predicted factor over the base kernel versus the observed one (PREDICTION gives both), and why they differ (required whenever they differ).
Revise overall_rating_0_to_10, confidence_0_to_1, action.score_0_to_1, action.difficulty_1_to_5 and impacts wherever the evidence bears on them. If the code did not follow the intent, downgrade the node.)TXT",
      n.id));
  guide(out, "CONTINUATION_RULE", fmt::format(
      R"TXT(The solved node "{0}" must end with at least one open child action with difficulty_1_to_5 < 5 that refines its kernel further (insert_node with parent_id "{0}"). Refinements are children of "{0}", not siblings; alternatives belong elsewhere in the tree.)TXT",
      n.id));
  guide(out, "PRUNING", fmt::format(
      "Prune ideas the evidence contradicts by lowering their score_0_to_1, or remove open leaves with delete_node. "
      "At most {} new nodes.",
      defaults.max_new_nodes));
  edit_tail(out, in);
  return out;
}

std::string too_hard_prompt(const Tree& t, const WmPromptInputs& in) {
  const Node& n = chosen_node(t, in);
  EditRules defaults;
  std::string out = edit_intro(in, fmt::format(
      "The action \"{}\" produced no passing kernel in its cycle. Downgrade it or give the search a smaller way "
      "forward.",
      n.id));
  common_context(out, t, in);
  section(out, "CHOSEN_ACTION", chosen_action_text(t, n.id), B::action);
  section(out, "TREE_PATH", path_text(t, n.id), B::path);
  section(out, "EVALUATION", in.eval_summary, B::eval);
  section(out, "CYCLE_ATTEMPTS", in.attempts, B::attempts);
  if (!in.kernel_code.empty()) section(out, "KERNEL_CODE", in.kernel_code, B::code_guard);
  guide(out, "ATTEMPTS", fmt::format("This cycle made {} debug-and-improve attempts without a passing kernel.",
                                     in.debug_rounds));
  section(out, "PERFORMANCE_TARGETS", in.targets, B::targets);
  guide(out, "RECOVERY_LADDER", fmt::format(
      R"TXT(Take the first rung that fits the failure:
1. The idea is sound but the step was too big: lower the score of "{0}" and insert a smaller stepping-stone action (lower difficulty_1_to_5) beside it, under "{1}", so it can run next.
2. The failure points at a specific obstacle (resource limits, layout, numerics, a compile error pattern): lower the score and insert, beside it, an action that removes the obstacle first.
3. The idea looks unsound for this task: lower its score sharply, or delete it with delete_node when it is an open leaf.
Whatever you choose, "{0}" must end with a score below its current {2:.2f}, be deleted, or get a new open recovery action with difficulty below its {3} (under it or beside it). Actions under "{0}" cannot run until it has a passing kernel. At most {4} new nodes.)TXT",
      n.id, n.parent_id, n.action.score, n.action.difficulty, defaults.max_new_nodes));
  edit_tail(out, in);
  return out;
}

}  // namespace

std::string build_prompt(const Tree* tree, PromptKind kind, const WmPromptInputs& in) {
  if (kind == PromptKind::wm_init) return init_prompt(in);
  if (kind != PromptKind::wm_propose && kind != PromptKind::wm_refine && kind != PromptKind::wm_too_hard)
    throw Error(Status::invalid_argument,
                fmt::format("world model: no prompt for kind \"{}\" (world-model kinds: wm_init, wm_propose, "
                            "wm_refine, wm_too_hard)",
                            to_string(kind)));
  if (!tree)
    throw Error(Status::state, fmt::format("world model: a {} prompt needs an initialized world model", to_string(kind)));
  if (kind == PromptKind::wm_propose) return propose_prompt(*tree, in);
  if (kind == PromptKind::wm_refine) return refine_prompt(*tree, in);
  return too_hard_prompt(*tree, in);
}

}  // namespace ks::core::wm
