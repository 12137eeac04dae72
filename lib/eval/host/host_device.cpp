#include "eval/host/host_device.hpp"
#include "eval/python/python_program.hpp"

#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <math.h>  // ks_rng.h calls log, sqrt, cos, tan, floor unqualified

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "core/inputs.hpp"
#include "core/rng/ks_rng.h"
#include "eval/compare.hpp"
#include "eval/digest.hpp"
#include "eval/host/guarded_memory.hpp"

namespace ks::eval::host {
namespace {

std::string trim(std::string s) {
  auto b = s.find_first_not_of(" \t\n");
  auto e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "32768K" / "1M" as in /sys/devices/system/cpu/cpu0/cache/index*/size.
std::int64_t parse_size(const std::string& s) {
  if (s.empty()) return 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (end && (*end == 'K' || *end == 'k')) v *= 1024;
  else if (end && (*end == 'M' || *end == 'm')) v *= 1024 * 1024;
  return v;
}

std::string size_text(std::int64_t bytes);

CpuFacts read_cpu_facts() {
  CpuFacts f;
  f.threads = std::max(1u, std::thread::hardware_concurrency());
  // /proc/cpuinfo: model, flags and the current clock (an upper bound is
  // wanted, so take the largest seen and add turbo headroom below).
  std::istringstream info(read_text("/proc/cpuinfo"));
  double mhz = 0;
  for (std::string line; std::getline(info, line);) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (f.model.empty() && (key == "model name" || key == "Model" || key == "CPU part")) f.model = value;
    if (f.isa_flags.empty() && (key == "flags" || key == "Features")) f.isa_flags = value;
    if (key == "cpu MHz") mhz = std::max(mhz, std::atof(value.c_str()));
  }
  std::string max_khz = trim(read_text("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"));
  if (!max_khz.empty()) mhz = std::max(mhz, std::atof(max_khz.c_str()) / 1000.0);
  // Without a cpufreq maximum, allow for boost clocks well above the base.
  f.max_ghz = mhz > 0 ? std::max(mhz / 1000.0 * (max_khz.empty() ? 1.6 : 1.0), 1.0) : 5.0;
  utsname u{};
  if (::uname(&u) == 0) f.arch = u.machine;
  if (f.arch == "x86_64") f.arch = "x86-64";
  // fp32 FLOPs per cycle per thread, assuming two FMA pipes of the widest width.
  auto has = [&](const char* flag) {
    std::string needle = std::string(" ") + flag + " ";
    return (" " + f.isa_flags + " ").find(needle) != std::string::npos;
  };
  if (has("avx512f")) f.flops_per_cycle = 64;
  else if (has("avx2") || has("fma") || has("avx")) f.flops_per_cycle = 32;
  else if (has("sve")) f.flops_per_cycle = 64;
  else f.flops_per_cycle = 16;
  f.peak_ops_per_cycle = host_peak_ops_per_cycle(f.isa_flags, f.flops_per_cycle, &f.peak_basis);
  // The last-level cache one CPU sees (sysconf reports a whole-package figure
  // on some virtual machines, which would make every flush huge).
  for (int idx = 0; idx < 8; ++idx) {
    std::string base = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", idx);
    std::string type = trim(read_text(base + "type"));
    if (type.empty()) continue;
    const std::int64_t size = parse_size(trim(read_text(base + "size")));
    if (type != "Instruction" && size > 0) {
      const std::string level = trim(read_text(base + "level"));
      f.caches += fmt::format("{}L{}{} {}", f.caches.empty() ? "" : ", ", level.empty() ? "?" : level,
                              type == "Data" ? "d" : "", size_text(size));
    }
    if (type == "Instruction") continue;
    f.llc_bytes = std::max(f.llc_bytes, size);
  }
  f.features = cpu_features_text(f.isa_flags);
  if (f.llc_bytes <= 0) {
    long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
    f.llc_bytes = l3 > 0 ? l3 : 32l << 20;
  }
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  f.memory_bytes = pages > 0 && page > 0 ? static_cast<std::int64_t>(pages) * page : 0;
  if (f.model.empty()) f.model = "unknown CPU";
  return f;
}

std::string size_text(std::int64_t bytes) {
  if (bytes >= (std::int64_t{1} << 20) && bytes % (std::int64_t{1} << 20) == 0)
    return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (std::int64_t{1} << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
  return fmt::format("{} KiB", bytes >> 10);
}

// Fills [begin, end) of a `dtype` array with generated values.
void generate_range(void* data, DType dtype, std::size_t begin, std::size_t end, int kind, double p0,
                    double p1, std::uint64_t seed, std::uint64_t stream) {
  switch (dtype) {
    case DType::f32: {
      auto* p = static_cast<float*>(data);
      for (std::size_t i = begin; i < end; ++i)
        p[i] = static_cast<float>(ks_rng_value(kind, p0, p1, seed, stream, i));
      return;
    }
    case DType::f64: {
      auto* p = static_cast<double*>(data);
      for (std::size_t i = begin; i < end; ++i) p[i] = ks_rng_value(kind, p0, p1, seed, stream, i);
      return;
    }
    default:
      for (std::size_t i = begin; i < end; ++i)
        store_element(data, dtype, i, ks_rng_value(kind, p0, p1, seed, stream, i));
  }
}

}  // namespace

double host_peak_ops_per_cycle(const std::string& isa_flags, int fp32_flops_per_cycle, std::string* basis) {
  auto has = [&](const char* flag) {
    return (" " + isa_flags + " ").find(std::string(" ") + flag + " ") != std::string::npos;
  };
  struct Unit {
    const char* flag;
    double ops;
    const char* what;
  };
  // Per cycle per thread, two units where the core has two; rounded up.
  static const Unit units[] = {{"amx_int8", 2048, "AMX int8 tiles"},
                               {"amx_bf16", 1024, "AMX bf16 tiles"},
                               {"avx512_vnni", 256, "AVX-512 VNNI int8 dot products"},
                               {"avx512_bf16", 128, "AVX-512 BF16 dot products"},
                               {"avx_vnni", 128, "AVX-VNNI int8 dot products"}};
  double best = 4.0 * fp32_flops_per_cycle;
  std::string why = fmt::format("4 x the fp32 FMA rate of {} FLOP/cycle (packed 8/16-bit dot products)",
                                fp32_flops_per_cycle);
  for (const auto& u : units)
    if (has(u.flag) && u.ops > best) {
      best = u.ops;
      why = u.what;
    }
  if (basis) *basis = fmt::format("{} ops/cycle per thread: {}", best, why);
  return best;
}

std::string cpu_features_text(const std::string& isa_flags) {
  struct Ext {
    const char* flag;
    const char* name;
  };
  // x86 flags, then Arm's (/proc/cpuinfo "Features").
  static const Ext exts[] = {{"sse4_2", "SSE4.2"},       {"avx", "AVX"},
                             {"avx2", "AVX2"},           {"fma", "FMA"},
                             {"f16c", "F16C"},           {"avx512f", "AVX-512F"},
                             {"avx512bw", "AVX-512BW"},  {"avx512vl", "AVX-512VL"},
                             {"avx512_vnni", "AVX-512 VNNI"}, {"avx512_bf16", "AVX-512 BF16"},
                             {"avx512_fp16", "AVX-512 FP16"}, {"avx_vnni", "AVX-VNNI"},
                             {"amx_bf16", "AMX-BF16"},   {"amx_int8", "AMX-INT8"},
                             {"asimd", "NEON (ASIMD)"},  {"asimdhp", "NEON FP16"},
                             {"asimddp", "NEON dot product"}, {"sve", "SVE"},
                             {"sve2", "SVE2"},           {"i8mm", "I8MM"},
                             {"bf16", "BF16"}};
  const std::string padded = " " + isa_flags + " ";
  std::string out;
  for (const auto& e : exts)
    if (padded.find(std::string(" ") + e.flag + " ") != std::string::npos) out += (out.empty() ? "" : " ") + std::string(e.name);
  return out;
}

const CpuFacts& cpu_facts() {
  static const CpuFacts facts = read_cpu_facts();
  return facts;
}

DeviceInfo host_device_info(bool candidate_process) {
  const CpuFacts& f = cpu_facts();
  DeviceInfo d;
  d.backend = "host";
  d.name = f.model;
  d.arch = f.arch;
  d.count = 1;
  d.compute_units = f.threads;
  d.clock_ghz = f.max_ghz;
  d.features = f.features;
  d.caches = f.caches;
  // docs/evaluation.md ("Host candidates run in a process of their own")
  // measured the round trip: 50-100 us on a 2-core machine, 29 us on a server.
  d.timing = candidate_process
                 ? "a steady clock around each call of your code, which runs in a process of its own: every timed "
                   "call includes a round trip to that process of roughly 30-100 us, so a call shorter than about "
                   "0.1 ms is measured mostly as that round trip. Outputs are filled with a poison pattern and the "
                   "last-level cache is flushed before every timed call."
                 : "a steady clock around each call of your code, in the evaluating process (no round trip). Outputs "
                   "are filled with a poison pattern and the last-level cache is flushed before every timed call.";
  d.peak_flops = static_cast<double>(f.threads) * f.max_ghz * 1e9 * f.peak_ops_per_cycle;
  d.peak_bytes_per_s = 0;
  d.l2_bytes = f.llc_bytes;
  d.memory_bytes = f.memory_bytes;
  return d;
}

HostDevice::HostDevice() = default;

HostDevice::HostDevice(CandidateProcessOptions isolate) : isolate_(std::move(isolate)) {}

HostDevice::~HostDevice() {
  if (flush_buf_ && flush_pid_ == ::getpid()) ::munmap(flush_buf_, flush_bytes_);
}

DeviceInfo HostDevice::info() const { return host_device_info(isolate_.has_value()); }

Buffer HostDevice::alloc(std::size_t bytes) {
  void* p = guarded_alloc(bytes);
  Buffer b{reinterpret_cast<std::uint64_t>(p), bytes};
  live_[b.addr] = bytes;
  live_bytes_ += bytes;
  return b;
}

void HostDevice::free(Buffer b) {
  if (auto it = live_.find(b.addr); it != live_.end()) {
    live_bytes_ -= it->second;
    live_.erase(it);
  }
  guarded_free(b.host_ptr());
}

void HostDevice::upload(Buffer dst, const void* src, std::size_t bytes) {
  std::memcpy(dst.host_ptr(), src, std::min(bytes, dst.bytes));
}

void HostDevice::download(void* dst, Buffer src, std::size_t bytes) {
  std::memcpy(dst, src.host_ptr(), std::min(bytes, src.bytes));
}

void HostDevice::copy(Buffer dst, Buffer src, std::size_t bytes) {
  std::memcpy(dst.host_ptr(), src.host_ptr(), std::min({bytes, dst.bytes, src.bytes}));
}

void HostDevice::generate(Buffer b, DType dtype, std::size_t count, Distribution::Kind kind, double p0,
                          double p1, std::uint64_t seed, std::uint64_t stream) {
  count = std::min(count, b.bytes / dtype_size(dtype));
  if (Distribution{kind}.structured()) {
    core::generate_values(b.host_ptr(), dtype, count, kind, p0, p1, seed, stream);
    return;
  }
  const int k = static_cast<int>(kind);
  // Elements are independent (counter-based RNG), so split large tensors.
  const std::size_t per_thread = 1u << 18;
  const std::size_t nthreads =
      std::min<std::size_t>(std::min(cpu_facts().threads, 16), (count + per_thread - 1) / per_thread);
  if (nthreads <= 1) {
    generate_range(b.host_ptr(), dtype, 0, count, k, p0, p1, seed, stream);
    return;
  }
  std::vector<std::thread> pool;
  const std::size_t chunk = (count + nthreads - 1) / nthreads;
  for (std::size_t t = 0; t < nthreads; ++t) {
    std::size_t begin = t * chunk, end = std::min(count, begin + chunk);
    if (begin >= end) break;
    pool.emplace_back(generate_range, b.host_ptr(), dtype, begin, end, k, p0, p1, seed, stream);
  }
  for (auto& th : pool) th.join();
}

void HostDevice::label(Buffer b, std::string_view name) { set_guard_label(b.host_ptr(), name); }

void HostDevice::poison(Buffer b, std::size_t bytes) {
  std::memset(b.host_ptr(), 0xFF, std::min(bytes, b.bytes));
}

CompareStats HostDevice::compare(Buffer out, Buffer ref, DType dtype, std::size_t count,
                                 const Tolerance& tol) {
  const std::size_t n = std::min({count, out.bytes / dtype_size(dtype), ref.bytes / dtype_size(dtype)});
  return compare_elements(out.host_ptr(), ref.host_ptr(), dtype, n, tol);
}

std::uint64_t HostDevice::digest(Buffer b, std::size_t bytes) {
  bytes = std::min(bytes, b.bytes);
  return digest_finish(digest_sum(b.host_ptr(), bytes, digest_key_, 0), digest_key_, bytes);
}

void HostDevice::flush_cache() {
#if defined(__x86_64__)
  const auto llc = static_cast<std::size_t>(std::max<std::int64_t>(cpu_facts().llc_bytes, 1 << 20));
  if (live_bytes_ <= 2 * llc) {
    // CLFLUSH writes a dirty line back and invalidates it in every cache of
    // the coherence domain, so the candidate's process (which maps the same
    // pages) reads them from memory. The fence orders the flushes before
    // the timed call that follows.
    for (const auto& [addr, bytes] : live_)
      for (std::uint64_t a = addr & ~std::uint64_t{63}; a < addr + bytes; a += 64)
        _mm_clflush(reinterpret_cast<const void*>(a));
    _mm_mfence();
    return;
  }
#endif
  flush_by_writing();
}

void HostDevice::flush_by_writing() {
  // MADV_DONTFORK: a process forked from this one (without exec) has the
  // pointer but not the pages, and allocates its own.
  if (flush_buf_ && flush_pid_ != ::getpid()) flush_buf_ = nullptr;
  if (!flush_buf_) {
    flush_pid_ = ::getpid();
    flush_bytes_ = static_cast<std::size_t>(2 * std::max<std::int64_t>(cpu_facts().llc_bytes, 1 << 20));
    void* m = ::mmap(nullptr, flush_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw RunError({EvalStatus::runtime_error, "cannot allocate the cache-flush buffer", true});
    // Not copied into the candidates' processes this worker starts: with its
    // pages in the page tables, every start took about 45 ms longer (fork
    // copies them), about 10 ms without.
    ::madvise(m, flush_bytes_, MADV_DONTFORK);
    flush_buf_ = static_cast<unsigned char*>(m);
    std::memset(flush_buf_, 0, flush_bytes_);
  }
  volatile unsigned char* p = flush_buf_;
  for (std::size_t i = 0; i < flush_bytes_; i += 64) p[i] = static_cast<unsigned char>(p[i] + 1);
}

std::unique_ptr<Program> HostDevice::load(const Artifact& artifact, const Solution& solution) {
  if (artifact.language == Language::python) {
    const CandidateProcessOptions options = isolate_ ? *isolate_ : CandidateProcessOptions{};
    return python::load_python_program(artifact, options, python::PythonDevice{});
  }
  if (artifact.language != Language::cpp)
    throw RunError({EvalStatus::runtime_error,
                    fmt::format("the host backend cannot run a {} artifact", to_string(artifact.language))});
  return load_host_program(artifact, solution, isolate_ ? &*isolate_ : nullptr);
}

}  // namespace ks::eval::host
