// The TaskSpec of gpumode/trimul against the upstream problem (task.yml,
// reference.py, eval.py) as recorded in benchmark-suites.md section 1.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "eval/compare.hpp"
#include "ksearch/tasks.hpp"
#include "ksearch/types.hpp"
#include "tasks/gpumode/gpumode.hpp"
#include "tasks/gpumode/trimul.hpp"
#include "util/expr.hpp"

using namespace ks;
using namespace ks::tasks::gpumode;

namespace {

const TaskSpec& spec() {
  static const TaskSpec s = make_trimul_spec();
  return s;
}

struct Upstream {
  const char* name;
  std::int64_t n, b, c;
  std::uint64_t seed;
  bool nomask, cauchy, bench;
};

// task.yml, written out again here so that a slip in either copy shows.
const Upstream kUpstream[] = {
    {"test_00_n32_b1_c128_normal_nomask", 32, 1, 128, 9371, true, false, false},
    {"test_01_n32_b1_c128_normal_mask", 32, 1, 128, 1092, false, false, false},
    {"test_02_n64_b2_c256_normal_nomask", 64, 2, 256, 2291, true, false, false},
    {"test_03_n64_b2_c256_normal_mask", 64, 2, 256, 210284, false, false, false},
    {"test_04_n128_b1_c768_normal_nomask", 128, 1, 768, 81934, true, false, false},
    {"test_05_n256_b1_c128_normal_nomask", 256, 1, 128, 1932, true, false, false},
    {"test_06_n256_b1_c128_normal_mask", 256, 1, 128, 10432, false, false, false},
    {"test_07_n768_b2_c128_normal_nomask", 768, 2, 128, 731, true, false, false},
    {"test_08_n1024_b1_c384_normal_mask", 1024, 1, 384, 53121, false, false, false},
    {"test_09_n1024_b1_c768_normal_nomask", 1024, 1, 768, 31, true, false, false},
    {"test_10_n1024_b1_c768_normal_mask", 1024, 1, 768, 4921, false, false, false},
    {"test_11_n32_b1_c128_cauchy_nomask", 32, 1, 128, 937321, true, true, false},
    {"test_12_n64_b2_c256_cauchy_nomask", 64, 2, 256, 2291, true, true, false},
    {"test_13_n128_b1_c768_cauchy_nomask", 128, 1, 768, 8134, true, true, false},
    {"test_14_n256_b1_c128_cauchy_nomask", 256, 1, 128, 932, true, true, false},
    {"test_15_n768_b2_c128_cauchy_nomask", 768, 2, 128, 31, true, true, false},
    {"test_16_n1024_b1_c384_cauchy_mask", 1024, 1, 384, 5321, false, true, false},
    {"test_17_n1024_b1_c768_cauchy_mask", 1024, 1, 768, 491, false, true, false},
    {"bench_0_n256_b2_c128_normal_nomask", 256, 2, 128, 9371, true, false, true},
    {"bench_1_n768_b1_c128_cauchy_nomask", 768, 1, 128, 381, true, true, true},
    {"bench_2_n256_b2_c384_normal_mask", 256, 2, 384, 2301, false, false, true},
    {"bench_3_n512_b1_c128_normal_nomask", 512, 1, 128, 12819, true, false, true},
    {"bench_4_n1024_b1_c128_cauchy_nomask", 1024, 1, 128, 381, true, true, true},
    {"bench_5_n768_b1_c384_normal_mask", 768, 1, 384, 481, false, false, true},
    {"bench_6_n1024_b1_c384_normal_nomask", 1024, 1, 384, 23291, true, false, true},
};

util::Vars dims_of(const WorkloadSpec& w) { return util::Vars(w.dims.begin(), w.dims.end()); }

}  // namespace

TEST_CASE("trimul spec: validates and describes the task") {
  CHECK_NOTHROW(spec().validate());
  CHECK(spec().name == "gpumode/trimul");
  CHECK(spec().languages == std::vector<Language>{Language::cuda, Language::triton, Language::python});
  CHECK(spec().dims == std::vector<std::string>{"B", "N", "C", "H"});
  CHECK(spec().description.find("TriMul") != std::string::npos);
  auto task = make_trimul_task();
  CHECK(task->name() == "gpumode/trimul");
  CHECK(task->prompt(Language::cuda) == spec().prompts.at(Language::cuda));
  // Round trip through the JSON a worker receives.
  const TaskSpec back = TaskSpec::from_json(spec().to_json());
  CHECK(back.to_json() == spec().to_json());
}

