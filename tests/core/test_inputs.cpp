// Inputs of FlashInfer-style tasks: structured generators (indptr, page
// tables), scalar inputs, inputs given as data, clamped normals, real-valued
// expression variables, and the task checks that come with them.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "core/elements.hpp"
#include "core/inputs.hpp"
#include "core/rng/structured.hpp"
#include "core/safetensors.hpp"
#include "ksearch/error.hpp"
#include "ksearch/task.hpp"
#include "support/test_util.hpp"
#include "util/expr.hpp"

using namespace ks;
using namespace ks::core;

TEST_CASE("indptr: starts at 0, is monotone, ends at the total, every segment at least min_length") {
  for (std::uint64_t seed : {1u, 2u, 99u}) {
    for (auto [n, total, minlen] : {std::tuple{9, 100, 1}, std::tuple{2, 5, 1}, std::tuple{65, 64 * 7, 7},
                                    std::tuple{17, 4000, 1}, std::tuple{1, 0, 1}}) {
      CAPTURE(seed);
      CAPTURE(n);
      auto a = generate_indptr(static_cast<std::size_t>(n), total, minlen, seed, 5);
      REQUIRE(a.size() == static_cast<std::size_t>(n));
      CHECK(a.front() == 0);
      CHECK(a.back() == total);
      for (std::size_t i = 1; i < a.size(); ++i) CHECK(a[i] - a[i - 1] >= minlen);
    }
  }
  // Lengths vary (not all equal) and depend on the seed.
  auto a = generate_indptr(33, 3200, 1, 7, 1), b = generate_indptr(33, 3200, 1, 8, 1);
  CHECK(a != b);
  std::set<std::int64_t> lengths;
  for (std::size_t i = 1; i < a.size(); ++i) lengths.insert(a[i] - a[i - 1]);
  CHECK(lengths.size() > 5);
  CHECK(generate_indptr(33, 3200, 1, 7, 1) == a);  // deterministic
  CHECK_THROWS_WITH_AS(generate_indptr(5, 3, 1, 0, 0), doctest::Contains("4 segments of at least 1 each cannot end at 3"), Error);
  CHECK_THROWS_AS(generate_indptr(0, 0, 1, 0, 0), Error);
}

TEST_CASE("permutation: distinct values in range, in a seeded order that is never the identity") {
  for (auto [count, range] : {std::pair{1000, 1000}, std::pair{37, 100000}, std::pair{2, 2}, std::pair{5, 5}}) {
    for (std::uint64_t seed = 0; seed < 20; ++seed) {
      CAPTURE(count);
      CAPTURE(seed);
      auto p = generate_permutation(static_cast<std::size_t>(count), range, seed, 3);
      std::set<std::int64_t> seen(p.begin(), p.end());
      CHECK(seen.size() == p.size());
      CHECK(*seen.begin() >= 0);
      CHECK(*seen.rbegin() < range);
      bool identity = true;
      for (std::size_t i = 0; i < p.size(); ++i) identity = identity && p[i] == static_cast<std::int64_t>(i);
      CHECK_FALSE(identity);
    }
  }
  // A full permutation covers every page.
  auto full = generate_permutation(64, 64, 11, 2);
  CHECK(std::set<std::int64_t>(full.begin(), full.end()).size() == 64);
  CHECK(generate_permutation(64, 64, 11, 2) == full);
  CHECK(generate_permutation(64, 64, 12, 2) != full);
  CHECK_THROWS_WITH_AS(generate_permutation(10, 9, 0, 0), doctest::Contains("cannot draw 10 distinct values from [0, 9)"), Error);
  CHECK(generate_permutation(1, 1, 0, 0) == std::vector<std::int64_t>{0});
}

TEST_CASE("expressions read real-valued variables after integer ones") {
  util::Expr e = util::Expr::parse("sm_scale * 2 + N");
  CHECK(e.eval_double({{"N", 3}}, {{"sm_scale", 0.25}}) == doctest::Approx(3.5));
  CHECK_THROWS_WITH_AS(e.eval_double({{"N", 3}}), doctest::Contains("unknown name \"sm_scale\""), Error);
  CHECK(util::Expr::parse("N").eval_int({{"N", 3}}, {{"N", 9.5}}) == 3);  // integers first
  CHECK_THROWS_WITH_AS(util::Expr::parse("x").eval_int({}, {{"x", 0.5}}), doctest::Contains("must give an integer"), Error);
}

