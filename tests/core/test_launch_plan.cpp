// The launch plan codec (ks::LaunchPlan): every field of both schemas read
// into its typed form, JSON written back as read (solution ids hash it),
// the canonical form of plans built in code, errors that name the field,
// and stored plans off the schema kept as written.
#include <doctest/doctest.h>

#include "ksearch/error.hpp"
#include "ksearch/types.hpp"

using namespace ks;
using Plan = LaunchPlan;

namespace {

std::string error_of(const std::string& text, Language lang) {
  try {
    Plan::from_json(Json::parse(text), lang);
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    return e.what();
  }
  FAIL("the plan should have been refused: " << text);
  return {};
}

// The same fields in a fresh plan, which writes its canonical form.
Plan rebuilt(const Plan& p) {
  Plan out;
  out.kernels = p.kernels;
  out.calls = p.calls;
  out.scratch = p.scratch;
  out.variants = p.variants;
  return out;
}

constexpr const char* kCudaPlan = R"js({
  "kernels": [
    {"args": ["x", "y", "R", 4, {"f32": "1.0/C"}, {"f64": 0.5}, {"i32": 7}, {"i64": "R*C"}],
     "name": "row_softmax", "grid": ["R", 1], "block": [256], "shared_bytes": "4 * C", "cluster": [2, 1, 1]},
    {"name": "gemm<128, 64>", "grid": ["cdiv(N, 128)"], "block": [128, 1, 1], "shared_bytes": 0, "args": ["y"]}
  ],
  "scratch": [{"name": "partial", "dtype": "float32", "shape": ["R", "cdiv(C, 1024)"]}, {"name": "raw", "bytes": 64}],
  "variants": [
    {"when": "C <= 1024", "kernels": [{"name": "small", "grid": ["R"], "block": [32], "args": ["x", "y"]}]},
    {"kernels": [{"name": "big", "grid": ["R"], "block": [1024], "args": ["x", "tmp"]}], "when": "C > 100000",
     "scratch": [{"name": "tmp", "dtype": "f64", "shape": []}]}
  ]
})js";

constexpr const char* kCallPlan = R"js({
  "calls": [{"fn": "ns::matmul<4>", "args": ["A", "B", "packed", "M", 8, {"float32": "1.0/K"}, {"i32": 3}]}],
  "scratch": [{"name": "packed", "dtype": "f32", "shape": ["K", "N"]}, {"bytes": "64 * M", "name": "raw", "dtype": "u8"}],
  "variants": [{"when": "M < 64", "calls": [{"fn": "small", "args": ["A", "C"]}]},
               {"when": "M > 4096", "calls": [{"fn": "big", "args": []}], "scratch": []}],
  "params": {"space": {"T": {"values": [1, 2]}}}
})js";

}  // namespace