TEST_CASE("trimul spec: tensors in the documented kernel-argument order with the reference's generators") {
  const std::vector<std::string> order = {
      "x",         "mask",       "norm_weight", "norm_bias",          "left_proj",        "right_proj",
      "left_gate", "right_gate", "out_gate",    "to_out_norm_weight", "to_out_norm_bias", "to_out",
      "out"};
  REQUIRE(trimul_tensor_names() == order);
  REQUIRE(spec().tensors.size() == order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    const TensorSpec& t = spec().tensors[i];
    CAPTURE(t.name);
    CHECK(t.name == order[i]);
    CHECK(t.dtype == DType::f32);
    CHECK(t.is_output == (t.name == "out"));
  }
  using K = Distribution::Kind;
  auto dist_is = [](const TensorSpec* t, K kind, const char* p0, const char* p1) {
    REQUIRE(t);
    CAPTURE(t->name);
    CHECK(t->dist.kind == kind);
    CHECK(t->dist.p0 == p0);
    CHECK(t->dist.p1 == p1);
  };
  dist_is(spec().find_tensor("x"), K::normal, "0", "1");
  dist_is(spec().find_tensor("mask"), K::int_range, "0", "1");
  for (auto n : {"norm_weight", "norm_bias", "to_out_norm_weight", "to_out_norm_bias"})
    dist_is(spec().find_tensor(n), K::normal, "0", "1");
  for (auto n : {"left_proj", "right_proj", "left_gate", "right_gate", "out_gate"})
    dist_is(spec().find_tensor(n), K::normal, "0", "1/sqrt(H)");
  dist_is(spec().find_tensor("to_out"), K::normal, "0", "1/sqrt(C)");

  CHECK(spec().find_tensor("x")->shape == std::vector<std::string>{"B", "N", "N", "C"});
  CHECK(spec().find_tensor("mask")->shape == std::vector<std::string>{"B", "N", "N"});
  CHECK(spec().find_tensor("left_gate")->shape == std::vector<std::string>{"H", "C"});
  CHECK(spec().find_tensor("to_out")->shape == std::vector<std::string>{"C", "H"});
  CHECK(spec().find_tensor("to_out_norm_bias")->shape == std::vector<std::string>{"H"});
  CHECK(spec().find_tensor("out")->shape == std::vector<std::string>{"B", "N", "N", "C"});
}

TEST_CASE("trimul spec: the 18 tests and 7 benchmarks of task.yml with their seeds") {
  REQUIRE(spec().workloads.size() == 25);
  CHECK(spec().test_workloads().size() == 18);
  CHECK(spec().benchmark_workloads().size() == 7);
  std::size_t i = 0;
  for (const auto& u : kUpstream) {
    const WorkloadSpec& w = spec().workloads[i++];
    INFO("workload " << u.name);
    CHECK(w.name == u.name);
    CHECK(w.benchmark == u.bench);
    CHECK(w.seed == u.seed);
    CHECK(w.dims.at("N") == u.n);
    CHECK(w.dims.at("B") == u.b);
    CHECK(w.dims.at("C") == u.c);
    CHECK(w.dims.at("H") == 128);
    if (u.cauchy) {
      REQUIRE(w.dist_overrides.count("x"));
      CHECK(w.dist_overrides.at("x").kind == Distribution::Kind::cauchy);
      CHECK(w.dist_overrides.at("x").p0 == "0");
      CHECK(w.dist_overrides.at("x").p1 == "2");
    } else {
      CHECK(w.dist_overrides.count("x") == 0);
    }
    if (u.nomask) {
      REQUIRE(w.dist_overrides.count("mask"));
      CHECK(w.dist_overrides.at("mask").kind == Distribution::Kind::constant);
      CHECK(w.dist_overrides.at("mask").p0 == "1");
    } else {
      CHECK(w.dist_overrides.count("mask") == 0);  // the random 0/1 mask of the tensor's generator
    }
  }
}

