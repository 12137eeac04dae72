// Launch plans: parsing and resolution against a workload, a module and the
// limits of an H100 (no GPU needed).
#include <doctest/doctest.h>

#include <cstring>
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
