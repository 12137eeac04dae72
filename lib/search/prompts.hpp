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

struct CodegenInputs {
  const Task* task = nullptr;
  Language language = Language::cuda;
  std::string device;                    // target device description
  std::optional<ActionInfo> action;      // the world model's chosen action, if any
  KernelEvidence base;                   // known-good starting point
  KernelEvidence last;                   // the previous attempt of this cycle
  std::string world_model;               // compact world model section (already budgeted)
  int attempt = 1;                       // 1-based attempt within the cycle
  int debug_rounds_label = 5;
  std::string variant_hint;              // distinguishes parallel samples of one prompt
  PromptBudgets budgets;
};

// The system message for code-generation calls.
std::string codegen_system_message(Language lang);
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