namespace {

// A paged-attention-shaped task: random values, a clamped fp8 input, an
// indptr, a page table, scalars, and an input given as data.
TaskSpec paged_task() {
  return TaskSpec::from_json(Json::parse(R"JSON({
    "name": "test/paged", "languages": ["cpp"],
    "dims": ["batch_size", "num_pages", "len_indptr", "num_kv_indices"],
    "tensors": [
      {"name": "q", "dtype": "bf16", "shape": ["batch_size", 4]},
      {"name": "cache", "dtype": "f8e4m3", "shape": ["num_pages", 4], "dist": {"kind": "clamped_normal", "low": -2, "high": 2}},
      {"name": "kv_indptr", "dtype": "i32", "shape": ["len_indptr"], "dist": {"kind": "indptr", "total": "num_kv_indices"}},
      {"name": "kv_indices", "dtype": "i32", "shape": ["num_kv_indices"], "dist": {"kind": "permutation", "range": "num_pages"}},
      {"name": "sm_scale", "dtype": "f32", "shape": null, "dist": {"kind": "constant", "value": "1/sqrt(128)"}},
      {"name": "offset", "dtype": "i32", "shape": null, "dist": {"kind": "int_range", "low": 0, "high": 7}},
      {"name": "weights", "dtype": "i8", "shape": [3]},
      {"name": "out", "dtype": "f32", "shape": ["batch_size"], "role": "output"}
    ],
    "workloads": [
      {"name": "w", "dims": {"batch_size": 3, "num_pages": 50, "len_indptr": 4, "num_kv_indices": 20}, "seed": 4,
       "benchmark": true, "dist": {"sm_scale": {"kind": "constant", "value": 0.5}},
       "data": {"weights": {"values": [1, -2, 300]}}}
    ],
    "references": {"cpp": {"language": "cpp", "sources": [{"path": "r.cpp", "content": "void f() {}"}],
                           "launch_plan": {"calls": [{"fn": "f", "args": []}]}}}
  })JSON"));
}

}  // namespace

TEST_CASE("task inputs: scalars, data, structured and clamped inputs as the evaluation generates them") {
  TaskSpec t = paged_task();
  t.validate();
  const TensorSpec* scale = t.find_tensor("sm_scale");
  REQUIRE(scale);
  CHECK(scale->scalar);
  CHECK(scale->to_json()["shape"].is_null());
  CHECK(TensorSpec::from_json(scale->to_json()).scalar);
  const WorkloadSpec& w = t.workloads[0];
  CHECK(WorkloadSpec::from_json(w.to_json()).data.at("weights").values == std::vector<double>{1, -2, 300});
  // The workload sets sm_scale; `offset` is drawn once per workload, an integer.
  CHECK(scalar_value(*scale, w) == 0.5);
  const double offset = scalar_value(*t.find_tensor("offset"), w);
  CHECK(offset == std::floor(offset));
  CHECK(offset >= 0);
  CHECK(offset <= 7);
  WorkloadSpec plain = w;
  plain.dist_overrides.clear();
  CHECK(scalar_value(*scale, plain) == static_cast<float>(1 / std::sqrt(128.0)));  // rounded to f32

  auto in = generate_host_inputs(t, w, 1);
  CHECK(in.at("sm_scale").scalar == 0.5);
  CHECK(in.at("sm_scale").bytes.empty());
  const auto& ip = in.at("kv_indptr");
  REQUIRE(ip.count() == 4);
  CHECK(ip.at(0) == 0);
  CHECK(ip.at(3) == 20);
  const auto& idx = in.at("kv_indices");
  std::set<double> pages;
  for (std::size_t i = 0; i < idx.count(); ++i) pages.insert(idx.at(i));
  CHECK(pages.size() == 20);
  CHECK(*pages.rbegin() < 50);
  const auto& cache = in.at("cache");
  double lo = 0, hi = 0;
  for (std::size_t i = 0; i < cache.count(); ++i) {
    lo = std::min(lo, cache.at(i));
    hi = std::max(hi, cache.at(i));
  }
  CHECK(lo >= -2);
  CHECK(hi <= 2);
  CHECK(lo < -1);  // a normal, not a uniform squeezed into the range
  const auto& wt = in.at("weights");
  CHECK(wt.at(0) == 1);
  CHECK(wt.at(1) == -2);
  CHECK(wt.at(2) == 127);  // inline values convert (and saturate) like generated ones
  // Another input seed redraws random inputs; data stays.
  auto in0 = generate_host_inputs(t, w, 0);
  CHECK(in0.at("q").bytes != in.at("q").bytes);
  CHECK(in0.at("weights").bytes == wt.bytes);
}