TEST_CASE("launch plan codec: a CUDA launch plan reads into typed fields") {
  Plan p = Plan::from_json(Json::parse(kCudaPlan), Language::cuda);
  CHECK(p.readable());
  CHECK_FALSE(p.empty());
  CHECK_FALSE(p.is_call_plan());
  REQUIRE(p.kernels.size() == 2);
  const Plan::Kernel& k = p.kernels[0];
  CHECK(k.name == "row_softmax");
  CHECK(k.grid == std::vector<Plan::Expr>{"R", "1"});
  CHECK(k.block == std::vector<Plan::Expr>{256});
  REQUIRE(k.shared_bytes);
  CHECK(k.shared_bytes->text == "4 * C");
  CHECK(k.cluster == std::vector<Plan::Expr>{2, 1, 1});
  REQUIRE(k.args.size() == 8);
  CHECK(k.args[0] == Plan::Arg("x"));
  CHECK(k.args[3] == Plan::Arg(4));
  CHECK(k.args[4] == Plan::Arg(Plan::Arg::Type::f32, "1.0/C"));
  CHECK(k.args[5] == Plan::Arg(Plan::Arg::Type::f64, "0.5"));
  CHECK(k.args[6] == Plan::Arg(Plan::Arg::Type::i32, 7));
  CHECK(k.args[7] == Plan::Arg(Plan::Arg::Type::i64, "R*C"));
  CHECK(p.kernels[1].name == "gemm<128, 64>");
  CHECK(p.kernels[1].cluster.empty());
  REQUIRE(p.scratch.size() == 2);
  CHECK(p.scratch[0].dtype == DType::f32);  // "float32" is a spelling of f32
  CHECK(p.scratch[0].shape == std::vector<Plan::Expr>{"R", "cdiv(C, 1024)"});
  CHECK_FALSE(p.scratch[0].bytes);
  CHECK(p.scratch[1].bytes == Plan::Expr(64));
  CHECK_FALSE(p.scratch[1].dtype);
  REQUIRE(p.variants.size() == 2);
  CHECK(p.variants[0].when.text == "C <= 1024");
  CHECK_FALSE(p.variants[0].scratch);  // keeps the top-level buffers
  REQUIRE(p.variants[1].scratch);
  CHECK(p.variants[1].scratch->at(0).shape.empty());
  CHECK(p.names() == std::vector<std::string>{"row_softmax", "gemm<128, 64>", "small", "big"});
  // Without a language the keys tell the schema.
  CHECK(Plan::from_json(Json::parse(kCudaPlan)) == p);
}

TEST_CASE("launch plan codec: a host call plan reads into typed fields") {
  Plan p = Plan::from_json(Json::parse(kCallPlan), Language::cpp);
  CHECK(p.is_call_plan());
  REQUIRE(p.calls.size() == 1);
  CHECK(p.calls[0].fn == "ns::matmul<4>");
  CHECK(p.calls[0].args[4] == Plan::Arg(8));
  CHECK(p.calls[0].args[5] == Plan::Arg(Plan::Arg::Type::f32, "1.0/K"));
  CHECK(p.calls[0].args[6] == Plan::Arg(Plan::Arg::Type::i32, "3"));
  REQUIRE(p.scratch.size() == 2);
  CHECK(p.scratch[1].bytes == Plan::Expr("64 * M"));
  CHECK(p.scratch[1].dtype == DType::u8);
  REQUIRE(p.variants.size() == 2);
  CHECK_FALSE(p.variants[0].scratch);
  REQUIRE(p.variants[1].scratch);
  CHECK(p.variants[1].scratch->empty());
  CHECK(p.names() == std::vector<std::string>{"ns::matmul<4>", "small", "big"});
  CHECK(Plan::from_json(Json::parse(kCallPlan)) == p);
}

TEST_CASE("launch plan codec: a plan writes back exactly as read while unchanged") {
  for (const char* text : {kCudaPlan, kCallPlan,
                           R"js({"kernels": [{"block": [32], "name": "k", "args": [], "grid": [1], "cluster": null, "shared_bytes": null}], "scratch": null, "variants": null})js",
                           R"js({"variants": [{"when": "N > 1", "kernels": [{"name": "k", "grid": [1], "block": [1], "args": []}], "scratch": null}]})js"}) {
    CAPTURE(text);
    Json j = Json::parse(text);
    Plan p = Plan::from_json(j);
    CHECK(p.to_json().dump() == j.dump());
    Plan copy = p;
    CHECK(copy.to_json().dump() == j.dump());
    // The canonical form reads back to the same fields.
    CHECK(Plan::from_json(rebuilt(p).to_json()) == p);
  }
}

