// Launch plans: parsing and resolution against a workload, a module and the
// limits of an H100 (no GPU needed).
#include <doctest/doctest.h>

#include <cstring>
#include <limits>
#include <map>

#include "eval/cuda/launch_plan.hpp"
#include "ksearch/error.hpp"

using namespace ks;
using namespace ks::eval::cuda;

namespace {

DeviceLimits h100() {
  DeviceLimits l;
  l.max_threads_per_block = 1024;
  l.max_shared_per_block = 48 * 1024;
  l.max_shared_per_block_optin = 232448;
  l.cluster_launch = true;
  l.max_cluster_size = 16;
  return l;
}

// A module with row_softmax(const float*, float*, int, long long, float),
// row_max(const float*, float*, int) and a template gemm<128, 64>(float*).
struct FakeModule {
  std::map<std::string, KernelDesc> kernels;
  FakeModule() {
    kernels["row_softmax"] = KernelDesc{"row_softmax", std::vector<ParamInfo>{{0, 8}, {8, 8}, {16, 4}, {24, 8}, {32, 4}}, 1024, 0};
    kernels["row_max"] = KernelDesc{"row_max", std::vector<ParamInfo>{{0, 8}, {8, 8}, {16, 4}}, 256, 1024};
    kernels["gemm<128,64>"] = KernelDesc{"_Z4gemmILi128ELi64EEvPf", std::vector<ParamInfo>{{0, 8}}, 1024, 0};
  }
  KernelCatalog catalog() const {
    KernelCatalog c;
    c.names = {"row_softmax", "row_max", "gemm<128, 64>"};
    c.find = [this](const std::string& n) -> const KernelDesc* {
      std::string key = n;
      key.erase(std::remove(key.begin(), key.end(), ' '), key.end());
      auto it = kernels.find(key);
      return it == kernels.end() ? nullptr : &it->second;
    };
    return c;
  }
};

const std::set<std::string> kTensors{"x", "y"};

std::string resolve_error(const std::string& plan_text, const util::Vars& vars = {{"R", 64}, {"C", 1000}}) {
  FakeModule m;
  try {
    resolve_plan(eval::cuda::LaunchPlan::parse(Json::parse(plan_text)), vars, kTensors, m.catalog(), h100());
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    return e.what();
  }
  FAIL("the plan should have been rejected: " << plan_text);
  return {};
}

std::string parse_error(const std::string& plan_text) {
  try {
    eval::cuda::LaunchPlan::parse(Json::parse(plan_text));
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    return e.what();
  }
  FAIL("the plan should not parse: " << plan_text);
  return {};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("launch plan: a valid plan resolves to launches with typed arguments") {
  FakeModule m;
  auto plan = eval::cuda::LaunchPlan::parse(Json::parse(R"js({
    "kernels": [{"name": "row_softmax", "grid": ["R", 1], "block": [256],
                 "shared_bytes": "C * 4", "args": ["x", "y", "R", "C", {"f32": "1.0 / C"}]}],
    "scratch": [{"name": "partial", "dtype": "f32", "shape": ["R", "cdiv(C, 1024)"]}]})js"));
  auto r = resolve_plan(plan, {{"R", 64}, {"C", 1000}}, kTensors, m.catalog(), h100());
  REQUIRE(r.launches.size() == 1);
  const auto& l = r.launches[0];
  CHECK(l.symbol == "row_softmax");
  CHECK(l.grid == std::array<unsigned, 3>{64, 1, 1});
  CHECK(l.block == std::array<unsigned, 3>{256, 1, 1});
  CHECK(l.shared_bytes == 4000);
  CHECK_FALSE(l.has_cluster);
  REQUIRE(l.args.size() == 5);
  CHECK(l.args[0].is_buffer);
  CHECK(l.args[0].buffer == "x");
  CHECK(l.args[2].size == 4);  // int parameter
  std::int32_t r32;
  std::memcpy(&r32, l.args[2].bytes.data(), 4);
  CHECK(r32 == 64);
  CHECK(l.args[3].size == 8);  // long long parameter: the width follows the kernel
  std::int64_t c64;
  std::memcpy(&c64, l.args[3].bytes.data(), 8);
  CHECK(c64 == 1000);
  float inv;
  std::memcpy(&inv, l.args[4].bytes.data(), 4);
  CHECK(inv == doctest::Approx(1.0 / 1000));
  REQUIRE(r.scratch.size() == 1);
  CHECK(r.scratch[0].bytes == 64 * 1 * 4);
  CHECK(r.variant == -1);
  CHECK(contains(r.describe(), "row_softmax grid 64x1x1 block 256x1x1"));
}

TEST_CASE("launch plan: an unknown kernel is named with the module's kernels") {
  auto msg = resolve_error(R"js({"kernels": [{"name": "foo", "grid": [1], "block": [32], "args": []}]})js");
  CHECK(contains(msg, "kernel `foo` not found in module; kernels are: row_softmax, row_max, gemm<128, 64>"));
}

TEST_CASE("launch plan: template kernels are found by name expression") {
  FakeModule m;
  auto plan = eval::cuda::LaunchPlan::parse(Json::parse(
      R"js({"kernels": [{"name": "gemm<128, 64>", "grid": [1], "block": [128], "args": ["y"]}]})js"));
  auto r = resolve_plan(plan, {}, kTensors, m.catalog(), h100());
  CHECK(r.launches[0].symbol == "_Z4gemmILi128ELi64EEvPf");
  auto msg = resolve_error(R"js({"kernels": [{"name": "gemm<64, 64>", "grid": [1], "block": [128], "args": ["y"]}]})js");
  CHECK(contains(msg, "not found in module"));
  CHECK(contains(msg, "instantiation"));
}

TEST_CASE("launch plan: argument count must match the kernel's parameters") {
  auto msg = resolve_error(
      R"js({"kernels": [{"name": "row_max", "grid": ["R"], "block": [128], "args": ["x", "y", "R", "C"]}]})js");
  CHECK(contains(msg, "kernel `row_max` takes 3 parameters but the plan passes 4 arguments"));
  FakeModule m;
  auto plan = eval::cuda::LaunchPlan::parse(Json::parse(
      R"js({"kernels": [{"name": "row_max", "grid": ["R"], "block": [128], "args": ["x"]}]})js"));
  CHECK_THROWS_WITH_AS(check_plan_against_module(plan, m.catalog()),
                       doctest::Contains("takes 3 parameters but the plan passes 1 argument"), Error);
}

TEST_CASE("launch plan: unknown names in expressions list what is known") {
  auto msg = resolve_error(
      R"js({"kernels": [{"name": "row_max", "grid": ["Rows"], "block": [128], "args": ["x", "y", "R"]}]})js");
  CHECK(contains(msg, "kernels[0] (kernel `row_max`) grid[0]"));
  CHECK(contains(msg, "unknown name \"Rows\" (known: C, R)"));
  msg = resolve_error(
      R"js({"kernels": [{"name": "row_max", "grid": ["R"], "block": [128], "args": ["x", "z", "R"]}]})js");
  CHECK(contains(msg, "argument 1 `z`: unknown name `z`; tensors: x, y; scratch: none; dimensions and parameters: C, R"));
}

TEST_CASE("launch plan: bad dimensions, block sizes and shared memory are rejected") {
  CHECK(contains(resolve_error(R"js({"kernels": [{"name": "row_max", "grid": ["R - 64"], "block": [128], "args": ["x", "y", "R"]}]})js"),
                 "grid[0]: `R - 64` = 0 is outside 1..2147483647"));
  CHECK(contains(resolve_error(R"js({"kernels": [{"name": "row_max", "grid": [1, 70000], "block": [128], "args": ["x", "y", "R"]}]})js"),
                 "is outside 1..65535"));
  CHECK(contains(resolve_error(R"js({"kernels": [{"name": "row_softmax", "grid": [1], "block": [64, 32], "args": ["x", "y", "R", "C", {"f32": "1"}]}]})js"),
                 "a block of 64x32x1 = 2048 threads exceeds the device's limit of 1024"));
  CHECK(contains(resolve_error(R"js({"kernels": [{"name": "row_max", "grid": [1], "block": [512], "args": ["x", "y", "R"]}]})js"),
                 "exceeds this kernel's limit of 256"));
  CHECK(contains(resolve_error(R"js({"kernels": [{"name": "row_max", "grid": [1], "block": [128], "shared_bytes": 232000, "args": ["x", "y", "R"]}]})js"),
                 "plus 1024 bytes of static shared memory exceeds the device's limit of 232448 bytes per block"));
  CHECK(contains(resolve_error(R"js({"kernels": [{"name": "row_max", "grid": [1], "block": [128], "shared_bytes": "cdiv(C, 0)", "args": ["x", "y", "R"]}]})js"),
                 "positive divisor"));
}

TEST_CASE("launch plan: more than 48 KB of dynamic shared memory is allowed up to the opt-in limit") {
  FakeModule m;
  auto plan = eval::cuda::LaunchPlan::parse(Json::parse(
      R"js({"kernels": [{"name": "row_max", "grid": [1], "block": [128], "shared_bytes": "200 * 1024", "args": ["x", "y", "R"]}]})js"));
  auto r = resolve_plan(plan, {{"R", 1}}, kTensors, m.catalog(), h100());
  CHECK(r.launches[0].shared_bytes == 200 * 1024);
}

TEST_CASE("launch plan: clusters must divide the grid and fit the device") {
  FakeModule m;
  auto plan = eval::cuda::LaunchPlan::parse(Json::parse(
      R"js({"kernels": [{"name": "row_max", "grid": [8, 2], "block": [128], "cluster": [2, 2], "args": ["x", "y", "R"]}]})js"));
  auto r = resolve_plan(plan, {{"R", 1}}, kTensors, m.catalog(), h100());
  CHECK(r.launches[0].has_cluster);
  CHECK(r.launches[0].cluster == std::array<unsigned, 3>{2, 2, 1});
  CHECK(contains(resolve_error(R"js({"kernels": [{"name": "row_max", "grid": [7], "block": [128], "cluster": [2], "args": ["x", "y", "R"]}]})js"),
                 "cluster[0] = 2 does not divide grid[0] = 7"));
  CHECK(contains(resolve_error(R"js({"kernels": [{"name": "row_max", "grid": [64], "block": [128], "cluster": [32], "args": ["x", "y", "R"]}]})js"),
                 "cluster[0]: `32` = 32 is outside 1..16"));
  DeviceLimits old = h100();
  old.cluster_launch = false;
  CHECK_THROWS_WITH_AS(resolve_plan(plan, {{"R", 1}}, kTensors, m.catalog(), old),
                       doctest::Contains("need thread-block clusters"), Error);
  // A 1x1x1 cluster is an ordinary launch.
  auto plain = eval::cuda::LaunchPlan::parse(Json::parse(
      R"js({"kernels": [{"name": "row_max", "grid": [7], "block": [128], "cluster": [1, 1, 1], "args": ["x", "y", "R"]}]})js"));
  CHECK_FALSE(resolve_plan(plain, {{"R", 1}}, kTensors, m.catalog(), old).launches[0].has_cluster);
}

TEST_CASE("launch plan: argument widths and values are checked against the kernel") {
  CHECK(contains(resolve_error(R"js({"kernels": [{"name": "row_max", "grid": [1], "block": [32], "args": ["x", "y", "R * 100000000"]}]})js",
                               {{"R", 64}}),
                 "= 6400000000 does not fit the kernel's 4-byte integer parameter"));
  CHECK(contains(resolve_error(R"js({"kernels": [{"name": "row_max", "grid": [1], "block": [32], "args": ["x", {"i32": "R"}, "R"]}]})js", {{"R", 1}}),
                 "an i32 value is 4 bytes but the kernel's parameter is 8 bytes"));
  CHECK(contains(resolve_error(R"js({"kernels": [{"name": "row_max", "grid": [1], "block": [32], "args": ["x", "y", {"f64": "R"}]}]})js", {{"R", 1}}),
                 "an f64 value is 8 bytes but the kernel's parameter is 4 bytes"));
  CHECK(contains(resolve_error(R"js({"kernels": [{"name": "row_max", "grid": [1], "block": [32], "args": ["x", "y", "R / 2.5"]}]})js", {{"R", 1}}),
                 "must give an integer"));
  CHECK(contains(resolve_error(R"js({"kernels": [{"name": "row_softmax", "grid": [1], "block": [32], "args": ["x", "y", "R", "C", "x"]}]})js"),
                 "a buffer is passed as an 8-byte pointer but the kernel's parameter 4 is 4 bytes"));
}

TEST_CASE("launch plan: variants pick kernels and scratch per shape") {
  FakeModule m;
  auto plan = eval::cuda::LaunchPlan::parse(Json::parse(R"js({
    "kernels": [{"name": "row_softmax", "grid": ["R"], "block": [256], "args": ["x", "y", "R", "C", {"f32": "1"}]}],
    "scratch": [{"name": "tmp", "bytes": "C"}],
    "variants": [
      {"when": "C <= 1024", "kernels": [{"name": "row_max", "grid": ["R"], "block": [128], "args": ["x", "tmp", "R"]}]},
      {"when": "C > 100000", "kernels": [{"name": "row_max", "grid": ["R"], "block": [128], "args": ["x", "big", "R"]}],
       "scratch": [{"name": "big", "dtype": "f64", "shape": ["C"]}]}]})js"));
  auto small = resolve_plan(plan, {{"R", 4}, {"C", 512}}, kTensors, m.catalog(), h100());
  CHECK(small.variant == 0);
  CHECK(small.launches[0].kernel == "row_max");
  REQUIRE(small.scratch.size() == 1);  // a variant without scratch keeps the top-level buffers
  CHECK(small.scratch[0].name == "tmp");
  auto big = resolve_plan(plan, {{"R", 4}, {"C", 200000}}, kTensors, m.catalog(), h100());
  CHECK(big.variant == 1);
  CHECK(big.scratch[0].name == "big");
  CHECK(big.scratch[0].bytes == 200000 * 8);
  auto mid = resolve_plan(plan, {{"R", 4}, {"C", 5000}}, kTensors, m.catalog(), h100());
  CHECK(mid.variant == -1);
  CHECK(mid.launches[0].kernel == "row_softmax");
  CHECK(plan.kernel_names() == std::vector<std::string>{"row_softmax", "row_max"});

  auto only_variants = eval::cuda::LaunchPlan::parse(Json::parse(R"js({"variants": [
      {"when": "C <= 1024", "kernels": [{"name": "row_max", "grid": ["R"], "block": [128], "args": ["x", "y", "R"]}]}]})js"));
  CHECK_THROWS_WITH_AS(resolve_plan(only_variants, {{"R", 4}, {"C", 4096}}, kTensors, m.catalog(), h100()),
                       doctest::Contains("no variant applies to this workload (C=4096, R=4)"), Error);
}

TEST_CASE("launch plan: scratch names may not shadow tensors or repeat") {
  CHECK(contains(resolve_error(R"js({"kernels": [{"name": "row_max", "grid": [1], "block": [32], "args": ["x", "y", "R"]}],
                                   "scratch": [{"name": "x", "bytes": 16}]})js"),
                 "already a tensor"));
  CHECK(contains(resolve_error(R"js({"kernels": [{"name": "row_max", "grid": [1], "block": [32], "args": ["x", "y", "R"]}],
                                   "scratch": [{"name": "t", "bytes": 16}, {"name": "t", "bytes": 8}]})js"),
                 "declared twice"));
  CHECK(contains(resolve_error(R"js({"kernels": [{"name": "row_max", "grid": [1], "block": [32], "args": ["x", "y", "R"]}],
                                   "scratch": [{"name": "t", "bytes": "0 - C"}]})js"),
                 "bytes = -1000 is negative"));
}

