// Tunable parameter declarations: parsing, constraints, per-workload
// resolution and how values reach code.
#include <doctest/doctest.h>

#include <string>

#include "core/param_space.hpp"
#include "ksearch/error.hpp"
#include "util/expr.hpp"

using ks::Json;
using ks::util::Expr;
using ks::core::ParamSpace;
using ks::util::Vars;

namespace {

// The message of the ks::Error that `fn` throws, checking its status.
template <class Fn>
std::string error_of(Fn fn, ks::Status want = ks::Status::invalid_argument) {
  try {
    fn();
  } catch (const ks::Error& e) {
    CHECK(e.status() == want);
    return e.what();
  }
  return "no error";
}

ParamSpace parse(const char* text) { return ParamSpace::from_json(Json::parse(text)); }

}  // namespace

TEST_CASE("params: values, ranges, steps and defaults") {
  ParamSpace s = parse(R"({"space": {
      "BLOCK": {"values": [256, 64, 128]},
      "VEC":   {"min": 1, "max": 4, "default": 4},
      "TILE":  {"min": 16, "max": 64, "step": 16},
      "ODD":   {"min": -3, "max": 3, "step": 4}}})");
  REQUIRE(s.params().size() == 4);
  CHECK(s.params()[0].name == "BLOCK");
  CHECK(s.params()[0].values == std::vector<std::int64_t>{256, 64, 128});  // as declared
  CHECK(s.params()[0].default_value == 256);                              // first value without "default"
  CHECK(s.params()[1].values == std::vector<std::int64_t>{1, 2, 3, 4});
  CHECK(s.params()[1].default_value == 4);
  CHECK(s.params()[2].values == std::vector<std::int64_t>{16, 32, 48, 64});
  CHECK(s.params()[3].values == std::vector<std::int64_t>{-3, 1});  // the step need not land on max
  CHECK(s.grid_size() == 3 * 4 * 4 * 2);
  CHECK(s.defaults() == ks::util::Vars{{"BLOCK", 256}, {"VEC", 4}, {"TILE", 16}, {"ODD", -3}});
  CHECK(s.find("VEC") != nullptr);
  CHECK(s.find("NOPE") == nullptr);
}

TEST_CASE("params: absent or null declarations give an empty space") {
  CHECK(ParamSpace::from_json(Json()).empty());
  CHECK(parse(R"({"space": null})").empty());
  CHECK(parse(R"({"values": {}})").empty());
  CHECK(parse("{}").grid_size() == 1);
}

TEST_CASE("params: bad declarations name the problem") {
  auto msg = [](const char* text) { return error_of([&] { parse(text); }); };
  CHECK(msg(R"({"space": {"2X": {"values": [1]}}})").find("\"2X\" is not a valid parameter name") !=
        std::string::npos);
  CHECK(msg(R"({"space": {"B": {"values": []}}})").find("non-empty array") != std::string::npos);
  CHECK(msg(R"({"space": {"B": {"values": 64}}})").find("non-empty array") != std::string::npos);
  CHECK(msg(R"({"space": {"B": {"values": [1.5]}}})").find("not an integer") != std::string::npos);
  CHECK(msg(R"({"space": {"B": {"values": ["64"]}}})").find("must be integers") != std::string::npos);
  CHECK(msg(R"({"space": {"B": {"values": [64, 64]}}})").find("values repeat") != std::string::npos);
  CHECK(msg(R"({"space": {"B": {"min": 4, "max": 1}}})").find("max (1) is below min (4)") != std::string::npos);
  CHECK(msg(R"({"space": {"B": {"min": 1, "max": 4, "step": 0}}})").find("step must be positive") !=
        std::string::npos);
  CHECK(msg(R"({"space": {"B": {"min": 1}}})").find("missing required field \"max\"") != std::string::npos);
  CHECK(msg(R"({"space": {"B": {"min": 0, "max": 1000000}}})").find("more than 100000 values") !=
        std::string::npos);
  CHECK(msg(R"({"space": {"B": {"min": -9223372036854775807, "max": 9223372036854775807}}})")
            .find("more than 100000 values") != std::string::npos);
  CHECK(msg(R"({"space": {"B": {"values": [1, 2], "default": 3}}})").find("default 3 is not one of its values") !=
        std::string::npos);
  CHECK(msg(R"({"space": {"B": {"values": [1], "stpe": 2}}})").find("stpe") != std::string::npos);
  CHECK(msg(R"({"space": {"B": {}}})").find("needs \"values\"") != std::string::npos);
  CHECK(msg(R"({"space": {"B": [1, 2]}})").find("must be a JSON object") != std::string::npos);
  CHECK(msg(R"({"space": [1, 2]})").find("\"space\" must map parameter names") != std::string::npos);
  // Duplicate keys can only come from a document built in code; the parser keeps one.
  Json twice = Json::obj({{"space", Json(Json::Object{{"B", Json::parse(R"({"values": [1]})")},
                                                      {"B", Json::parse(R"({"values": [2]})")}})}});
  CHECK(error_of([&] { ParamSpace::from_json(twice); }).find("\"B\" is declared twice") != std::string::npos);
  CHECK(msg(R"({"constraints": "B < 4"})").find("array of expressions") != std::string::npos);
  CHECK(msg(R"({"constraints": [4]})").find("expression string") != std::string::npos);
  CHECK(msg(R"({"constraints": ["B <"]})").find("constraint:") != std::string::npos);
  CHECK(msg(R"({"spaces": {}})").find("spaces") != std::string::npos);
}

