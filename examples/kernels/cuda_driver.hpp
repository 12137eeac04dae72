// The few CUDA driver calls this example makes for itself, opened at run
// time (libcuda.so.1) so that the program starts, and says why it cannot
// go on, on a machine without a GPU. A program that links libcuda directly
// does the same with plain calls.
#pragma once

#include <cuda.h>
#include <dlfcn.h>

#include <stdexcept>
#include <string>

namespace example {

// cuda.h maps names to versioned symbols (cuMemAlloc -> cuMemAlloc_v2):
// expand first, then stringify, to look up the symbol the declaration names.
#define EXAMPLE_STR2(x) #x
#define EXAMPLE_STR(x) EXAMPLE_STR2(x)
#define EXAMPLE_CUDA_CALLS(X)                                                                              \
  X(cuInit) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDevicePrimaryCtxRetain)           \
  X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxDestroy) X(cuStreamCreate) X(cuStreamDestroy) \
  X(cuStreamSynchronize) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync)           \
  X(cuGetErrorString)

struct Driver {
#define EXAMPLE_DECLARE(fn) decltype(&::fn) fn = nullptr;
  EXAMPLE_CUDA_CALLS(EXAMPLE_DECLARE)
#undef EXAMPLE_DECLARE
  // CUDA 12.5+: a context of the program's own, not the device's primary one.
  CUresult (*cuCtxCreate_v4)(CUcontext*, void*, unsigned, CUdevice) = nullptr;

  // False, with the reason, when there is no driver or no GPU.
  bool open(std::string* why) {
    void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      *why = "libcuda.so.1 cannot be opened (no NVIDIA driver)";
      return false;
    }
#define EXAMPLE_LOOKUP(fn)                                                        \
  fn = reinterpret_cast<decltype(fn)>(::dlsym(h, EXAMPLE_STR(fn)));               \
  if (!fn) {                                                                      \
    *why = std::string("the driver lacks ") + EXAMPLE_STR(fn);                    \
    return false;                                                                 \
  }
    EXAMPLE_CUDA_CALLS(EXAMPLE_LOOKUP)
#undef EXAMPLE_LOOKUP
    cuCtxCreate_v4 = reinterpret_cast<decltype(cuCtxCreate_v4)>(::dlsym(h, "cuCtxCreate_v4"));
    int n = 0;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&n) != CUDA_SUCCESS || n == 0) {
      *why = "no CUDA device";
      return false;
    }
    return true;
  }

  // Throws on a failed call, naming it.
  void check(CUresult r, const char* call) const {
    if (r == CUDA_SUCCESS) return;
    const char* s = nullptr;
    cuGetErrorString(r, &s);
    throw std::runtime_error(std::string(call) + ": " + (s ? s : "unknown CUDA error"));
  }
};

}  // namespace example
