#include "eval/cuda/cuda_device.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/inputs.hpp"
#include "eval/compare.hpp"
#include "eval/digest.hpp"
#include "eval/cuda/embedded.hpp"
#include "eval/cuda/nvrtc_compiler.hpp"
#include "eval/python/python_program.hpp"
#include "ksearch/error.hpp"
#include "util/fs.hpp"

namespace ks::eval::cuda {
namespace {

// Laid out as KsCompareResult in kernels/runtime.cu.
struct CompareResult {
  std::uint64_t mismatches = 0;
  std::uint64_t nonfinite_outputs = 0;
  std::uint64_t nonfinite_reference = 0;
  std::uint64_t poisoned = 0;
  std::uint64_t first_bad = ~0ULL;
  std::uint64_t max_abs_bits = 0;
  std::uint64_t max_rel_bits = 0;
};

constexpr unsigned kRuntimeBlock = 256;

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024 * 1024)); }

[[noreturn]] void setup_failed(const DriverApi& api, CUresult r, const char* call, int ordinal) {
  throw Error(Status::no_device, fmt::format("CUDA device {}: {} failed with {}", ordinal, call,
                                             error_text(api, r)));
}

double bits_to_double(std::uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

}  // namespace

std::string arch_for_capability(int major, int minor) {
  // From Hopper on, the "a" targets unlock the chip's own instructions.
  return fmt::format("sm_{}{}{}", major, minor, major >= 9 ? "a" : "");
}

PeakFigures estimate_peaks(const std::string& name, int major, int minor, int sm_count,
                           double sm_clock_khz, double mem_clock_khz, int bus_width_bits) {
  PeakFigures p;
  // Dense tensor-core operations per SM per clock at the chip's fastest
  // precision: fp4 on Blackwell datacenter parts, fp8 on Hopper (1979 TFLOP/s
  // on an H100 SXM), int8/fp8 before. Rounded up: the figure bounds what is
  // physically possible, so erring high never rejects an honest kernel.
  double per_sm_clock = 4096;
  std::string rate = "int8/fp8 tensor cores";
  if (major == 9) per_sm_clock = 8192, rate = "fp8 tensor cores";
  if (major == 10 || major == 11 || major > 12) per_sm_clock = 32768, rate = "fp4 tensor cores";
  if (major == 12) per_sm_clock = 8192, rate = "fp4 tensor cores";
  double clock_hz = sm_clock_khz * 1e3;
  std::string clock_note = "reported clock";
  if (clock_hz <= 0) clock_hz = 2.5e9, clock_note = "assumed 2.5 GHz clock";
  p.flops = per_sm_clock * sm_count * clock_hz;
  p.source = fmt::format("flops: {} SMs x {} ops/clock ({}, sm_{}{}) x {}", sm_count,
                         per_sm_clock, rate, major, minor, clock_note);

  if (mem_clock_khz > 0 && bus_width_bits > 0) {
    p.bytes_per_s = 2.0 * mem_clock_khz * 1e3 * bus_width_bits / 8.0;  // double data rate
    p.source += fmt::format("; bandwidth: driver attributes (memory clock {:.0f} MHz, {}-bit bus)",
                            mem_clock_khz / 1e3, bus_width_bits);
    return p;
  }
  struct Known {
    const char* part;
    double bytes_per_s;
  };
  // Vendor datasheet figures; the first part whose name appears wins.
  static const Known known[] = {{"GH200", 4.9e12}, {"H200", 4.8e12},   {"H100 PCIe", 2.0e12},
                                {"H100", 3.35e12}, {"H800", 3.35e12},  {"B200", 8.0e12},
                                {"B100", 8.0e12},  {"A100", 2.039e12}, {"L40S", 0.864e12}};
  for (const auto& k : known) {
    if (name.find(k.part) == std::string::npos) continue;
    p.bytes_per_s = k.bytes_per_s;
    p.source += fmt::format("; bandwidth: table of known parts ({}: {:.2f} TB/s)", k.part,
                            k.bytes_per_s / 1e12);
    return p;
  }
  p.bytes_per_s = 10e12;
  p.source += "; bandwidth: unknown part, assumed a generous 10 TB/s";
  return p;
}

