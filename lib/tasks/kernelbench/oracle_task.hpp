// Oracle tasks: the problems of a KernelBench checkout, run by a PyTorch
// reference oracle (oracle/kernelbench_oracle.py, a separate process). The
// task's tensors come from the oracle's description of the problem file:
// forward()'s arguments, the module's state_dict, the outputs.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ksearch/task.hpp"
#include "ksearch/tasks.hpp"

namespace ks::tasks::kernelbench {

// The oracle task `name` ("kernelbench/level1/19_ReLU") of the checkout in
// `kernelbench_dir` (empty: $KSEARCH_KERNELBENCH); nullptr when there is none
// or the name is not a KernelBench name. Throws ks::Error naming the problem
// when the checkout has no such file, PyTorch is missing, or the problem file
// is broken.
std::unique_ptr<Task> load_kernelbench_oracle_task(const std::string& name,
                                                   const std::filesystem::path& kernelbench_dir = {});

// The spec of one problem file of a checkout (for tests and tools).
TaskSpec make_kernelbench_oracle_spec(const std::filesystem::path& kernelbench_dir, const std::string& name);

// The Python program and script that run the oracle: $KSEARCH_PYTHON (else
// python3) and the installed or source-tree kernelbench_oracle.py
// ($KSEARCH_KERNELBENCH_ORACLE overrides).
std::vector<std::string> kernelbench_oracle_argv();

// Every problem file of a checkout as a task (ks::list_kernelbench_tasks).
std::vector<TaskInfo> list_kernelbench_problems(const std::filesystem::path& kernelbench_dir);

}  // namespace ks::tasks::kernelbench
