// Running a search end to end: the one call behind the CLI, the C ABI and the
// Python bindings. It wires a task, an evaluator, an LLM policy, the world
// model and a strategy to a run folder.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "ksearch/cancel.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/export.h"
#include "ksearch/llm.hpp"
#include "ksearch/llm_policies.hpp"
#include "ksearch/strategy.hpp"
#include "ksearch/task.hpp"
#include "ksearch/world_model.hpp"

namespace ks {

// Receives every run event as it is journalled: the object written to
// events.jsonl (with "seq", "time" and "type"). Called on the search's
// thread; what it throws is ignored.
using EventCallback = std::function<void(const Json& event)>;

// How prompts are answered.
struct KS_API LlmChoice {
  // openai | replay | command | offline | custom
  std::string kind = "openai";
  OpenAiConfig openai;
  std::filesystem::path replay_path;
  CommandConfig command;
  // kind "custom": a policy supplied by the host (C callback, Python, C++).
  std::shared_ptr<LlmPolicy> custom;

  // Parses the CLI form: "openai", "offline", "replay:PATH", "command:PROGRAM ARGS..."
  // (arguments split on spaces). Throws ks::Error naming the problem.
  static LlmChoice parse(const std::string& spec);
  // For the manifest; never contains an API key.
  Json to_json() const;
  static LlmChoice from_json(const Json& j);
};

// The policy behind a choice ("offline": one that refuses every request,
// for the tune strategy).
KS_API std::unique_ptr<LlmPolicy> make_llm_policy(const LlmChoice& choice);

struct KS_API SearchOptions {
  std::string task;                    // built-in name or task file path
  std::filesystem::path kernelbench_dir;  // for kernelbench/... names; empty: $KSEARCH_KERNELBENCH
  std::shared_ptr<Task> custom_task;   // used instead of `task` when set
  SearchConfig config;
  LlmChoice llm;
  EvaluatorConfig evaluator;
  std::shared_ptr<Evaluator> custom_evaluator;  // used instead of `evaluator` when set
  std::filesystem::path run_dir;       // empty: runs/<task>-<UTC time>
  ProgressCallback progress;
  EventCallback on_event;
  // Cancels the run from another thread (see CancelToken); null: none.
  std::shared_ptr<CancelToken> cancel;
  // Parts the host brings (null: the built-in ones). A custom strategy is
  // run instead of config.strategy; a custom world model is what the
  // world-model strategy edits. Runs made with custom parts resume only
  // through the API, with the same parts given again.
  std::shared_ptr<SearchStrategy> custom_strategy;
  std::shared_ptr<WorldModel> custom_world_model;
};

struct KS_API SearchOutcome {
  std::filesystem::path run_dir;
  std::string stop_reason;
  std::optional<BestSolution> best;
  int rounds = 0;
  int replayed_rounds = 0;     // rounds answered from the journal (resume)
  // The first passing candidate of the run (for tune runs: the starting
  // kernel), to say how much the search improved on it.
  int first_pass_round = 0;
  double first_pass_latency_ms = 0;
  LlmUsage usage;
  double wall_s = 0;
  DeviceInfo device;
  Json to_json() const;
};

// Runs a new search in a new run folder. Throws ks::Error for configuration
// problems (unknown task, no device, bad LLM settings); a kernel that fails
// is never an error.
KS_API SearchOutcome run_search(const SearchOptions& options);

// What may change when a run is resumed.
struct KS_API ResumeOptions {
  int max_rounds = 0;                  // above the recorded budget: raises it; otherwise ignored
  std::shared_ptr<LlmPolicy> custom_llm;  // needed when the run used a custom policy
  std::optional<LlmChoice> llm;        // replaces the recorded choice (e.g. another endpoint)
  std::shared_ptr<Evaluator> custom_evaluator;
  ProgressCallback progress;
  EventCallback on_event;
  std::shared_ptr<CancelToken> cancel;
  std::shared_ptr<SearchStrategy> custom_strategy;       // needed when the run used one
  std::shared_ptr<WorldModel> custom_world_model;
};

// Resumes a run folder with its recorded configuration: the journal is
// replayed (no LLM call or evaluation is repeated) and the search continues.
KS_API SearchOutcome resume_search(const std::filesystem::path& run_dir, const ResumeOptions& options = {});

}  // namespace ks