TEST_CASE("launch plan codec: a changed or built plan writes its canonical form") {
  Plan p = Plan::from_json(Json::parse(R"js({"kernels": [{"args": ["x"], "name": "k", "grid": ["1"], "block": [32]}]})js"));
  p.kernels[0].block = {"BLOCK"};
  CHECK(p.to_json().dump() == R"js({"kernels":[{"name":"k","grid":[1],"block":["BLOCK"],"args":["x"]}]})js");
  p.kernels[0].block = {32};  // back to the fields as read: the JSON as read again
  CHECK(p.to_json().dump() == R"js({"kernels":[{"args":["x"],"name":"k","grid":["1"],"block":[32]}]})js");

  Plan built;
  built.kernels.push_back({.name = "scale",
                           .grid = {"cdiv(N, 256)"},
                           .block = {256},
                           .shared_bytes = Plan::Expr(1024),
                           .cluster = {},
                           .args = {"x", "y", "N", Plan::Arg(Plan::Arg::Type::f32, "1.0 / N")}});
  built.scratch.push_back({.name = "tmp", .dtype = DType::bf16, .shape = {"N", 2}, .bytes = std::nullopt});
  built.variants.push_back({.when = "N < 64", .kernels = {built.kernels[0]}, .calls = {}, .scratch = std::vector<Plan::Scratch>{}});
  CHECK(built.to_json().dump() ==
        R"js({"kernels":[{"name":"scale","grid":["cdiv(N, 256)"],"block":[256],"shared_bytes":1024,"args":["x","y","N",{"f32":"1.0 / N"}]}],)js"
        R"js("scratch":[{"name":"tmp","dtype":"bf16","shape":["N",2]}],)js"
        R"js("variants":[{"when":"N < 64","kernels":[{"name":"scale","grid":["cdiv(N, 256)"],"block":[256],"shared_bytes":1024,"args":["x","y","N",{"f32":"1.0 / N"}]}],"scratch":[]}]})js");
  CHECK(Plan::from_json(built.to_json(), Language::cuda) == built);

  Plan calls;
  calls.calls.push_back({.fn = "f", .args = {"x", 3}});
  calls.scratch.push_back({.name = "raw", .dtype = DType::u8, .shape = {}, .bytes = Plan::Expr("8 * N")});
  CHECK(calls.to_json().dump() == R"js({"calls":[{"fn":"f","args":["x",3]}],"scratch":[{"name":"raw","dtype":"u8","bytes":"8 * N"}]})js");
  CHECK(Plan::from_json(calls.to_json(), Language::cpp) == calls);

  // A call-plan variant whose condition is a constant: "when" stays a string,
  // which the call-plan reader insists on.
  calls.variants.push_back({.when = "1", .kernels = {}, .calls = {calls.calls[0]}, .scratch = std::nullopt});
  CHECK(calls.to_json().at("variants")[0].at("when").is_string());
  CHECK(Plan::from_json(calls.to_json(), Language::cpp) == calls);
}

TEST_CASE("launch plan codec: no plan is JSON null, and a solution without one keeps its id") {
  CHECK(Plan().empty());
  CHECK(Plan().to_json().is_null());
  CHECK(Plan::from_json(Json()).empty());
  Solution s;
  s.language = Language::cpp;
  s.sources = {{"kernel.cpp", "void f() {}"}};
  Json j = s.to_json();
  CHECK(j.at("launch_plan").is_null());
  CHECK(Solution::from_json(j).launch_plan.empty());
  CHECK(Solution::from_json(j).id == s.compute_id());
}

