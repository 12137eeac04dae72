// What launching a resolved plan takes, shared by the evaluator's programs
// (cuda_program.cpp, on the evaluation device) and by kernels loaded into a
// host program's own context (host_kernel.cpp): finding a module's function
// with its parameter layout and limits, raising those limits as a launch
// needs, and enqueueing one launch.
#pragma once

#include <string>
#include <vector>

#include "eval/cuda/cuda_api.hpp"
#include "eval/cuda/launch_plan.hpp"

namespace ks::eval::cuda {

struct ModuleFunction {
  CUfunction handle = nullptr;
  KernelDesc desc;
  std::int64_t dynamic_shared_limit = 0;  // what CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES allows now
  bool non_portable_cluster = false;
};

// `symbol` of `module`, with its parameter layout (from the driver on CUDA
// 12.4+, else from the cubin's records) and its limits. `found` is false
// when the module has no such function; other failures are returned.
CUresult load_module_function(const DriverApi& api, CUmodule module, const std::string& symbol,
                              const std::vector<CubinKernel>& cubin, ModuleFunction& out, bool& found);

// Raises the function's limits for `launch`: dynamic shared memory beyond
// its current limit, clusters above the portable 8 blocks. On failure,
// `what` names the step.
CUresult prepare_launch(const DriverApi& api, ModuleFunction& f, const ResolvedLaunch& launch, std::string& what);

// Enqueues one launch on `stream` (cuLaunchKernelEx when it has a cluster).
// CUDA_ERROR_NOT_SUPPORTED when a cluster launch needs a newer driver.
CUresult enqueue_launch(const DriverApi& api, CUfunction f, const ResolvedLaunch& launch, void** params,
                        CUstream stream);

// What a device allows, from its attributes.
DeviceLimits device_limits(const DriverApi& api, CUdevice device);

// "launching kernel `k` with grid 1x1x1, block 256x1x1, 0 bytes of dynamic shared memory"
std::string describe_launch(const ResolvedLaunch& launch);

}  // namespace ks::eval::cuda