TEST_CASE("launch plan: malformed plans name the field") {
  CHECK(contains(parse_error("null"), "expected a JSON object with \"kernels\""));
  CHECK(contains(parse_error("{}"), "\"kernels\" is missing"));
  CHECK(contains(parse_error(R"js({"kernels": []})js"), "kernels: expected a non-empty array"));
  CHECK(contains(parse_error(R"js({"kernels": [{"name": "k", "block": [1], "args": []}]})js"), "kernels[0]: \"grid\" is missing"));
  CHECK(contains(parse_error(R"js({"kernels": [{"name": "k", "grid": [1, 2, 3, 4], "block": [1], "args": []}]})js"),
                 "kernels[0].grid: expected one to three integer expressions"));
  CHECK(contains(parse_error(R"js({"kernels": [{"name": "k", "grid": ["N +"], "block": [1], "args": []}]})js"),
                 "kernels[0].grid[0]: expression \"N +\""));
  CHECK(contains(parse_error(R"js({"kernels": [{"name": "k", "grid": [1], "block": [1], "args": [0.5]}]})js"),
                 "kernels[0].args[0]: 0.5 is not an integer; pass a floating value as {\"f32\": \"0.5\"}"));
  CHECK(contains(parse_error(R"js({"kernels": [{"name": "k", "grid": [1], "block": [1], "args": [{"f16": "1"}]}]})js"),
                 "expected a tensor or scratch name"));
  CHECK(contains(parse_error(R"js({"kernels": [{"name": "k", "grid": [1], "block": [1], "args": [], "shared": 10}]})js"),
                 "shared"));
  CHECK(contains(parse_error(R"js({"kernels": [{"name": "k", "grid": [1], "block": [1], "args": []}], "scratch": [{"name": "s"}]})js"),
                 "scratch \"s\" needs either \"dtype\" and \"shape\", or \"bytes\""));
  CHECK(contains(parse_error(R"js({"kernels": [{"name": "k", "grid": [1], "block": [1], "args": []}],
                                 "scratch": [{"name": "s", "dtype": "f8", "shape": [1]}]})js"),
                 "unknown dtype \"f8\""));
  CHECK(contains(parse_error(R"js({"variants": [{"kernels": [{"name": "k", "grid": [1], "block": [1], "args": []}]}]})js"),
                 "variants[0]: \"when\" is missing"));
}