TEST_CASE("trimul spec: tolerance is the upstream rtol = atol = 2e-2 on every element") {
  const Tolerance& t = spec().tolerance;
  CHECK(t.atol == doctest::Approx(2e-2));
  CHECK(t.rtol == doctest::Approx(2e-2));
  CHECK(t.min_matched_ratio == 1.0);
  CHECK(t.nan_policy == Tolerance::NanPolicy::must_match);
}

TEST_CASE("trimul spec: FLOP and byte formulas") {
  // By hand for the smallest test: B=1, N=32, C=128, H=128.
  const double n = 32, c = 128, h = 128;
  const double by_hand = 10 * n * n * c * h + 2 * n * n * n * h + 2 * n * n * h * c;
  const WorkloadSpec& w0 = spec().workloads.front();
  CHECK(util::eval_double_expr(spec().flops, dims_of(w0)) == doctest::Approx(by_hand));
  CHECK(util::eval_double_expr(spec().bytes, dims_of(w0)) ==
        doctest::Approx(4 * (2 * n * n * c + n * n + 6 * h * c + 2 * c + 2 * h)));
  // The GEMM GFLOP column of benchmark-suites.md 1.3, benchmarks 0..6.
  const double gflop[] = {34.4, 231.9, 85.9, 85.9, 481.0, 463.9, 893.4};
  const double input_mb[] = {67, 302, 201, 134, 537, 906, 1611};
  auto bench = spec().benchmark_workloads();
  REQUIRE(bench.size() == 7);
  for (std::size_t i = 0; i < 7; ++i) {
    CAPTURE(bench[i]->name);
    CHECK(util::eval_double_expr(spec().flops, dims_of(*bench[i])) / 1e9 ==
          doctest::Approx(gflop[i]).epsilon(0.002));
    const auto& d = bench[i]->dims;
    const double x_bytes = 4.0 * static_cast<double>(d.at("B") * d.at("N") * d.at("N") * d.at("C"));
    CHECK(x_bytes / 1e6 == doctest::Approx(input_mb[i]).epsilon(0.01));
    CHECK(util::eval_double_expr(spec().bytes, dims_of(*bench[i])) > 2 * x_bytes);
  }
}

TEST_CASE("trimul spec: score is the geometric mean over the benchmarks, with the speedup") {
  EvalResult r;
  r.status = EvalStatus::passed;
  const double ms[] = {0.25, 1.5, 0.6, 0.5, 2.0, 2.5, 4.0};
  const double ref_ms[] = {2.5, 15.0, 6.0, 5.0, 20.0, 25.0, 40.0};  // ten times slower each
  std::size_t i = 0;
  for (const auto* w : spec().benchmark_workloads()) {
    WorkloadResult wr;
    wr.name = w->name;
    wr.benchmark = true;
    wr.timing.mean_ms = ms[i];
    wr.timing.count = 10;
    wr.reference_ms = ref_ms[i];
    r.workloads.push_back(wr);
    ++i;
  }
  for (const auto* w : spec().test_workloads()) {  // correctness-only: not in the score
    WorkloadResult wr;
    wr.name = w->name;
    r.workloads.push_back(wr);
  }
  r.compute_summary();
  double log_sum = 0;
  for (double m : ms) log_sum += std::log(m);
  const double geomean = std::exp(log_sum / 7);
  CHECK(r.latency_ms == doctest::Approx(geomean));
  CHECK(r.score == doctest::Approx(1.0 / geomean));
  CHECK(r.reference_latency_ms == doctest::Approx(10 * geomean));
  CHECK(r.speedup == doctest::Approx(10.0));
}

TEST_CASE("trimul spec: published targets name their source") {
  const Json& t = spec().targets;
  REQUIRE(t.find("h100"));
  bool found_ksearch = false, found_pytorch = false;
  for (const auto& e : t.at("h100").as_array()) {
    CHECK(!e.get_string("source").empty());
    if (e.get_number("geomean_ms") == 1.028) found_ksearch = true;
    if (e.get_number("geomean_ms") == 11.2) found_pytorch = true;
  }
  CHECK(found_ksearch);
  CHECK(found_pytorch);
}

