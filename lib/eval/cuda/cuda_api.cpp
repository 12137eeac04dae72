#include "eval/cuda/cuda_api.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>

#include "ksearch/error.hpp"

namespace ks::eval::cuda {
namespace {

namespace fs = std::filesystem;

// Two-step stringification so a versioned name (cuMemAlloc -> cuMemAlloc_v2)
// is expanded before it becomes the symbol to look up.
#define KS_CUDA_STR2(x) #x
#define KS_CUDA_STR(x) KS_CUDA_STR2(x)

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

[[noreturn]] void no_device(const std::string& why) { throw Error(Status::no_device, why); }

std::string dl_error() {
  const char* e = ::dlerror();
  return e ? std::string(e) : std::string("unknown dlopen error");
}

template <typename Fn>
bool load_symbol(void* handle, Fn& slot, const char* name) {
  slot = reinterpret_cast<Fn>(::dlsym(handle, name));
  return slot != nullptr;
}

// The folder holding the toolkit: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda.
std::vector<fs::path> toolkit_roots() {
  std::vector<fs::path> roots;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (auto v = env(var); !v.empty()) roots.emplace_back(v);
  roots.emplace_back("/usr/local/cuda");
  return roots;
}

}  // namespace

std::unique_ptr<DriverApi> load_driver(const std::string& path) {
  std::string lib = !path.empty() ? path : env("KSEARCH_LIBCUDA");
  if (lib.empty()) lib = "libcuda.so.1";
  ::dlerror();
  void* handle = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    no_device(fmt::format("no CUDA driver: {} not found ({}); install the NVIDIA driver or set "
                          "KSEARCH_LIBCUDA",
                          lib, dl_error()));
  auto api = std::make_unique<DriverApi>();
  api->handle = handle;
  api->library = lib;

  std::vector<std::string> missing;
#define KS_LOAD_REQUIRED(fn) \
  if (!load_symbol(handle, api->fn, KS_CUDA_STR(fn))) missing.emplace_back(KS_CUDA_STR(fn));
#define KS_LOAD_OPTIONAL(fn) load_symbol(handle, api->fn, KS_CUDA_STR(fn));
  KS_CUDA_DRIVER_REQUIRED(KS_LOAD_REQUIRED)
  KS_CUDA_DRIVER_OPTIONAL(KS_LOAD_OPTIONAL)
#undef KS_LOAD_REQUIRED
#undef KS_LOAD_OPTIONAL
  // cuEventElapsedTime_v2 arrived with CUDA 12.8 drivers; the original entry
  // point has the same signature, so older drivers keep working.
  if (!api->cuEventElapsedTime &&
      load_symbol(handle, api->cuEventElapsedTime, "cuEventElapsedTime"))
    std::erase(missing, std::string(KS_CUDA_STR(cuEventElapsedTime)));
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    no_device(fmt::format("the CUDA driver {} lacks {}; a driver for CUDA 12.0 or newer is needed",
                          lib, list));
  }

  CUresult r = api->cuInit(0);
  if (r != CUDA_SUCCESS)
    no_device(fmt::format("no usable CUDA device: cuInit failed with {} (driver library {})",
                          error_text(*api, r), lib));
  api->cuDriverGetVersion(&api->version);
  r = api->cuDeviceGetCount(&api->device_count);
  if (r != CUDA_SUCCESS)
    no_device(fmt::format("no usable CUDA device: cuDeviceGetCount failed with {}",
                          error_text(*api, r)));
  if (api->device_count == 0)
    no_device(fmt::format("no CUDA device: the driver ({}, CUDA {}.{}) sees no GPU{}", lib,
                          api->version / 1000, api->version % 1000 / 10,
                          env("CUDA_VISIBLE_DEVICES").empty()
                              ? ""
                              : " (CUDA_VISIBLE_DEVICES=" + env("CUDA_VISIBLE_DEVICES") + ")"));
  return api;
}

void* open_toolkit_library(const std::string& path, const char* env_var, std::initializer_list<const char*> names,
                           std::string& loaded, std::string& tried) {
  std::vector<std::string> candidates;
  if (!path.empty()) {
    candidates.push_back(path);
  } else if (auto e = env(env_var); !e.empty()) {
    candidates.push_back(e);
  } else {
    for (const char* n : names) candidates.emplace_back(n);
    for (const auto& root : toolkit_roots())
      for (const char* n : names) candidates.push_back((root / "lib64" / n).string());
  }
  for (const auto& c : candidates) {
    ::dlerror();
    if (void* handle = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      loaded = c;
      return handle;
    }
    tried += fmt::format("\n  {}: {}", c, dl_error());
  }
  return nullptr;
}

