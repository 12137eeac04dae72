#include <doctest/doctest.h>

#include <cmath>

#include "ksearch/error.hpp"
#include "util/expr.hpp"

using ks::util::Expr;
using ks::util::Vars;

TEST_CASE("expr: integer arithmetic follows C rules") {
  ks::util::Vars v{{"N", 1000}, {"B", 2}};
  CHECK(ks::util::Expr::parse("N / 128").eval_int(v) == 7);
  CHECK(ks::util::Expr::parse("(N + 127) / 128").eval_int(v) == 8);
  CHECK(ks::util::Expr::parse("cdiv(N, 128)").eval_int(v) == 8);
  CHECK(ks::util::Expr::parse("round_up(N, 128)").eval_int(v) == 1024);
  CHECK(ks::util::Expr::parse("N % 7").eval_int(v) == 6);
  CHECK(ks::util::Expr::parse("-B * 3 + 1").eval_int(v) == -5);
  CHECK(ks::util::Expr::parse("min(N, 64, B * 100)").eval_int(v) == 64);
  CHECK(ks::util::Expr::parse("max(1, B)").eval_int(v) == 2);
  CHECK(ks::util::Expr::parse("2 * B * N * N").eval_int(v) == 4000000);
}

TEST_CASE("expr: doubles, functions and comparisons") {
  ks::util::Vars v{{"H", 128}};
  CHECK(ks::util::Expr::parse("1/sqrt(H)").eval_double(v) == doctest::Approx(1 / std::sqrt(128.0)));
  CHECK(ks::util::Expr::parse("1e-5").eval_double(v) == doctest::Approx(1e-5));
  CHECK(ks::util::Expr::parse("H >= 128 && H % 64 == 0").eval_bool(v));
  CHECK_FALSE(ks::util::Expr::parse("H < 64 || !(H == 128)").eval_bool(v));
  CHECK(ks::util::Expr::parse("H > 100 ? 3 : 4").eval_int(v) == 3);
  CHECK(ks::util::Expr::parse("pow(2, 10)").eval_int(v) == 1024);
  CHECK(ks::util::Expr::parse("log2(H)").eval_int(v) == 7);
}

TEST_CASE("expr: variables lists names") {
  auto e = ks::util::Expr::parse("B*N*N*C + cdiv(N, BLOCK) - N");
  CHECK(e.variables() == std::vector<std::string>{"B", "BLOCK", "C", "N"});
}

TEST_CASE("expr: errors name the problem") {
  auto msg = [](auto fn) {
    try {
      fn();
    } catch (const ks::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(msg([] { ks::util::Expr::parse("N +"); }).find("column") != std::string::npos);
  CHECK(msg([] { ks::util::Expr::parse("(N"); }).find("expected ')'") != std::string::npos);
  CHECK(msg([] { ks::util::Expr::parse("foo(N)"); }).find("unknown function foo()") != std::string::npos);
  CHECK(msg([] { ks::util::Expr::parse("cdiv(N)"); }).find("takes 2") != std::string::npos);
  CHECK(msg([] { ks::util::Expr::parse("N").eval_int({{"M", 1}}); }).find("unknown name \"N\"") != std::string::npos);
  CHECK(msg([] { ks::util::Expr::parse("N / 0").eval_int({{"N", 1}}); }).find("division by zero") != std::string::npos);
  CHECK(msg([] { ks::util::Expr::parse("N * N").eval_int({{"N", 1LL << 40}}); }).find("overflow") != std::string::npos);
  CHECK(msg([] { ks::util::Expr::parse("N / 2.5").eval_int({{"N", 3}}); }).find("integer") != std::string::npos);
  CHECK(msg([] { ks::util::Expr::parse(""); }).find("empty") != std::string::npos);
  CHECK(msg([] { ks::util::Expr::parse("2 ** 3"); }).find("unexpected") != std::string::npos);
}

TEST_CASE("expr: hostile input is an error, never a crash") {
  // From LLM answers: malformed numbers, overflow traps, runaway nesting.
  CHECK_THROWS_AS(ks::util::Expr::parse(".e3"), ks::Error);
  CHECK_THROWS_AS(ks::util::Expr::parse("."), ks::Error);
  CHECK_THROWS_AS(ks::util::Expr::parse("1e999"), ks::Error);
  CHECK_THROWS_AS(ks::util::Expr::parse("99999999999999999999"), ks::Error);
  CHECK_THROWS_AS(ks::util::Expr::parse("(-9223372036854775807-1) / -1").eval_int({}), ks::Error);
  CHECK(ks::util::Expr::parse("(-9223372036854775807-1) % -1").eval_int({}) == 0);
  CHECK_THROWS_AS(ks::util::Expr::parse("-(-9223372036854775807-1)").eval_int({}), ks::Error);
  CHECK_THROWS_AS(ks::util::Expr::parse("abs(-9223372036854775807-1)").eval_int({}), ks::Error);
  CHECK_THROWS_AS(ks::util::Expr::parse("round_up(9223372036854775807, 2)").eval_int({}), ks::Error);
  CHECK(ks::util::Expr::parse("cdiv(9223372036854775807, 2)").eval_int({}) == 4611686018427387904LL);
  CHECK(ks::util::Expr::parse("cdiv(-7, 2)").eval_int({}) == -3);
  std::string deep(5000, '(');
  CHECK_THROWS_WITH(ks::util::Expr::parse(deep), doctest::Contains("longer than"));
  std::string nested = std::string(300, '(') + "1" + std::string(300, ')');
  CHECK_THROWS_WITH(ks::util::Expr::parse(nested), doctest::Contains("nested"));
  CHECK_THROWS_WITH(ks::util::Expr::parse(std::string(1000, '-') + "1"), doctest::Contains("nested"));
  std::string chain = "1";
  for (int i = 0; i < 500; ++i) chain += "+1";
  CHECK_THROWS_WITH(ks::util::Expr::parse(chain), doctest::Contains("too many terms"));
  CHECK(ks::util::Expr::parse(".5 * 4").eval_double({}) == doctest::Approx(2.0));
}
