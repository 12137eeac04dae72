// Finding tasks: built-in suites by name, task files by path.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <cstdint>
#include <string>
#include <vector>

#include "ksearch/export.h"
#include "ksearch/task.hpp"

KS_NAMESPACE_BEGIN

struct KS_API TaskInfo {
  std::string name;         // "gpumode/trimul" or the path of a task file
  std::string description;
  std::string source;       // "built-in" or the file path
  std::vector<Language> languages;
  Json targets;             // published numbers to beat
};

// Loads a task by built-in name ("gpumode/trimul"), from a JSON task file
// (a path, or a folder holding task.json), or from a FlashInfer-Bench
// definition in a dataset checkout (DIR/definitions/<op_type>/<name>.json). Throws ks::Error(Status::not_found)
// listing the known names, or Status::invalid_argument naming the malformed field.
KS_API std::unique_ptr<Task> load_task(const std::string& name_or_path);

// Which of a task's workloads a search evaluates each round (its feedback
// subset; the best kernel is then evaluated on all). K-Search's
// --feedback-workloads, and its unpinned choice of 5.
struct KS_API FeedbackSelection {
  // Pinned workloads by name (a dataset's workload names are their UUIDs),
  // in this order; an unknown one is an error listing the valid names.
  std::vector<std::string> workloads;
  // Without pinned workloads: "" keeps the task's own subset; "first" takes
  // the first `count` timed workloads in the task's order; "random" draws
  // `count` of them with `seed` (as K-Search's random.sample, but seeded).
  std::string policy;
  int count = 5;
  std::uint64_t seed = 0;

  bool empty() const { return workloads.empty() && policy.empty(); }
  Json to_json() const;
  static FeedbackSelection from_json(const Json& j);  // throws ks::Error naming a bad field
};

// The workload names `selection` picks from `task`'s (empty: the task's own
// subset, unchanged). Throws ks::Error(Status::invalid_argument) for an
// unknown workload (naming it and listing the valid ones) or policy.
KS_API std::vector<std::string> select_feedback_workloads(const TaskSpec& task, const FeedbackSelection& selection);

// Where task names may also resolve, beside the built-in suites, and how a
// task is set up once found.
struct KS_API TaskSources {
  // A KernelBench checkout for kernelbench/levelN/... names; empty: $KSEARCH_KERNELBENCH.
  std::filesystem::path kernelbench_dir;
  // A FlashInfer-Trace checkout: flashinfer/<definition> names load that
  // definition from it (its workloads, with their UUIDs as names), as its
  // path DIR/definitions/<op_type>/<definition>.json does.
  std::filesystem::path dataset;
  // For a definition of a dataset (by name with `dataset`, or by path):
  // the solution whose PASSED traces give each workload's baseline latency
  // on this card (the fastest), by name; empty: FlashInfer's wrapper for the
  // definition (flashinfer_wrapper*), when the dataset has one; "none": no
  // traces. docs/tasks/flashinfer.md, "Baselines from traces".
  std::string baseline_solution;
  // Measure that solution here (from DIR/solutions; python, triton, cpp or cuda) where
  // the traces lack this card or a workload.
  bool measure_baseline = false;
  // Replaces the task's feedback subset when not empty.
  FeedbackSelection feedback;

  Json to_json() const;
  static TaskSources from_json(const Json& j);
};
KS_API std::unique_ptr<Task> load_task(const std::string& name_or_path, const TaskSources& sources);

// Reads a task file (sources resolved relative to its folder).
KS_API TaskSpec load_task_file(const std::filesystem::path& path);

// The definitions of a FlashInfer-Trace dataset checkout (DIR/definitions/...),
// each with its workload count and where its reference comes from; load one
// with load_task("DIR/definitions/<op_type>/<name>.json").
KS_API std::vector<TaskInfo> list_dataset_tasks(const std::filesystem::path& dataset_dir);

// Built-in tasks, then the example task files found in `example_dirs`.
KS_API std::vector<TaskInfo> list_tasks(const std::vector<std::filesystem::path>& example_dirs = {});

// The problems of a KernelBench checkout (DIR, or DIR/KernelBench, holding
// level1/ ... level4/): tasks named kernelbench/level<N>/<file stem>, whose
// inputs and reference outputs come from a PyTorch reference oracle. Listing
// starts no Python. `load_task` resolves such a name to the oracle task when
// $KSEARCH_KERNELBENCH names a checkout (else to the native built-in task of
// that name, where one exists); docs/tasks/kernelbench.md.
KS_API std::vector<TaskInfo> list_kernelbench_tasks(const std::filesystem::path& kernelbench_dir);

// Built-in suites register a factory under a name at library load time.
using TaskFactory = std::function<std::unique_ptr<Task>()>;
KS_API void register_builtin_task(const std::string& name, const std::string& description,
                                  TaskFactory factory);

// Where the installed example tasks live (share/ksearch/tasks) or, in a build
// tree, examples/tasks of the source tree.
KS_API std::filesystem::path example_tasks_dir();

KS_NAMESPACE_END