CudaDevice::CudaDevice(int ordinal, host::CandidateProcessOptions python, std::string kernel_cache)
    : api_(driver()), ordinal_(ordinal), python_(std::move(python)), kernel_cache_(std::move(kernel_cache)) {
  if (ordinal < 0 || ordinal >= api_.device_count)
    throw Error(Status::no_device,
                fmt::format("CUDA device {} does not exist; {} device{} visible", ordinal,
                            api_.device_count, api_.device_count == 1 ? " is" : "s are"));
  CUresult r = api_.cuDeviceGet(&device_, ordinal);
  if (r != CUDA_SUCCESS) setup_failed(api_, r, "cuDeviceGet", ordinal);
  r = api_.cuDevicePrimaryCtxRetain(&context_, device_);
  if (r != CUDA_SUCCESS) setup_failed(api_, r, "cuDevicePrimaryCtxRetain", ordinal);
  r = api_.cuCtxSetCurrent(context_);
  if (r != CUDA_SUCCESS) setup_failed(api_, r, "cuCtxSetCurrent", ordinal);
  // A kernel's malloc() draws on this heap: kept small, so a candidate cannot
  // take the device's memory from under the evaluator (docs/security.md).
  if (api_.cuCtxSetLimit) api_.cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, kDeviceMallocHeapBytes);
  r = api_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING);
  if (r != CUDA_SUCCESS) setup_failed(api_, r, "cuStreamCreate", ordinal);

  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    return api_.cuDeviceGetAttribute(&v, a, device_) == CUDA_SUCCESS ? v : 0;
  };
  // Buffers a Python candidate's process maps by descriptor, which it can
  // neither guess nor forge: cuMemCreate allocations, exported as POSIX
  // descriptors. KSEARCH_CUDA_LEGACY_IPC=1 keeps cuMemAlloc and legacy IPC.
  vmm_ = api_.cuMemCreate && api_.cuMemRelease && api_.cuMemAddressReserve && api_.cuMemAddressFree &&
         api_.cuMemMap && api_.cuMemUnmap && api_.cuMemSetAccess && api_.cuMemExportToShareableHandle &&
         attr(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) == 1 &&
         attr(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) == 1 &&
         !(std::getenv("KSEARCH_CUDA_LEGACY_IPC") && std::string_view(std::getenv("KSEARCH_CUDA_LEGACY_IPC")) == "1");
  if (vmm_ && api_.cuMemGetAllocationGranularity) {
    const CUmemAllocationProp prop = vmm_properties();
    std::size_t g = 0;
    if (api_.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS && g > 0)
      block_bytes_ = (block_bytes_ + g - 1) / g * g;
  }
  if (api_.cuDeviceGetUuid) {
    CUuuid id{};
    if (api_.cuDeviceGetUuid(&id, device_) == CUDA_SUCCESS) {
      const auto* b = reinterpret_cast<const unsigned char*>(id.bytes);
      visible_devices_ = "GPU-";
      for (int i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) visible_devices_ += '-';
        visible_devices_ += fmt::format("{:02x}", b[i]);
      }
    }
  }
  char name[256] = {};
  api_.cuDeviceGetName(name, sizeof name - 1, device_);
  const int major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  const int minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  const int sms = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  std::size_t total = 0;
  api_.cuDeviceTotalMem(&total, device_);

  limits_ = device_limits(api_, device_);

  info_.backend = "cuda";
  info_.name = name;
  info_.arch = arch_for_capability(major, minor);
  info_.count = 1;
  info_.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  info_.memory_bytes = static_cast<std::int64_t>(total);
  info_.compute_units = sms;
  info_.clock_ghz = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) / 1e6;  // kHz
  info_.caches = fmt::format("L2 {} MiB, up to {} KiB of shared memory per block (opt-in), {} KiB per SM",
                             info_.l2_bytes >> 20, attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN) >> 10,
                             attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR) >> 10);
  info_.timing =
      "CUDA events around your plan's launches on one stream, so a timed call includes each launch's overhead "
      "(a few microseconds per kernel); outputs are filled with a poison pattern and the L2 cache is flushed "
      "before every timed call, so inputs come from device memory.";
  peaks_ = estimate_peaks(info_.name, major, minor, sms, attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
                          attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
                          attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH));
  info_.peak_flops = peaks_.flops;
  info_.peak_bytes_per_s = peaks_.bytes_per_s;
  // Now rather than at the first evaluation: a cold cache costs seconds of
  // NVRTC time, which belongs to starting the worker, not to a candidate's
  // time limit; and missing toolkit headers show up here, clearly.
  load_runtime_kernels();
}