TEST_CASE("trimul spec: reference, starting point and prompt") {
  const Solution& ref = spec().references.at(Language::cuda);
  CHECK(ref.language == Language::cuda);
  CHECK(ref.task == "gpumode/trimul");
  CHECK(ref.id == ref.compute_id());
  REQUIRE(ref.sources.size() == 1);
  CHECK(ref.sources[0].content.find("trimul_ref_triangle") != std::string::npos);
  // No tensor cores in the reference.
  CHECK(ref.sources[0].content.find("mma") == std::string::npos);
  CHECK(ref.launch_plan.kernels.size() == 5);

  REQUIRE(spec().starting_points.size() == 1);
  const Solution& start = spec().starting_points[0];
  CHECK(start.name.find("starting point") != std::string::npos);
  CHECK(start.description.find("not a tuned result") != std::string::npos);
  CHECK_FALSE(start.params.space.empty());
  CHECK(start.id == start.compute_id());

  const std::string& prompt = spec().prompts.at(Language::cuda);
  for (const char* needle : {"[B, N, N, C]", "2e-2", "launch_plan", "```cuda", "geometric mean",
                             "left_proj", "to_out_norm_weight", "H = 128", "sm_90a"}) {
    INFO("prompt should mention " << needle);
    CHECK(prompt.find(needle) != std::string::npos);
  }
}

TEST_CASE("trimul spec: the evaluator's comparison applies the task's tolerance rule") {
  const Tolerance& tol = spec().tolerance;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  float poison;
  const std::uint32_t ones = 0xffffffffu;
  std::memcpy(&poison, &ones, sizeof poison);
  struct Pair {
    float ref, out;
    bool ok;
  };
  // |out - ref| <= 2e-2 + 2e-2 * |ref|: at ref = 100 the bound is 2.02.
  const Pair pairs[] = {
      {0.f, 0.0199f, true},    {0.f, -0.0201f, false},  {1.f, 1.0399f, true},   {1.f, 1.0401f, false},
      {-2.f, -2.0599f, true},  {-2.f, -1.9399f, false}, {100.f, 102.0f, true},  {100.f, 97.9f, false},
      {nan, nan, true},        {inf, inf, true},        {-inf, -inf, true},     {inf, -inf, false},
      {1.f, nan, false},       {nan, 1.f, false},       {inf, 1e30f, false},    {5.f, inf, false},
      {3.f, poison, false},
  };
  std::vector<float> ref, out;
  for (const auto& p : pairs) {
    ref.push_back(p.ref);
    out.push_back(p.out);
  }
  const eval::CompareStats all = eval::compare_elements(out.data(), ref.data(), DType::f32, out.size(), tol);
  std::uint64_t expected_bad = 0;
  for (const auto& p : pairs) expected_bad += p.ok ? 0 : 1;
  CHECK(all.count == out.size());
  CHECK(all.mismatches == expected_bad);
  CHECK(all.poisoned == 1);
  CHECK(all.first_bad_index == 1);
  // Element by element, so each verdict is the rule's.
  for (std::size_t i = 0; i < out.size(); ++i) {
    INFO("ref " << ref[i] << " out " << out[i]);
    const eval::CompareStats one = eval::compare_elements(&out[i], &ref[i], DType::f32, 1, tol);
    CHECK((one.mismatches == 0) == pairs[i].ok);
  }
  // Every element must match: one mismatch in a million fails the workload.
  std::vector<float> big_ref(1000000, 1.f), big_out(big_ref);
  big_out[777777] = 1.1f;
  const eval::CompareStats big = eval::compare_elements(big_out.data(), big_ref.data(), DType::f32, big_out.size(), tol);
  CHECK(big.mismatches == 1);
  CHECK(big.matched_ratio() < tol.min_matched_ratio);
}

TEST_CASE("trimul spec: reachable as the built-in task gpumode/trimul") {
  auto task = load_task("gpumode/trimul");
  REQUIRE(task);
  CHECK(task->spec().workloads.size() == 25);
  CHECK(task->spec().references.count(Language::cuda) == 1);
  bool listed = false;
  for (const auto& info : list_tasks())
    if (info.name == "gpumode/trimul") {
      listed = true;
      CHECK(info.source == "built-in");
      CHECK(info.targets.find("h100") != nullptr);
    }
  CHECK(listed);
  register_gpumode_suite();  // idempotent: a second call neither throws nor duplicates
  CHECK(load_task("gpumode/trimul")->spec().to_json() == task->spec().to_json());
}
