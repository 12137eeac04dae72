// The CUDA backend's entry points, used by the evaluation flow and the worker.
// Everything CUDA is reached through dlopen (cuda_api), so nothing here needs
// a driver at link time; on a machine without one these functions report
// Status::no_device with the reason.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "eval/backend.hpp"
#include "eval/host/candidate_process.hpp"

namespace ks::eval {

struct CudaCompilerOptions {
  std::string arch;                        // "sm_90a"; empty = detect from device 0, else error
  std::vector<std::string> include_dirs;   // extra include folders (the toolkit's are added)
  std::string cache_dir;                   // content-addressed cubin cache; empty = default
  bool use_pch = true;                     // NVRTC automatic precompiled headers (-pch)
  std::string pch_dir;                     // empty = <cache_dir>/pch
};

// True when a driver loads and at least one device is visible; otherwise false
// and *why says what is missing ("libcuda.so.1 not found", "no CUDA device").
bool cuda_probe(std::string* why = nullptr);

// How many CUDA devices the driver reports (after CUDA_VISIBLE_DEVICES).
// Throws ks::Error(Status::no_device) when no driver or device is usable.
int cuda_device_count();

// The driver's CUDA version (cuDriverGetVersion), e.g. 13000.
int cuda_driver_version();

// The architecture NVRTC should target for a device, e.g. "sm_90a" on Hopper.
// Throws ks::Error(Status::no_device).
std::string cuda_device_arch(int ordinal);

// Opens device `ordinal` (after CUDA_VISIBLE_DEVICES) with its own context
// and stream. Throws ks::Error(Status::no_device).
// Python candidates on it start their processes with `python`. Its own
// kernels come from the cubin cache `kernel_cache` (empty: the default one).
std::unique_ptr<Device> make_cuda_device(int ordinal, const host::CandidateProcessOptions& python = {},
                                         const std::string& kernel_cache = {});

// The compile request for a device's own kernels on `arch`.
CompileRequest cuda_runtime_kernels_request(const std::string& arch);

// Compiles a device's own kernels for `arch` into the cubin cache
// `cache_dir` in this process, unless they are there (once per process,
// cache folder and architecture). The evaluator does this before it starts
// a CUDA run worker, which reads that folder but may not write it; no
// compile worker (which sees candidates' sources) may write it either.
// Failures are left to the run worker, which compiles them itself then and
// reports what is wrong.
void ensure_cuda_runtime_kernels(const std::string& arch, const std::string& cache_dir);

// NVRTC-based compiler; usable without a GPU when options.arch is set.
// Throws ks::Error(Status::no_device) when NVRTC cannot be loaded.
std::unique_ptr<Compiler> make_cuda_compiler(const CudaCompilerOptions& options);

}  // namespace ks::eval
