// A test double of the CUDA driver (loaded through KSEARCH_LIBCUDA by
// test_cuda_fake): "device memory" is host memory, launches are recorded
// (with their argument values, sized by the cubin's own parameter records)
// instead of run, and a test can make the next synchronisation fail. It lets
// the device and program code (memory, attributes, argument blocks, launch
// configurations, error mapping) run on a machine without a GPU. Kernels do
// not execute, so nothing here stands in for what they compute.
#include <cuda.h>

#include <array>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "eval/cuda/cubin.hpp"

namespace {

struct Module {
  std::string image;
};
struct Function {
  std::string name;
  std::map<int, int> attributes;
  std::vector<ks::eval::cuda::ParamInfo> params;
};

std::map<CUmodule, Module*> g_modules;
CUresult g_next_sync_error = CUDA_SUCCESS;

// The devices: compute capabilities from $KSFAKE_DEVICES ("9.0,9.0,8.6"),
// one Hopper GPU by default.
const std::vector<std::pair<int, int>>& devices() {
  static const std::vector<std::pair<int, int>> list = [] {
    std::vector<std::pair<int, int>> out;
    const char* env = std::getenv("KSFAKE_DEVICES");
    std::string spec = env && *env ? env : "9.0";
    std::size_t pos = 0;
    while (pos <= spec.size()) {
      std::size_t comma = spec.find(',', pos);
      std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      auto dot = item.find('.');
      out.emplace_back(std::atoi(item.substr(0, dot).c_str()),
                       dot == std::string::npos ? 0 : std::atoi(item.substr(dot + 1).c_str()));
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    return out;
  }();
  return list;
}

}  // namespace

// What the test reads back: the last launches, in order.
struct FakeLaunch {
  std::string kernel;
  unsigned grid[3], block[3], cluster[3];
  unsigned shared_bytes;
  bool extended;                                // through cuLaunchKernelEx
  std::vector<std::array<unsigned char, 8>> args;  // copied at launch, as the driver does
};

extern "C" {

__attribute__((visibility("default"))) std::vector<FakeLaunch>* ksfake_launches() {
  static std::vector<FakeLaunch> launches;
  return &launches;
}
__attribute__((visibility("default"))) void ksfake_fail_next_sync(CUresult r) { g_next_sync_error = r; }
// For callers without C++ (the export runtime's test, through ctypes): the
// launch count and one launch as JSON, and a reset.
__attribute__((visibility("default"))) int ksfake_launch_count() {
  return static_cast<int>(ksfake_launches()->size());
}
__attribute__((visibility("default"))) void ksfake_clear_launches() { ksfake_launches()->clear(); }
// Modules loaded and not unloaded: what a leak would leave behind.
__attribute__((visibility("default"))) int ksfake_live_modules() { return static_cast<int>(g_modules.size()); }
__attribute__((visibility("default"))) int ksfake_launch_json(int i, char* out, int size) {
  const auto& l = ksfake_launches()->at(static_cast<std::size_t>(i));
  std::string s = "{\"kernel\":\"" + l.kernel + "\"";
  auto dims = [&](const char* name, const unsigned* d) {
    s += std::string(",\"") + name + "\":[" + std::to_string(d[0]) + "," + std::to_string(d[1]) + "," +
         std::to_string(d[2]) + "]";
  };
  dims("grid", l.grid);
  dims("block", l.block);
  dims("cluster", l.cluster);
  s += ",\"shared_bytes\":" + std::to_string(l.shared_bytes) + ",\"extended\":" + (l.extended ? "true" : "false");
  s += ",\"args\":[";
  for (std::size_t a = 0; a < l.args.size(); ++a) {
    static const char* hex = "0123456789abcdef";
    s += a ? ",\"" : "\"";
    for (unsigned char c : l.args[a]) s += std::string{hex[c >> 4], hex[c & 15]};
    s += "\"";
  }
  s += "]}";
  if (static_cast<int>(s.size()) >= size) return -static_cast<int>(s.size()) - 1;
  std::memcpy(out, s.c_str(), s.size() + 1);
  return static_cast<int>(s.size());
}
__attribute__((visibility("default"))) int ksfake_function_attribute(CUfunction f, int attr) {
  auto* fn = reinterpret_cast<Function*>(f);
  auto it = fn->attributes.find(attr);
  return it == fn->attributes.end() ? -1 : it->second;
}

#define KS_FAKE __attribute__((visibility("default")))

KS_FAKE CUresult cuInit(unsigned) { return CUDA_SUCCESS; }
KS_FAKE CUresult cuDriverGetVersion(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuGetErrorName(CUresult r, const char** s) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return CUDA_SUCCESS;
    default: *s = "CUDA_ERROR_FAKE"; return CUDA_SUCCESS;
  }
}
KS_FAKE CUresult cuGetErrorString(CUresult r, const char** s) {
  *s = r == CUDA_ERROR_ILLEGAL_ADDRESS ? "an illegal memory access was encountered" : "fake error";
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuDeviceGetCount(int* n) {
  *n = static_cast<int>(devices().size());
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  if (ordinal < 0 || ordinal >= static_cast<int>(devices().size())) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
  std::strncpy(name, devices()[static_cast<std::size_t>(d)].first == 9 ? "NVIDIA H100 80GB HBM3 (fake driver)"
                                                                     : "NVIDIA A100 (fake driver)",
               static_cast<std::size_t>(len));
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = devices()[static_cast<std::size_t>(d)].first; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = devices()[static_cast<std::size_t>(d)].second; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *v = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 49152; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 50 * 1024 * 1024; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *v = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 5120; break;
    default: *v = 0;
  }
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuDeviceTotalMem(size_t* b, CUdevice) {
  *b = 80ull << 30;
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice) {
  *c = reinterpret_cast<CUcontext>(0x1);
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuDevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
static CUcontext g_current = nullptr;
KS_FAKE CUresult cuCtxSetCurrent(CUcontext c) {
  g_current = c;
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuCtxGetCurrent(CUcontext* c) {
  *c = g_current;
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuCtxGetDevice(CUdevice* d) {
  if (!g_current) return CUDA_ERROR_INVALID_CONTEXT;
  *d = 0;
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuCtxSynchronize() { return CUDA_SUCCESS; }
KS_FAKE CUresult cuStreamCreate(CUstream* s, unsigned) {
  *s = reinterpret_cast<CUstream>(0x2);
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuStreamDestroy(CUstream) { return CUDA_SUCCESS; }
static CUresult take_sync_error() {
  CUresult r = g_next_sync_error;
  if (r != CUDA_SUCCESS) g_next_sync_error = CUDA_SUCCESS;
  return r;
}
KS_FAKE CUresult cuStreamSynchronize(CUstream) { return take_sync_error(); }
KS_FAKE CUresult cuMemAlloc(CUdeviceptr* p, size_t n) {
  if (n > (64ull << 30)) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = reinterpret_cast<CUdeviceptr>(std::malloc(n));
  return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
KS_FAKE CUresult cuMemFree(CUdeviceptr p) {
  std::free(reinterpret_cast<void*>(p));
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuMemGetInfo(size_t* f, size_t* t) {
  *f = 1ull << 30;
  *t = 80ull << 30;
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuMemcpyHtoDAsync(CUdeviceptr d, const void* s, size_t n, CUstream) {
  std::memcpy(reinterpret_cast<void*>(d), s, n);
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuMemcpyDtoHAsync(void* d, CUdeviceptr s, size_t n, CUstream) {
  std::memcpy(d, reinterpret_cast<void*>(s), n);
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream) {
  std::memcpy(reinterpret_cast<void*>(d), reinterpret_cast<void*>(s), n);
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream) {
  std::memset(reinterpret_cast<void*>(d), v, n);
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, CUstream) {
  auto* p = reinterpret_cast<unsigned*>(d);
  for (size_t i = 0; i < n; ++i) p[i] = v;
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuModuleLoadData(CUmodule* m, const void* image) {
  // A cubin is an ELF file; anything else is rejected as a real driver would.
  if (std::memcmp(image, "\177ELF", 4) != 0) return CUDA_ERROR_INVALID_IMAGE;
  auto* mod = new Module;
  // Enough of the image to find symbol names in.
  const char* bytes = static_cast<const char*>(image);
  std::uint64_t phoff, shoff;
  std::uint16_t phentsize, phnum, shentsize, shnum;
  std::memcpy(&phoff, bytes + 0x20, 8);
  std::memcpy(&shoff, bytes + 0x28, 8);
  std::memcpy(&phentsize, bytes + 0x36, 2);
  std::memcpy(&phnum, bytes + 0x38, 2);
  std::memcpy(&shentsize, bytes + 0x3a, 2);
  std::memcpy(&shnum, bytes + 0x3c, 2);
  std::uint64_t end = shoff + std::uint64_t{shentsize} * shnum;
  if (phoff + std::uint64_t{phentsize} * phnum > end) end = phoff + std::uint64_t{phentsize} * phnum;
  mod->image.assign(bytes, end);
  *m = reinterpret_cast<CUmodule>(mod);
  g_modules[*m] = mod;
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuModuleUnload(CUmodule m) {
  delete g_modules[m];
  g_modules.erase(m);
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  std::string key = std::string(1, '\0') + name + std::string(1, '\0');
  if (g_modules[m]->image.find(key) == std::string::npos) return CUDA_ERROR_NOT_FOUND;
  auto* fn = new Function{name, {}, {}};  // lives as long as the test process
  for (const auto& k : ks::eval::cuda::inspect_cubin(g_modules[m]->image))
    if (k.symbol == name && k.params) fn->params = *k.params;
  fn->attributes[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] = 1024;
  fn->attributes[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES] = 0;
  fn->attributes[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] = 49152;
  *f = reinterpret_cast<CUfunction>(fn);
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction f) {
  auto& attrs = reinterpret_cast<Function*>(f)->attributes;
  auto it = attrs.find(a);
  *v = it == attrs.end() ? 0 : it->second;
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuFuncGetParamInfo(CUfunction f, size_t i, size_t* offset, size_t* size) {
  const auto& params = reinterpret_cast<Function*>(f)->params;
  if (i >= params.size()) return CUDA_ERROR_INVALID_VALUE;
  *offset = params[i].offset;
  *size = params[i].size;
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES && v > 232448) return CUDA_ERROR_INVALID_VALUE;
  reinterpret_cast<Function*>(f)->attributes[a] = v;
  return CUDA_SUCCESS;
}
static CUresult record(CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned smem,
                       const unsigned cluster[3], bool extended, void** params) {
  auto* fn = reinterpret_cast<Function*>(f);
  // Real launches fail when dynamic shared memory exceeds the kernel's limit,
  // or a cluster exceeds 8 blocks without the kernel opting in.
  if (static_cast<int>(smem) > fn->attributes[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES])
    return CUDA_ERROR_INVALID_VALUE;
  if (cluster[0] * cluster[1] * cluster[2] > 8 &&
      fn->attributes[CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED] != 1)
    return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  FakeLaunch l{fn->name, {grid[0], grid[1], grid[2]}, {block[0], block[1], block[2]},
               {cluster[0], cluster[1], cluster[2]}, smem, extended, {}};
  for (std::size_t i = 0; i < fn->params.size(); ++i) {
    std::array<unsigned char, 8> v{};
    std::memcpy(v.data(), params[i], std::min<std::size_t>(fn->params[i].size, 8));
    l.args.push_back(v);
  }
  ksfake_launches()->push_back(l);
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                unsigned by, unsigned bz, unsigned smem, CUstream, void** params,
                                void**) {
  const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz}, cluster[3] = {1, 1, 1};
  return record(f, grid, block, smem, cluster, false, params);
}
KS_FAKE CUresult cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** params, void**) {
  unsigned cluster[3] = {1, 1, 1};
  for (unsigned i = 0; i < c->numAttrs; ++i)
    if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      cluster[0] = c->attrs[i].value.clusterDim.x;
      cluster[1] = c->attrs[i].value.clusterDim.y;
      cluster[2] = c->attrs[i].value.clusterDim.z;
    }
  const unsigned grid[3] = {c->gridDimX, c->gridDimY, c->gridDimZ};
  const unsigned block[3] = {c->blockDimX, c->blockDimY, c->blockDimZ};
  return record(f, grid, block, c->sharedMemBytes, cluster, true, params);
}
KS_FAKE CUresult cuEventCreate(CUevent* e, unsigned) {
  *e = reinterpret_cast<CUevent>(0x3);
  return CUDA_SUCCESS;
}
KS_FAKE CUresult cuEventDestroy(CUevent) { return CUDA_SUCCESS; }
KS_FAKE CUresult cuEventRecord(CUevent, CUstream) { return CUDA_SUCCESS; }
KS_FAKE CUresult cuEventSynchronize(CUevent) { return take_sync_error(); }
KS_FAKE CUresult cuEventElapsedTime(float* ms, CUevent, CUevent) {
  *ms = 0.5f;
  return CUDA_SUCCESS;
}

}  // extern "C"
