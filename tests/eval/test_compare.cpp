#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "eval/compare.hpp"

using namespace ks;
using namespace ks::eval;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tolerance tol(double atol, double rtol, Tolerance::NanPolicy p = Tolerance::NanPolicy::must_match,
              double ratio = 1.0) {
  Tolerance t;
  t.atol = atol;
  t.rtol = rtol;
  t.nan_policy = p;
  t.min_matched_ratio = ratio;
  return t;
}

CompareStats cmp(std::vector<float> out, std::vector<float> ref, const Tolerance& t) {
  return compare_elements(out.data(), ref.data(), DType::f32, out.size(), t);
}

float poison_f32() {
  float f;
  std::memset(&f, 0xFF, sizeof f);
  return f;
}

}  // namespace

TEST_CASE("compare: the tolerance boundary is inclusive, and rtol scales with |ref|") {
  // Exactly representable values, so the boundary is exact: |1.5 - 1| = 0.5 = 0.25 + 0.25*1.
  CHECK(cmp({1.5f}, {1.0f}, tol(0.25, 0.25)).mismatches == 0);
  CHECK(cmp({1.5f}, {1.0f}, tol(0.25, 0.24)).mismatches == 1);
  CHECK(cmp({-1.5f}, {-1.0f}, tol(0.25, 0.25)).mismatches == 0);  // |ref| for negatives too
  CHECK(cmp({1.5f}, {1.0f}, tol(0.0, 0.5)).mismatches == 0);
  CHECK(cmp({0.5f}, {0.0f}, tol(0.0, 0.5)).mismatches == 1);  // no relative slack at ref = 0
  // Relative error uses the reference, not the output: 100 vs 110 is 10 % off.
  CompareStats s = cmp({110.0f}, {100.0f}, tol(0, 0.1));
  CHECK(s.mismatches == 0);
  CHECK(s.max_rel_error == doctest::Approx(0.1));
  CHECK(s.max_abs_error == doctest::Approx(10));
}

TEST_CASE("compare: out_relative scales rtol with |out| (KernelBench's torch.allclose(ref, out))") {
  Tolerance t = tol(0.0, 0.5);
  t.rule = Tolerance::Rule::out_relative;
  // |1.0 - 2.0| = 1.0 <= 0.5 * |2.0| but > 0.5 * |1.0|.
  CHECK(cmp({2.0f}, {1.0f}, t).mismatches == 0);
  CHECK(cmp({2.0f}, {1.0f}, tol(0.0, 0.5)).mismatches == 1);
  CHECK(cmp({1.0f}, {2.0f}, t).mismatches == 1);  // 1.0 > 0.5 * |1.0|
  t.atol = 0.25;
  CHECK(cmp({1.5f}, {1.0f}, t).mismatches == 0);  // 0.5 <= 0.25 + 0.5*1.5
}

TEST_CASE("compare: abs_or_rel fails an element only when both errors are too large (FlashInfer-Bench)") {
  Tolerance t = tol(0.01, 0.01);
  t.rule = Tolerance::Rule::abs_or_rel;
  CHECK(cmp({0.005f}, {0.0f}, t).mismatches == 0);    // abs 0.005 <= atol, rel huge
  CHECK(cmp({1000.5f}, {1000.0f}, t).mismatches == 0);  // abs 0.5 > atol, rel 5e-4 <= rtol
  CHECK(cmp({1.5f}, {1.0f}, t).mismatches == 1);      // abs 0.5, rel 0.5: both too large
  // The relative error divides by |ref| + 1e-8: at ref = 0 only atol helps.
  CHECK(cmp({0.02f}, {0.0f}, t).mismatches == 1);
  // The ref_relative bound would pass 1.015 vs 1.0 (0.015 <= 0.01 + 0.01); abs_or_rel does not.
  CHECK(cmp({1.015f}, {1.0f}, t).mismatches == 1);
  CHECK(cmp({1.015f}, {1.0f}, tol(0.01, 0.01)).mismatches == 0);
}

TEST_CASE("compare: tolerance rules round-trip through JSON and bad ones are named") {
  Tolerance t;
  t.rule = Tolerance::Rule::abs_or_rel;
  CHECK(Tolerance::from_json(t.to_json()).rule == Tolerance::Rule::abs_or_rel);
  CHECK(Tolerance::from_json(Json::object()).rule == Tolerance::Rule::ref_relative);
  Json bad = Json::obj({{"rule", "loose"}});
  CHECK_THROWS_WITH(Tolerance::from_json(bad), doctest::Contains("rule must be"));
  CHECK(describe_tolerance(t).find("both atol=") != std::string::npos);
}