TEST_CASE("launch plan: scalar inputs pass by name in their own type and are readable in expressions") {
  FakeModule m;
  // row_softmax(const float*, float*, int, long long, float)
  const eval::ScalarArgs scalars{{"sm_scale", {DType::f32, 0.125}}, {"offset", {DType::i32, 32}},
                                 {"wide", {DType::i64, 1e12}}};
  // Integer scalars are also plain variables (the flow adds them to vars).
  util::Vars vars{{"R", 64}, {"C", 1000}, {"offset", 32}, {"wide", 1000000000000}};
  auto plan = eval::cuda::LaunchPlan::parse(Json::parse(R"js({
    "kernels": [{"name": "row_softmax", "grid": ["R + offset"], "block": [256],
                 "args": ["x", "y", "offset", "wide", "sm_scale"]},
                {"name": "row_softmax", "grid": [1], "block": [32],
                 "args": ["x", "y", "C", {"i64": "C"}, {"f32": "sm_scale * 8"}]}]})js"));
  auto r = resolve_plan(plan, vars, kTensors, m.catalog(), h100(), scalars);
  REQUIRE(r.launches.size() == 2);
  CHECK(r.launches[0].grid[0] == 96);
  const auto& a = r.launches[0].args;
  std::int32_t off = 0;
  std::memcpy(&off, a[2].bytes.data(), 4);
  CHECK(off == 32);
  std::int64_t wide = 0;
  std::memcpy(&wide, a[3].bytes.data(), 8);
  CHECK(wide == 1000000000000);
  float scale = 0;
  CHECK(a[4].size == 4);
  std::memcpy(&scale, a[4].bytes.data(), 4);
  CHECK(scale == 0.125f);
  float scaled = 0;
  std::memcpy(&scaled, r.launches[1].args[4].bytes.data(), 4);
  CHECK(scaled == 1.0f);
  // A scalar whose type does not fit the kernel's parameter.
  auto wrong = eval::cuda::LaunchPlan::parse(Json::parse(R"js({"kernels": [{"name": "row_softmax", "grid": [1], "block": [32],
                 "args": ["x", "y", "C", "sm_scale", {"f32": "1"}]}]})js"));
  CHECK_THROWS_WITH_AS(resolve_plan(wrong, vars, kTensors, m.catalog(), h100(), scalars),
                       doctest::Contains("scalar input `sm_scale` is f32 (4 bytes) but the kernel's parameter is 8 bytes"),
                       Error);
  auto unknown = eval::cuda::LaunchPlan::parse(Json::parse(R"js({"kernels": [{"name": "row_max", "grid": [1], "block": [32],
                 "args": ["x", "y", "sm_scal"]}]})js"));
  CHECK_THROWS_WITH_AS(resolve_plan(unknown, vars, kTensors, m.catalog(), h100(), scalars),
                       doctest::Contains("scalar inputs: offset, sm_scale, wide;"), Error);
}

