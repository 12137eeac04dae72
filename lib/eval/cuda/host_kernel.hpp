// A found kernel in a host program's own CUDA context. The program owns the
// context, the streams and the memory; this compiles the solution with the
// evaluator's compiler (same NVRTC options, same content-addressed cache),
// loads one module per parameter set into the context current at load time,
// and launches the launch plan resolved for the caller's dimensions on the
// caller's stream with the caller's device pointers.
//
// No CUDA type appears here, so the public API (ks::Kernel) can wrap it
// without the toolkit's headers.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/param_space.hpp"
#include "eval/backend.hpp"
#include "eval/cuda/launch_plan.hpp"
#include "ksearch/task.hpp"

namespace ks::eval::cuda {

class CublasLtHandle;  // eval/cuda/cublaslt.hpp
class GemmStep;

struct HostKernelConfig {
  TaskSpec task;
  Solution solution;
  std::string arch;                 // empty: the current context's device's (then load_module must be true)
  std::string cache_dir;            // the cubin cache (<cache>/cuda); empty: the evaluator's default
  std::vector<std::string> flags;   // extra NVRTC flags, as the run's evaluator used them
  bool load_module = true;          // false: compile and resolve only; no driver is touched
};

struct HostBuffer {
  std::uint64_t ptr = 0;    // a CUdeviceptr
  std::uint64_t bytes = 0;  // 0: not checked
};

struct HostLaunch {
  std::map<std::string, std::int64_t> dims;
  std::map<std::string, HostBuffer> buffers;  // task tensors and, optionally, the plan's scratch buffers
  std::map<std::string, double> scalars;      // the task's scalar inputs (e.g. sm_scale); a workload's own when omitted
  void* stream = nullptr;                     // a CUstream; null: the default stream
  std::string workload;                       // whose per-shape values to use; empty: the one matching `dims`
};

struct HostResolved {
  std::string workload;  // whose per-shape values were taken; empty: the solution's values
  std::map<std::string, std::int64_t> params;
  ResolvedPlan plan;
};

class HostKernel {
 public:
  // Compiles every parameter set the solution uses (its values, and each
  // per-workload entry) and, with load_module, loads the modules into the
  // current context. Throws ks::Error: compile (NVRTC's log included),
  // no_device, state (no current context), invalid_argument (not a CUDA
  // solution; a plan that does not fit the module), cuda (a driver call).
  explicit HostKernel(HostKernelConfig config);
  ~HostKernel();
  HostKernel(const HostKernel&) = delete;
  HostKernel& operator=(const HostKernel&) = delete;

  // The plan for these dimensions, without launching. Throws
  // ks::Error(invalid_argument) naming what does not fit.
  HostResolved resolve(const HostLaunch& launch);
  // Enqueues the plan on launch.stream. Thread-safe.
  void launch(const HostLaunch& launch);

  const std::string& arch() const { return arch_; }
  const TaskSpec& task() const { return cfg_.task; }
  const Solution& solution() const { return cfg_.solution; }
  std::size_t module_count() const;

 private:
  struct Module;
  struct Scratch {
    std::uint64_t ptr = 0;
    std::size_t bytes = 0;
  };
  Module& module_for(const util::Vars& params);  // compiles one on first use; call with mu_ held
  Module& compile(const util::Vars& params);
  void release() noexcept;  // scratch and modules, from their own context
  HostResolved resolve_locked(const HostLaunch& launch, Module** module);
  void check_sizes(const HostLaunch& launch) const;
  // Call with mu_ held.
  GemmStep& gemm_step(const ResolvedGemm& g, const std::string& step,
                      const std::function<std::uint64_t(const std::string&, const std::string&)>& pointer_of,
                      const HostLaunch& l);
  std::uint64_t gemm_workspace(void* stream);

  HostKernelConfig cfg_;
  core::ParamSpace space_;  // the solution's, read once
  LaunchPlan plan_;
  std::string arch_;
  std::unique_ptr<Compiler> compiler_;
  void* context_ = nullptr;  // CUcontext the modules live in; null without load_module
  DeviceLimits limits_;
  std::mutex mu_;  // modules, their functions, scratch
  std::vector<std::unique_ptr<Module>> modules_;
  std::map<std::string, Scratch> scratch_;
  std::unique_ptr<CublasLtHandle> cublas_;  // made at the first GEMM step
  std::map<std::string, std::unique_ptr<GemmStep>> gemm_steps_;
  std::map<std::pair<void*, std::thread::id>, std::uint64_t> gemm_workspaces_;  // by CUstream (and thread)
};

}  // namespace ks::eval::cuda