TEST_CASE("compare: the first mismatch and the matched ratio") {
  CompareStats s = cmp({1, 2, 9, 4, 7}, {1, 2, 3, 4, 5}, tol(1e-3, 0));
  CHECK(s.count == 5);
  CHECK(s.mismatches == 2);
  CHECK(s.first_bad_index == 2);
  CHECK(s.first_bad_out == 9);
  CHECK(s.first_bad_ref == 3);
  CHECK(s.matched_ratio() == doctest::Approx(0.6));
  CHECK(s.max_abs_error == doctest::Approx(6));
}

TEST_CASE("compare: NaN and infinity under must_match") {
  auto t = tol(1e-3, 1e-3, Tolerance::NanPolicy::must_match);
  CHECK(cmp({float(kNaN)}, {float(kNaN)}, t).mismatches == 0);
  CHECK(cmp({float(kInf)}, {float(kInf)}, t).mismatches == 0);
  CHECK(cmp({float(-kInf)}, {float(-kInf)}, t).mismatches == 0);
  CompareStats s = cmp({float(kInf)}, {float(-kInf)}, t);
  CHECK(s.mismatches == 1);
  CHECK(s.nonfinite_outputs == 1);
  CHECK(s.nonfinite_reference == 0);
  CHECK(cmp({float(kNaN)}, {1.0f}, t).nonfinite_outputs == 1);
  // The reference's NaN must be reproduced: a number there is a mismatch of
  // the reference side, not a NaN in the output.
  CompareStats r = cmp({1.0f}, {float(kNaN)}, t);
  CHECK(r.mismatches == 1);
  CHECK(r.nonfinite_outputs == 0);
  CHECK(r.nonfinite_reference == 1);
  CHECK(cmp({float(kInf)}, {1e30f}, t).nonfinite_outputs == 1);
  // Non-finite pairs do not pollute the error figures.
  CompareStats e = cmp({float(kNaN), 1.25f}, {float(kNaN), 1.0f}, t);
  CHECK(e.max_abs_error == doctest::Approx(0.25));
}

TEST_CASE("compare: forbid rejects every NaN or infinity in the output") {
  auto t = tol(1e-3, 1e-3, Tolerance::NanPolicy::forbid);
  CHECK(cmp({float(kNaN)}, {float(kNaN)}, t).nonfinite_outputs == 1);
  CHECK(cmp({float(kInf)}, {float(kInf)}, t).nonfinite_outputs == 1);
  CHECK(cmp({1.0f}, {1.0f}, t).mismatches == 0);
  // A number where the reference has NaN is no NaN in the output.
  CompareStats r = cmp({1.0f, 2.0f}, {float(kNaN), 2.0f}, t);
  CHECK(r.mismatches == 1);
  CHECK(r.nonfinite_outputs == 0);
  CHECK(r.nonfinite_reference == 1);
}

TEST_CASE("compare: elements left holding the poison pattern count as never written") {
  auto t = tol(1e-3, 1e-3);
  CompareStats s = cmp({1.0f, poison_f32(), poison_f32()}, {1.0f, 2.0f, 3.0f}, t);
  CHECK(s.poisoned == 2);
  CHECK(s.mismatches == 2);
  CHECK(s.nonfinite_outputs == 0);  // reported as unwritten, not as a NaN result
  CHECK(s.first_bad_index == 1);
  CHECK(is_poison_element(std::vector<float>{poison_f32()}.data(), DType::f32, 0));

  // For integers the pattern is -1, a legitimate value: it counts only where
  // the reference differs.
  std::vector<std::int32_t> out{-1, -1}, ref{-1, 5};
  CompareStats si = compare_elements(out.data(), ref.data(), DType::i32, 2, tol(0, 0));
  CHECK(si.mismatches == 1);
  CHECK(si.poisoned == 1);
  CHECK(si.first_bad_index == 1);
}

