// Running a search end to end: the one call behind the CLI, the C ABI and the
// Python bindings. It wires a task, an evaluator, an LLM policy, the world
// model and a strategy to a run folder.
#pragma once

#include <filesystem>
#include <functional>
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
#include "ksearch/tasks.hpp"
#include "ksearch/vocabulary.hpp"
#include "ksearch/world_model.hpp"

KS_NAMESPACE_BEGIN

// Receives every run event as it is journalled: the object written to
// events.jsonl (with "seq", "time" and "type"). Called on the search's
// thread; what it throws is ignored.
using EventCallback = std::function<void(const Json& event)>;

// How prompts are answered.
struct KS_API LlmChoice {
  LlmSource kind = LlmSource::openai;  // the manifest's "kind": openai | replay | command | offline | custom
  OpenAiConfig openai;
  std::filesystem::path replay_path;
  // kind replay: what happens where the search asks for another kind of
  // answer than the transcript holds next: stop (the run stops and says
  // why) or skip (each request gets the next recorded answer of its kind;
  // the answers passed over are never used); live is refused (a transcript
  // has no model to go on with). See docs/search.md, "Replay".
  ReplayDivergence on_divergence = ReplayDivergence::stop;
  CommandConfig command;
  // kind custom: a policy supplied by the host (C callback, Python, C++).
  std::shared_ptr<LlmPolicy> custom;

  // Parses the CLI form: "openai", "offline", "replay:PATH", "command:PROGRAM ARGS..."
  // (arguments split on spaces). Throws ks::Error naming the problem.
  static LlmChoice parse(const std::string& spec);
  // For the manifest; never contains an API key.
  Json to_json() const;
  static LlmChoice from_json(const Json& j);
};

// The policy behind a choice (offline: one that refuses every request, for
// the tune strategy).
KS_API std::unique_ptr<LlmPolicy> make_llm_policy(const LlmChoice& choice);

// What a run starts with, reported once its folder exists and the checks
// before spending have passed (the task loads, its backend is usable, the
// LLM can answer), before the first LLM call.
struct KS_API SearchStart {
  std::filesystem::path run_dir;
  std::string task;            // the task's name
  SearchConfig config;         // as recorded (the language inferred, a resumed budget applied)
  std::string llm;             // the policy's description, e.g. "openai:gpt-5.2"
  int rounds_done = 0;         // a resume: rounds in the journal
};
using StartCallback = std::function<void(const SearchStart&)>;

// Logging the run to Weights & Biases under K-Search's names (its --wandb,
// --wandb-project, --run-name; docs/search.md, "Weights & Biases from the
// run"). The run starts $KSEARCH_PYTHON (else python3) with the ksearch.tracking
// program built into the library, which follows the run folder and needs the
// wandb package; the library never loads Python itself. The logger gets an
// environment of its own (W&B's WANDB_* settings, no LLM key) and is ended
// when the run ends, also on an error. W&B being unreachable or not installed
// is a one-line warning on stderr, never a failed search.
struct KS_API WandbOptions {
  bool enabled = false;
  std::string project;     // empty: $WANDB_PROJECT, else "flashinfer-bench" (K-Search's default)
  std::string run_name;    // empty: $RUN_NAME, else W&B's generated name
  // After the run, how long the logger may take to finish (uploading in
  // online mode) before it is stopped; what it wrote stays in W&B's local
  // folder for `wandb sync`.
  double finish_timeout_s = 120;
};

