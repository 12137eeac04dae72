// The candidates of the weak-check detection (ksearch/weak_check.hpp),
// generated from a task's tensor specs as real solutions in the task's
// language, so that the evaluator compiles, runs and checks them exactly as
// it does a model's kernels.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ksearch/task.hpp"
#include "ksearch/types.hpp"

namespace ks::core::weak {

// A candidate that computes nothing the task asks for.
struct TrivialCandidate {
  std::string name;         // "zeros", "ones", "echo"
  std::string description;  // what it writes, in words
  Solution solution;
};

// zeros (every output element 0), ones (every element 1 in the output's
// dtype) and echo (each output a copy of the first input of its dtype,
// repeated or cut to the output's size; outputs without such an input get
// zeros), as host C++ with a call plan (cpp) or NVRTC kernels with a launch
// plan (cuda). Echo is left out when no output has an input of its dtype.
std::vector<TrivialCandidate> trivial_candidates(const TaskSpec& task, Language language);

// The task's reference with one more step at its end: every output is
// overwritten with its own most common value (compared bit for bit, -0 as
// 0). Checked with an exact tolerance, its matched ratio is the share of
// that value in the reference's outputs. Host C++ only (nullopt for cuda,
// or for a task without a reference in that language).
std::optional<Solution> most_common_value_probe(const TaskSpec& task, Language language);

// The element count of a tensor as a plan expression: "(M)*(N)", "1" for a
// tensor of rank 0.
std::string element_count_expr(const TensorSpec& tensor);

}  // namespace ks::core::weak