CudaDevice::~CudaDevice() {
  // Teardown in a context a kernel broke fails; nothing useful can be done
  // about that, and the process is about to end.
  api_.cuCtxSetCurrent(context_);
  // Every allocation still live (the flush buffer and the compare result
  // among them): cuMemCreate memory and exported descriptors outlive a
  // context otherwise.
  for (auto& [base, a] : allocations_) release(base, a);
  allocations_.clear();
  if (api_.cuIpcCloseMemHandle)
    for (const auto& [handle, base] : ipc_mappings_) api_.cuIpcCloseMemHandle(base);
  if (runtime_module_) api_.cuModuleUnload(runtime_module_);
  if (stream_) api_.cuStreamDestroy(stream_);
  if (context_) api_.cuDevicePrimaryCtxRelease(device_);
}

void CudaDevice::make_current() const {
  CUresult r = api_.cuCtxSetCurrent(context_);
  if (r != CUDA_SUCCESS) cuda::check(r, "cuCtxSetCurrent");
}

void CudaDevice::require_usable() const {
  if (!sticky_error_.empty())
    throw RunError(Failure{EvalStatus::crashed,
                              "the CUDA context is unusable after an earlier error: " + sticky_error_});
}

void CudaDevice::check(CUresult r, const char* call, std::string_view what) {
  if (r == CUDA_SUCCESS) return;
  try {
    cuda::check(r, call, what);
  } catch (const RunError& e) {
    if (is_sticky(r) && sticky_error_.empty()) sticky_error_ = e.what();
    throw;
  }
}

Buffer CudaDevice::alloc(std::size_t bytes) {
  require_usable();
  make_current();
  if (bytes == 0) return Buffer{};
  // Checked before asking: a request far beyond what is free gets the same
  // clear answer as one the driver refuses, without the driver's attempt.
  std::size_t free_b = 0, total_b = 0;
  const bool known = api_.cuMemGetInfo(&free_b, &total_b) == CUDA_SUCCESS;
  // Whole blocks: a buffer handed to a Python candidate's process must
  // share its memory with nothing else (a reference output, the pristine
  // inputs).
  const std::size_t request = (bytes + kRedzoneBytes + block_bytes_ - 1) / block_bytes_ * block_bytes_;
  Allocation a{.bytes = bytes, .mapped = request, .serial = next_serial_++};
  CUdeviceptr p = 0;
  CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
  const char* call = vmm_ ? "cuMemCreate" : "cuMemAlloc";  // the call that failed, for the message
  if (known && request > free_b) {
  } else if (!vmm_) {
    r = api_.cuMemAlloc(&p, request);
  } else {
    const CUmemAllocationProp prop = vmm_properties();
    const CUmemAccessDesc access{prop.location, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    r = api_.cuMemCreate(&a.handle, request, &prop, 0);
    if (r == CUDA_SUCCESS && (r = api_.cuMemAddressReserve(&p, request, 0, 0, 0)) != CUDA_SUCCESS) {
      call = "cuMemAddressReserve";
      api_.cuMemRelease(a.handle);
    } else if (r == CUDA_SUCCESS && ((r = api_.cuMemMap(p, request, 0, a.handle, 0)) != CUDA_SUCCESS ||
                                     (r = api_.cuMemSetAccess(p, request, &access, 1)) != CUDA_SUCCESS)) {
      call = "cuMemMap/cuMemSetAccess";
      api_.cuMemUnmap(p, request);  // a no-op where the map failed
      api_.cuMemAddressFree(p, request);
      api_.cuMemRelease(a.handle);
    }
  }
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    api_.cuMemGetInfo(&free_b, &total_b);
    throw RunError(Failure{
        EvalStatus::runtime_error,
        fmt::format("out of device memory: cannot allocate {} ({} bytes; {} free of {})",
                    gib(static_cast<double>(bytes)), bytes, gib(static_cast<double>(free_b)),
                    gib(static_cast<double>(total_b))),
        true});
  }
  check(r, call, fmt::format("{} bytes", bytes));
  allocations_[p] = std::move(a);
  try {
    check(api_.cuMemsetD8Async(p + bytes, kRedzoneByte, kRedzoneBytes, stream_), "cuMemsetD8Async",
          "filling a redzone");
  } catch (...) {
    free(Buffer{p, bytes});
    throw;
  }
  return Buffer{p, bytes};
}