TEST_CASE("params: constraints between parameters") {
  ParamSpace s = parse(R"({
      "space": {"BLOCK_M": {"values": [64, 128, 256]}, "BLOCK_N": {"values": [64, 128]},
                "VEC": {"values": [1, 2, 4, 8]}},
      "constraints": ["BLOCK_M * BLOCK_N <= 16384", "BLOCK_N % (VEC * 32) == 0"]})");
  std::string why;
  CHECK(s.admissible({{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"VEC", 4}}, {}, &why));
  CHECK_FALSE(s.admissible({{"BLOCK_M", 256}, {"BLOCK_N", 128}, {"VEC", 1}}, {}, &why));
  CHECK(why.find("BLOCK_M * BLOCK_N <= 16384") != std::string::npos);
  CHECK_FALSE(s.admissible({{"BLOCK_M", 64}, {"BLOCK_N", 64}, {"VEC", 4}}, {}, &why));
  CHECK(why.find("BLOCK_N % (VEC * 32) == 0") != std::string::npos);
  CHECK_FALSE(s.admissible({{"BLOCK_M", 96}, {"BLOCK_N", 64}, {"VEC", 1}}, {}, &why));
  CHECK(why.find("not one of its allowed values") != std::string::npos);
  CHECK_FALSE(s.admissible({{"BLOCK_M", 64}, {"BLOCK_N", 64}}, {}, &why));
  CHECK(why.find("\"VEC\" has no value") != std::string::npos);
  CHECK_FALSE(s.admissible({{"BLOCK_M", 64}, {"BLOCK_N", 64}, {"VEC", 1}, {"X", 1}}, {}, &why));
  CHECK(why.find("\"X\" is not a declared parameter") != std::string::npos);
}

TEST_CASE("params: constraints on dimensions are checked per workload") {
  ParamSpace s = parse(R"({
      "space": {"VEC": {"values": [1, 2, 4, 8]}, "BLOCK": {"values": [128, 256]}},
      "constraints": ["C % VEC == 0", "BLOCK <= 2 * C"]})");
  const ks::util::Vars v8{{"VEC", 8}, {"BLOCK", 128}};
  // Without dimensions only parameter-only constraints can be judged.
  CHECK(s.admissible(v8, {}));
  CHECK(s.admissible(v8, {{"C", 64}}));
  std::string why;
  CHECK_FALSE(s.admissible(v8, {{"C", 12}}, &why));
  CHECK(why.find("C % VEC == 0") != std::string::npos);
  CHECK_FALSE(s.admissible({{"VEC", 1}, {"BLOCK", 256}}, {{"C", 64}}, &why));
  CHECK(why.find("BLOCK <= 2 * C") != std::string::npos);
  // A constraint naming something that is neither a parameter nor a dimension.
  ParamSpace typo = parse(R"({"space": {"VEC": {"values": [1]}}, "constraints": ["CC % VEC == 0"]})");
  CHECK_FALSE(typo.admissible({{"VEC", 1}}, {{"C", 64}}, &why));
  CHECK(why.find("\"CC\", which is neither a parameter nor a dimension") != std::string::npos);
  // A constraint that cannot be evaluated does not hold.
  ParamSpace zero = parse(R"({"space": {"D": {"values": [0, 2]}}, "constraints": ["8 % D == 0"]})");
  CHECK(zero.admissible({{"D", 2}}, {}));
  CHECK_FALSE(zero.admissible({{"D", 0}}, {}, &why));
  CHECK(why.find("cannot be evaluated") != std::string::npos);
  CHECK(why.find("modulo by zero") != std::string::npos);
  // A parameter may not shadow a dimension.
  ParamSpace clash = parse(R"({"space": {"C": {"values": [1]}}})");
  CHECK_FALSE(clash.admissible({{"C", 1}}, {{"C", 64}}, &why));
  CHECK(why.find("has the name of a dimension") != std::string::npos);
}