TEST_CASE("launch plan codec: structural errors name the field") {
  struct Case {
    const char* plan;
    Language lang;
    const char* needle;
  };
  const Case cases[] = {
      {"[1]", Language::cuda, "launch plan: expected a JSON object with \"kernels\", got [1]"},
      {"{}", Language::cuda, "launch plan: \"kernels\" is missing (the list of kernel launches"},
      {R"js({"grid": [1], "block": [32]})js", Language::cuda, "the plan has keys \"grid\", \"block\""},
      {R"js({"calls": [{"fn": "f", "args": []}]})js", Language::cuda, "a CUDA candidate needs a launch plan with \"kernels\""},
      {R"js({"kernels": []})js", Language::cuda, "launch plan: kernels: expected a non-empty array"},
      {R"js({"kernels": [{"name": "k", "block": [1], "args": []}]})js", Language::cuda, "launch plan: kernels[0]: \"grid\" is missing"},
      {R"js({"kernels": [{"grid": [1], "block": [1], "args": []}]})js", Language::cuda, "kernels[0]: missing required field \"name\""},
      {R"js({"kernels": [{"name": "", "grid": [1], "block": [1], "args": []}]})js", Language::cuda, "kernels[0]: \"name\" is empty"},
      {R"js({"kernels": [{"name": "k", "grid": [1, 2, 3, 4], "block": [1], "args": []}]})js", Language::cuda,
       "kernels[0].grid: expected one to three integer expressions"},
      {R"js({"kernels": [{"name": "k", "grid": [1], "block": [true], "args": []}]})js", Language::cuda,
       "kernels[0].block[0]: expected an integer expression"},
      {R"js({"kernels": [{"name": "k", "grid": [1], "block": [1], "cluster": [], "args": []}]})js", Language::cuda,
       "kernels[0].cluster: expected one to three"},
      {R"js({"kernels": [{"name": "k", "grid": [1], "block": [1], "shared_bytes": [4], "args": []}]})js", Language::cuda,
       "kernels[0].shared_bytes: expected an integer expression"},
      {R"js({"kernels": [{"name": "k", "grid": [1], "block": [1], "args": [0.5]}]})js", Language::cuda,
       "kernels[0].args[0]: 0.5 is not an integer; pass a floating value as {\"f32\": \"0.5\"}"},
      {R"js({"kernels": [{"name": "k", "grid": [1], "block": [1], "args": [{"f16": "1"}]}]})js", Language::cuda,
       "kernels[0].args[0]: expected a tensor or scratch name"},
      {R"js({"kernels": [{"name": "k", "grid": [1], "block": [1], "args": [{"f32": [1]}]}]})js", Language::cuda,
       "kernels[0].args[0].f32: expected an integer expression"},
      {R"js({"kernels": [{"name": "k", "grid": [1], "block": [1], "args": [], "smem": 10}]})js", Language::cuda,
       "kernels[0]: unknown field \"smem\""},
      {R"js({"kernels": [{"name": "k", "grid": [1], "block": [1], "args": []}], "scratch": {}})js", Language::cuda,
       "launch plan: scratch: expected an array of buffers"},
      {R"js({"kernels": [{"name": "k", "grid": [1], "block": [1], "args": []}], "scratch": [{"name": "s"}]})js", Language::cuda,
       "scratch[0]: scratch \"s\" needs either \"dtype\" and \"shape\", or \"bytes\""},
      {R"js({"kernels": [{"name": "k", "grid": [1], "block": [1], "args": []}], "scratch": [{"name": "s", "dtype": "f8", "shape": [1]}]})js",
       Language::cuda, "scratch[0].dtype: unknown dtype \"f8\""},
      {R"js({"kernels": [{"name": "k", "grid": [1], "block": [1], "args": []}], "variants": {}})js", Language::cuda,
       "launch plan: variants: expected an array"},
      {R"js({"variants": [{"kernels": [{"name": "k", "grid": [1], "block": [1], "args": []}]}]})js", Language::cuda,
       "launch plan: variants[0]: \"when\" is missing"},
      {R"js({"variants": [{"when": "N > 1"}]})js", Language::cuda, "launch plan: variants[0]: \"kernels\" is missing"},
      {R"js({"variants": [{"when": "N > 1", "kernels": [{"name": "k", "grid": [1], "args": []}]}]})js", Language::cuda,
       "launch plan: variants[0].kernels[0]: \"block\" is missing"},
      {"[1]", Language::cpp, "call plan: the plan must be a JSON object with \"calls\", found array"},
      {R"js({"kernels": [{"name": "k"}]})js", Language::cpp, "call plan: this is a CUDA launch plan"},
      {R"js({"scratch": []})js", Language::cpp, "call plan: \"calls\" must be a non-empty array of {\"fn\": ..., \"args\": [...]}; the plan has keys \"scratch\""},
      {R"js({"calls": []})js", Language::cpp, "call plan: \"calls\" must be a non-empty array"},
      {R"js({"calls": [{"args": []}]})js", Language::cpp, "call plan: calls[0] needs \"fn\""},
      {R"js({"calls": [{"fn": "f"}]})js", Language::cpp, "call plan: calls[0] (\"f\") needs \"args\": an array"},
      {R"js({"calls": [{"fn": "f", "args": [], "grid": [1]}]})js", Language::cpp, "calls[0] (\"f\"): unknown field \"grid\""},
      {R"js({"calls": [{"fn": "f", "args": [{"u8": "1"}]}]})js", Language::cpp, "calls[0] (\"f\") argument 0: typed scalar must be one of"},
      {R"js({"calls": [{"fn": "f", "args": [{"f32": [1]}]}]})js", Language::cpp, "argument 0: the value of \"f32\" must be an expression"},
      {R"js({"calls": [{"fn": "f", "args": [[1]]}]})js", Language::cpp, "calls[0] (\"f\") argument 0 must be a tensor name"},
      {R"js({"calls": [{"fn": "f", "args": []}], "scratch": [{"name": "s"}]})js", Language::cpp, "scratch \"s\" needs \"dtype\" and \"shape\", or \"bytes\""},
      {R"js({"calls": [{"fn": "f", "args": []}], "scratch": [{"name": "1s", "bytes": 4}]})js", Language::cpp,
       "scratch[0] needs a \"name\" that is an identifier"},
      {R"js({"calls": [{"fn": "f", "args": []}], "scratch": [{"name": "s", "dtype": "f33", "shape": [1]}]})js", Language::cpp,
       "scratch \"s\": unknown dtype \"f33\""},
      {R"js({"calls": [{"fn": "f", "args": []}], "scratch": [{"name": "s", "bytes": [1]}]})js", Language::cpp,
       "scratch \"s\": \"bytes\" must be an integer expression"},
      {R"js({"calls": [{"fn": "f", "args": []}], "variants": [{"calls": []}]})js", Language::cpp, "variants[0] needs \"when\""},
      {R"js({"calls": [{"fn": "f", "args": []}], "variants": [{"when": "N > 1", "calls": [{"fn": "g"}]}]})js", Language::cpp,
       "call plan: variants[0].calls[0] (\"g\") needs \"args\""},
      {R"js({"calls": [{"fn": "f", "args": []}], "extra": 1})js", Language::cpp, "call plan: unknown field \"extra\""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.plan);
    CHECK_MESSAGE(error_of(c.plan, c.lang).find(c.needle) != std::string::npos, error_of(c.plan, c.lang));
  }
}