// ---------------------------------------------------------------------------
// GEMM steps and per-step "when"

namespace {

const std::set<std::string> kGemmTensors{"x", "w", "y", "y32", "c32", "xb", "wb", "bias16", "idx", "untyped"};
const std::map<std::string, DType> kGemmDtypes{
    {"x", DType::f16},   {"w", DType::f16},  {"y", DType::f16},       {"y32", DType::f32}, {"c32", DType::f32},
    {"xb", DType::bf16}, {"wb", DType::bf16}, {"bias16", DType::f16}, {"idx", DType::i32}};
const util::Vars kMNK{{"M", 64}, {"N", 128}, {"K", 32}, {"B", 4}};

ResolvedPlan resolve_gemm(const std::string& plan_text, const util::Vars& vars = kMNK) {
  FakeModule m;
  return resolve_plan(eval::cuda::LaunchPlan::parse(Json::parse(plan_text)), vars, kGemmTensors, m.catalog(), h100(),
                      {}, kGemmDtypes);
}

std::string gemm_error(const std::string& plan_text, const util::Vars& vars = kMNK) {
  try {
    resolve_gemm(plan_text, vars);
  } catch (const Error& e) {
    CHECK(e.status() == Status::invalid_argument);
    return e.what();
  }
  FAIL("the plan should have been rejected: " << plan_text);
  return {};
}

// A plan of one GEMM step: x @ w -> y (all f16, M x K times K x N) with `extra` fields.
std::string one_gemm(const std::string& extra = "") {
  return R"js({"kernels": [{"gemm": {"a": "x", "b": "w", "d": "y", "m": "M", "n": "N", "k": "K")js" +
         (extra.empty() ? "" : ", " + extra) + "}}]}";
}

}  // namespace

