// Files the CUDA backend compiles with NVRTC at run time, compiled into the
// library (CMakeLists.txt embeds them with ks_embed_files).
#pragma once

#include <string_view>

namespace ks::eval::cuda::embedded {

extern const std::string_view runtime_kernels;  // kernels/runtime.cu
extern const std::string_view rng_header;       // lib/core/rng/ks_rng.h

}  // namespace ks::eval::cuda::embedded
