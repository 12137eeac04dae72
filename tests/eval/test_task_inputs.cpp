// The evaluator end to end (host backend, real worker processes) on a task
// with the inputs FlashInfer-Bench definitions need: an fp8 cache, an indptr
// and a page table generated per seed, scalar inputs passed by value, and an
// input given as inline data. A kernel that reads pages in order instead of
// through the page table, or ignores a scalar, fails. Also: comparison of the
// new element types, and scalar arguments in call plans and launch plans.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "eval/compare.hpp"
#include "eval/host/call_plan.hpp"
#include "fixtures.hpp"
#include "ksearch/error.hpp"
#include "ksearch/eval.hpp"
#include "ksearch/sys/evaluator.hpp"
#include "support/test_util.hpp"

using namespace ks;
using namespace ks::eval;
using namespace ks::eval::host;

namespace {

// out[b] = sm_scale * sum over the request's pages j of fp8 cache[j] * w[j % 3] + offset
TaskSpec gather_task() {
  Json j = Json::parse(R"JSON({
    "name": "test/paged_gather", "languages": ["cpp"],
    "dims": ["batch_size", "num_pages", "len_indptr", "num_kv_indices"],
    "tensors": [
      {"name": "cache", "dtype": "f8e4m3", "shape": ["num_pages"], "dist": {"kind": "clamped_normal", "low": -2, "high": 2}},
      {"name": "kv_indptr", "dtype": "i32", "shape": ["len_indptr"], "dist": {"kind": "indptr", "total": "num_kv_indices"}},
      {"name": "kv_indices", "dtype": "i32", "shape": ["num_kv_indices"], "dist": {"kind": "permutation", "range": "num_pages"}},
      {"name": "w", "dtype": "i16", "shape": [3]},
      {"name": "sm_scale", "dtype": "f32", "shape": null, "dist": {"kind": "constant", "value": 0.125}},
      {"name": "offset", "dtype": "i32", "shape": null, "dist": {"kind": "constant", "value": 3}},
      {"name": "out", "dtype": "f32", "shape": ["batch_size"], "role": "output"}
    ],
    "workloads": [
      {"name": "small", "dims": {"batch_size": 3, "num_pages": 40, "len_indptr": 4, "num_kv_indices": 25}, "seed": 1,
       "data": {"w": {"values": [1, -2, 3]}}},
      {"name": "big", "dims": {"batch_size": 16, "num_pages": 5000, "len_indptr": 17, "num_kv_indices": 3000}, "seed": 2,
       "benchmark": true, "dist": {"sm_scale": {"kind": "constant", "value": 0.5}, "offset": {"kind": "constant", "value": -7}},
       "data": {"w": {"values": [2, 1, -1]}}}
    ],
    "tolerance": {"atol": 1e-4, "rtol": 1e-4, "rule": "abs_or_rel", "nan_policy": "forbid"},
    "references": {"cpp": {"language": "cpp", "name": "reference",
      "sources": [{"path": "ref.cpp", "content": "KERNEL"}],
      "launch_plan": {"calls": [{"fn": "paged_gather", "args": ["cache", "kv_indptr", "kv_indices", "w", "sm_scale", "offset", "out", "batch_size"]}]}}}
  })JSON");
  j["references"]["cpp"]["sources"][0]["content"] = std::string(R"CPP(
#include <cmath>
#include <cstdint>
#include <cstring>
static float fp8(std::uint8_t b) {  // E4M3FN
  const int e = (b >> 3) & 15, m = b & 7;
  const float v = e == 0 ? std::ldexp(float(m), -9) : std::ldexp(float(8 + m), e - 10);
  return (b & 0x80) ? -v : v;
}
void paged_gather(const std::uint8_t* cache, const std::int32_t* indptr, const std::int32_t* indices,
                  const std::int16_t* w, float sm_scale, std::int32_t offset, float* out, std::int64_t B) {
  for (std::int64_t b = 0; b < B; ++b) {
    double acc = 0;
    for (std::int32_t k = indptr[b]; k < indptr[b + 1]; ++k) {
      const std::int32_t page = indices[k];
      acc += double(fp8(cache[page])) * w[page % 3];
    }
    out[b] = float(sm_scale * acc + offset);
  }
}
)CPP");
  TaskSpec t = TaskSpec::from_json(j);
  t.validate();
  return t;
}

Solution variant(const std::string& from, const std::string& to, const std::string& name) {
  Solution s = gather_task().references.at(Language::cpp);
  std::string& src = s.sources[0].content;
  auto at = src.find(from);
  REQUIRE(at != std::string::npos);
  src.replace(at, from.size(), to);
  s.name = name;
  return s.finalize();
}

}  // namespace