std::unique_ptr<NvrtcApi> load_nvrtc(const std::string& path) {
  std::string lib, tried;
  void* handle =
      open_toolkit_library(path, "KSEARCH_LIBNVRTC", {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, lib, tried);
  if (!handle)
    no_device("NVRTC (the CUDA runtime compiler) could not be loaded; install the CUDA toolkit or "
              "set KSEARCH_LIBNVRTC. Tried:" + tried);

  auto api = std::make_unique<NvrtcApi>();
  api->handle = handle;
  api->library = lib;
  std::vector<std::string> missing;
#define KS_LOAD_REQUIRED(fn) \
  if (!load_symbol(handle, api->fn, #fn)) missing.emplace_back(#fn);
#define KS_LOAD_OPTIONAL(fn) load_symbol(handle, api->fn, #fn);
  KS_NVRTC_REQUIRED(KS_LOAD_REQUIRED)
  KS_NVRTC_OPTIONAL(KS_LOAD_OPTIONAL)
#undef KS_LOAD_REQUIRED
#undef KS_LOAD_OPTIONAL
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    no_device(fmt::format("NVRTC library {} lacks {}; NVRTC 12.0 or newer is needed", lib, list));
  }
  api->nvrtcVersion(&api->major, &api->minor);
  // The name loaded from the loader path says little; record the real file.
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(api->nvrtcVersion), &info) && info.dli_fname)
    api->library = info.dli_fname;
  return api;
}

namespace {

Loaded<DriverApi>& driver_slot() {
  static Loaded<DriverApi> slot;
  return slot;
}

Loaded<NvrtcApi>& nvrtc_slot() {
  static Loaded<NvrtcApi> slot;
  return slot;
}

}  // namespace

// The tables are never freed: kernels, modules and NVRTC's PCH heap may be in
// use until exit, and dlclose() at exit gains nothing.
const DriverApi& driver() {
  return get_loaded(driver_slot(), [] { return load_driver(); });
}

const NvrtcApi& nvrtc() {
  return get_loaded(nvrtc_slot(), [] { return load_nvrtc(); });
}

namespace {

// Names of the errors met most, for when the driver cannot name its own
// (the toolkit's stub cannot) or is not loaded at all.
const char* known_error_name(CUresult r) {
#define KS_CUDA_ERROR_NAME(e) \
  case e: return #e;
  switch (r) {
    KS_CUDA_ERROR_NAME(CUDA_ERROR_INVALID_VALUE)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_OUT_OF_MEMORY)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_NOT_INITIALIZED)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_DEINITIALIZED)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_STUB_LIBRARY)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_DEVICE_UNAVAILABLE)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_NO_DEVICE)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_INVALID_DEVICE)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_SYSTEM_NOT_READY)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_OPERATING_SYSTEM)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_UNKNOWN)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_NO_BINARY_FOR_GPU)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_INVALID_IMAGE)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_NOT_FOUND)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_ILLEGAL_ADDRESS)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_LAUNCH_TIMEOUT)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_ASSERT)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_HARDWARE_STACK_ERROR)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_ILLEGAL_INSTRUCTION)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_MISALIGNED_ADDRESS)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_INVALID_ADDRESS_SPACE)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_INVALID_PC)
    KS_CUDA_ERROR_NAME(CUDA_ERROR_LAUNCH_FAILED)
    default: return nullptr;
  }
#undef KS_CUDA_ERROR_NAME
}

}  // namespace

std::string error_text(const DriverApi& api, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName && api.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (api.cuGetErrorString && api.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
  if (!name) name = known_error_name(r);
  if (r == CUDA_ERROR_STUB_LIBRARY && !text)
    text = "the toolkit's stub libcuda.so was loaded instead of the real driver";
  std::string out = name ? name : fmt::format("CUresult {}", static_cast<int>(r));
  if (text) out += fmt::format(" ({})", text);
  return out;
}

bool is_sticky(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
      return true;
    default:
      return false;
  }
}

std::string error_text(CUresult r) {
  try {
    return error_text(driver(), r);
  } catch (const Error&) {
    return error_text(DriverApi{}, r);  // no driver: the built-in names
  }
}

void check(CUresult r, const char* call, std::string_view what) {
  if (r == CUDA_SUCCESS) return;
  Failure f;
  f.status = is_sticky(r) ? EvalStatus::crashed : EvalStatus::runtime_error;
  f.message = fmt::format("{}: {}", call, error_text(r));
  if (!what.empty()) f.message += fmt::format(" ({})", what);
  throw RunError(std::move(f));
}

void check_nvrtc(nvrtcResult r, const char* call) {
  if (r == NVRTC_SUCCESS) return;
  const auto& api = nvrtc();
  throw Error(Status::internal, fmt::format("{}: {}", call, api.nvrtcGetErrorString(r)));
}

const std::vector<std::string>& toolkit_include_dirs() {
  static const std::vector<std::string> dirs = [] {
    std::vector<fs::path> roots;
    // Prefer the toolkit NVRTC came from: its headers match its version.
    try {
      fs::path lib = fs::weakly_canonical(nvrtc().library);
      // <root>/lib64/libnvrtc.so or <root>/targets/<triple>/lib/libnvrtc.so
      roots.push_back(lib.parent_path().parent_path());
      roots.push_back(lib.parent_path().parent_path().parent_path().parent_path());
    } catch (const Error&) {
      // No NVRTC: the toolkit root from the environment is all we have.
    }
    for (const auto& r : toolkit_roots()) roots.push_back(r);
    std::error_code ec;
    for (const auto& root : roots) {
      fs::path inc = root / "include";
      if (!fs::exists(inc / "cuda_fp16.h", ec)) continue;
      std::vector<std::string> out{inc.string()};
      if (fs::exists(inc / "cccl", ec)) out.push_back((inc / "cccl").string());
      return out;
    }
    return std::vector<std::string>{};
  }();
  return dirs;
}

}  // namespace ks::eval::cuda
