// Finding tasks: built-in suites by name, task files by path.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
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

// Where task names may also resolve, beside the built-in suites.
struct KS_API TaskSources {
  // A KernelBench checkout for kernelbench/levelN/... names; empty: $KSEARCH_KERNELBENCH.
  std::filesystem::path kernelbench_dir;
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
