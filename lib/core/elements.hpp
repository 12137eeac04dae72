// Elements of every DType as doubles: the one-rounding conversions that
// generated inputs go through, and loads for comparisons and CPU references.
// Shared by the evaluation backends (lib/eval) and by tasks that compute
// references on the host (lib/tasks), so both read and write the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ksearch/types.hpp"

namespace ks::core {

// IEEE binary16 and bfloat16 from double with a single round-to-nearest-even
// (no double rounding through float), saturating to infinity on overflow.
std::uint16_t double_to_f16(double v);
std::uint16_t double_to_bf16(double v);
float f16_to_float(std::uint16_t h);
float bf16_to_float(std::uint16_t h);
// bfloat16 from float, round to nearest even (the rounding a kernel's
// __float2bfloat16_rn does); NaN stays NaN.
std::uint16_t float_to_bf16(float v);

// OCP float8 from double, one round-to-nearest-even, saturating to the
// largest finite value (E4M3FN: 448, E5M2: 57344; CUDA's __NV_SATFINITE;
// infinity too), NaN to 0x7F. The rule is ks_f8_bits in core/rng/ks_rng.h,
// which the GPU's input generator shares.
std::uint8_t double_to_f8e4m3(double v);
std::uint8_t double_to_f8e5m2(double v);
float f8e4m3_to_float(std::uint8_t b);  // 0x7F / 0xFF are NaN
float f8e5m2_to_float(std::uint8_t b);  // 0x7C / 0xFC are +-inf, 0x7D-0x7F / 0xFD-0xFF NaN

// The conversion rules of generated inputs below, as text: part of the key
// of cached reference outputs, so changing a rule must change this text.
inline constexpr std::string_view kInputConversionRules =
    "inputs-v2: f32 round-to-nearest-even from double; f64 as is; f16, bf16 one round-to-nearest-even from "
    "double, overflow to infinity; f8e4m3, f8e5m2 one round-to-nearest-even from double, saturating to the "
    "largest finite value; integers round half away from zero, saturate, NaN to 0; bool: nonzero is 1";

// Stores `v` as element `index` of a `dtype` array: floats round to nearest
// even; integers round to nearest (ties away from zero) and saturate to the
// type's range; bool stores 1 for any nonzero value. Both backends convert
// generated inputs this way.
void store_element(void* data, DType dtype, std::size_t index, double v);
double load_element(const void* data, DType dtype, std::size_t index);

}  // namespace ks::core