CUmemAllocationProp CudaDevice::vmm_properties() const {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, ordinal_};
  return prop;
}

void CudaDevice::release(CUdeviceptr base, Allocation& a) {
  if (a.fd >= 0) ::close(a.fd);
  if (a.handle) {
    api_.cuMemUnmap(base, a.mapped);
    api_.cuMemAddressFree(base, a.mapped);
    api_.cuMemRelease(a.handle);
  } else {
    api_.cuMemFree(base);
  }
}

void CudaDevice::free(Buffer b) {
  // Freeing never throws: it runs on cleanup paths, also after a crash.
  if (!b) return;
  api_.cuCtxSetCurrent(context_);
  if (auto it = allocations_.find(b.addr); it != allocations_.end()) {
    release(it->first, it->second);
    allocations_.erase(it);
  } else {
    api_.cuMemFree(b.addr);
  }
}

void CudaDevice::label(Buffer b, std::string_view name) {
  if (auto it = allocations_.find(b.addr); it != allocations_.end()) it->second.label = name;
}

std::string CudaDevice::check_redzone(Buffer b) {
  auto it = allocations_.find(b.addr);
  if (!b || it == allocations_.end()) return {};
  const Allocation& a = it->second;
  unsigned char zone[kRedzoneBytes];
  download(zone, Buffer{b.addr + a.bytes, kRedzoneBytes}, kRedzoneBytes);
  std::size_t reach = 0;  // how far past the end the last changed byte lies
  for (std::size_t i = 0; i < kRedzoneBytes; ++i)
    if (zone[i] != kRedzoneByte) reach = i + 1;
  if (reach == 0) return {};
  return fmt::format("wrote past the end of {} ({} bytes beyond its {} bytes{})",
                     a.label.empty() ? "a buffer" : a.label, reach, a.bytes,
                     reach == kRedzoneBytes ? "; the write may reach further, the check covers 4096 bytes" : "");
}

void CudaDevice::upload(Buffer dst, const void* src, std::size_t bytes) {
  require_usable();
  if (bytes > dst.bytes)
    throw Error(Status::invalid_argument,
                fmt::format("upload of {} bytes into a {}-byte buffer", bytes, dst.bytes));
  if (bytes == 0) return;
  make_current();
  check(api_.cuMemcpyHtoDAsync(dst.addr, src, bytes, stream_), "cuMemcpyHtoDAsync");
  check(api_.cuStreamSynchronize(stream_), "cuStreamSynchronize", "after an upload");
}

void CudaDevice::download(void* dst, Buffer src, std::size_t bytes) {
  require_usable();
  if (bytes > src.bytes)
    throw Error(Status::invalid_argument,
                fmt::format("download of {} bytes from a {}-byte buffer", bytes, src.bytes));
  if (bytes == 0) return;
  make_current();
  check(api_.cuMemcpyDtoHAsync(dst, src.addr, bytes, stream_), "cuMemcpyDtoHAsync");
  check(api_.cuStreamSynchronize(stream_), "cuStreamSynchronize", "after a download");
}

void CudaDevice::copy(Buffer dst, Buffer src, std::size_t bytes) {
  require_usable();
  if (bytes > dst.bytes || bytes > src.bytes)
    throw Error(Status::invalid_argument,
                fmt::format("copy of {} bytes between buffers of {} and {} bytes", bytes,
                            src.bytes, dst.bytes));
  if (bytes == 0) return;
  make_current();
  check(api_.cuMemcpyDtoDAsync(dst.addr, src.addr, bytes, stream_), "cuMemcpyDtoDAsync");
}

