// A task: the operator to optimise, its shapes, reference and tolerance.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ksearch/export.h"
#include "ksearch/types.hpp"

KS_NAMESPACE_BEGIN

// Everything an evaluator needs to check and time candidates for one task,
// and everything a prompt needs to describe it. Built-in tasks fill it in
// C++; other tasks come from a JSON task file (see docs/task-format.md).
struct KS_API TaskSpec {
  std::string name;                    // e.g. "gpumode/trimul"
  std::string description;             // one line, shown by `ksearch tasks`
  std::vector<Language> languages;     // backends this task can be evaluated on
  std::vector<std::string> dims;       // dimension names, e.g. {"B", "N", "C", "H"}
  std::vector<TensorSpec> tensors;     // inputs and outputs, in kernel-argument order
  std::vector<WorkloadSpec> workloads; // test (correctness) and benchmark (timed) cases
  Tolerance tolerance;
  std::string flops;                   // expression over dims: floating-point operations per call
  std::string bytes;                   // expression over dims: minimal bytes moved per call
  std::map<Language, Solution> references;  // trusted reference solution per language
  std::map<Language, std::string> prompts;  // specification text given to the LLM
  std::vector<Solution> starting_points;    // labelled starting kernels (often tunable)
  Json targets = Json::object();       // published numbers to beat, free-form
  // Null for native tasks. Otherwise a reference oracle, a separate process
  // that supplies each workload's inputs and reference outputs instead of the
  // generators and `references` (e.g. a KernelBench problem run by PyTorch):
  // {"argv": [program, args...], "problem": path, ...}; see
  // docs/tasks/kernelbench.md and docs/evaluation.md ("Reference oracles").
  Json oracle;
  std::filesystem::path base_dir;      // where a task file's sources live
  // The few workloads a search evaluates each round (K-Search used 5-8 per
  // FlashInfer-Bench definition); empty means all. A search ends with its
  // best kernel evaluated on every workload (docs/search.md).
  std::vector<std::string> feedback_workloads;
  ScoreMode score = ScoreMode::latency;
  // The solution whose latencies vs_baseline divides by, per language; its
  // description says what it is. Measured once per device and cached.
  std::map<Language, Solution> baselines;
  // Baseline latencies known without measuring, per card, in the form of
  // EvalOptions::baseline_latencies ({"<hardware>": {"<workload>": ms}}):
  // e.g. what a FlashInfer-Trace dataset's traces record for FlashInfer's
  // own kernels. Used after the options' table and before `baselines` is
  // measured. Null: none.
  Json baseline_latencies;
  // Where baseline_latencies came from, for manifests and eval output:
  // {"kind": "traces", "dataset", "solution", "hardware": [keys],
  // "traces": {"<hardware>": {"<workload>": "traces/...jsonl:LINE"}},
  // "measure_here": whether `baselines` holds that solution, to be
  // measured on a card the traces do not cover}. Null: none.
  Json baseline_origin;
  // Solutions that must NOT pass the check: the reference with one term
  // dropped (the bias, a residual, a scale), written by the task's author.
  // The weak-check detection (ksearch/weak_check.hpp) evaluates them
  // beside its trivial candidates; one that passes means the workloads
  // cannot see that term. Each names its language; empty for most tasks.
  std::vector<Solution> weakened_references;
  // How Python candidates (triton, python) are called, in the suite's own
  // convention (docs/python-candidates.md). Null: libksearch's `run(...)`,
  // inputs in task order, returning the outputs or writing into outputs
  // passed after the inputs. Otherwise {"function": "custom_kernel",
  // "module": "submission.py", "signature": "custom_kernel(data)",
  // "adapter": Python code defining ks_args(inputs, dims) -> the entry's
  // positional arguments, "cast_outputs": whether a returned output may have
  // another dtype (it is converted, as GPUMode compares in float32)}.
  Json python;

  const TensorSpec* find_tensor(std::string_view name) const;
  const WorkloadSpec* find_workload(std::string_view name) const;
  std::vector<const WorkloadSpec*> benchmark_workloads() const;
  std::vector<const WorkloadSpec*> test_workloads() const;
  // Whether a search evaluates only some workloads and then all of them at the end.
  bool has_feedback_subset() const {
    return !feedback_workloads.empty() && feedback_workloads.size() < workloads.size();
  }

  // Checks internal consistency (shape expressions name known dims, every
  // workload sets every dim, names are unique, ...); throws ks::Error naming
  // the first problem.
  void validate() const;

  Json to_json() const;
  static TaskSpec from_json(const Json& j);
};

// The abstract task. Most tasks are plain data (SpecTask); subclasses can
// compute prompts or references on demand.
class KS_API Task {
 public:
  virtual ~Task() = default;
  virtual const TaskSpec& spec() const = 0;
  const std::string& name() const { return spec().name; }
  // The specification text for the LLM in the given language.
  virtual std::string prompt(Language lang) const;
};

// The default implementation: a task that is exactly its TaskSpec.
class KS_API SpecTask : public Task {
 public:
  explicit SpecTask(TaskSpec spec);
  const TaskSpec& spec() const override { return spec_; }

 private:
  TaskSpec spec_;
};

// Reads a solution given as solution JSON (with "sources") or as an LLM-style
// answer (fenced or tagged blocks, docs/candidate-format.md), trying the
// task's languages in order. Throws ks::Error(Status::parse) with the reason.
KS_API Solution parse_solution_text(std::string_view text, const TaskSpec& spec);
// The same for a file; a relative path is read from the working directory. A
// folder (a run's attempt folder, best/) is read as its solution.json, a run
// folder as its best solution (one in a language `spec` does not list is an
// error). The
// file must be regular and not the kernel's (/proc, /sys); what is read
// beside it (solution.json in a folder, the source files it names) must not
// be a symbolic link.
KS_API Solution load_solution_file(const std::filesystem::path& path, const TaskSpec& spec);

KS_NAMESPACE_END