TEST_CASE("launch plan: a GEMM step resolves with dense defaults") {
  auto r = resolve_gemm(one_gemm());
  REQUIRE(r.launches.size() == 1);
  const ResolvedLaunch& l = r.launches[0];
  CHECK(l.step == 0);
  CHECK(l.kernel == "cuBLASLt GEMM");
  REQUIRE(l.gemm);
  const ResolvedGemm& g = *l.gemm;
  CHECK(g.a == "x");
  CHECK(g.b == "w");
  CHECK(g.c == "y");  // none named: D itself
  CHECK(g.d == "y");
  CHECK(g.bias.empty());
  CHECK(g.a_type == DType::f16);
  CHECK(g.d_type == DType::f16);
  CHECK((g.m == 64 && g.n == 128 && g.k == 32 && g.batch == 1));
  CHECK((g.lda == 32 && g.ldb == 128 && g.ldc == 128 && g.ldd == 128));
  CHECK((g.stride_a == 64 * 32 && g.stride_b == 32 * 128 && g.stride_c == 64 * 128 && g.stride_d == 64 * 128));
  CHECK(g.alpha == 1.0);
  CHECK(g.beta == 0.0);
  CHECK(g.epilogue == ks::LaunchPlan::Gemm::Epilogue::none);
  CHECK(g.compute == ks::LaunchPlan::Gemm::Compute::f32);
  CHECK(g.algo == 0);
  CHECK(g.bytes_a() == 64 * 32 * 2);
  CHECK(g.bytes_b() == 32 * 128 * 2);
  CHECK(g.bytes_d() == 64 * 128 * 2);
  CHECK(g.bytes_bias() == 0);
  CHECK(r.describe() == "cuBLASLt GEMM 64x128x32 x @ w -> y algo 0");
  CHECK(r.step_where(l) == "kernels[0]");
  CHECK(eval::cuda::LaunchPlan::parse(Json::parse(one_gemm())).kernel_names().empty());

  // Transposed operands: their rows are the stored ones.
  auto t = resolve_gemm(one_gemm(R"js("trans_a": true, "trans_b": true, "batch": "B")js")).launches[0].gemm;
  CHECK((t->lda == 64 && t->ldb == 32 && t->ldc == 128 && t->ldd == 128));
  CHECK((t->stride_a == 32 * 64 && t->stride_b == 128 * 32 && t->stride_d == 64 * 128));
  CHECK(t->batch == 4);
  CHECK(t->bytes_a() == 4 * 32 * 64 * 2);
  // f16 operands may write an f32 D; bf16 ones too.
  CHECK(resolve_gemm(one_gemm(R"js("d": "y32")js")).launches[0].gemm->d_type == DType::f32);
  CHECK(resolve_gemm(R"js({"kernels": [{"gemm": {"a": "xb", "b": "wb", "d": "y32", "m": 1, "n": 1, "k": 1}}]})js")
            .launches[0]
            .gemm->a_type == DType::bf16);
}