TEST_CASE("params: per-workload resolution") {
  const ks::Params params = ks::Params::from_json(Json::parse(R"({
      "space": {"BLOCK": {"values": [64, 128, 256], "default": 128}, "VEC": {"min": 1, "max": 4}},
      "constraints": ["C % VEC == 0"],
      "values": {"VEC": 4},
      "per_workload": {"big": {"BLOCK": 256}, "odd": {"VEC": 1}}})"));
  using ks::core::resolve_param_values;
  // "values" over defaults, per_workload over "values", missing ones take defaults.
  CHECK(resolve_param_values(params, "small", {{"C", 64}}) == ks::util::Vars{{"BLOCK", 128}, {"VEC", 4}});
  CHECK(resolve_param_values(params, "big", {{"C", 64}}) == ks::util::Vars{{"BLOCK", 256}, {"VEC", 4}});
  CHECK(resolve_param_values(params, "odd", {{"C", 7}}) == ks::util::Vars{{"BLOCK", 128}, {"VEC", 1}});
  // The values a workload gets must be admissible for its dimensions.
  std::string msg = error_of([&] { resolve_param_values(params, "small", {{"C", 6}}); });
  CHECK(msg.find("workload \"small\"") != std::string::npos);
  CHECK(msg.find("C % VEC == 0") != std::string::npos);
  // No declaration: nothing to resolve.
  CHECK(resolve_param_values(ks::Params(), "w", {{"C", 1}}).empty());

  // Stored params off the schema are kept as written and fail here, where
  // the evaluator resolves them, with what is wrong.
  auto bad = [](const char* text) {
    return error_of([&] { resolve_param_values(ks::Params::as_written(Json::parse(text)), "w", {}); });
  };
  CHECK(bad(R"({"space": {"B": {"values": [1]}}, "values": {"X": 1}})").find("undeclared parameter \"X\"") !=
        std::string::npos);
  CHECK(bad(R"({"space": {"B": {"values": [1]}}, "values": {"B": "1"}})").find("must be an integer") !=
        std::string::npos);
  CHECK(bad(R"({"space": {"B": {"values": [1]}}, "values": {"B": 2}})").find("not one of its allowed values") !=
        std::string::npos);
  CHECK(bad(R"({"space": {"B": {"values": [1]}}, "values": [1]})").find("must map parameter names") !=
        std::string::npos);
  CHECK(bad(R"({"space": {"B": {"values": [1]}}, "per_workload": [1]})").find("\"per_workload\" must map") !=
        std::string::npos);
  CHECK(bad(R"({"space": {"B": {"values": [1, 2]}}, "per_workload": {"w": {"B": 3}}})")
            .find("workload \"w\"") != std::string::npos);
}

TEST_CASE("params: values reach device code as macros and plans as variables") {
  const ks::util::Vars values{{"BLOCK", 128}, {"VEC", 4}};
  CHECK(ks::core::param_defines(values) == std::vector<std::string>{"-DBLOCK=128", "-DVEC=4"});
  CHECK(ks::core::param_defines({}).empty());

  // A launch plan's expressions see dimensions and parameters side by side.
  const ks::Params params = ks::Params::from_json(Json::parse(R"({
      "space": {"BLOCK": {"values": [64, 128, 256]}, "VEC": {"values": [1, 2, 4]}},
      "values": {"BLOCK": 128, "VEC": 4},
      "per_workload": {"large": {"BLOCK": 256}}})"));
  for (auto [workload, n, grid, block] : {std::tuple{"small", 1000, 8, 32}, std::tuple{"large", 5000, 20, 64}}) {
    CAPTURE(workload);
    ks::util::Vars scope{{"N", n}};
    for (const auto& [k, v] : ks::core::resolve_param_values(params, workload, scope)) scope[k] = v;
    CHECK(ks::util::Expr::parse("cdiv(N, BLOCK)").eval_int(scope) == grid);
    CHECK(ks::util::Expr::parse("BLOCK / VEC").eval_int(scope) == block);
  }
}
