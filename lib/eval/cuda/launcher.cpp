#include "eval/cuda/launcher.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ks::eval::cuda {

CUresult load_module_function(const DriverApi& api, CUmodule module, const std::string& symbol,
                              const std::vector<CubinKernel>& cubin, ModuleFunction& f, bool& found) {
  found = false;
  CUresult r = api.cuModuleGetFunction(&f.handle, module, symbol.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) return CUDA_SUCCESS;
  if (r != CUDA_SUCCESS) return r;
  found = true;
  f.desc.symbol = symbol;
  // The parameter layout from the driver when it can tell (CUDA 12.4+),
  // else from the cubin's own records.
  if (api.cuFuncGetParamInfo) {
    std::vector<ParamInfo> params;
    for (std::size_t i = 0; i < 4096; ++i) {
      std::size_t offset = 0, size = 0;
      if (api.cuFuncGetParamInfo(f.handle, i, &offset, &size) != CUDA_SUCCESS) break;
      params.push_back(ParamInfo{static_cast<std::uint32_t>(offset), static_cast<std::uint32_t>(size)});
    }
    f.desc.params = std::move(params);
  } else {
    for (const auto& k : cubin)
      if (k.symbol == symbol) f.desc.params = k.params;
  }
  int value = 0;
  if (api.cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f.handle) == CUDA_SUCCESS)
    f.desc.max_threads_per_block = value;
  if (api.cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f.handle) == CUDA_SUCCESS)
    f.desc.static_shared_bytes = value;
  if (api.cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f.handle) == CUDA_SUCCESS)
    f.dynamic_shared_limit = value;
  return CUDA_SUCCESS;
}

CUresult prepare_launch(const DriverApi& api, ModuleFunction& f, const ResolvedLaunch& l, std::string& what) {
  // Beyond its current limit (48 KB less its static shared memory, at
  // first) a kernel must opt in to more dynamic shared memory.
  auto dynamic = static_cast<std::int64_t>(l.shared_bytes);
  if (dynamic > f.dynamic_shared_limit) {
    CUresult r = api.cuFuncSetAttribute(f.handle, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        static_cast<int>(dynamic));
    if (r != CUDA_SUCCESS) {
      what = fmt::format("raising `{}` to {} bytes of dynamic shared memory", l.kernel, dynamic);
      return r;
    }
    f.dynamic_shared_limit = dynamic;
  }
  if (l.has_cluster && l.cluster[0] * l.cluster[1] * l.cluster[2] > 8 && !f.non_portable_cluster) {
    CUresult r = api.cuFuncSetAttribute(f.handle, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
    if (r != CUDA_SUCCESS) {
      what = fmt::format("allowing `{}` clusters above 8 blocks", l.kernel);
      return r;
    }
    f.non_portable_cluster = true;
  }
  return CUDA_SUCCESS;
}

CUresult enqueue_launch(const DriverApi& api, CUfunction f, const ResolvedLaunch& l, void** params, CUstream stream) {
  if (!l.has_cluster)
    return api.cuLaunchKernel(f, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2],
                              static_cast<unsigned>(l.shared_bytes), stream, params, nullptr);
  if (!api.cuLaunchKernelEx) return CUDA_ERROR_NOT_SUPPORTED;
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = l.cluster[0];
  attr.value.clusterDim.y = l.cluster[1];
  attr.value.clusterDim.z = l.cluster[2];
  CUlaunchConfig cfg{};
  cfg.gridDimX = l.grid[0];
  cfg.gridDimY = l.grid[1];
  cfg.gridDimZ = l.grid[2];
  cfg.blockDimX = l.block[0];
  cfg.blockDimY = l.block[1];
  cfg.blockDimZ = l.block[2];
  cfg.sharedMemBytes = static_cast<unsigned>(l.shared_bytes);
  cfg.hStream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return api.cuLaunchKernelEx(&cfg, f, params, nullptr);
}

DeviceLimits device_limits(const DriverApi& api, CUdevice device) {
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    return api.cuDeviceGetAttribute(&v, a, device) == CUDA_SUCCESS ? v : 0;
  };
  DeviceLimits limits;
  limits.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  limits.max_block = {attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X), attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
                      attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)};
  limits.max_grid = {attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                     attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)};
  limits.max_shared_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  limits.max_shared_per_block_optin =
      std::max(limits.max_shared_per_block, std::int64_t{attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)});
  limits.cluster_launch = attr(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH) != 0;
  // 8 blocks is the portable cluster size; Hopper runs 16 once a kernel opts in.
  limits.max_cluster_size = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) >= 9 ? 16 : 8;
  return limits;
}

std::string describe_launch(const ResolvedLaunch& l) {
  return fmt::format("launching kernel `{}` with grid {}x{}x{}, block {}x{}x{}, {} bytes of dynamic shared memory",
                     l.kernel, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], l.shared_bytes);
}

}  // namespace ks::eval::cuda