constexpr const char* kGemmPlan = R"js({
  "kernels": [
    {"when": "M > 0", "gemm": {"b": "w", "a": "x", "d": "y", "m": "M", "n": 256, "k": "K", "trans_b": true,
                               "c": "y0", "bias": "bias", "beta": 0.5, "alpha": "1.0 / K", "epilogue": "gelu_bias",
                               "compute": "tf32", "lda": "K", "ldb": null, "batch": "B", "stride_a": "M * K",
                               "stride_c": 0, "algo": "ALGO"}},
    {"name": "scale", "grid": ["M"], "block": [256], "args": ["y", "M"], "when": "M % 2 == 0"},
    {"gemm": {"a": "y", "b": "w2", "d": "out", "m": "M", "n": "N", "k": 256, "trans_a": false, "ldd": "N + 8",
              "stride_b": 1, "stride_d": "M * (N + 8)", "ldc": 7, "stride_a": 0, "alpha": 2, "beta": null}}
  ]
})js";

TEST_CASE("launch plan codec: GEMM steps and per-step when read into typed fields") {
  Plan p = Plan::from_json(Json::parse(kGemmPlan), Language::cuda);
  REQUIRE(p.kernels.size() == 3);
  REQUIRE(p.kernels[0].gemm);
  CHECK(p.kernels[0].when == Plan::Expr("M > 0"));
  CHECK(p.kernels[0].name.empty());
  CHECK(p.kernels[0].args.empty());
  const Plan::Gemm& g = *p.kernels[0].gemm;
  CHECK(g.a == "x");
  CHECK(g.b == "w");
  CHECK(g.d == "y");
  CHECK(g.c == std::optional<std::string>("y0"));
  CHECK(g.bias == std::optional<std::string>("bias"));
  CHECK(g.m == Plan::Expr("M"));
  CHECK(g.n == Plan::Expr(256));
  CHECK_FALSE(g.trans_a);
  CHECK(g.trans_b);
  CHECK(g.lda == Plan::Expr("K"));
  CHECK_FALSE(g.ldb);  // null: the default
  CHECK_FALSE(g.ldc);
  CHECK(g.batch == Plan::Expr("B"));
  CHECK(g.stride_a == Plan::Expr("M * K"));
  CHECK(g.stride_c == Plan::Expr(0));
  CHECK(g.alpha == Plan::Expr("1.0 / K"));
  CHECK(g.beta == Plan::Expr("0.5"));  // a JSON number reads as its text
  CHECK(g.epilogue == Plan::Gemm::Epilogue::gelu_bias);
  CHECK(g.compute == Plan::Gemm::Compute::tf32);
  CHECK(g.algo == Plan::Expr("ALGO"));
  CHECK_FALSE(p.kernels[1].gemm);
  CHECK(p.kernels[1].when == Plan::Expr("M % 2 == 0"));
  const Plan::Gemm& g2 = *p.kernels[2].gemm;
  CHECK_FALSE(p.kernels[2].when);
  CHECK_FALSE(g2.c);
  CHECK_FALSE(g2.bias);
  CHECK(g2.alpha == Plan::Expr(2));
  CHECK_FALSE(g2.beta);
  CHECK(g2.epilogue == Plan::Gemm::Epilogue::none);
  CHECK(g2.compute == Plan::Gemm::Compute::f32);
  CHECK_FALSE(g2.algo);
  // GEMM steps name no kernel.
  CHECK(p.names() == std::vector<std::string>{"scale"});
  CHECK(std::string(to_string(Plan::Gemm::Epilogue::relu_bias)) == "relu_bias");
  CHECK(std::string(to_string(Plan::Gemm::Compute::tf32)) == "tf32");
}