TEST_CASE("launch plan: a strided, batched GEMM step with every field set") {
  auto r = resolve_gemm(R"js({"kernels": [
      {"name": "row_max", "grid": ["M"], "block": [128], "args": ["x", "y", "M"]},
      {"gemm": {"a": "x", "b": "w", "c": "c32", "d": "y32", "bias": "b32", "m": "M", "n": "N", "k": "K",
                "trans_a": true, "lda": "M + 8", "ldb": "N * 2", "ldc": "N", "ldd": "N + 1", "batch": "B",
                "stride_a": "K * (M + 8) + 16", "stride_b": 0, "stride_c": "M * N", "stride_d": "M * (N + 1)",
                "alpha": 0.5, "beta": "1.0 / K", "epilogue": "relu_bias", "algo": "K % 7"}}],
    "scratch": [{"name": "b32", "dtype": "f32", "shape": ["N"]}]})js");
  REQUIRE(r.launches.size() == 2);
  CHECK(r.launches[1].step == 1);
  const ResolvedGemm& g = *r.launches[1].gemm;
  CHECK(g.c == "c32");
  CHECK(g.bias == "b32");
  CHECK((g.lda == 72 && g.ldb == 256 && g.ldc == 128 && g.ldd == 129));
  CHECK((g.stride_a == 32 * 72 + 16 && g.stride_b == 0 && g.stride_c == 64 * 128 && g.stride_d == 64 * 129));
  CHECK(g.alpha == 0.5);
  CHECK(g.beta == 1.0 / 32);
  CHECK(g.algo == 4);
  // Batch items, then rows, then one row's columns: A is stored K x M (transposed).
  CHECK(g.bytes_a() == (3 * (32 * 72 + 16) + 31 * 72 + 64) * 2);
  CHECK(g.bytes_b() == (0 + 31 * 256 + 128) * 2);
  CHECK(g.bytes_c() == (3 * 64 * 128 + 63 * 128 + 128) * 4);
  CHECK(g.bytes_d() == (3 * 64 * 129 + 63 * 129 + 128) * 4);
  CHECK(g.bytes_bias() == 128 * 4);
  CHECK(g.describe() == "cuBLASLt GEMM 4 x 64x128x32 x^T @ w -> y32 + 0.03125 * c32 epilogue relu_bias algo 4");
  CHECK(r.describe() == "row_max grid 64x1x1 block 128x1x1 smem 0; " + g.describe());

  // The bytes reached saturate rather than wrap round past 2^64.
  auto huge = resolve_gemm(one_gemm(R"js("batch": 3, "stride_a": "9223372036854775807")js")).launches[0].gemm;
  CHECK(huge->bytes_a() == std::numeric_limits<std::uint64_t>::max());
  CHECK(huge->bytes_b() == (2 * 32 * 128 + 31 * 128 + 128) * 2);

  auto tf32 = resolve_gemm(R"js({"kernels": [{"gemm": {"a": "y32", "b": "y32", "d": "c32", "m": 8, "n": 8, "k": 8,
                                                        "compute": "tf32", "trans_b": true, "algo": 63}}]})js");
  CHECK(tf32.launches[0].gemm->describe() == "cuBLASLt GEMM 8x8x8 y32 @ y32^T -> c32 compute tf32 algo 63");
}

