// A found CUDA kernel, loaded into the host program's own CUDA context and
// launched on its streams with its buffers (the C form: ksearch/ks_kernel.h).
//
//   cuCtxSetCurrent(ctx);
//   auto k = ks::Kernel::load({.run_dir = "runs/softmax-..."});
//   k->launch({.dims = {{"R", 4096}, {"C", 1024}},
//              .buffers = {{"x", {d_x}}, {"y", {d_y}}},
//              .stream = stream});
//
// The kernel is compiled exactly as the evaluator compiled it (NVRTC, the
// same options and cubin cache); the launch plan is resolved per call for the
// caller's dimensions: the variant whose condition holds, the tuned parameter
// values of the workload with those dimensions (else the solution's values),
// grid, block, shared memory and scratch sizes.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ksearch/export.h"
#include "ksearch/json.hpp"
#include "ksearch/task.hpp"
#include "ksearch/types.hpp"

KS_NAMESPACE_BEGIN

// Where the kernel comes from: a run folder (its best solution), or exactly
// one of solution, solution_file and solution_text. A run folder given with
// one of those supplies the task and how its evaluator compiled.
struct KS_API KernelSource {
  std::optional<Solution> solution;    // e.g. SearchOutcome::best->solution
  std::filesystem::path run_dir;       // the best solution of a run folder
  std::filesystem::path solution_file; // solution JSON or an LLM-style answer
  std::string solution_text;           // the same, as text
  // The task: a built-in name or a task file/folder. Needed except with
  // run_dir, whose manifest names it when this is empty (a task given here
  // wins).
  std::string task;
  std::shared_ptr<Task> custom_task;   // instead of `task`
};

struct KS_API KernelOptions {
  std::string cuda_arch;               // empty: the current context's device
  std::filesystem::path cache_dir;     // the evaluator's cache folder; empty: its default
  std::vector<std::string> extra_compile_flags;  // with run_dir: the run's own, when this is empty
  // false: compile and check only (no driver needed; cuda_arch must be set).
  bool load_module = true;
};

struct KS_API KernelBuffer {
  std::uint64_t device_ptr = 0;  // a CUdeviceptr of the current context
  std::uint64_t bytes = 0;       // its size, checked against the shape; 0 = not checked
};

struct KS_API KernelLaunch {
  std::map<std::string, std::int64_t> dims;      // every dimension of the task
  std::map<std::string, KernelBuffer> buffers;   // tensors by name (and, optionally, the plan's scratch)
  std::map<std::string, double> scalars;         // scalar inputs by name; omitted: the same-shaped workload's
  void* stream = nullptr;                        // a CUstream; null: the default stream
  std::string workload;                          // whose tuned values to use; empty: the one with these dims
};

// One kernel launch of a resolved plan.
struct KS_API ResolvedKernelLaunch {
  std::string kernel;  // as the plan names it
  std::string symbol;  // in the module
  std::array<unsigned, 3> grid{1, 1, 1}, block{1, 1, 1}, cluster{1, 1, 1};
  bool has_cluster = false;
  std::size_t shared_bytes = 0;
};

// What a launch does for given dimensions.
struct KS_API ResolvedKernelPlan {
  int variant = -1;          // the plan variant used; -1: the top-level kernels
  std::string workload;      // whose per-shape tuned values were used; empty: the solution's values
  std::map<std::string, std::int64_t> params;  // the parameter values the module was compiled with
  std::vector<ResolvedKernelLaunch> launches;
  std::vector<std::pair<std::string, std::size_t>> scratch;  // name, bytes
  Json to_json() const;
};

class KS_API Kernel {
 public:
  // Compiles (every parameter set the solution uses) and loads into the
  // current context. Throws ks::Error: compile, no_device, state (no current
  // context), not_found, invalid_argument, cuda.
  static std::unique_ptr<Kernel> load(const KernelSource& source, const KernelOptions& options = {});
  ~Kernel();
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  // Without launching. Throws ks::Error(invalid_argument) naming what does not fit.
  ResolvedKernelPlan resolve(const KernelLaunch& launch);
  // Enqueues the plan on launch.stream; returns at once. Thread-safe.
  void launch(const KernelLaunch& launch);

  const Solution& solution() const;
  const TaskSpec& task() const;
  const std::string& arch() const;
  std::size_t module_count() const;  // one per distinct parameter set

 private:
  Kernel();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

KS_NAMESPACE_END