TEST_CASE("launch plan codec: a plan with GEMM steps writes back exactly as read, and canonically when built") {
  Json j = Json::parse(kGemmPlan);
  Plan p = Plan::from_json(j);
  CHECK(p.to_json().dump() == j.dump());
  CHECK(Plan::from_json(rebuilt(p).to_json()) == p);
  // A changed field: the canonical form, every field in its place.
  p.kernels[0].gemm->algo = Plan::Expr(3);
  CHECK(p.to_json().dump() ==
        R"js({"kernels":[{"gemm":{"a":"x","b":"w","c":"y0","d":"y","bias":"bias","m":"M","n":256,"k":"K",)js"
        R"js("trans_b":true,"lda":"K","batch":"B","stride_a":"M * K","stride_c":0,"alpha":"1.0 / K","beta":"0.5",)js"
        R"js("epilogue":"gelu_bias","compute":"tf32","algo":3},"when":"M > 0"},)js"
        R"js({"name":"scale","grid":["M"],"block":[256],"args":["y","M"],"when":"M % 2 == 0"},)js"
        R"js({"gemm":{"a":"y","b":"w2","d":"out","m":"M","n":"N","k":256,"ldc":7,"ldd":"N + 8","stride_a":0,)js"
        R"js("stride_b":1,"stride_d":"M * (N + 8)","alpha":2}}]})js");

  Plan built;
  Plan::Gemm g;
  g.a = "x", g.b = "w", g.d = "y";
  g.m = "M", g.n = 64, g.k = "K";
  g.trans_a = true;
  g.ldb = Plan::Expr("N");
  g.batch = Plan::Expr("B");
  g.alpha = Plan::Expr("0.5");
  g.epilogue = Plan::Gemm::Epilogue::relu_bias;
  g.bias = "bias";
  g.algo = Plan::Expr(3);
  built.kernels.push_back({.when = Plan::Expr("M > 1"), .gemm = g});
  built.kernels.push_back({.name = "k", .grid = {1}, .block = {32}, .args = {"y"}, .when = Plan::Expr(0)});
  CHECK(built.to_json().dump() ==
        R"js({"kernels":[{"gemm":{"a":"x","b":"w","d":"y","bias":"bias","m":"M","n":64,"k":"K","trans_a":true,)js"
        R"js("ldb":"N","batch":"B","alpha":"0.5","epilogue":"relu_bias","algo":3},"when":"M > 1"},)js"
        R"js({"name":"k","grid":[1],"block":[32],"args":["y"],"when":"0"}]})js");
  CHECK(Plan::from_json(built.to_json(), Language::cuda) == built);
}