Buffer CudaDevice::open_external(const ExternalTensor& t) {
  if (t.handover != "cuda_ipc") return Device::open_external(t);
  require_usable();
  make_current();
  auto it = ipc_mappings_.find(t.handle);
  if (it == ipc_mappings_.end()) {
    if (!api_.cuIpcOpenMemHandle)
      throw RunError(Failure{EvalStatus::runtime_error, "this CUDA driver has no cuIpcOpenMemHandle"});
    CUipcMemHandle h{};
    if (t.handle.size() != 2 * sizeof(h.reserved))
      throw Error(Status::invalid_argument, fmt::format("CUDA IPC handle of {} hex digits, expected {}",
                                                        t.handle.size(), 2 * sizeof(h.reserved)));
    for (std::size_t i = 0; i < sizeof(h.reserved); ++i)
      h.reserved[i] = static_cast<char>(std::stoi(t.handle.substr(2 * i, 2), nullptr, 16));
    CUdeviceptr base = 0;
    CUresult r = api_.cuIpcOpenMemHandle(&base, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (r != CUDA_SUCCESS) {
      const char* name = nullptr;
      api_.cuGetErrorName(r, &name);
      // Not a fault of the candidate or a sticky error: the oracle's memory
      // is out of reach (another PID or IPC namespace, another machine).
      throw RunError(Failure{EvalStatus::runtime_error,
                                fmt::format("cannot map the reference oracle's memory (cuIpcOpenMemHandle: {})",
                                            name ? name : "unknown error")});
    }
    it = ipc_mappings_.emplace(t.handle, base).first;
  }
  return Buffer{it->second + t.offset, static_cast<std::size_t>(t.bytes)};
}

void CudaDevice::keep_only_externals(const std::set<std::string>& handles) {
  for (auto it = ipc_mappings_.begin(); it != ipc_mappings_.end();) {
    if (handles.count(it->first)) {
      ++it;
      continue;
    }
    make_current();
    api_.cuIpcCloseMemHandle(it->second);
    it = ipc_mappings_.erase(it);
  }
}

void CudaDevice::release_external(Buffer b, const ExternalTensor& t) {
  if (t.handover != "cuda_ipc") Device::release_external(b, t);
}

CompileRequest runtime_kernels_request(const std::string& arch) {
  CompileRequest req;
  req.solution.name = "ksearch-runtime";
  req.solution.language = Language::cuda;
  req.solution.sources = {{"ks_runtime.cu", std::string(embedded::runtime_kernels)},
                          {"ks_rng.h", std::string(embedded::rng_header)}};
  req.arch = arch;
  // The host computes inputs without fused multiply-adds; so must the GPU.
  req.flags = {"-fmad=false"};
  return req;
}

void CudaDevice::load_runtime_kernels() {
  std::call_once(runtime_once_, [&] {
    CudaCompilerOptions opts;
    opts.arch = info_.arch;
    opts.cache_dir = kernel_cache_;
    opts.use_pch = false;  // compiled once per machine, then read from the cache
    CudaCompiler compiler(opts);
    const CompileRequest req = runtime_kernels_request(info_.arch);
    Artifact art;
    try {
      art = compiler.compile(req);
    } catch (const CompileError& e) {
      throw Error(Status::compile,
                  fmt::format("the CUDA device's runtime kernels do not compile ({}); is the "
                              "toolkit's include folder complete?\n{}",
                              e.what(), e.log()));
    }
    std::string image = util::read_file(art.path);
    make_current();
    check(api_.cuModuleLoadData(&runtime_module_, image.data()), "cuModuleLoadData",
          "the device's runtime kernels");
    for (const auto& sym : art.kernels) {
      CUfunction f = nullptr;
      check(api_.cuModuleGetFunction(&f, runtime_module_, sym.c_str()), "cuModuleGetFunction",
            sym);
      runtime_functions_[sym] = f;
    }
    compare_result_ = alloc(sizeof(CompareResult));
    digest_result_ = alloc(sizeof(std::uint64_t));
  });
}

CUfunction CudaDevice::runtime_kernel(const std::string& name) {
  load_runtime_kernels();
  auto it = runtime_functions_.find(name);
  if (it == runtime_functions_.end())
    throw Error(Status::internal, "runtime kernel " + name + " missing from its module");
  return it->second;
}

void CudaDevice::generate(Buffer b, DType dtype, std::size_t count, Distribution::Kind kind,
                          double p0, double p1, std::uint64_t seed, std::uint64_t stream) {
  require_usable();
  count = std::min(count, b.bytes / dtype_size(dtype));
  if (count == 0) return;
  if (Distribution{kind}.structured()) {
    // Offsets and page tables are built whole (sorting, shuffling) on the
    // host, by the same code as the host backend's, and copied over.
    std::vector<unsigned char> host(count * dtype_size(dtype));
    core::generate_values(host.data(), dtype, count, kind, p0, p1, seed, stream);
    upload(b, host.data(), host.size());
    return;
  }
  CUfunction f = runtime_kernel(std::string("ks_generate_") + to_string(dtype));
  make_current();
  unsigned long long n = count, s = seed, st = stream;
  int k = static_cast<int>(kind);
  CUdeviceptr out = b.addr;
  void* params[] = {&out, &n, &k, &p0, &p1, &s, &st};
  auto blocks = static_cast<unsigned>(
      std::min<std::size_t>((count + kRuntimeBlock - 1) / kRuntimeBlock, 65535));
  check(api_.cuLaunchKernel(f, blocks, 1, 1, kRuntimeBlock, 1, 1, 0, stream_, params, nullptr),
        "cuLaunchKernel", "input generation");
}

void CudaDevice::poison(Buffer b, std::size_t bytes) {
  require_usable();
  bytes = std::min(bytes, b.bytes);
  if (bytes == 0) return;
  make_current();
  check(api_.cuMemsetD8Async(b.addr, 0xFF, bytes, stream_), "cuMemsetD8Async", "poisoning");
}

CompareStats CudaDevice::compare(Buffer out, Buffer ref, DType dtype, std::size_t count,
                                 const Tolerance& tol) {
  require_usable();
  const std::size_t esize = dtype_size(dtype);
  if (count * esize > out.bytes || count * esize > ref.bytes)
    throw Error(Status::invalid_argument,
                fmt::format("compare of {} elements over buffers of {} and {} bytes", count,
                            out.bytes, ref.bytes));
  CompareStats st;
  st.count = count;
  if (count == 0) return st;
  CUfunction f = runtime_kernel(std::string("ks_compare_") + to_string(dtype));
  make_current();
  CompareResult init;
  check(api_.cuMemcpyHtoDAsync(compare_result_.addr, &init, sizeof init, stream_),
        "cuMemcpyHtoDAsync", "comparison setup");
  unsigned long long n = count;
  double atol = tol.atol, rtol = tol.rtol;
  int forbid = tol.nan_policy == Tolerance::NanPolicy::forbid ? 1 : 0;
  // runtime.cu numbers the rules the same way.
  static_assert(static_cast<int>(Tolerance::Rule::ref_relative) == 0 &&
                static_cast<int>(Tolerance::Rule::out_relative) == 1 &&
                static_cast<int>(Tolerance::Rule::abs_or_rel) == 2);
  int rule = static_cast<int>(tol.rule);
  CUdeviceptr o = out.addr, r = ref.addr, res = compare_result_.addr;
  void* params[] = {&o, &r, &n, &atol, &rtol, &rule, &forbid, &res};
  auto blocks = static_cast<unsigned>(
      std::min<std::size_t>((count + kRuntimeBlock - 1) / kRuntimeBlock, 4096));
  check(api_.cuLaunchKernel(f, blocks, 1, 1, kRuntimeBlock, 1, 1, 0, stream_, params, nullptr),
        "cuLaunchKernel", "output comparison");
  CompareResult got;
  download(&got, compare_result_, sizeof got);
  st.mismatches = got.mismatches;
  st.nonfinite_outputs = got.nonfinite_outputs;
  st.nonfinite_reference = got.nonfinite_reference;
  st.poisoned = got.poisoned;
  st.max_abs_error = bits_to_double(got.max_abs_bits);
  st.max_rel_error = bits_to_double(got.max_rel_bits);
  if (got.first_bad != ~0ULL) {
    st.first_bad_index = static_cast<std::int64_t>(got.first_bad);
    unsigned char ov[8] = {}, rv[8] = {};
    download(ov, Buffer{out.addr + got.first_bad * esize, esize}, esize);
    download(rv, Buffer{ref.addr + got.first_bad * esize, esize}, esize);
    st.first_bad_out = load_element(ov, dtype, 0);
    st.first_bad_ref = load_element(rv, dtype, 0);
  }
  return st;
}

std::uint64_t CudaDevice::digest(Buffer b, std::size_t bytes) {
  require_usable();
  bytes = std::min(bytes, b.bytes);
  const std::size_t words = bytes / 8;
  std::uint64_t sum = 0;
  if (words > 0) {
    CUfunction f = runtime_kernel("ks_digest");
    make_current();
    check(api_.cuMemsetD8Async(digest_result_.addr, 0, sizeof(std::uint64_t), stream_), "cuMemsetD8Async",
          "digest setup");
    CUdeviceptr p = b.addr, res = digest_result_.addr;
    unsigned long long n = words, key = digest_key_;
    void* params[] = {&p, &n, &key, &res};
    auto blocks = static_cast<unsigned>(std::min<std::size_t>((words + kRuntimeBlock - 1) / kRuntimeBlock, 4096));
    check(api_.cuLaunchKernel(f, blocks, 1, 1, kRuntimeBlock, 1, 1, 0, stream_, params, nullptr),
          "cuLaunchKernel", "input digest");
    download(&sum, digest_result_, sizeof sum);
  }
  if (bytes % 8) {  // the last, partial word: its term on the host
    unsigned char tail[8] = {};
    download(tail, Buffer{b.addr + words * 8, bytes % 8}, bytes % 8);
    sum += digest_sum(tail, bytes % 8, digest_key_, words);
  }
  return digest_finish(sum, digest_key_, bytes);
}

void CudaDevice::flush_cache() {
  require_usable();
  make_current();
  if (!flush_buffer_) {
    // Twice the L2, so no line of the last run survives the writes.
    std::size_t bytes = std::max<std::size_t>(2 * static_cast<std::size_t>(info_.l2_bytes), 8u << 20);
    flush_buffer_ = alloc(bytes);
  }
  check(api_.cuMemsetD32Async(flush_buffer_.addr, ++flush_value_, flush_buffer_.bytes / 4, stream_),
        "cuMemsetD32Async", "L2 flush");
}

void CudaDevice::synchronize() {
  require_usable();
  make_current();
  check(api_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
}

std::unique_ptr<Program> CudaDevice::load(const Artifact& artifact, const Solution& solution) {
  require_usable();
  if (language_is_python(artifact.language)) {
    python::PythonDevice d;
    d.kind = python::PythonDevice::Kind::cuda;
    d.share = [this](const Buffer& b) { return share(b); };
    d.visible_devices = visible_devices_;
    d.synchronize = [this] { synchronize(); };
    return python::load_python_program(artifact, python_, d);
  }
  return std::make_unique<CudaProgram>(*this, artifact, solution);
}

python::CudaShare CudaDevice::share(const Buffer& b) {
  require_usable();
  make_current();
  auto it = allocations_.upper_bound(b.addr);
  if (it == allocations_.begin())
    throw RunError(Failure{EvalStatus::runtime_error, "a tensor is no buffer of the evaluator"});
  --it;
  const CUdeviceptr base = it->first;
  Allocation& a = it->second;
  if (b.addr + b.bytes > base + a.bytes)
    throw RunError(Failure{EvalStatus::runtime_error, "a tensor is no buffer of the evaluator"});
  if (a.handle && a.fd < 0) {
    int fd = -1;
    check(api_.cuMemExportToShareableHandle(&fd, a.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
          "cuMemExportToShareableHandle", "sharing a buffer with a Python candidate");
    // For the candidate's process only, by SCM_RIGHTS: never inherited.
    a.fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    ::close(fd);
    if (a.fd < 0)
      throw RunError(Failure{EvalStatus::runtime_error,
                             fmt::format("cannot keep a CUDA allocation's descriptor: {}", std::strerror(errno))});
  } else if (!a.handle && a.ipc.empty()) {
    if (!api_.cuIpcGetMemHandle)
      throw RunError(Failure{EvalStatus::runtime_error,
                             "this CUDA driver has neither virtual memory management nor cuIpcGetMemHandle, one of "
                             "which Python candidates need"});
    CUipcMemHandle h{};
    check(api_.cuIpcGetMemHandle(&h, base), "cuIpcGetMemHandle", "sharing a buffer with a Python candidate");
    for (char c : h.reserved) a.ipc += fmt::format("{:02x}", static_cast<unsigned char>(c));
  }
  return python::CudaShare{.serial = a.serial,
                           .fd = a.fd,
                           .size = a.mapped,
                           .ipc = a.ipc,
                           .offset = static_cast<std::size_t>(b.addr - base)};
}

}  // namespace ks::eval::cuda
