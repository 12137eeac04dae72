// kernelbench/level1/<id>_<name>: KernelBench level-1 problems as native
// tasks (docs/tasks/kernelbench.md). Shapes, tolerance and the names of
// dimensions, inputs, parameters and the output follow the KernelBench HEAD
// problem files, so a native solution is also a candidate of the oracle task
// of the same name (a real KernelBench checkout run by PyTorch). Inputs come
// from libksearch's own generator (uniform [0, 1) where KernelBench calls
// torch.rand), so their values differ from KernelBench's.
//
// Internal to the library (tests and tools use it); users reach the tasks
// through ks::load_task("kernelbench/level1/19_ReLU").
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/task.hpp"

namespace ks::tasks::kernelbench {

inline constexpr std::string_view kKernelBenchPrefix = "kernelbench/";

// Host tensors by name (float32 values).
using HostTensors = std::map<std::string, std::vector<float>, std::less<>>;
using DimValues = std::map<std::string, std::int64_t, std::less<>>;

// One native level-1 problem.
struct Level1Problem {
  int id = 0;
  std::string stem;     // the KernelBench file name without .py, e.g. "19_ReLU"
  std::string summary;  // one line
  std::string pytorch;  // what the module computes, in PyTorch, for the prompt
  std::vector<std::pair<std::string, std::int64_t>> dims;  // HEAD values, named as in the problem file
  std::vector<std::pair<std::string, DimValues>> tests;    // small correctness workloads (libksearch's own)
  std::vector<TensorSpec> tensors;                         // inputs, parameters, then "output"
  std::string flops, bytes;
  Solution reference, start;
  double eager_ms = 0, compile_ms = 0;  // KernelBench results/timing/H100_Modal, fp32
  std::string inputs_note;              // where the inputs differ from KernelBench's
  // get_init_inputs() of the problem file, as a Python expression over the
  // dimension names (ModelNew(*init_inputs) for Python candidates), and how
  // many of the inputs before the output are the module's state_dict entries.
  std::string init_inputs = "[]";
  int parameters = 0;
  // The CPU reference in double precision, rounded to float: fills the
  // outputs of `tensors` (by name) from the inputs. For small workloads.
  std::function<void(const HostTensors& inputs, const DimValues& dims, HostTensors& outputs)> cpu;
};

// The native problems, in id order.
const std::vector<Level1Problem>& level1_problems();
const Level1Problem* find_level1_problem(std::string_view stem);

std::string level1_task_name(const Level1Problem& p);  // "kernelbench/level1/19_ReLU"
TaskSpec make_level1_spec(const Level1Problem& p);

// Host copies of a workload's inputs exactly as the evaluation backends
// generate them (same generator, streams and seeds).
HostTensors generate_host_inputs(const TaskSpec& spec, const WorkloadSpec& workload, std::uint64_t seed_index = 0);

// The prompt of a KernelBench task: the PyTorch problem, tensors and
// dimensions, KernelBench's check and scoring, and the launch-plan contract.
// `pytorch_source` is the problem file for oracle tasks, a description for
// native ones.
std::string kernelbench_prompt(const TaskSpec& spec, std::string_view pytorch_source, bool source_is_file,
                               std::string_view inputs_note);

// Python candidates (triton, python) in KernelBench's convention: a ModelNew
// built after set_seed(42) from `init_inputs` (a Python expression over the
// dimensions), called with the first `forward_inputs` inputs; the remaining
// inputs are its state_dict entries, copied in when `parameters_loaded`
// (native tasks, whose parameters libksearch generates), else left as the
// seeded construction made them (oracle tasks: KernelBench's own values).
Json kernelbench_python_convention(const std::string& init_inputs, int forward_inputs, bool parameters_loaded);
std::string kernelbench_python_prompt(const TaskSpec& spec, std::string_view pytorch_source, bool source_is_file,
                                      std::string_view inputs_note, Language language);

void register_kernelbench_suite();

}  // namespace ks::tasks::kernelbench