TEST_CASE("launch plan codec: GEMM steps' structural errors name the field") {
  struct Case {
    const char* plan;
    const char* message;
  };
  const Case cases[] = {
      {R"js({"kernels": [{"gemm": {"b": "w", "d": "y", "m": 1, "n": 1, "k": 1}}]})js",
       "launch plan: kernels[0].gemm: \"a\" is missing"},
      {R"js({"kernels": [{"gemm": {"a": "x", "b": "w", "d": "y", "n": 1, "k": 1}}]})js",
       "launch plan: kernels[0].gemm: \"m\" is missing"},
      {R"js({"kernels": [{"gemm": {"a": "x", "b": "w", "d": "", "m": 1, "n": 1, "k": 1}}]})js",
       "launch plan: kernels[0].gemm.d: expected the name of a tensor or scratch buffer, got \"\""},
      {R"js({"kernels": [{"gemm": {"a": "x", "b": "w", "d": "y", "m": 1, "n": 1, "k": 1, "transpose_a": true}}]})js",
       "launch plan: kernels[0].gemm: unknown field \"transpose_a\" (known fields: a, b, c, d, bias, m, n, k, "
       "trans_a, trans_b, lda, ldb, ldc, ldd, batch, stride_a, stride_b, stride_c, stride_d, alpha, beta, epilogue, "
       "compute, algo)"},
      {R"js({"kernels": [{"gemm": {"a": "x", "b": "w", "d": "y", "m": 1, "n": 1, "k": 1, "epilogue": "silu"}}]})js",
       "launch plan: kernels[0].gemm.epilogue: expected one of \"none\", \"relu\", \"gelu\", \"bias\", "
       "\"relu_bias\", \"gelu_bias\", got \"silu\""},
      {R"js({"kernels": [{"gemm": {"a": "x", "b": "w", "d": "y", "m": 1, "n": 1, "k": 1, "compute": "fp16"}}]})js",
       "launch plan: kernels[0].gemm.compute: expected one of \"f32\", \"tf32\", got \"fp16\""},
      {R"js({"kernels": [{"gemm": {"a": "x", "b": "w", "d": "y", "m": 1, "n": 1, "k": 1, "bias": "b"}}]})js",
       "launch plan: kernels[0].gemm: \"bias\" needs a bias epilogue (\"bias\", \"relu_bias\" or \"gelu_bias\")"},
      {R"js({"kernels": [{"gemm": {"a": "x", "b": "w", "d": "y", "m": 1, "n": 1, "k": 1, "epilogue": "relu_bias"}}]})js",
       "launch plan: kernels[0].gemm: epilogue \"relu_bias\" needs \"bias\": a buffer of n values"},
      {R"js({"kernels": [{"gemm": {"a": "x", "b": "w", "d": "y", "m": 1, "n": 1, "k": 1, "trans_a": "yes"}}]})js",
       "launch plan: kernels[0].gemm.trans_a: expected true or false, got \"yes\""},
      {R"js({"kernels": [{"gemm": {"a": "x", "b": "w", "d": "y", "m": 1, "n": 1, "k": 1, "trans_b": 1}}]})js",
       "launch plan: kernels[0].gemm.trans_b: expected true or false, got 1"},
      {R"js({"kernels": [{"gemm": {"a": "x", "b": "w", "d": "y", "m": 1.5, "n": 1, "k": 1}}]})js",
       "launch plan: kernels[0].gemm.m: expected an integer expression"},
      {R"js({"kernels": [{"gemm": {"a": "x", "b": "w", "d": "y", "m": 1, "n": 1, "k": 1, "alpha": true}}]})js",
       "launch plan: kernels[0].gemm.alpha: expected an integer expression"},
      {R"js({"kernels": [{"gemm": "matmul"}]})js",
       "launch plan: kernels[0].gemm: expected an object such as {\"a\": \"x\""},
      {R"js({"kernels": [{"gemm": {"a": "x", "b": "w", "d": "y", "m": 1, "n": 1, "k": 1}, "name": "k"}]})js",
       "launch plan: kernels[0]: unknown field \"name\" (known fields: gemm, when)"},
      {R"js({"kernels": [{"gemm": {"a": "x", "b": "w", "d": "y", "m": 1, "n": 1, "k": 1}, "when": true}]})js",
       "launch plan: kernels[0].when: expected an integer expression"},
      {R"js({"kernels": [{"name": "k", "grid": [1], "block": [1], "args": [], "when": [1]}]})js",
       "launch plan: kernels[0].when: expected an integer expression"},
      {R"js({"variants": [{"when": 1, "kernels": [{"gemm": {"a": "x", "b": "w", "d": "y", "m": 1, "k": 1}}]}]})js",
       "launch plan: variants[0].kernels[0].gemm: \"n\" is missing"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.plan);
    const std::string got = error_of(c.plan, Language::cuda);
    CHECK_MESSAGE(got.rfind(c.message, 0) == 0, got);  // the message, or (cut short above) its beginning
  }
}

