#include "eval/compare.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace ks::eval {
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

}  // namespace

bool element_matches(double diff, double out, double ref, const Tolerance& tol) {
  switch (tol.rule) {
    case Tolerance::Rule::ref_relative: return diff <= tol.atol + tol.rtol * std::fabs(ref);
    case Tolerance::Rule::out_relative: return diff <= tol.atol + tol.rtol * std::fabs(out);
    case Tolerance::Rule::abs_or_rel: return diff <= tol.atol || diff / (std::fabs(ref) + 1e-8) <= tol.rtol;
  }
  return false;
}

std::string describe_tolerance(const Tolerance& tol) {
  switch (tol.rule) {
    case Tolerance::Rule::ref_relative: return fmt::format("atol={:g} + rtol={:g}*|ref|", tol.atol, tol.rtol);
    case Tolerance::Rule::out_relative: return fmt::format("atol={:g} + rtol={:g}*|out|", tol.atol, tol.rtol);
    case Tolerance::Rule::abs_or_rel:
      return fmt::format("both atol={:g} and rtol={:g} (relative to |ref|)", tol.atol, tol.rtol);
  }
  return "?";
}

namespace {

// The comparison loop, specialised per element type through `load`.
template <typename Load>
CompareStats compare_loop(const void* out, const void* ref, std::size_t count, std::size_t elem_bytes,
                          const Tolerance& tol, Load load) {
  CompareStats st;
  st.count = count;
  const auto* ob = static_cast<const unsigned char*>(out);
  const auto* rb = static_cast<const unsigned char*>(ref);
  auto all_ones = [elem_bytes](const unsigned char* p) {
    for (std::size_t k = 0; k < elem_bytes; ++k)
      if (p[k] != 0xFF) return false;
    return true;
  };
  for (std::size_t i = 0; i < count; ++i) {
    const double o = load(out, i), r = load(ref, i);
    bool bad = false, nonfinite_out = false, nonfinite_ref = false, poisoned = false;
    if (all_ones(ob + i * elem_bytes) && !all_ones(rb + i * elem_bytes)) {
      bad = poisoned = true;
    } else if (std::isfinite(o) && std::isfinite(r)) {
      const double diff = std::fabs(o - r);
      if (diff > st.max_abs_error) st.max_abs_error = diff;
      if (r != 0) {
        const double rel = diff / std::fabs(r);
        if (rel > st.max_rel_error) st.max_rel_error = rel;
      }
      bad = !element_matches(diff, o, r, tol);
    } else if (!std::isfinite(o)) {
      // Accepted only under must_match, and only as the reference's own value.
      const bool same = (std::isnan(o) && std::isnan(r)) || (std::isinf(o) && o == r);
      bad = nonfinite_out = tol.nan_policy == Tolerance::NanPolicy::forbid || !same;
    } else {
      bad = nonfinite_ref = true;  // a number where the reference has NaN or infinity
    }
    if (!bad) continue;
    ++st.mismatches;
    if (nonfinite_out) ++st.nonfinite_outputs;
    if (nonfinite_ref) ++st.nonfinite_reference;
    if (poisoned) ++st.poisoned;
    if (st.first_bad_index < 0) {
      st.first_bad_index = static_cast<std::int64_t>(i);
      st.first_bad_out = o;
      st.first_bad_ref = r;
    }
  }
  return st;
}

}  // namespace

std::uint16_t double_to_f16(double v) { return to_small_float(v, 10, 15, 31, 0x7E00); }
std::uint16_t double_to_bf16(double v) { return to_small_float(v, 7, 127, 255, 0x7FC0); }

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

void store_element(void* data, DType dtype, std::size_t i, double v) {
  switch (dtype) {
    case DType::f32: store_as<float>(data, i, static_cast<float>(v)); return;
    case DType::f64: store_as<double>(data, i, v); return;
    case DType::f16: store_as<std::uint16_t>(data, i, double_to_f16(v)); return;
    case DType::bf16: store_as<std::uint16_t>(data, i, double_to_bf16(v)); return;
    case DType::i32: store_as<std::int32_t>(data, i, saturate_round<std::int32_t>(v)); return;
    case DType::i64: store_as<std::int64_t>(data, i, saturate_round<std::int64_t>(v)); return;
    case DType::u8: store_as<std::uint8_t>(data, i, saturate_round<std::uint8_t>(v)); return;
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
  }
  return 0;
}

bool is_poison_element(const void* data, DType dtype, std::size_t i) {
  const std::size_t n = dtype_size(dtype);
  const auto* p = static_cast<const unsigned char*>(data) + i * n;
  for (std::size_t k = 0; k < n; ++k)
    if (p[k] != 0xFF) return false;
  return true;
}

CompareStats compare_elements(const void* out, const void* ref, DType dtype, std::size_t count,
                              const Tolerance& tol) {
  const std::size_t eb = dtype_size(dtype);
  switch (dtype) {
    case DType::f32: return compare_loop(out, ref, count, eb, tol, [](const void* d, std::size_t i) { return double(load_as<float>(d, i)); });
    case DType::f64: return compare_loop(out, ref, count, eb, tol, [](const void* d, std::size_t i) { return load_as<double>(d, i); });
    case DType::f16: return compare_loop(out, ref, count, eb, tol, [](const void* d, std::size_t i) { return double(f16_to_float(load_as<std::uint16_t>(d, i))); });
    case DType::bf16: return compare_loop(out, ref, count, eb, tol, [](const void* d, std::size_t i) { return double(bf16_to_float(load_as<std::uint16_t>(d, i))); });
    case DType::i32: return compare_loop(out, ref, count, eb, tol, [](const void* d, std::size_t i) { return double(load_as<std::int32_t>(d, i)); });
    case DType::i64: return compare_loop(out, ref, count, eb, tol, [](const void* d, std::size_t i) { return double(load_as<std::int64_t>(d, i)); });
    case DType::u8: return compare_loop(out, ref, count, eb, tol, [](const void* d, std::size_t i) { return double(load_as<std::uint8_t>(d, i)); });
  }
  return {};
}

std::string format_index(const std::string& tensor, const std::vector<std::int64_t>& shape,
                         std::int64_t flat) {
  if (shape.empty()) return tensor;
  std::vector<std::int64_t> idx(shape.size());
  std::int64_t rest = flat;
  for (std::size_t k = shape.size(); k-- > 0;) {
    std::int64_t d = shape[k] > 0 ? shape[k] : 1;
    idx[k] = rest % d;
    rest /= d;
  }
  std::string out = tensor + "[";
  for (std::size_t k = 0; k < idx.size(); ++k) out += (k ? ", " : "") + std::to_string(idx[k]);
  return out + "]";
}

std::string format_value(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.6g}", v);
}

}  // namespace ks::eval
