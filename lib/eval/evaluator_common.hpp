// What the process and in-process evaluators share: choosing workloads and
// backends, compiling a solution into builds (one per distinct set of tunable
// parameter values), and finishing results.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "eval/backend.hpp"
#include "eval/messages.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/task.hpp"

namespace ks::eval {

enum class Backend { host, cuda };
const char* to_string(Backend b);

// The backend that runs `language` under config.backend. Throws
// ks::Error(Status::invalid_argument) when the evaluator is configured for
// the other backend. Python candidates (python) go to the GPU when
// `gpu_usable` under EvalBackend::automatic; triton ones only to the GPU.
Backend backend_for(Language language, EvalBackend configured, bool gpu_usable);

// The language of the reference a candidate on backend `b` is checked against.
Language reference_language(Backend b);

// The folder of the evaluator's cache that `l`'s artifacts live in.
const char* cache_folder(Language l);

// Checks that config.backend and config.sandbox hold values of their sets
// (not an integer cast from elsewhere). Throws invalid_argument.
void validate_config_sets(const EvaluatorConfig& config);

// The workloads to evaluate, tests first, then benchmarks, each in task
// order. Throws ks::Error(Status::invalid_argument) for an unknown name in
// only_workloads or when nothing is selected.
std::vector<std::string> select_workloads(const TaskSpec& task, const EvalOptions& options);

// Checks that the task can evaluate `solution` at all. Throws invalid_argument.
void check_solution_fits(const TaskSpec& task, const Solution& solution, Backend backend);

// A stable key for a task's content (workers cache tasks by it).
std::string task_key(const TaskSpec& task);

using CompileFn = std::function<Artifact(const CompileRequest&)>;

// The request that compiles `solution` with tunable parameter values
// `values`: what every build of an evaluation asks for (and what an export
// asks for, so that it gets the same cubin).
CompileRequest make_compile_request(const TaskSpec& task, const Solution& solution, const util::Vars& values,
                                    const EvalOptions& options, const std::string& arch, const std::string& cache_dir);

// Compiles `solution` for `workloads`: resolves each workload's tunable
// parameter values from the solution's params (ParamSpace::resolve), compiles
// each distinct set once. Returns
// the prepared solution, or a finished compile_error result (bad parameters,
// compiler errors, compile timeouts).
std::variant<PreparedSolution, EvalResult> prepare_solution(const TaskSpec& task, const Solution& solution,
                                                            const std::vector<std::string>& workloads,
                                                            const EvalOptions& options, const std::string& arch,
                                                            const std::string& cache_dir, const CompileFn& compile);

// Compiles the task's reference in language `l` for every workload, with
// the options a reference gets (the candidate's extra compile flags are not
// for it). A reference that does not compile is the task's fault: ks::Error.
PreparedSolution prepare_reference(const TaskSpec& task, Language l, const EvalOptions& options,
                                   const std::string& arch, const std::string& cache_dir, const CompileFn& compile);

// Adds compile metrics and the compile log (warnings) of `prepared` to `result`.
void add_compile_info(EvalResult& result, const PreparedSolution& prepared);

// What a reference latency depends on besides the task and the workload:
// the card (name, architecture, memory, its reported clock), the driver, the
// reference's compiled code (its artifacts' content-addressed names cover the
// source, compiler version, flags and target), the timing rules (the options
// and the version of the timing code) and how the evaluator calls a program
// (in its own process, or through a worker: a host program's call is then a
// round trip to its process). A change of any of them is another identity,
// so a cached latency is never used for it.
std::string timing_identity(const DeviceInfo& device, const PreparedSolution& reference, const EvalOptions& options,
                            bool in_process);

// Latencies of the task's reference, measured once per device identity
// (timing_identity). With a folder they outlive the process: one small JSON
// file per (task, identity, workload), written by the evaluator only (no
// worker sees the folder), so a fresh `ksearch eval` does not time the
// reference again. A file that is unreadable or names another key is a miss.
class ReferenceTimes {
 public:
  ReferenceTimes() = default;
  explicit ReferenceTimes(std::filesystem::path dir) : dir_(std::move(dir)) {}

  std::optional<double> find(const std::string& task_key, const std::string& device,
                             const std::string& workload) const;
  void put(const std::string& task_key, const std::string& device, const std::string& workload, double ms);
  // Benchmark workloads among `workloads` without a measurement yet.
  std::vector<std::string> missing(const TaskSpec& task, const std::string& task_key, const std::string& device,
                                   const std::vector<std::string>& workloads) const;
  // Fills WorkloadResult::reference_ms of benchmark workloads, then the summary.
  void apply(EvalResult& result, const std::string& task_key, const std::string& device) const;

 private:
  std::filesystem::path file_for(const std::string& key) const;
  mutable std::map<std::string, double> ms_;  // what was measured or read back
  std::filesystem::path dir_;
};

}  // namespace ks::eval