TEST_CASE("launch plan codec: a stored plan off the schema is kept as written, with its problem") {
  Json bad = Json::parse(R"js({"kernels": [{"name": "k", "grid": [1], "smem": 4, "args": []}]})js");
  Plan p = Plan::as_written(bad, Language::cuda);
  CHECK_FALSE(p.readable());
  CHECK(p.problem().find("kernels[0]: unknown field \"smem\"") != std::string::npos);
  CHECK_FALSE(p.empty());
  CHECK(p.kernels.empty());
  CHECK(p.to_json().dump() == bad.dump());
  CHECK(Plan::as_written(Json::parse(kCudaPlan), Language::cuda) == Plan::from_json(Json::parse(kCudaPlan)));

  // A recorded solution with such a plan loads, keeps its id, and writes back as stored.
  Solution s;
  s.language = Language::cuda;
  s.sources = {{"kernel.cu", "__global__ void k() {}"}};
  s.launch_plan = p;
  s.finalize();
  Solution back = Solution::from_json(s.to_json());
  CHECK(back.id == s.id);
  CHECK_FALSE(back.launch_plan.readable());
  CHECK(back.to_json().at("launch_plan").dump() == bad.dump());
}

TEST_CASE("launch plan codec: the example of docs/launch-plan.md") {
  ks::LaunchPlan plan;
  plan.kernels.push_back({.name = "row_softmax", .grid = {"R"}, .block = {256}, .shared_bytes = {},
                          .cluster = {}, .args = {"x", "y", "R", "C", {ks::LaunchPlan::Arg::Type::f32, "1.0/C"}}});
  plan.scratch.push_back({.name = "partial", .dtype = ks::DType::f32, .shape = {"R", "cdiv(C, 1024)"}, .bytes = {}});
  ks::Json j = plan.to_json();
  CHECK(j.dump() == R"js({"kernels":[{"name":"row_softmax","grid":["R"],"block":[256],"args":["x","y","R","C",{"f32":"1.0/C"}]}],)js"
                    R"js("scratch":[{"name":"partial","dtype":"f32","shape":["R","cdiv(C, 1024)"]}]})js");
  ks::LaunchPlan back = ks::LaunchPlan::from_json(j, ks::Language::cuda);
  CHECK(back == plan);
}
