// The CUDA driver API and NVRTC, opened with dlopen at run time (architecture
// decision 1). Their entry points live in two tables filled once per process;
// nothing links against libcuda or libnvrtc, so the library loads and runs its
// CPU paths on machines without either.
//
// The toolkit headers are included for types and enums only. Member names are
// the header's names after its versioning macros (cuMemAlloc is cuMemAlloc_v2
// in cuda.h), so each table entry is looked up under the ABI name that matches
// the declared signature.
#pragma once

#include <cuda.h>
#include <nvrtc.h>

#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eval/backend.hpp"
#include "ksearch/error.hpp"

namespace ks::eval::cuda {

// Driver entry points every CUDA evaluation needs.
#define KS_CUDA_DRIVER_REQUIRED(X)                                                               \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount)     \
  X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem)                 \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxGetCurrent) \
  X(cuCtxGetDevice)                                                                              \
  X(cuCtxSynchronize) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)              \
  X(cuMemAlloc) X(cuMemFree) X(cuMemGetInfo) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync)         \
  X(cuMemcpyDtoDAsync) X(cuMemsetD8Async) X(cuMemsetD32Async) X(cuModuleLoadData)              \
  X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncGetAttribute) X(cuFuncSetAttribute)          \
  X(cuLaunchKernel) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize)   \
  X(cuEventElapsedTime)

// Newer entry points used when present: exact parameter layouts (CUDA 12.4+)
// and launches with attributes such as cluster dimensions (CUDA 12.0+).
// cuCtxSetLimit: a small device malloc heap. CUDA IPC: reading a reference
// oracle's tensors in place (docs/evaluation.md). Virtual memory management
// with POSIX descriptors: buffers a Python candidate's process maps by a
// descriptor it cannot forge (eval/python/). cuDeviceGetUuid: the one GPU
// that process sees.
#define KS_CUDA_DRIVER_OPTIONAL(X)                                                                      \
  X(cuFuncGetParamInfo) X(cuLaunchKernelEx) X(cuCtxSetLimit) X(cuIpcOpenMemHandle) X(cuIpcCloseMemHandle) \
  X(cuIpcGetMemHandle) X(cuMemCreate) X(cuMemRelease) X(cuMemAddressReserve) X(cuMemAddressFree)         \
  X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) X(cuMemExportToShareableHandle)                           \
  X(cuMemGetAllocationGranularity) X(cuDeviceGetUuid)

#define KS_NVRTC_REQUIRED(X)                                                                     \
  X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcDestroyProgram)           \
  X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize)   \
  X(nvrtcGetCUBIN) X(nvrtcAddNameExpression) X(nvrtcGetLoweredName)                             \
  X(nvrtcGetNumSupportedArchs) X(nvrtcGetSupportedArchs)

// Precompiled headers (CUDA 12.8+) and compile cancellation (CUDA 12.9+).
#define KS_NVRTC_OPTIONAL(X)                                                                     \
  X(nvrtcGetPCHHeapSize) X(nvrtcSetPCHHeapSize) X(nvrtcGetPCHCreateStatus)                      \
  X(nvrtcGetPCHHeapSizeRequired) X(nvrtcSetFlowCallback)

#define KS_CUDA_DECLARE_ENTRY(fn) decltype(&::fn) fn = nullptr;

struct DriverApi {
  KS_CUDA_DRIVER_REQUIRED(KS_CUDA_DECLARE_ENTRY)
  KS_CUDA_DRIVER_OPTIONAL(KS_CUDA_DECLARE_ENTRY)
  std::string library;    // the file dlopen found
  int version = 0;        // cuDriverGetVersion, e.g. 13000
  int device_count = 0;
  void* handle = nullptr; // kept open for the life of the process
};

struct NvrtcApi {
  KS_NVRTC_REQUIRED(KS_CUDA_DECLARE_ENTRY)
  KS_NVRTC_OPTIONAL(KS_CUDA_DECLARE_ENTRY)
  std::string library;
  int major = 0, minor = 0;
  void* handle = nullptr;
  std::string version_string() const { return std::to_string(major) + "." + std::to_string(minor); }
};

#undef KS_CUDA_DECLARE_ENTRY

// Opens a driver library and initialises it (cuInit, device count). `path`
// empty: $KSEARCH_LIBCUDA, else libcuda.so.1 from the loader path. Throws
// ks::Error(Status::no_device) saying what is missing: the library, an entry
// point, or a working device (cuInit's error, e.g. CUDA_ERROR_STUB_LIBRARY
// or CUDA_ERROR_NO_DEVICE). Separate calls load separate copies; use driver().
std::unique_ptr<DriverApi> load_driver(const std::string& path = {});

// Opens NVRTC: `path`, else $KSEARCH_LIBNVRTC, else libnvrtc.so.13, .12 and
// libnvrtc.so from the loader path and then from the toolkit's lib64 folder.
// Throws ks::Error(Status::no_device) listing what was tried.
std::unique_ptr<NvrtcApi> load_nvrtc(const std::string& path = {});

// The process-wide tables, loaded on first use (thread-safe). A failure is
// remembered and thrown again on every later call.
const DriverApi& driver();
const NvrtcApi& nvrtc();

// "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)".
std::string error_text(const DriverApi& api, CUresult r);
// The same with the process's driver, or built-in names when there is none.
std::string error_text(CUresult r);

// Errors after which the context is unusable: the worker must exit.
bool is_sticky(CUresult r);

// Checks a driver call made for a candidate or the evaluation device. Throws
// RunError: `crashed` for sticky errors, else `runtime_error`. The message
// names the call and the error, plus `what` when given.
void check(CUresult r, const char* call, std::string_view what = {});

// Checks an NVRTC call; throws ks::Error(Status::internal) naming it.
void check_nvrtc(nvrtcResult r, const char* call);

// Loads once and keeps either the table or the reason it failed: every later
// call returns the same table or throws the same error.
template <typename Api>
struct Loaded {
  std::once_flag once;
  std::unique_ptr<Api> api;
  std::optional<Error> failure;
};

template <typename Api, typename LoadFn>
const Api& get_loaded(Loaded<Api>& slot, LoadFn load) {
  std::call_once(slot.once, [&] {
    try {
      slot.api = load();
    } catch (const Error& e) {
      slot.failure.emplace(e);
    }
  });
  if (slot.failure) throw *slot.failure;
  return *slot.api;
}

// Opens a toolkit library with dlopen: `path` when given, else $`env_var`
// when set, else each of `names` from the loader path, then under $CUDA_HOME,
// $CUDA_PATH and /usr/local/cuda (lib64). Returns the handle and the name that
// opened (`loaded`), or nullptr with every attempt and its error in `tried`.
void* open_toolkit_library(const std::string& path, const char* env_var, std::initializer_list<const char*> names,
                           std::string& loaded, std::string& tried);

// The toolkit's include folders for NVRTC: <root>/include and, when present,
// <root>/include/cccl (where CUDA 13 keeps cuda/barrier, cuda/pipeline, cub).
// Found next to the loaded NVRTC library, else under $CUDA_HOME, $CUDA_PATH
// or /usr/local/cuda. Empty when none holds cuda_fp16.h.
const std::vector<std::string>& toolkit_include_dirs();

}  // namespace ks::eval::cuda
