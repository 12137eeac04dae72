// The CUDA evaluation device (one GPU: its primary context and one stream)
// and the programs it loads (a cubin plus its launch plan).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "eval/backend.hpp"
#include "eval/cuda/cublaslt.hpp"
#include "eval/cuda/cuda_api.hpp"
#include "eval/cuda/launch_plan.hpp"
#include "eval/cuda/launcher.hpp"
#include "eval/host/candidate_process.hpp"
#include "eval/python/python_program.hpp"

namespace ks::eval::cuda {

// Peak figures for the speed-of-light bound, and where they came from.
struct PeakFigures {
  double flops = 0;          // highest dense tensor-core rate the chip offers, per second
  double bytes_per_s = 0;    // DRAM bandwidth
  std::string source;        // "driver attributes" or "table of known parts: ..."
};

// Generous peaks for compute capability `cc_major.cc_minor` (see cuda_device.cpp).
PeakFigures estimate_peaks(const std::string& name, int cc_major, int cc_minor, int sm_count,
                           double sm_clock_khz, double mem_clock_khz, int bus_width_bits);

// "sm_90a" for Hopper, "sm_100a" for Blackwell, "sm_86" for others: the
// architecture-specific target where one exists, so candidates may use every
// instruction of the chip (wgmma, setmaxnreg, tcgen05, ...).
std::string arch_for_capability(int cc_major, int cc_minor);

// The compile request for the device's own kernels (input generation,
// poisoning, comparison): the same on both sides, so the cubin a compile
// worker stores is the one a sandboxed run worker, which may not write the
// cache, finds there.
CompileRequest runtime_kernels_request(const std::string& arch);

class CudaDevice final : public Device {
 public:
  // Python candidates (eval/python/) start their processes with `python`.
  // `kernel_cache` is the cubin cache the runtime kernels are read from (and
  // written to when it is writable); empty: the default cache.
  explicit CudaDevice(int ordinal, host::CandidateProcessOptions python = {}, std::string kernel_cache = {});
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  DeviceInfo info() const override { return info_; }
  Buffer alloc(std::size_t bytes) override;
  void free(Buffer b) override;
  void upload(Buffer dst, const void* src, std::size_t bytes) override;
  void download(void* dst, Buffer src, std::size_t bytes) override;
  void copy(Buffer dst, Buffer src, std::size_t bytes) override;
  void generate(Buffer b, DType dtype, std::size_t count, Distribution::Kind kind, double p0,
                double p1, std::uint64_t seed, std::uint64_t stream) override;
  void poison(Buffer b, std::size_t bytes) override;
  CompareStats compare(Buffer out, Buffer ref, DType dtype, std::size_t count,
                       const Tolerance& tol) override;
  std::uint64_t digest(Buffer b, std::size_t bytes) override;
  void flush_cache() override;
  void synchronize() override;
  void label(Buffer b, std::string_view name) override;
  std::unique_ptr<Program> load(const Artifact& artifact, const Solution& solution) override;
  // "cuda_ipc" tensors are mapped once per allocation (cuIpcOpenMemHandle)
  // and stay mapped until the device goes; "file" tensors as any device.
  Buffer open_external(const ExternalTensor& t) override;
  void release_external(Buffer b, const ExternalTensor& t) override;
  void keep_only_externals(const std::set<std::string>& handles) override;
  // The allocation that holds `b`, as a Python candidate's process maps it:
  // a POSIX descriptor where the device has virtual memory management
  // (every allocation is then made with cuMemCreate), else a legacy IPC handle.
  python::CudaShare share(const Buffer& b);
  bool usable() const override { return sticky_error_.empty(); }

  // Every allocation is followed by a redzone of kRedzoneBytes filled with
  // kRedzoneByte; a kernel that writes past the end of a buffer changes it.
  static constexpr std::size_t kRedzoneBytes = 4096;
  // The device-side malloc heap of every context (CU_LIMIT_MALLOC_HEAP_SIZE).
  static constexpr std::size_t kDeviceMallocHeapBytes = std::size_t{4} << 20;
  static constexpr unsigned char kRedzoneByte = 0xA5;
  // "" when the redzone after `b` is intact; otherwise what was overwritten:
  // "wrote past the end of output \"y\" (12 bytes beyond its 4004 bytes)".
  std::string check_redzone(Buffer b);

