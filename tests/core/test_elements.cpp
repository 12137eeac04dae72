// Element types added for FlashInfer-Bench (f8e4m3, f8e5m2, i8, i16, bool):
// names, sizes, C types, one-rounding conversions against hand-computed bit
// patterns, saturation, and round trips through store/load.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/elements.hpp"
#include "ksearch/types.hpp"

using namespace ks;
using namespace ks::core;

namespace {
const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

TEST_CASE("dtypes: names, FlashInfer aliases, sizes and C types") {
  struct Row {
    const char* name;
    const char* alias;
    DType t;
    std::size_t size;
    const char* cuda;
    const char* host;
  };
  const Row rows[] = {{"f8e4m3", "float8_e4m3fn", DType::f8e4m3, 1, "__nv_fp8_e4m3", "uint8_t"},
                      {"f8e5m2", "float8_e5m2", DType::f8e5m2, 1, "__nv_fp8_e5m2", "uint8_t"},
                      {"i8", "int8", DType::i8, 1, "signed char", "int8_t"},
                      {"i16", "int16", DType::i16, 2, "short", "int16_t"},
                      {"bool", "boolean", DType::boolean, 1, "bool", "bool"},
                      {"bf16", "bfloat16", DType::bf16, 2, "__nv_bfloat16", "uint16_t"}};
  for (const auto& r : rows) {
    CAPTURE(r.name);
    CHECK(dtype_from_string(r.name) == r.t);
    CHECK(dtype_from_string(r.alias) == r.t);
    CHECK(std::string(to_string(r.t)) == r.name);
    CHECK(dtype_size(r.t) == r.size);
    CHECK(std::string(dtype_c_type(r.t, Language::cuda)) == r.cuda);
    CHECK(std::string(dtype_c_type(r.t, Language::cpp)) == r.host);
  }
  CHECK(dtype_is_float(DType::f8e4m3));
  CHECK(dtype_is_float(DType::f8e5m2));
  CHECK_FALSE(dtype_is_float(DType::i8));
  CHECK_FALSE(dtype_is_float(DType::boolean));
  CHECK_FALSE(dtype_from_string("float4_e2m1").has_value());
}

TEST_CASE("f8e4m3: one round-to-nearest-even from double, saturating at 448, no infinity") {
  // Hand-computed encodings: sign | exponent (bias 7) << 3 | mantissa.
  CHECK(double_to_f8e4m3(0.0) == 0x00);
  CHECK(double_to_f8e4m3(-0.0) == 0x80);
  CHECK(double_to_f8e4m3(1.0) == 0x38);     // exponent 7
  CHECK(double_to_f8e4m3(-1.0) == 0xB8);
  CHECK(double_to_f8e4m3(2.0) == 0x40);
  CHECK(double_to_f8e4m3(-2.0) == 0xC0);
  CHECK(double_to_f8e4m3(1.125) == 0x39);   // 1 + 1/8
  CHECK(double_to_f8e4m3(1.875) == 0x3F);
  CHECK(double_to_f8e4m3(448.0) == 0x7E);   // the largest finite value
  CHECK(double_to_f8e4m3(1.0625) == 0x38);  // halfway between 1 and 1.125: to even (down)
  CHECK(double_to_f8e4m3(1.1875) == 0x3A);  // halfway between 1.125 and 1.25: to even (up)
  CHECK(double_to_f8e4m3(1.0625 + 1e-12) == 0x39);  // a hair above halfway rounds up (one rounding)
  CHECK(double_to_f8e4m3(1.96875) == 0x40);          // rounds up into the next binade: 2.0
  CHECK(double_to_f8e4m3(std::ldexp(1.0, -9)) == 0x01);    // smallest subnormal
  CHECK(double_to_f8e4m3(std::ldexp(1.0, -10)) == 0x00);   // halfway between 0 and it: even
  CHECK(double_to_f8e4m3(std::ldexp(3.0, -10)) == 0x02);   // 1.5 units: to even (2)
  CHECK(double_to_f8e4m3(std::ldexp(1.0, -6)) == 0x08);    // smallest normal
  CHECK(double_to_f8e4m3(std::ldexp(7.5, -9)) == 0x08);    // subnormal rounding up into normal
  // Saturation (E4M3FN has no infinity; 480's encoding is NaN): 464 is a tie
  // that rounds to even (448), 470 would round to 480 and saturates instead.
  CHECK(double_to_f8e4m3(464.0) == 0x7E);
  CHECK(double_to_f8e4m3(470.0) == 0x7E);
  CHECK(double_to_f8e4m3(500.0) == 0x7E);
  CHECK(double_to_f8e4m3(-1e6) == 0xFE);
  CHECK(double_to_f8e4m3(kInf) == 0x7E);
  CHECK(double_to_f8e4m3(-kInf) == 0xFE);
  CHECK(double_to_f8e4m3(kNaN) == 0x7F);
  CHECK(std::isnan(f8e4m3_to_float(0x7F)));
  CHECK(std::isnan(f8e4m3_to_float(0xFF)));
  CHECK(f8e4m3_to_float(0x7E) == 448.0f);
  CHECK(f8e4m3_to_float(0x01) == std::ldexp(1.0f, -9));
  CHECK(f8e4m3_to_float(0xB8) == -1.0f);
  // Every finite encoding round-trips.
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7F) == 0x7F) continue;
    const float v = f8e4m3_to_float(static_cast<std::uint8_t>(b));
    CAPTURE(b);
    CHECK(double_to_f8e4m3(v) == b);
  }
}

