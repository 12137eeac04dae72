// Kernel sources, launch plans and the prompt of gpumode/trimul, kept as
// ordinary files beside this header (kernels/, prompt/) and compiled into the
// library by CMake (ks_embed_files, cmake/KsEmbed.cmake), so an installed library needs no data files.
#pragma once

#include <string_view>

namespace ks::tasks::gpumode::embedded {

extern const std::string_view trimul_reference_cu;         // kernels/trimul_reference.cu
extern const std::string_view trimul_reference_plan_json;  // kernels/trimul_reference_plan.json
extern const std::string_view trimul_tunable_cu;           // kernels/trimul_tunable.cu
extern const std::string_view trimul_tunable_plan_json;    // kernels/trimul_tunable_plan.json
extern const std::string_view trimul_tunable_params_json;  // kernels/trimul_tunable_params.json
extern const std::string_view trimul_prompt_md;            // prompt/trimul_prompt.md
extern const std::string_view trimul_python_prompt_md;     // prompt/trimul_python_prompt.md

}  // namespace ks::tasks::gpumode::embedded