struct KS_API SearchOptions {
  std::string task;                    // built-in name or task file path
  std::filesystem::path kernelbench_dir;  // for kernelbench/... names; empty: $KSEARCH_KERNELBENCH
  // How `task` is found and set up: a FlashInfer-Trace dataset, its
  // baseline solution's traces, the feedback subset (ksearch/tasks.hpp).
  // Its kernelbench_dir is used when the one above is empty. Recorded in
  // the manifest, the feedback subset as the workloads chosen, so resume
  // and replay load the same task.
  TaskSources task_sources;
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
  // run instead of config.strategy (a Searcher through
  // make_searcher_strategy, ksearch/sys/searcher.hpp); a custom world model
  // is what the world-model strategy edits. Runs made with custom parts
  // resume only through the API, with the same parts given again.
  std::shared_ptr<SearchStrategy> custom_strategy;
  std::shared_ptr<WorldModel> custom_world_model;
  StartCallback on_start;              // optional
  // When set, a task written in one language only runs in that language
  // whatever config.language says (a CLI without --language); a task with
  // several keeps config.language.
  bool infer_language = false;
  // Before the first LLM request, check that the task's check tells
  // trivial candidates (zeros, ones, an input echoed, the task's weakened
  // references) apart from the reference; a weak check is a warning on
  // stderr and the manifest's "weak_check" record (ksearch/weak_check.hpp).
  // Skipped, with a note in that record, for a custom evaluator.
  bool weak_check = true;
  // K-Search's --continue-from-world-model (world_model strategy): a tree
  // to start from instead of wm_init. A run folder (its latest snapshot and
  // the kernels attached in it), a snapshot file (world_model/vNNNNNN.json
  // of a run: that version), K-Search's world_model.json (normalised as the
  // original does, its kernels' code from the solution_db.jsonl beside it),
  // or "auto": the latest run of the same task in the folder this run's
  // folder is made in (runs/ by default). run_search reads it into
  // config.continue_from_world_model (docs/world-model.md, "Warm start").
  std::string continue_from_world_model;
  WandbOptions wandb;                  // off by default
};

struct KS_API SearchOutcome {
  std::filesystem::path run_dir;
  StopReason stop_reason = StopReason::strategy_done;
  std::optional<BestSolution> best;
  int rounds = 0;
  int replayed_rounds = 0;     // rounds answered from the journal (resume)
  int recorded_rounds = 0;     // rounds whose evaluation came from a replayed run folder
  int recorded_answers = 0;    // LLM answers taken from a replayed recording
  // Where a replay left its recording; null when it did not. Fields: what
  // ("kind": another kind of request, "prompt": the same kind with another
  // prompt, "evaluation": another candidate), after_round, llm_call or
  // attempt (0-based), asked, recorded, decision {index, now, recorded: the
  // strategy's "decision" events, with the timings they compared},
  // stopped (false: the run went live or skipped ahead), message (the
  // explanation as the CLI prints it).
  Json divergence;
  // The first passing candidate of the run (for tune runs: the starting
  // kernel; for a warm start whose evaluation was adopted: that kernel, round
  // 0), to say how much the search improved on it.
  int first_pass_round = 0;
  double first_pass_latency_ms = 0;
  LlmUsage usage;
  double wall_s = 0;
  DeviceInfo device;
  // When the task names feedback workloads, the search evaluates only those;
  // the best kernel is then evaluated on every workload (also in
  // <run>/final_eval.json and <run>/best/final_eval.json).
  std::optional<EvalResult> final_eval;
  // The workloads the search evaluated each round when they were a subset
  // (then final_eval covers every workload); empty otherwise.
  std::vector<std::string> feedback_workloads;
  // The weak-check detection's report (WeakCheckReport::to_json), as the
  // run's manifest holds it: a resume or a replay, which do not run the
  // check, keep the recorded one; null for a run made before it existed.
  Json weak_check;
  Json to_json() const;
};

// The evaluation a run folder recorded for a kernel to continue from
// (SearchConfig::continue_from_solution_eval): a run folder's best (or its
// best.json), an attempt folder or best/ (their eval.json), with the task
// fingerprint and device of the run that holds it. nullopt for a solution
// file or an answer, which carry none. Nothing in it is trusted yet:
// run_search adopts it only for the same task and device. Throws ks::Error
// when a file that is there does not read.
KS_API std::optional<RecordedEvaluation> load_recorded_evaluation(const std::filesystem::path& source);