TEST_CASE("f8e5m2: one round-to-nearest-even from double, saturating at 57344") {
  CHECK(double_to_f8e5m2(1.0) == 0x3C);    // exponent 15 << 2
  CHECK(double_to_f8e5m2(-2.0) == 0xC0);
  CHECK(double_to_f8e5m2(1.25) == 0x3D);
  CHECK(double_to_f8e5m2(1.125) == 0x3C);  // halfway between 1 and 1.25: to even (down)
  CHECK(double_to_f8e5m2(1.375) == 0x3E);  // halfway between 1.25 and 1.5: to even (up)
  CHECK(double_to_f8e5m2(57344.0) == 0x7B);
  CHECK(double_to_f8e5m2(61440.0) == 0x7B);  // would round to 65536 (infinity): saturates
  CHECK(double_to_f8e5m2(kInf) == 0x7B);
  CHECK(double_to_f8e5m2(-kInf) == 0xFB);
  CHECK(double_to_f8e5m2(std::ldexp(1.0, -16)) == 0x01);  // smallest subnormal
  CHECK(double_to_f8e5m2(std::ldexp(1.0, -14)) == 0x04);  // smallest normal
  CHECK(double_to_f8e5m2(kNaN) == 0x7F);
  CHECK(std::isinf(f8e5m2_to_float(0x7C)));
  CHECK(f8e5m2_to_float(0xFC) < 0);
  CHECK(std::isnan(f8e5m2_to_float(0x7D)));
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7F) >= 0x7C) continue;
    const float v = f8e5m2_to_float(static_cast<std::uint8_t>(b));
    CAPTURE(b);
    CHECK(double_to_f8e5m2(v) == b);
  }
}

TEST_CASE("store and load: every new type round-trips, integers saturate, bool is 0 or 1") {
  struct Row {
    DType t;
    double in, out;
  };
  const Row rows[] = {{DType::i8, 5.0, 5.0},       {DType::i8, -128.0, -128.0}, {DType::i8, 300.0, 127.0},
                      {DType::i8, -1e9, -128.0},   {DType::i8, 2.5, 3.0},       {DType::i8, kNaN, 0.0},
                      {DType::i16, 1234.0, 1234.0}, {DType::i16, 40000.0, 32767.0}, {DType::i16, -40000.0, -32768.0},
                      {DType::boolean, 0.0, 0.0},  {DType::boolean, 1.0, 1.0},  {DType::boolean, -3.0, 1.0},
                      {DType::boolean, 0.2, 0.0},  {DType::f8e4m3, 1.9, 1.875}, {DType::f8e4m3, -600.0, -448.0},
                      {DType::f8e5m2, 3.1, 3.0},   {DType::bf16, 1.0 + 1.0 / 256, 1.0}};
  for (const auto& r : rows) {
    CAPTURE(to_string(r.t));
    CAPTURE(r.in);
    std::vector<unsigned char> buf(3 * dtype_size(r.t), 0xAB);
    store_element(buf.data(), r.t, 1, r.in);
    CHECK(load_element(buf.data(), r.t, 1) == r.out);
    // Neighbours untouched.
    for (std::size_t k = 0; k < dtype_size(r.t); ++k) {
      CHECK(buf[k] == 0xAB);
      CHECK(buf[2 * dtype_size(r.t) + k] == 0xAB);
    }
  }
  // float -> bf16 as a kernel's __float2bfloat16_rn: ties to even.
  CHECK(float_to_bf16(1.0f) == 0x3F80);
  CHECK(float_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);
  CHECK(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);
  CHECK((float_to_bf16(std::numeric_limits<float>::quiet_NaN()) & 0x7F80) == 0x7F80);
}
