// Kernel sources and prompt text of the KernelBench tasks, kept as ordinary
// files beside this header (kernels/, prompt/) and compiled into the library
// by CMake (ks_embed_files, cmake/KsEmbed.cmake).
#pragma once

#include <string_view>

namespace ks::tasks::kernelbench::embedded {

extern const std::string_view kb_ref_elementwise_cu;
extern const std::string_view kb_start_elementwise_cu;
extern const std::string_view kb_ref_scale_cu;
extern const std::string_view kb_start_scale_cu;
extern const std::string_view kb_start_diag_matmul_cu;
extern const std::string_view kb_ref_gemm_cu;
extern const std::string_view kb_start_gemm_cu;
extern const std::string_view kb_start_matvec_cu;
extern const std::string_view kb_ref_rows_cu;
extern const std::string_view kb_start_softmax_cu;
extern const std::string_view kb_start_layer_norm_cu;
extern const std::string_view kb_ref_axis_cu;
extern const std::string_view kb_start_reduce_axis_cu;
extern const std::string_view kb_start_rms_norm_cu;
extern const std::string_view kb_start_cumsum_cu;
extern const std::string_view kb_ref_conv2d_cu;
extern const std::string_view kb_start_conv2d_cu;
extern const std::string_view kb_contract_md;

}  // namespace ks::tasks::kernelbench::embedded