// Runs a new search in a new run folder. Throws ks::Error for configuration
// problems (unknown task, no device, bad LLM settings); a kernel that fails
// is never an error.
KS_API SearchOutcome run_search(const SearchOptions& options);

// What may change when a run is resumed.
struct KS_API ResumeOptions {
  // 0 keeps the recorded budget; otherwise the run's new total round budget
  // (more or fewer rounds than recorded). Refused with
  // ks::Error(Status::invalid_argument), before anything in the folder
  // changes: a value below the rounds already done; on a tune run, one above
  // the budget its tuner planned for when it began (a lower one replays the
  // plan and stops early); on a run with a tune phase, any change.
  int max_rounds = 0;
  std::shared_ptr<LlmPolicy> custom_llm;  // needed when the run used a custom policy
  std::optional<LlmChoice> llm;        // replaces the recorded choice (e.g. another endpoint)
  std::shared_ptr<Evaluator> custom_evaluator;
  ProgressCallback progress;
  EventCallback on_event;
  std::shared_ptr<CancelToken> cancel;
  std::shared_ptr<SearchStrategy> custom_strategy;       // needed when the run used one
  std::shared_ptr<WorldModel> custom_world_model;
  StartCallback on_start;              // optional
  // Logs the whole run, the rounds before the resume too, as a new W&B run.
  WandbOptions wandb;
};

// Resumes a run folder with its recorded configuration: the journal is
// replayed (no LLM call or evaluation is repeated) and the search continues.
// A resume that is refused, or fails before it records a new attempt or LLM
// answer (its journal no longer replays, its evaluator cannot start), leaves
// manifest.json, state.json and events.jsonl as it found them; opening the
// folder still removes what a kill left (a torn log line, the temporary
// files of atomic writes).
// A replay (replay_search, or a run with a replay transcript) goes on
// following its recording; giving a model (llm or custom_llm) to a
// reproduction that stopped where it diverged lets it continue live there.
KS_API SearchOutcome resume_search(const std::filesystem::path& run_dir, const ResumeOptions& options = {});

// What may change when a run folder is replayed into a new one.
struct KS_API ReplayOptions {
  std::filesystem::path run_dir;  // the new folder (must not hold a run); empty: runs/<task>-<UTC time>
  // Changes to the recorded configuration, as SearchConfig JSON fields
  // ({"wm_stagnation_window": 3}); a field SearchConfig does not have is an error.
  Json config_changes = Json::object();
  // Where the search leaves the recording: stop (say where and why, and
  // stop), skip (take recorded answers by kind and recorded evaluations by
  // solution id, measure the rest) or live (continue with `llm` or
  // `custom_llm` and the live evaluator).
  ReplayDivergence on_divergence = ReplayDivergence::stop;
  // A prompt that differs from the recorded one (same kind) is a divergence;
  // false: the recorded answer is used and the difference noted once.
  bool check_prompts = true;
  std::optional<LlmChoice> llm;          // the model to continue with
  std::shared_ptr<LlmPolicy> custom_llm;
  std::shared_ptr<Evaluator> custom_evaluator;  // for live evaluations; default: the recorded evaluator settings
  ProgressCallback progress;
  EventCallback on_event;
  std::shared_ptr<CancelToken> cancel;
  StartCallback on_start;              // optional
};

// Replays a finished or partial run folder into a new one: the recorded
// answers and the recorded evaluations are used in order, nothing is asked
// or measured again, so with the same configuration the new folder ends with
// the same world-model tree, attempts and best solution. With changes it
// runs until the search asks for something the recording does not hold,
// and reports where and why (SearchOutcome::divergence). Needs no GPU and
// no model unless it goes live.
KS_API SearchOutcome replay_search(const std::filesystem::path& recorded_run, const ReplayOptions& options = {});

KS_NAMESPACE_END
