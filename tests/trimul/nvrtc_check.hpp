// Test-only: compiles CUDA sources with NVRTC for sm_90a (no GPU needed) and
// lists the kernels of the result, to check that every kernel shipped with
// gpumode/trimul builds and that its launch plan matches the module. NVRTC is
// opened with dlopen, as the library does, so the test skips cleanly where
// the toolkit is missing.
#pragma once

#include <string>
#include <vector>

#include "ksearch/json.hpp"

namespace ks::test {

struct PtxKernel {
  std::string name;
  std::vector<int> param_bytes;  // one entry per kernel parameter
};

struct NvrtcOutcome {
  bool ok = false;
  std::string log;                 // compiler and ptxas messages
  std::vector<PtxKernel> kernels;  // entry points, from the PTX
  std::size_t cubin_bytes = 0;
};

// False (with the reason) when libnvrtc cannot be loaded.
bool nvrtc_available(std::string* why = nullptr);

// Compiles `source` for sm_90a with -std=c++17, the toolkit's include folder
// and `options` (e.g. {"-DBM=128"}); asks ptxas for resource usage (-v).
NvrtcOutcome nvrtc_compile(const std::string& source, const std::string& file_name,
                           const std::vector<std::string>& options = {});

// The problems of `plan` against the module's kernels: names no kernel of
// the module, or passes a different number of arguments than the kernel
// takes (top level and every variant). Empty when the plan fits.
std::vector<std::string> plan_mismatches(const Json& plan, const std::vector<PtxKernel>& kernels);

}  // namespace ks::test