TEST_CASE("launch plan: a GEMM step's buffers, dtypes, sizes and algo are checked") {
  CHECK(gemm_error(one_gemm(R"js("a": "z")js")) ==
        "launch plan: kernels[0] (GEMM step): a `z` is not a tensor or scratch buffer; tensors: bias16, c32, idx, "
        "untyped, w, wb, x, xb, y, y32; scratch: none");
  CHECK(gemm_error(R"js({"kernels": [{"gemm": {"a": "x", "b": "w", "d": "raw", "m": 1, "n": 1, "k": 1}}],
                        "scratch": [{"name": "raw", "bytes": 64}]})js") ==
        "launch plan: kernels[0] (GEMM step): d `raw` has no dtype; declare the scratch buffer with \"dtype\" and "
        "\"shape\"");
  CHECK(contains(gemm_error(one_gemm(R"js("b": "untyped")js")), "b `untyped` has no dtype"));
  CHECK(gemm_error(one_gemm(R"js("c": "y32", "beta": 1)js")) ==
        "launch plan: kernels[0] (GEMM step): c `y32` is f32 but d `y` is f16; they must match");
  CHECK(gemm_error(one_gemm(R"js("d": "y32", "bias": "bias16", "epilogue": "bias")js")) ==
        "launch plan: kernels[0] (GEMM step): bias `bias16` is f16 but d `y32` is f32; they must match");
  CHECK(gemm_error(one_gemm(R"js("b": "y32")js")) ==
        "launch plan: kernels[0] (GEMM step): a f16, b f32, d f16: a GEMM step takes a and b of one dtype, f16, bf16 "
        "or f32, and d of that dtype or f32 (for f16 and bf16)");
  CHECK(contains(gemm_error(one_gemm(R"js("a": "xb", "b": "wb")js")), "a bf16, b bf16, d f16: a GEMM step takes"));
  CHECK(contains(gemm_error(R"js({"kernels": [{"gemm": {"a": "y32", "b": "y32", "d": "y", "m": 1, "n": 1, "k": 1}}]})js"),
                 "a f32, b f32, d f16"));
  CHECK(contains(gemm_error(R"js({"kernels": [{"gemm": {"a": "idx", "b": "idx", "d": "y32", "m": 1, "n": 1, "k": 1}}]})js"),
                 "a i32, b i32, d f32"));
  CHECK(gemm_error(one_gemm(R"js("compute": "tf32")js")) ==
        "launch plan: kernels[0] (GEMM step): compute \"tf32\" is for f32 operands; these are f16");
  CHECK(gemm_error(one_gemm(R"js("m": "M - 64")js")) ==
        "launch plan: kernels[0] (GEMM step): m = `M - 64` = 0 is outside 1..2147483647");
  CHECK(contains(gemm_error(one_gemm(R"js("batch": "B - 4")js")), "batch = `B - 4` = 0 is outside 1..2147483647"));
  CHECK(contains(gemm_error(one_gemm(R"js("k": "Q")js")), "kernels[0] (GEMM step).k: expression \"Q\": unknown name"));
  CHECK(gemm_error(one_gemm(R"js("lda": "K - 1")js")) ==
        "launch plan: kernels[0] (GEMM step): lda = `K - 1` = 31 is less than a stored row (32 elements)");
  CHECK(contains(gemm_error(one_gemm(R"js("trans_a": true, "lda": 63)js")),
                 "lda = `63` = 63 is less than a stored row (64 elements)"));
  // Past the 32-bit range the message says so (it used to call 2^31 "less than a stored row").
  CHECK(gemm_error(one_gemm(R"js("ldd": "2147483648")js")) ==
        "launch plan: kernels[0] (GEMM step): ldd = `2147483648` = 2147483648 is more than 2147483647");
  CHECK(contains(gemm_error(one_gemm(R"js("stride_b": "0 - 1", "batch": 2)js")), "stride_b = `0 - 1` = -1 is negative"));
  CHECK(gemm_error(one_gemm(R"js("algo": 64)js")) ==
        "launch plan: kernels[0] (GEMM step): algo = `64` = 64 is outside 0..63");
  CHECK(contains(gemm_error(one_gemm(R"js("algo": "K - 33")js")), "algo = `K - 33` = -1 is outside 0..63"));
  CHECK(contains(gemm_error(one_gemm(R"js("alpha": "1 / 0")js")), "kernels[0] (GEMM step).alpha: expression"));
  // Without the tensors' dtypes a tensor cannot be an operand.
  FakeModule m;
  CHECK_THROWS_WITH_AS(resolve_plan(eval::cuda::LaunchPlan::parse(Json::parse(one_gemm())), kMNK, kGemmTensors,
                                    m.catalog(), h100()),
                       doctest::Contains("a `x` has no dtype"), Error);
}

