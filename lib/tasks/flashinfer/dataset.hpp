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

// Whether `path` is a FlashInfer-Bench definition file (a JSON object with
// "axes", "inputs", "outputs" and "op_type" or "type").
bool is_definition_file(const std::filesystem::path& path);

// The task of a definition in a dataset checkout. Throws ks::Error naming
// the file, line and field for malformed input, and Status::not_found when
// no native reference exists (the message says where to put one).
TaskSpec load_definition(const std::filesystem::path& definition_json);

// Every definition under DIR/definitions, with its workload count and where
// its reference comes from; a broken one is listed with its error.
std::vector<TaskInfo> list_dataset(const std::filesystem::path& dir);

}  // namespace ks::tasks::flashinfer
