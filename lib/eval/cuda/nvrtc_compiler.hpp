// The NVRTC compiler of the CUDA backend: a solution's sources plus its
// tunable parameter values become a cubin for one architecture, stored in a
// content-addressed cache so that a repeated candidate compiles once.
//
// Meant to live in a long-lived compile worker: NVRTC's automatic
// precompiled headers (-pch) are kept per process, so the first candidate
// that includes a set of toolkit headers pays for parsing them and later ones
// reuse the result. A process killed mid-compile leaves no partial cache
// entry (writes are atomic) and its PCH folder is removed by the next
// compiler that starts.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "eval/cuda/cuda_backend.hpp"
#include "eval/cuda/cubin.hpp"
#include "eval/cuda/launch_plan.hpp"

namespace ks::eval::cuda {

// The translation unit NVRTC compiles for a solution.
struct ProgramSource {
  std::string name;  // the first .cu file's path, e.g. "kernel.cu": compiler messages use it
  std::string text;
  std::vector<std::pair<std::string, std::string>> headers;  // every file, includable by its path
};

// Joins a solution's files into one translation unit: files named *.h, *.cuh,
// *.hpp, *.hh, *.inc are headers (compiled only where included); the others
// are concatenated in order, each marked with #line so messages point at the
// right file and line. Parameter values become #define lines placed after the
// leading block of system #includes of the first file, so that the headers'
// precompiled form does not depend on them. Throws ks::Error(invalid_argument).
ProgramSource assemble_source(const std::vector<SourceFile>& files,
                              const std::map<std::string, std::int64_t>& params);

// Where a plan's kernel names lead in a module: the lowered name of a name
// expression, an exact symbol, or a C++ kernel by its unmangled name.
KernelCatalog module_catalog(const std::vector<CubinKernel>& kernels,
                             const std::map<std::string, std::string>& lowered_names);

// True for names a plan may use without a name expression ("row_softmax").
bool is_plain_identifier(const std::string& name);

// The name expressions NVRTC is given for a plan: its kernel names that are
// not plain identifiers ("gemm<128, 64>"), in order of first appearance.
std::vector<std::string> name_expressions_of(const LaunchPlan* plan);

class CudaCompiler final : public Compiler {
 public:
  explicit CudaCompiler(CudaCompilerOptions options);

  // Throws CompileError for a candidate that does not compile or whose plan
  // does not match the module; ks::Error when NVRTC itself cannot work.
  Artifact compile(const CompileRequest& request) override;

  // The options NVRTC receives for a request (precompiled-header options
  // excluded: they change how fast, not what, NVRTC compiles).
  std::vector<std::string> nvrtc_options(const CompileRequest& request, const std::string& arch) const;
  std::string arch_for(const CompileRequest& request) const;
  std::string cache_dir_for(const CompileRequest& request) const;

  struct Counters {
    int compiled = 0;      // NVRTC runs
    int cache_hits = 0;
    int pch_created = 0;   // compilations that wrote a precompiled header
    int pch_used = 0;      // compilations that read one
  };
  Counters counters() const;

 private:
  struct Outcome;
  Outcome run_nvrtc(const ProgramSource& src, const std::vector<std::string>& options,
                    const std::vector<std::string>& name_exprs, const std::string& cache_dir,
                    double timeout_s);
  std::string pch_dir_for(const std::string& cache_dir);

  CudaCompilerOptions options_;
  std::size_t pch_heap_wanted_ = 0;  // a larger PCH heap to set before the next compilation
  std::atomic<int> compiled_{0}, cache_hits_{0}, pch_created_{0}, pch_used_{0};
};

}  // namespace ks::eval::cuda
