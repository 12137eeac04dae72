// The CUDA backend's entry points (cuda_backend.hpp).
#include "eval/cuda/cuda_backend.hpp"

#include <fmt/format.h>

#include <mutex>
#include <set>

#include "eval/cuda/cuda_api.hpp"
#include "eval/cuda/cuda_device.hpp"
#include "eval/cuda/nvrtc_compiler.hpp"
#include "ksearch/error.hpp"

namespace ks::eval {

bool cuda_probe(std::string* why) {
  try {
    cuda::driver();
    return true;
  } catch (const Error& e) {
    if (why) *why = e.what();
    return false;
  }
}

int cuda_device_count() { return cuda::driver().device_count; }

int cuda_driver_version() { return cuda::driver().version; }

std::string cuda_device_arch(int ordinal) {
  const auto& api = cuda::driver();
  if (ordinal < 0 || ordinal >= api.device_count)
    throw Error(Status::no_device, fmt::format("CUDA device {} does not exist; {} visible", ordinal,
                                               api.device_count));
  CUdevice dev = 0;
  int major = 0, minor = 0;
  if (api.cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS ||
      api.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
      api.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS)
    throw Error(Status::no_device,
                fmt::format("cannot read the compute capability of CUDA device {}", ordinal));
  return cuda::arch_for_capability(major, minor);
}

std::unique_ptr<Device> make_cuda_device(int ordinal, const host::CandidateProcessOptions& python,
                                         const std::string& kernel_cache) {
  return std::make_unique<cuda::CudaDevice>(ordinal, python, kernel_cache);
}

CompileRequest cuda_runtime_kernels_request(const std::string& arch) { return cuda::runtime_kernels_request(arch); }

void ensure_cuda_runtime_kernels(const std::string& arch, const std::string& cache_dir) {
  static std::mutex mu;
  static std::set<std::string> done;
  std::lock_guard<std::mutex> lock(mu);
  if (!done.insert(cache_dir + "\n" + arch).second) return;
  try {
    CudaCompilerOptions o;
    o.arch = arch;
    o.cache_dir = cache_dir;
    o.use_pch = false;  // the same options as the device's own compiler: the same cache key
    cuda::CudaCompiler(o).compile(cuda_runtime_kernels_request(arch));
  } catch (const std::exception&) {
    done.erase(cache_dir + "\n" + arch);  // tried again at the next start
  }
}

std::unique_ptr<Compiler> make_cuda_compiler(const CudaCompilerOptions& options) {
  return std::make_unique<cuda::CudaCompiler>(options);
}

}  // namespace ks::eval