TEST_CASE("compare: half-precision types compare by value") {
  std::vector<std::uint16_t> out{double_to_f16(1.0), double_to_f16(2.0)};
  std::vector<std::uint16_t> ref{double_to_f16(1.0), double_to_f16(2.5)};
  CompareStats s = compare_elements(out.data(), ref.data(), DType::f16, 2, tol(0.1, 0));
  CHECK(s.mismatches == 1);
  CHECK(s.first_bad_ref == doctest::Approx(2.5));
  std::vector<std::uint16_t> bo{double_to_bf16(3.0)}, br{double_to_bf16(3.0)};
  CHECK(compare_elements(bo.data(), br.data(), DType::bf16, 1, tol(0, 0)).mismatches == 0);
}

TEST_CASE("compare: f16 conversion rounds once, to nearest even, and saturates") {
  CHECK(double_to_f16(1.0) == 0x3C00);
  CHECK(double_to_f16(-2.0) == 0xC000);
  CHECK(double_to_f16(65504.0) == 0x7BFF);                         // largest finite
  CHECK(double_to_f16(65519.99) == 0x7BFF);                        // below the halfway point
  CHECK(double_to_f16(65520.0) == 0x7C00);                         // halfway rounds to even: infinity
  CHECK(double_to_f16(1.0 + std::ldexp(1.0, -11)) == 0x3C00);      // tie: to even (down)
  CHECK(double_to_f16(1.0 + 3 * std::ldexp(1.0, -11)) == 0x3C02);  // tie: to even (up)
  // A value just above a tie must not be rounded twice (double -> float -> half would).
  CHECK(double_to_f16(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)) == 0x3C01);
  CHECK(double_to_f16(std::ldexp(1.0, -24)) == 0x0001);            // smallest subnormal
  CHECK(double_to_f16(std::ldexp(1.0, -25)) == 0x0000);            // tie between 0 and it: even
  CHECK(double_to_f16(std::ldexp(1.0, -14)) == 0x0400);            // smallest normal
  CHECK(double_to_f16(std::ldexp(1023.5, -24)) == 0x0400);         // subnormal rounding up into normal
  CHECK(double_to_f16(kInf) == 0x7C00);
  CHECK((double_to_f16(kNaN) & 0x7C00) == 0x7C00);
  CHECK((double_to_f16(kNaN) & 0x03FF) != 0);
  for (double v : {0.1, -3.75, 1234.5, 6.1e-5})
    CHECK(f16_to_float(double_to_f16(v)) == doctest::Approx(v).epsilon(1e-3));
}

TEST_CASE("compare: bf16 conversion") {
  CHECK(double_to_bf16(1.0) == 0x3F80);
  CHECK(double_to_bf16(-1.0) == 0xBF80);
  CHECK(double_to_bf16(1.0 + std::ldexp(1.0, -8)) == 0x3F80);  // tie: to even
  CHECK(double_to_bf16(1.0 + 3 * std::ldexp(1.0, -8)) == 0x3F82);
  CHECK(double_to_bf16(1e39) == 0x7F80);  // beyond the largest finite: infinity
  CHECK(bf16_to_float(double_to_bf16(3.140625)) == 3.140625f);
}

TEST_CASE("compare: integer stores round to nearest and saturate") {
  std::uint8_t u8[4];
  store_element(u8, DType::u8, 0, 300.0);
  store_element(u8, DType::u8, 1, -5.0);
  store_element(u8, DType::u8, 2, 2.5);
  store_element(u8, DType::u8, 3, kNaN);
  CHECK(u8[0] == 255);
  CHECK(u8[1] == 0);
  CHECK(u8[2] == 3);  // ties away from zero
  CHECK(u8[3] == 0);
  std::int32_t i32[2];
  store_element(i32, DType::i32, 0, -2.5);
  store_element(i32, DType::i32, 1, 1e12);
  CHECK(i32[0] == -3);
  CHECK(i32[1] == std::numeric_limits<std::int32_t>::max());
  CHECK(load_element(i32, DType::i32, 0) == -3);
}

TEST_CASE("compare: indices and values read naturally") {
  CHECK(format_index("C", {4, 5}, 7) == "C[1, 2]");
  CHECK(format_index("x", {10}, 3) == "x[3]");
  CHECK(format_index("s", {}, 0) == "s");
  CHECK(format_value(kNaN) == "nan");
  CHECK(format_value(-kInf) == "-inf");
  CHECK(format_value(1.5) == "1.5");
}
