#include "eval/compare.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace ks::eval {
namespace {

template <typename T>
T load_as(const void* data, std::size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(data) + i * sizeof(T), sizeof(T));
  return v;
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
    case DType::f8e4m3: return compare_loop(out, ref, count, eb, tol, [](const void* d, std::size_t i) { return double(f8e4m3_to_float(load_as<std::uint8_t>(d, i))); });
    case DType::f8e5m2: return compare_loop(out, ref, count, eb, tol, [](const void* d, std::size_t i) { return double(f8e5m2_to_float(load_as<std::uint8_t>(d, i))); });
    case DType::i8: return compare_loop(out, ref, count, eb, tol, [](const void* d, std::size_t i) { return double(load_as<std::int8_t>(d, i)); });
    case DType::i16: return compare_loop(out, ref, count, eb, tol, [](const void* d, std::size_t i) { return double(load_as<std::int16_t>(d, i)); });
    case DType::boolean: return compare_loop(out, ref, count, eb, tol, [](const void* d, std::size_t i) { return double(load_as<std::uint8_t>(d, i)); });
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