  const DeviceLimits& limits() const { return limits_; }
  const PeakFigures& peaks() const { return peaks_; }
  CUstream stream() const { return stream_; }
  // Makes this device's context current on the calling thread.
  void make_current() const;
  // Like cuda::check, and remembers a sticky error: afterwards every call
  // fails at once with RunError(crashed), since the context is unusable.
  void check(CUresult r, const char* call, std::string_view what = {});
  // Throws RunError(crashed) when an earlier call hit a sticky error.
  void require_usable() const;

 private:
  void load_runtime_kernels();
  CUfunction runtime_kernel(const std::string& name);

  const DriverApi& api_;
  int ordinal_ = 0;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  DeviceInfo info_;
  DeviceLimits limits_;
  PeakFigures peaks_;
  std::string sticky_error_;
  struct Allocation {
    std::size_t bytes = 0;
    std::string label;
    std::size_t mapped = 0;  // the size reserved and mapped (whole blocks)
    std::uint64_t serial = 0;
    CUmemGenericAllocationHandle handle = 0;  // cuMemCreate's (vmm_), else 0
    int fd = -1;             // its exported descriptor, once a Python candidate needed it
    std::string ipc;         // its legacy IPC handle (hex), likewise
  };
  // Allocations with cuMemCreate, exportable as POSIX descriptors.
  bool vmm_ = false;
  std::size_t block_bytes_ = std::size_t{2} << 20;  // allocations take whole blocks (VMM granularity)
  std::uint64_t next_serial_ = 1;
  std::string visible_devices_;  // "GPU-<uuid>": this device alone, for Python candidates
  void release(CUdeviceptr base, Allocation& a);
  // An allocation on this device, exportable as a POSIX descriptor.
  CUmemAllocationProp vmm_properties() const;
  std::map<CUdeviceptr, Allocation> allocations_;  // live buffers, for their redzones
  std::map<std::string, CUdeviceptr> ipc_mappings_;  // by IPC handle (hex): another process's memory
  host::CandidateProcessOptions python_;

  std::string kernel_cache_;
  std::once_flag runtime_once_;
  CUmodule runtime_module_ = nullptr;
  std::map<std::string, CUfunction> runtime_functions_;
  Buffer compare_result_;
  Buffer digest_result_;  // one 64-bit sum
  Buffer flush_buffer_;
  unsigned flush_value_ = 0;
};

class CudaProgram final : public Program {
 public:
  CudaProgram(CudaDevice& device, const Artifact& artifact, const Solution& solution);
  ~CudaProgram() override;
  CudaProgram(const CudaProgram&) = delete;
  CudaProgram& operator=(const CudaProgram&) = delete;

  void bind(const Bindings& b) override;
  void launch() override;
  void synchronize() override;
  double timed_launch() override;
  void poison_scratch() override;

  const ResolvedPlan& resolved() const { return resolved_; }

 private:
  using Function = ModuleFunction;
  struct Launch {
    Function* function = nullptr;
    std::unique_ptr<GemmStep> gemm;  // a GEMM step instead of a kernel
    std::vector<std::array<unsigned char, 8>> values;
    std::vector<void*> params;
  };
  Function* function_for(const std::string& plan_name);
  std::unique_ptr<GemmStep> bind_gemm(const ResolvedGemm& g, const std::string& step,
                                      const std::function<Buffer(const std::string&)>& buffer_of);
  void enqueue(bool check_each);
  void free_scratch();
  std::string kernel_list() const;

  CudaDevice& device_;
  CUmodule module_ = nullptr;
  LaunchPlan plan_;
  std::map<std::string, std::string> symbols_;  // plan name -> symbol
  std::vector<CubinKernel> cubin_kernels_;
  std::map<std::string, Function> functions_;   // by symbol
  ResolvedPlan resolved_;
  std::map<std::string, Buffer> scratch_;
  std::vector<Buffer> bound_tensors_;  // their redzones are checked after every checked run
  std::vector<Launch> launches_;
  std::unique_ptr<CublasLtHandle> cublas_;  // made at the first bind with a GEMM step
  Buffer gemm_workspace_;
  bool bound_ = false;
  bool checked_run_done_ = false;
  CUevent start_ = nullptr, stop_ = nullptr;
};

}  // namespace ks::eval::cuda
