// FlashInfer-Trace datasets (docs/tasks/flashinfer.md, "Datasets"): a
// definition file becomes a task, its workloads file the task's workloads.
//
//   DIR/definitions/<op_type>/<name>.json     axes, ordered inputs and outputs, a Python reference
//   DIR/workloads/<op_type>/<name>.jsonl      one trace per line: {"definition", "workload": {uuid,
//                                             axes, inputs: {name: random | scalar | safetensors}}}
//   DIR/blob/...                              .safetensors inputs, paths relative to DIR
//   DIR/ksearch/references/<op_type>/<name>.json   a libksearch solution JSON: the native reference
//                                             of a definition the library has none for
//   DIR/ksearch/baselines/<op_type>/<name>.json    optional: a baseline solution (vs_baseline scores)
//   DIR/traces/**/*.jsonl                     traces of solutions: the baseline's latencies per card
//   DIR/solutions/**/*.json                   Solution JSON files (the baseline, to measure it here)
//
// The four definitions of the flashinfer suite keep their native references,
// kernels, prompts and tolerances; only their workloads come from the dataset.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ksearch/task.hpp"
#include "ksearch/tasks.hpp"

namespace ks::tasks::flashinfer {

// How a definition's scores are made (docs/tasks/flashinfer.md, "Baselines
// from traces").
struct DatasetOptions {
  // The solution whose PASSED traces give each workload's baseline latency
  // per card (the minimum over its traces). Empty: the definition's
  // FlashInfer wrapper (a solution named flashinfer_wrapper*, else one whose
  // author is flashinfer), when the dataset has one; "none": no traces (the
  // task's own baseline kernel, where it has one).
  std::string baseline_solution;
  // Measure that solution here (from DIR/solutions) where the traces lack a
  // card or a workload; it must be one libksearch runs (python, triton).
  bool measure_baseline = false;
};

// Whether `path` is a FlashInfer-Bench definition file (a JSON object with
// "axes", "inputs", "outputs" and "op_type" or "type").
bool is_definition_file(const std::filesystem::path& path);

// The task of a definition in a dataset checkout. Throws ks::Error naming
// the file, line and field for malformed input, and Status::not_found when
// no native reference exists (the message says where to put one).
TaskSpec load_definition(const std::filesystem::path& definition_json, const DatasetOptions& options = {});

// DIR/definitions/<op_type>/<name>.json for a definition name (the task name
// without "flashinfer/"); throws Status::not_found listing the dataset's
// definitions when there is none.
std::filesystem::path find_definition(const std::filesystem::path& dir, const std::string& name);

// Every definition under DIR/definitions, with its workload count and where
// its reference comes from; a broken one is listed with its error.
std::vector<TaskInfo> list_dataset(const std::filesystem::path& dir);

}  // namespace ks::tasks::flashinfer
