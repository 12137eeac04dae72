// Code-generation prompts (generate, debug, improve) shared by the
// strategies. World-model prompts live with the world model.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ksearch/llm.hpp"
#include "ksearch/task.hpp"
#include "ksearch/types.hpp"
#include "ksearch/world_model.hpp"
#include "ksearch/sys/world_model.hpp"

namespace ks::core {

// Budgets (characters) of the variable sections, so a prompt stays bounded
// however long logs or world models grow.
struct PromptBudgets {
  std::size_t log = 4000;          // compiler log / error excerpt of one evaluation
  std::size_t workloads = 3000;    // per-workload results table
  std::size_t world_model = 50000; // compact world model
  std::size_t action = 1500;       // chosen action block
  std::size_t inspiration = 12000; // code of one inspiration kernel (evolve)
};

// A kernel and what is known about it, for a prompt section.
struct KernelEvidence {
  const Solution* solution = nullptr;  // may be null (no code yet)
  const EvalResult* eval = nullptr;    // may be null (never evaluated)
  std::string raw_answer;              // an answer that held no usable candidate
};

// One attempt of a cycle, for the compact list that improve, debug, refine
// and too-hard prompts show: every attempt, without its code.
struct AttemptBrief {
  int attempt = 0;                          // 1-based within the cycle
  int round = 0;                            // the run's round it took
  PromptKind kind = PromptKind::generate;   // the request that produced it
  std::string solution_id;                  // empty: the answer held no usable candidate
  EvalStatus status = EvalStatus::passed;
  double latency_ms = 0;                    // when passed
  std::string note;                         // one line: why it failed, or what the kernel is
  double noise = 0;                         // half its latency's 95% interval over it (0.03 = +-3%), 0 unknown
};

struct CodegenInputs {
  const Task* task = nullptr;
  Language language = Language::cuda;
  std::string device;                    // target device description (lines)
  std::optional<ActionInfo> action;      // the world model's chosen action, if any
  // The starting point and reference: the action's base kernel (world
  // model), the best kernel so far (greedy), the parent (evolve).
  KernelEvidence base;
  std::string base_heading = "Base kernel";  // what `base` is, as a heading
  std::string base_name = "the base kernel";  // and in a sentence
  // The cycle's best passing kernel when it is neither the base nor the
  // last attempt (world model): its code is shown as the kernel to beat.
  KernelEvidence cycle_best;
  KernelEvidence last;                   // the previous attempt
  std::vector<AttemptBrief> attempts;    // the cycle's attempts so far, oldest first
  std::string search_state;              // rounds left and the cycle's state, in lines
  std::string world_model;               // compact world model section (already budgeted)
  int attempt = 1;                       // 1-based attempt within the cycle
  int debug_rounds_label = 5;            // unused: the search state says where the cycle stands
  std::string variant_hint;              // distinguishes parallel samples of one prompt
  PromptBudgets budgets;
};

// The system message for code-generation calls.
std::string codegen_system_message(Language lang);
// The system message of a world-model call (wm_init, wm_propose, wm_refine,
// wm_too_hard) for a run in `lang` on a device of `backend` ("cuda", "host").
std::string world_model_system_message(PromptKind kind, Language lang, const std::string& backend);
// A language in a few words, for world-model prompts: "cpp: C++20 for the
// host CPU, compiled with -O3 -march=native; your functions are called from a call plan".
std::string language_text(Language lang);
// The workloads a round evaluates, each with its dimension values and
// whether it is timed, the correctness check, and how the score is made of
// the timings. Bounded by `budget`.
std::string workloads_text(const TaskSpec& spec, std::size_t budget = 2500);
// "1.25x faster than the base", "0.40x the base's speed: a regression (2.50x
// slower)", "as fast as the base"; "" when either latency is unknown.
// "1.20x faster than the base", "... a regression ...", or, when the two
// differ by less than `noise` (a relative half-width), "within the noise".
std::string versus_base(double latency_ms, double base_latency_ms, double noise = 0);
// The attempts as a table (round, request, kernel, status, latency, against
// the base kernel, a note), regressions named; bounded by `budget`.
std::string attempts_text(const std::vector<AttemptBrief>& attempts, const std::string& base_id,
                          double base_latency_ms, std::size_t budget = 2500);
// How an answer must be written (candidate format, tunable parameters). For
// Python languages the task's calling convention (TaskSpec::python) names
// the entry point.
std::string answer_format_text(Language lang, const TaskSpec* spec = nullptr);
// Published targets of the task, or "" when it has none.
std::string targets_text(const TaskSpec& spec);
// Status, per-workload table (latencies, reference, speedup, errors) and a
// log excerpt, bounded by the budgets.
std::string eval_feedback_text(const EvalResult& r, const PromptBudgets& budgets);
// A kernel in exactly the format a model must answer in.
std::string kernel_text(const Solution& s);

// generate: write a kernel (from the spec, or applying the action to a base).
LlmRequest build_generate_request(const CodegenInputs& in);
// debug: the last attempt failed; fix it.
LlmRequest build_debug_request(const CodegenInputs& in);
// improve: a passing kernel exists; make it faster.
LlmRequest build_improve_request(const CodegenInputs& in);

// The evolve strategy's prompt: the parent (codegen.base) with its full code
// and evaluation, or the island's failing attempt (codegen.last) while the
// island has no passing kernel, and other kernels of the population as
// inspirations with their code and scores. Its kind is improve with a
// parent, debug with a failure to fix, else generate.
struct EvolvePromptInputs {
  CodegenInputs codegen;
  int island = 0;
  int islands = 1;
  int generation = 1;
  std::string mode;                        // exploit, explore, empty
  std::vector<KernelEvidence> inspirations;
};
LlmRequest build_evolve_request(const EvolvePromptInputs& in);

// Cuts text to at most max_chars, marking the cut.
std::string clip(const std::string& text, std::size_t max_chars);

}  // namespace ks::core