TEST_CASE("evaluator: scalar inputs, page tables, indptr and data inputs on the host backend") {
  auto cfg = ks::test::test_config(ks::test::scratch_dir("eval_task_inputs").string());
  auto ev = make_evaluator(cfg);
  SpecTask task(gather_task());

  Solution good = task.spec().references.at(Language::cpp);
  good.name = "good";
  EvalResult r = ev->evaluate(task, good.finalize());
  INFO(r.to_json().dump(2));
  CHECK(r.status == EvalStatus::passed);
  CHECK(r.workloads.size() == 2);

  // Pages read in order instead of through the page table.
  EvalResult in_order = ev->evaluate(task, variant("const std::int32_t page = indices[k];",
                                                   "const std::int32_t page = k; (void)indices;", "pages_in_order"));
  CHECK(in_order.status == EvalStatus::incorrect);
  // The scalar ignored: sm_scale taken as 1.
  EvalResult no_scale = ev->evaluate(task, variant("sm_scale * acc", "1.0 * acc", "ignores_sm_scale"));
  CHECK(no_scale.status == EvalStatus::incorrect);
  // The integer scalar ignored.
  EvalResult no_offset = ev->evaluate(task, variant("acc + offset", "acc", "ignores_offset"));
  CHECK(no_offset.status == EvalStatus::incorrect);
  // A NaN in the output fails under nan_policy forbid, whatever the ratio.
  EvalResult nan = ev->evaluate(task, variant("out[b] = float(sm_scale * acc + offset);",
                                              "out[b] = b == 0 ? NAN : float(sm_scale * acc + offset);", "nan"));
  CHECK(nan.status == EvalStatus::incorrect);
  CHECK(nan.workloads.back().message.find("NaN or infinite") != std::string::npos);
  // A scalar passed with the wrong C type is the model's compile error.
  EvalResult wrong_type = ev->evaluate(task, variant("float sm_scale, std::int32_t offset",
                                                     "float sm_scale, const float* offset", "wrong_type"));
  CHECK(wrong_type.status == EvalStatus::compile_error);
}

TEST_CASE("call plan: a scalar input is passed by value in its own type") {
  HostPlan p = HostPlan::parse(Json::parse(R"({"calls": [{"fn": "f", "args": ["cache", "sm_scale", "offset", "out"]}]})"),
                               gather_task().tensors);
  const auto& a = p.main.calls[0].args;
  CHECK(a[0].kind == HostArg::Kind::tensor);
  CHECK(a[0].dtype == DType::f8e4m3);
  CHECK(a[1].kind == HostArg::Kind::value);
  CHECK(a[1].dtype == DType::f32);
  CHECK(a[2].dtype == DType::i32);
  CHECK(describe_call(p.main.calls[0]) == "f(const uint8_t* cache, float sm_scale, int32_t offset, float* out)");
}

TEST_CASE("compare: fp8, i8, i16 and bool outputs compare by value") {
  Tolerance t;
  t.atol = 0.01;
  t.rtol = 0.01;
  t.rule = Tolerance::Rule::abs_or_rel;
  std::vector<std::uint8_t> o8{double_to_f8e4m3(1.0), double_to_f8e4m3(2.0), 0x7F};
  std::vector<std::uint8_t> r8{double_to_f8e4m3(1.0), double_to_f8e4m3(2.25), double_to_f8e4m3(1.0)};
  CompareStats s = compare_elements(o8.data(), r8.data(), DType::f8e4m3, 3, t);
  CHECK(s.mismatches == 2);
  CHECK(s.first_bad_ref == 2.25);
  CHECK(s.nonfinite_outputs == 1);
  std::vector<std::uint8_t> e5{double_to_f8e5m2(3.0)}, e5r{double_to_f8e5m2(3.0)};
  CHECK(compare_elements(e5.data(), e5r.data(), DType::f8e5m2, 1, t).mismatches == 0);
  std::vector<std::int8_t> i8o{-5, 7}, i8r{-5, 8};
  CHECK(compare_elements(i8o.data(), i8r.data(), DType::i8, 2, t).first_bad_out == 7);
  std::vector<std::int16_t> i16o{-300}, i16r{-300};
  CHECK(compare_elements(i16o.data(), i16r.data(), DType::i16, 1, t).mismatches == 0);
  std::vector<std::uint8_t> bo{1, 0}, br{1, 1};
  CHECK(compare_elements(bo.data(), br.data(), DType::boolean, 2, t).mismatches == 1);
  // The poison pattern in an fp8 output is a never-written element.
  std::vector<std::uint8_t> p8{0xFF};
  CHECK(compare_elements(p8.data(), r8.data(), DType::f8e4m3, 1, t).poisoned == 1);
}
