// Kernel sources, launch plans and prompts of the flashinfer suite, kept as
// ordinary files beside this header (kernels/, prompt/) and compiled into the
// library by CMake (ks_embed_files, cmake/KsEmbed.cmake).
#pragma once

#include <string_view>

namespace ks::tasks::flashinfer::embedded {

extern const std::string_view gqa_decode_reference_cu, gqa_decode_reference_plan_json;
extern const std::string_view gqa_decode_start_cu, gqa_decode_start_plan_json;
extern const std::string_view gqa_decode_baseline_cu, gqa_decode_baseline_plan_json;
extern const std::string_view gqa_decode_md;
extern const std::string_view mla_decode_reference_cu, mla_decode_reference_plan_json;
extern const std::string_view mla_decode_start_cu, mla_decode_start_plan_json;
extern const std::string_view mla_decode_baseline_cu, mla_decode_baseline_plan_json;
extern const std::string_view mla_decode_md;
extern const std::string_view mla_prefill_reference_cu, mla_prefill_reference_plan_json;
extern const std::string_view mla_prefill_start_cu, mla_prefill_start_plan_json;
extern const std::string_view mla_prefill_baseline_cu, mla_prefill_baseline_plan_json;
extern const std::string_view mla_prefill_md;
extern const std::string_view moe_reference_cu, moe_reference_plan_json;
extern const std::string_view moe_start_cu, moe_start_plan_json;
extern const std::string_view moe_baseline_cu, moe_baseline_plan_json;
extern const std::string_view moe_md;

}  // namespace ks::tasks::flashinfer::embedded