TEST_CASE("launch plan: a step's \"when\" leaves it out, keeping the others' places") {
  const std::string plan = R"js({"kernels": [
      {"gemm": {"a": "x", "b": "w", "d": "y", "m": "M", "n": "N", "k": "K"}, "when": "M > 64"},
      {"name": "row_max", "grid": ["M"], "block": [128], "args": ["x", "y", "M"], "when": "M <= 64"},
      {"gemm": {"a": "x", "b": "w", "d": "y32", "m": "M", "n": "N", "k": "K"}}]})js";
  auto small = resolve_gemm(plan);
  REQUIRE(small.launches.size() == 2);
  CHECK(small.launches[0].kernel == "row_max");
  CHECK(small.launches[0].step == 1);
  CHECK(small.launches[1].step == 2);
  CHECK(small.launches[1].gemm->d == "y32");
  auto big = resolve_gemm(plan, {{"M", 65}, {"N", 8}, {"K", 8}});
  REQUIRE(big.launches.size() == 2);
  CHECK(big.launches[0].step == 0);
  CHECK(big.launches[0].gemm);
  CHECK(big.launches[1].step == 2);

  // A step skipped is not resolved: its errors do not matter where it does not run.
  const std::string guarded = R"js({"kernels": [
      {"name": "row_max", "grid": ["M"], "block": [128], "args": ["x", "y", "M"]},
      {"gemm": {"a": "x", "b": "w", "d": "y", "m": "M - 64", "n": "N", "k": "K"}, "when": "M > 64"}]})js";
  CHECK(resolve_gemm(guarded).launches.size() == 1);
  CHECK(resolve_gemm(guarded, {{"M", 65}, {"N", 8}, {"K", 8}}).launches.size() == 2);

  CHECK(gemm_error(R"js({"kernels": [
      {"gemm": {"a": "x", "b": "w", "d": "y", "m": "M", "n": "N", "k": "K"}, "when": "M > 64"},
      {"name": "row_max", "grid": ["M"], "block": [128], "args": ["x", "y", "M"], "when": 0}]})js") ==
        "launch plan: kernels: every step's \"when\" is zero for this workload: nothing would run");
  auto in_variant = R"js({"kernels": [{"name": "row_max", "grid": [1], "block": [128], "args": ["x", "y", "M"]}],
      "variants": [{"when": "B > 1", "kernels": [
          {"name": "row_max", "grid": [1], "block": [128], "args": ["x", "y", "M"], "when": "K > 16"},
          {"gemm": {"a": "x", "b": "w", "d": "y", "m": "M", "n": "N", "k": "K"}, "when": "M * 0.5 > 40"}]}]})js";
  CHECK(gemm_error(in_variant, {{"M", 64}, {"N", 8}, {"K", 8}, {"B", 2}}) ==
        "launch plan: variants[0].kernels: every step's \"when\" is zero for this workload: nothing would run");
  auto v = resolve_gemm(in_variant, {{"M", 100}, {"N", 8}, {"K", 8}, {"B", 2}});
  REQUIRE(v.launches.size() == 1);
  CHECK(v.variant == 0);
  CHECK(v.step_where(v.launches[0]) == "variants[0].kernels[1]");
  CHECK(contains(gemm_error(R"js({"kernels": [{"name": "row_max", "grid": [1], "block": [128], "args": ["x", "y", "M"],
                                              "when": "Q > 1"}]})js"),
                 "launch plan: kernels[0].when: expression \"Q > 1\": unknown name"));
  CHECK(contains(parse_error(R"js({"kernels": [{"name": "row_max", "grid": [1], "block": [128], "args": [],
                                                "when": "M >"}]})js"),
                 "launch plan: kernels[0].when: expression \"M >\""));
}

TEST_CASE("launch plan: C read in place takes D's layout, and a batch's outputs may not overlap") {
  // c omitted (or d): ldc and stride_c follow ldd and stride_d.
  auto g = resolve_gemm(one_gemm(R"js("ldd": "2*N", "batch": "B", "beta": 1)js")).launches[0].gemm;
  REQUIRE(g);
  CHECK(g->c == "y");
  CHECK(g->ldc == 256);
  CHECK(g->ldc == g->ldd);
  CHECK(g->stride_c == g->stride_d);
  CHECK(gemm_error(one_gemm(R"js("ldd": "2*N", "ldc": "N", "beta": 1)js")) ==
        "launch plan: kernels[0] (GEMM step): c is d (`y`), read in place, so ldc and stride_c must be ldd and "
        "stride_d (256 and 16384), not 128 and 16384");
  // Stacked outputs, or side by side within D's rows: both fine.
  CHECK(resolve_gemm(one_gemm(R"js("batch": 2, "n": 32, "ldd": 128, "stride_d": 32)js")).launches.size() == 1);
  CHECK(resolve_gemm(one_gemm(R"js("batch": 2, "stride_d": "M*N")js")).launches.size() == 1);
  CHECK(gemm_error(one_gemm(R"js("d": "x")js")) ==
        "launch plan: kernels[0] (GEMM step): d `x` is also a: the step would read and write it at once; write D to "
        "another buffer");
  CHECK(gemm_error(one_gemm(R"js("batch": 2, "stride_d": 0)js")) ==
        "launch plan: kernels[0] (GEMM step): stride_d = 0 makes the batch's outputs overlap (m = 64, n = 128, ldd = "
        "128); stack them (stride_d >= 8192) or place them side by side in D's rows");
}