TEST_CASE("task inputs: data from a .safetensors file must have the tensor's dtype and shape") {
  auto dir = test::scratch_dir("inputs_safetensors");
  std::vector<unsigned char> w3 = {1, 0xFE, 3};
  write_safetensors(dir / "d.safetensors", {{"weights", DType::i8, {3}, w3}, {"wrong", DType::i32, {3}, std::vector<unsigned char>(12)}});
  TaskSpec t = paged_task();
  WorkloadSpec w = t.workloads[0];
  w.data["weights"] = InputData{{}, "d.safetensors", "weights"};
  const auto shape = std::vector<std::int64_t>{3};
  auto bytes = input_data_bytes(*t.find_tensor("weights"), w, shape, dir);
  CHECK(load_element(bytes.data(), DType::i8, 1) == -2);
  w.data["weights"].key = "wrong";
  CHECK_THROWS_WITH_AS(input_data_bytes(*t.find_tensor("weights"), w, shape, dir),
                       doctest::Contains("workload \"w\", input \"weights\": tensor \"wrong\" has dtype I32 but the task's input is i8"),
                       Error);
  w.data["weights"].key = "weights";
  CHECK_THROWS_WITH_AS(input_data_bytes(*t.find_tensor("weights"), w, {4}, dir),
                       doctest::Contains("has shape [3] but the workload needs [4]"), Error);
  w.data["weights"].file = "missing.safetensors";
  CHECK_THROWS_WITH_AS(input_data_bytes(*t.find_tensor("weights"), w, shape, dir), doctest::Contains("not found"), Error);
}

TEST_CASE("task checks for scalars, data, structured inputs, feedback workloads and baselines") {
  auto fails = [](auto edit, const char* needle) {
    TaskSpec t = paged_task();
    edit(t);
    CHECK_THROWS_WITH_AS(t.validate(), doctest::Contains(needle), Error);
  };
  fails([](TaskSpec& t) { t.tensors.back().scalar = true; }, "output \"out\" cannot be a scalar");
  fails([](TaskSpec& t) { t.tensors[4].dtype = DType::bf16; }, "scalar \"sm_scale\" must be f32, f64, an integer type or bool");
  fails([](TaskSpec& t) { t.tensors[2].dtype = DType::f32; }, "the \"indptr\" distribution needs an integer dtype");
  fails([](TaskSpec& t) { t.workloads[0].dims["num_kv_indices"] = 2; },
        "input \"kv_indptr\": an indptr of 3 segments of at least 1 each cannot end at 2");
  fails([](TaskSpec& t) { t.workloads[0].dims["num_pages"] = 10; },
        "input \"kv_indices\": a permutation cannot draw 20 distinct values from [0, 10)");
  fails([](TaskSpec& t) { t.workloads[0].data["nope"] = InputData{{1}, "", ""}; }, "gives data for unknown tensor \"nope\"");
  fails([](TaskSpec& t) { t.workloads[0].data["out"] = InputData{{1}, "", ""}; }, "gives data for output \"out\"");
  fails([](TaskSpec& t) { t.workloads[0].data["sm_scale"] = InputData{{1}, "", ""}; }, "gives data for scalar \"sm_scale\"");
  fails([](TaskSpec& t) { t.workloads[0].data["weights"].values = {1, 2}; }, "input \"weights\" is given 2 values but has 3 elements");
  fails([](TaskSpec& t) { t.feedback_workloads = {"w", "zz"}; }, "feedback workload \"zz\" is not a workload");
  fails([](TaskSpec& t) { t.feedback_workloads = {"w", "w"}; }, "feedback workload \"w\" is listed twice");
  fails([](TaskSpec& t) { t.score = ScoreMode::vs_baseline; }, "\"score\": \"vs_baseline\" needs a baseline solution");
  // The new fields survive the JSON round trip that workers see.
  TaskSpec t = paged_task();
  t.feedback_workloads = {"w"};
  t.score = ScoreMode::vs_baseline;
  t.baselines[Language::cpp] = t.references.at(Language::cpp);
  t.baselines[Language::cpp].name = "baseline";
  t.validate();
  TaskSpec back = TaskSpec::from_json(t.to_json());
  CHECK(back.feedback_workloads == t.feedback_workloads);
  CHECK(back.score == ScoreMode::vs_baseline);
  CHECK(back.baselines.at(Language::cpp).name == "baseline");
  CHECK(back.to_json() == t.to_json());
  // A task without them serializes as before (no new keys).
  CHECK_FALSE(paged_task().to_json().contains("score"));
}
