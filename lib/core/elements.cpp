#include "core/elements.hpp"

#include <math.h>  // ks_rng.h calls floor unqualified

#include <cmath>
#include <cstring>
#include <limits>

#include "core/rng/ks_rng.h"

namespace ks::core {
namespace {

// Rounds |v| (finite, > 0) to a small float with `man_bits` stored mantissa
// bits and exponent bias `bias`; returns the magnitude bits. Scaling by
// powers of two is exact in double, so nearbyint performs the only rounding
// (round-to-nearest-even, the default mode).
std::uint16_t round_small_float(double a, int man_bits, int bias, int max_field) {
  const int min_normal_exp = 1 - bias;
  int e2 = 0;
  double f = std::frexp(a, &e2);  // a = f * 2^e2, f in [0.5, 1)
  int e = e2 - 1;                 // a = (2f) * 2^e, 2f in [1, 2)
  if (e < min_normal_exp) {
    // Subnormal: units of 2^(min_normal_exp - man_bits). A result of
    // 2^man_bits units is the smallest normal, whose encoding is the same.
    double m = std::nearbyint(std::ldexp(a, man_bits - min_normal_exp));
    return static_cast<std::uint16_t>(m);
  }
  double m = std::nearbyint(std::ldexp(2 * f, man_bits));  // in [2^man, 2^(man+1)]
  if (m >= std::ldexp(1.0, man_bits + 1)) {
    m = std::ldexp(1.0, man_bits);
    ++e;
  }
  int field = e + bias;
  if (field >= max_field) return static_cast<std::uint16_t>(max_field << man_bits);  // infinity
  return static_cast<std::uint16_t>((field << man_bits) | (static_cast<int>(m) - (1 << man_bits)));
}

std::uint16_t to_small_float(double v, int man_bits, int bias, int max_field, std::uint16_t nan) {
  std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (std::isnan(v)) return sign | nan;
  double a = std::fabs(v);
  if (std::isinf(a)) return sign | static_cast<std::uint16_t>(max_field << man_bits);
  if (a == 0) return sign;
  return sign | round_small_float(a, man_bits, bias, max_field);
}

template <typename T>
T saturate_round(double v) {
  if (std::isnan(v)) return 0;
  double r = std::round(v);
  if (r <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (r >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(r);
}

template <typename T>
T load_as(const void* data, std::size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(data) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void store_as(void* data, std::size_t i, T v) {
  std::memcpy(static_cast<char*>(data) + i * sizeof(T), &v, sizeof(T));
}

// An 8-bit float with `man_bits` mantissa bits and exponent bias `bias`.
float small_float_value(unsigned magnitude, int man_bits, int bias) {
  const unsigned field = magnitude >> man_bits, man = magnitude & ((1u << man_bits) - 1u);
  if (field == 0) return std::ldexp(static_cast<float>(man), 1 - bias - man_bits);
  return std::ldexp(static_cast<float>(man | (1u << man_bits)), static_cast<int>(field) - bias - man_bits);
}

}  // namespace

std::uint16_t double_to_f16(double v) { return to_small_float(v, 10, 15, 31, 0x7E00); }
std::uint16_t double_to_bf16(double v) { return to_small_float(v, 7, 127, 255, 0x7FC0); }

std::uint16_t float_to_bf16(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  if (std::isnan(v)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

float f16_to_float(std::uint16_t h) {
  const int sign = (h >> 15) & 1, field = (h >> 10) & 0x1F, man = h & 0x3FF;
  float v;
  if (field == 0) v = std::ldexp(static_cast<float>(man), -24);
  else if (field == 31) v = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else v = std::ldexp(static_cast<float>(man | 0x400), field - 25);
  return sign ? -v : v;
}

float bf16_to_float(std::uint16_t h) {
  std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

std::uint8_t double_to_f8e4m3(double v) { return static_cast<std::uint8_t>(ks_f8e4m3_bits(v)); }
std::uint8_t double_to_f8e5m2(double v) { return static_cast<std::uint8_t>(ks_f8e5m2_bits(v)); }

float f8e4m3_to_float(std::uint8_t b) {
  const unsigned mag = b & 0x7Fu;
  if (mag == 0x7F) return std::numeric_limits<float>::quiet_NaN();
  const float v = small_float_value(mag, 3, 7);
  return (b & 0x80u) ? -v : v;
}

float f8e5m2_to_float(std::uint8_t b) {
  const unsigned mag = b & 0x7Fu;
  float v;
  if (mag == 0x7C) v = std::numeric_limits<float>::infinity();
  else if (mag > 0x7C) v = std::numeric_limits<float>::quiet_NaN();
  else v = small_float_value(mag, 2, 15);
  return (b & 0x80u) ? -v : v;
}

void store_element(void* data, DType dtype, std::size_t i, double v) {
  switch (dtype) {
    case DType::f32: store_as<float>(data, i, static_cast<float>(v)); return;
    case DType::f64: store_as<double>(data, i, v); return;
    case DType::f16: store_as<std::uint16_t>(data, i, double_to_f16(v)); return;
    case DType::bf16: store_as<std::uint16_t>(data, i, double_to_bf16(v)); return;
    case DType::i32: store_as<std::int32_t>(data, i, saturate_round<std::int32_t>(v)); return;
    case DType::i64: store_as<std::int64_t>(data, i, saturate_round<std::int64_t>(v)); return;
    case DType::u8: store_as<std::uint8_t>(data, i, saturate_round<std::uint8_t>(v)); return;
    case DType::f8e4m3: store_as<std::uint8_t>(data, i, double_to_f8e4m3(v)); return;
    case DType::f8e5m2: store_as<std::uint8_t>(data, i, double_to_f8e5m2(v)); return;
    case DType::i8: store_as<std::int8_t>(data, i, saturate_round<std::int8_t>(v)); return;
    case DType::i16: store_as<std::int16_t>(data, i, saturate_round<std::int16_t>(v)); return;
    case DType::boolean: store_as<std::uint8_t>(data, i, saturate_round<std::int64_t>(v) != 0 ? 1 : 0); return;
  }
}

double load_element(const void* data, DType dtype, std::size_t i) {
  switch (dtype) {
    case DType::f32: return load_as<float>(data, i);
    case DType::f64: return load_as<double>(data, i);
    case DType::f16: return f16_to_float(load_as<std::uint16_t>(data, i));
    case DType::bf16: return bf16_to_float(load_as<std::uint16_t>(data, i));
    case DType::i32: return load_as<std::int32_t>(data, i);
    case DType::i64: return static_cast<double>(load_as<std::int64_t>(data, i));
    case DType::u8: return load_as<std::uint8_t>(data, i);
    case DType::f8e4m3: return f8e4m3_to_float(load_as<std::uint8_t>(data, i));
    case DType::f8e5m2: return f8e5m2_to_float(load_as<std::uint8_t>(data, i));
    case DType::i8: return load_as<std::int8_t>(data, i);
    case DType::i16: return load_as<std::int16_t>(data, i);
    case DType::boolean: return load_as<std::uint8_t>(data, i);
  }
  return 0;
}

}  // namespace ks::core
