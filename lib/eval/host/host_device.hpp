// The host backend: candidates are C++ functions compiled by the system
// compiler into a shared object and called on the CPU through generated
// typed shims (docs/launch-plan.md, "Host C++: the call plan").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "eval/backend.hpp"
#include "eval/host/candidate_process.hpp"

namespace ks::eval::host {

// What the host CPU is, read once from the operating system.
struct CpuFacts {
  std::string model;          // "AMD EPYC 7B13"
  std::string arch;           // "x86-64", "aarch64"
  int threads = 1;            // hardware threads available to this process
  double max_ghz = 0;         // highest clock found (cpufreq or /proc/cpuinfo)
  int flops_per_cycle = 16;   // per thread, fp32, from the widest vector FMA the CPU has
  double peak_ops_per_cycle = 64;  // per thread, at the fastest precision it has (see host_peak_ops_per_cycle)
  std::string peak_basis;          // what that figure assumes, for messages
  std::int64_t llc_bytes = 0; // last-level cache as seen by one CPU
  std::int64_t memory_bytes = 0;
  std::string isa_flags;      // the CPU's feature flags, for the compile cache key
  std::string features;       // the vector and matrix extensions among them, for prompts ("AVX2 FMA AVX-512F")
  std::string caches;         // the caches cpu0 sees, for prompts ("L1d 48 KiB, L2 2 MiB, L3 105 MiB")
};
const CpuFacts& cpu_facts();

// Arithmetic operations per cycle per hardware thread at the fastest
// precision the CPU's feature flags (/proc/cpuinfo) offer, for the
// speed-of-light bound: AMX int8 (2048) or bf16 (1024) tiles, AVX-512 VNNI
// int8 dot products (256), AVX-512 BF16 (128), AVX-VNNI (128); and never
// less than 4x the fp32 FMA rate, since packed 8- and 16-bit dot products
// (pmaddubsw, sdot) do up to four times the operations of an fp32 FMA per
// instruction. A kernel may use any of them for a task that tolerates it, so
// the bound must assume the fastest. `basis` says which was taken.
double host_peak_ops_per_cycle(const std::string& isa_flags, int fp32_flops_per_cycle, std::string* basis = nullptr);

// Facts for the manifest and the speed-of-light bound. peak_flops is a
// deliberate over-estimate (every hardware thread at the highest clock
// doing host_peak_ops_per_cycle every cycle) so that no honest kernel is rejected;
// peak_bytes_per_s is 0 (unknown): a CPU's private caches keep data a flush
// of the shared cache cannot evict, so bytes give no hard bound here.
// `candidate_process`: candidates run in a process of their own (the worker's
// way), so a timed call includes a round trip to it; the device's timing
// note says so.
DeviceInfo host_device_info(bool candidate_process = true);

// The extensions of `isa_flags` (/proc/cpuinfo "flags" or "Features") a
// kernel writer cares about, in a fixed order: "SSE4.2 AVX AVX2 FMA ...".
std::string cpu_features_text(const std::string& isa_flags);

class HostDevice final : public Device {
 public:
  HostDevice();
  // Every program it loads runs in a process of its own, started with
  // `isolate` (the run worker's way; candidate_process.hpp).
  explicit HostDevice(CandidateProcessOptions isolate);
  ~HostDevice() override;
  DeviceInfo info() const override;
  Buffer alloc(std::size_t bytes) override;
  void free(Buffer b) override;
  void upload(Buffer dst, const void* src, std::size_t bytes) override;
  void download(void* dst, Buffer src, std::size_t bytes) override;
  void copy(Buffer dst, Buffer src, std::size_t bytes) override;
  void generate(Buffer b, DType dtype, std::size_t count, Distribution::Kind kind, double p0, double p1,
                std::uint64_t seed, std::uint64_t stream) override;
  void poison(Buffer b, std::size_t bytes) override;
  CompareStats compare(Buffer out, Buffer ref, DType dtype, std::size_t count,
                       const Tolerance& tol) override;
  std::uint64_t digest(Buffer b, std::size_t bytes) override;
  // Evicts the evaluation's buffers from every cache level: on x86-64,
  // CLFLUSH of each cache line of every live allocation (the inputs, the
  // outputs and the plan's scratch, which is what a kernel reads), when they
  // total at most twice the last-level cache; otherwise, and elsewhere, one
  // byte per cache line of a buffer twice the size of the last-level cache
  // is read and written with ordinary stores (memset may use streaming
  // stores that bypass the cache and evict nothing). The first costs
  // microseconds for the usual workload instead of tens of milliseconds, so
  // the timing budget buys many more calls (docs/evaluation.md, "Timing").
  void flush_cache() override;
  void synchronize() override {}
  void label(Buffer b, std::string_view name) override;
  std::unique_ptr<Program> load(const Artifact& artifact, const Solution& solution) override;

 private:
  void flush_by_writing();
  std::map<std::uint64_t, std::size_t> live_;  // address -> bytes of each allocation not yet freed
  std::size_t live_bytes_ = 0;
  unsigned char* flush_buf_ = nullptr;
  std::size_t flush_bytes_ = 0;
  int flush_pid_ = 0;  // the process that mapped flush_buf_
  std::optional<CandidateProcessOptions> isolate_;
};

// The host Program: the shared object plus its call plan (host_program.cpp),
// run in a process of its own when `isolate` is given, else in this one.
std::unique_ptr<Program> load_host_program(const Artifact& artifact, const Solution& solution,
                                           const CandidateProcessOptions* isolate = nullptr);

}  // namespace ks::eval::host
