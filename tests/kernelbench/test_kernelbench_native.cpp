// The native KernelBench level-1 tasks (lib/tasks/kernelbench): their specs
// (KernelBench HEAD shapes and tolerance), their CPU references against
// independent facts about each operation, and their CUDA references and
// starting kernels compiling for sm_90a with plans that name their kernels.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "eval/compare.hpp"
#include "eval/cuda/cuda_api.hpp"
#include "eval/cuda/cuda_backend.hpp"
#include "eval/cuda/nvrtc_compiler.hpp"
#include "ksearch/error.hpp"
#include "ksearch/metrics.hpp"
#include "ksearch/tasks.hpp"
#include "support/test_util.hpp"
#include "tasks/kernelbench/level1.hpp"

using namespace ks;
using namespace ks::tasks::kernelbench;

namespace {

const Level1Problem& problem(std::string_view stem) {
  const Level1Problem* p = find_level1_problem(stem);
  REQUIRE(p != nullptr);
  return *p;
}

// Runs a problem's CPU reference on the inputs of one of its small workloads.
struct Run {
  TaskSpec spec;
  const WorkloadSpec* w = nullptr;
  HostTensors inputs, outputs;
  DimValues dims;
};

Run run_cpu(std::string_view stem, const std::string& workload = "small", std::uint64_t seed_index = 0) {
  Run r;
  const Level1Problem& p = problem(stem);
  r.spec = make_level1_spec(p);
  r.w = r.spec.find_workload(workload);
  REQUIRE(r.w != nullptr);
  r.dims = DimValues(r.w->dims.begin(), r.w->dims.end());
  r.inputs = generate_host_inputs(r.spec, *r.w, seed_index);
  p.cpu(r.inputs, r.dims, r.outputs);
  return r;
}

std::int64_t d(const Run& r, const char* name) { return r.dims.at(name); }

}  // namespace

TEST_CASE("kernelbench native: at least 20 level-1 tasks, each valid, with KernelBench's names and tolerance") {
  const auto& problems = level1_problems();
  CHECK(problems.size() >= 20);
  std::set<std::string> families;
  for (const auto& p : problems) {
    CAPTURE(p.stem);
    auto task = load_task(level1_task_name(p));
    const TaskSpec& s = task->spec();
    CHECK(s.name == "kernelbench/level1/" + p.stem);
    CHECK(s.tolerance.rule == Tolerance::Rule::out_relative);
    CHECK(s.tolerance.atol == 1e-4);
    CHECK(s.tolerance.rtol == 1e-4);
    REQUIRE(s.benchmark_workloads().size() == 1);
    const WorkloadSpec& bench = *s.benchmark_workloads()[0];
    for (const auto& [k, v] : p.dims) CHECK(bench.dims.at(k) == v);
    CHECK(!s.test_workloads().empty());
    CHECK(s.find_tensor("output") != nullptr);
    CHECK(s.starting_points.size() == 1);
    CHECK(s.targets.get_number("eager_ms") > 0);
    const std::string prompt = task->prompt(Language::cuda);
    CHECK(prompt.find("```python") != std::string::npos);
    CHECK(prompt.find("launch_plan") != std::string::npos);
    CHECK(prompt.find("|out - ref| <= 0.0001 + 0.0001 * |out|") != std::string::npos);
    CHECK(!p.inputs_note.empty());
    families.insert(p.reference.sources[0].path);
  }
  // A spread: GEMMs, elementwise, rows (softmax, LayerNorm), axis reductions, a convolution.
  for (const char* f : {"ref_gemm.cu", "ref_elementwise.cu", "ref_rows.cu", "ref_axis.cu", "ref_conv2d.cu"})
    CHECK(families.count(f) == 1);
}

TEST_CASE("kernelbench native: HEAD shapes of representative problems (benchmark-suites.md 2.5)") {
  auto bench = [](std::string_view stem) {
    auto task = load_task("kernelbench/level1/" + std::string(stem));
    return task->spec().benchmark_workloads()[0]->dims;
  };
  CHECK(bench("1_Square_matrix_multiplication_").at("N") == 4096);
  CHECK(bench("4_Matrix_vector_multiplication_").at("K") == 1048576);
  CHECK(bench("19_ReLU") == std::map<std::string, std::int64_t>{{"batch_size", 4096}, {"dim", 393216}});
  CHECK(bench("36_RMSNorm_").at("batch_size") == 112);
  CHECK(bench("47_Sum_reduction_over_a_dimension").at("dim2") == 4095);
  auto conv = bench("63_conv_standard_2D__square_input__square_kernel");
  CHECK(conv.at("in_channels") == 16);
  CHECK(conv.at("out_channels") == 128);
  CHECK(conv.at("height") == 1024);
  CHECK(bench("89_cumsum").at("input_shape_0") == 32768);
}

TEST_CASE("kernelbench native: host inputs are uniform on [0, 1) and reproducible") {
  Run a = run_cpu("19_ReLU"), b = run_cpu("19_ReLU"), c = run_cpu("19_ReLU", "small", 1);
  const auto& x = a.inputs.at("x");
  CHECK(x.size() == 3000);
  CHECK(*std::min_element(x.begin(), x.end()) >= 0.0f);
  CHECK(*std::max_element(x.begin(), x.end()) < 1.0f);
  double mean = 0;
  for (float v : x) mean += v;
  CHECK(mean / x.size() == doctest::Approx(0.5).epsilon(0.05));
  CHECK(a.inputs.at("x") == b.inputs.at("x"));
  CHECK(a.inputs.at("x") != c.inputs.at("x"));
}

TEST_CASE("kernelbench native: CPU references of the activations match their definitions") {
  struct Case {
    const char* stem;
    double (*f)(double);
  };
  const Case cases[] = {
      {"19_ReLU", [](double v) { return std::max(v, 0.0); }},
      {"21_Sigmoid", [](double v) { return 0.5 * (1 + std::tanh(v / 2)); }},  // an identity, not the same formula
      {"22_Tanh", [](double v) { return 2 / (1 + std::exp(-2 * v)) - 1; }},
      {"25_Swish", [](double v) { return v * 0.5 * (1 + std::tanh(v / 2)); }},
      {"26_GELU_", [](double v) { return v * 0.5 * std::erfc(-v / std::sqrt(2.0)); }},
      {"30_Softsign", [](double v) { return v / (1 + v); }},  // inputs are >= 0
      {"32_HardTanh", [](double v) { return std::min(v, 1.0); }},
      {"29_Softplus", [](double v) { return std::log(1 + std::exp(v)); }},
  };
  for (const auto& c : cases) {
    CAPTURE(c.stem);
    Run r = run_cpu(c.stem);
    const auto& x = r.inputs.at("x");
    const auto& y = r.outputs.at("output");
    REQUIRE(y.size() == x.size());
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(y[i] == doctest::Approx(c.f(x[i])).epsilon(1e-6));
  }
}

TEST_CASE("kernelbench native: CPU references of products, reductions, norms, scan and convolution") {
  SUBCASE("a matrix product is linear in B: A @ (B1 + B2) = A @ B1 + A @ B2") {
    Run r = run_cpu("2_Standard_matrix_multiplication_");
    const Level1Problem& p = problem("2_Standard_matrix_multiplication_");
    HostTensors ones = r.inputs;
    std::fill(ones.at("B").begin(), ones.at("B").end(), 1.0f);
    HostTensors out_ones;
    p.cpu(ones, r.dims, out_ones);
    // With B all ones, every output of row i is the sum of A's row i.
    const auto M = d(r, "M"), K = d(r, "K"), N = d(r, "N");
    for (std::int64_t i = 0; i < M; ++i) {
      double row = 0;
      for (std::int64_t k = 0; k < K; ++k) row += r.inputs.at("A")[i * K + k];
      for (std::int64_t j = 0; j < N; ++j) CHECK(out_ones.at("output")[i * N + j] == doctest::Approx(row));
    }
  }
  SUBCASE("batched: each batch is its own product") {
    Run r = run_cpu("3_Batched_matrix_multiplication");
    const auto m = d(r, "m"), k = d(r, "k"), n = d(r, "n");
    const auto& A = r.inputs.at("A");
    const auto& B = r.inputs.at("B");
    // One element of the last batch, by hand.
    const std::int64_t z = d(r, "batch_size") - 1, i = m - 1, j = n / 2;
    double acc = 0;
    for (std::int64_t q = 0; q < k; ++q) acc += double(A[(z * m + i) * k + q]) * B[(z * k + q) * n + j];
    CHECK(r.outputs.at("output")[(z * m + i) * n + j] == doctest::Approx(acc));
  }
  SUBCASE("matrix-vector and scalar and diagonal products") {
    Run mv = run_cpu("4_Matrix_vector_multiplication_");
    CHECK(mv.outputs.at("output").size() == std::size_t(d(mv, "M")));
    Run s = run_cpu("5_Matrix_scalar_multiplication");
    CHECK(s.inputs.at("s") == std::vector<float>{3.14f});
    CHECK(s.outputs.at("output")[7] == doctest::Approx(s.inputs.at("A")[7] * 3.14f));
    Run dg = run_cpu("12_Matmul_with_diagonal_matrices_");
    const auto M = d(dg, "M");
    CHECK(dg.outputs.at("output")[2 * M + 5] == doctest::Approx(dg.inputs.at("A")[2] * dg.inputs.at("B")[2 * M + 5]));
  }
  SUBCASE("softmax rows sum to 1, log-softmax rows log-sum-exp to 0") {
    Run sm = run_cpu("23_Softmax"), lsm = run_cpu("24_LogSoftmax");
    const auto rows = d(sm, "batch_size"), cols = d(sm, "dim");
    for (std::int64_t i = 0; i < rows; ++i) {
      double s = 0, l = 0;
      for (std::int64_t j = 0; j < cols; ++j) {
        s += sm.outputs.at("output")[i * cols + j];
        l += std::exp(double(lsm.outputs.at("output")[i * cols + j]));
      }
      CHECK(s == doctest::Approx(1.0).epsilon(1e-5));
      CHECK(l == doctest::Approx(1.0).epsilon(1e-5));
    }
  }
  SUBCASE("LayerNorm rows have mean 0 and variance 1; RMSNorm lines have mean square 1") {
    Run ln = run_cpu("40_LayerNorm");
    CHECK(ln.inputs.at("ln_weight") == std::vector<float>(ln.inputs.at("ln_weight").size(), 1.0f));
    CHECK(ln.inputs.at("ln_bias") == std::vector<float>(ln.inputs.at("ln_bias").size(), 0.0f));
    const std::int64_t cols = d(ln, "features") * d(ln, "dim1") * d(ln, "dim2");
    for (std::int64_t r = 0; r < d(ln, "batch_size"); ++r) {
      double m = 0, q = 0;
      for (std::int64_t j = 0; j < cols; ++j) m += ln.outputs.at("output")[r * cols + j];
      m /= cols;
      for (std::int64_t j = 0; j < cols; ++j) q += std::pow(ln.outputs.at("output")[r * cols + j] - m, 2);
      CHECK(std::abs(m) < 1e-5);
      CHECK(q / cols == doctest::Approx(1.0).epsilon(1e-3));  // eps = 1e-5 against a variance of ~1/12
    }
    Run rms = run_cpu("36_RMSNorm_");
    const std::int64_t f = d(rms, "features"), inner = d(rms, "dim1") * d(rms, "dim2");
    double q = 0;
    for (std::int64_t k = 0; k < f; ++k) q += std::pow(rms.outputs.at("output")[k * inner + 3], 2);
    CHECK(q / f == doctest::Approx(1.0).epsilon(1e-3));
  }
  SUBCASE("sum = len * mean, max bounds every element; cumsum ends at the row sum") {
    Run sum = run_cpu("47_Sum_reduction_over_a_dimension"), mean = run_cpu("48_Mean_reduction_over_a_dimension"),
        mx = run_cpu("49_Max_reduction_over_a_dimension");
    const auto len = d(sum, "dim1"), inner = d(sum, "dim2");
    for (std::size_t i = 0; i < sum.outputs.at("output").size(); ++i)
      CHECK(sum.outputs.at("output")[i] == doctest::Approx(mean.outputs.at("output")[i] * len));
    const auto& x = mx.inputs.at("x");
    for (std::int64_t k = 0; k < len; ++k) CHECK(x[k * inner + 4] <= mx.outputs.at("output")[4]);
    Run cs = run_cpu("89_cumsum");
    const auto L = d(cs, "input_shape_0");
    double row = 0;
    for (std::int64_t k = 0; k < L; ++k) row += cs.inputs.at("x")[L + k];
    CHECK(cs.outputs.at("output")[2 * L - 1] == doctest::Approx(row));
  }
  SUBCASE("convolution: one output by hand; the weight is U(-1/sqrt(fan_in), 1/sqrt(fan_in))") {
    Run r = run_cpu("63_conv_standard_2D__square_input__square_kernel");
    const auto C = d(r, "in_channels"), R = d(r, "kernel_size"), H = d(r, "height"), W = d(r, "width"),
               K = d(r, "out_channels");
    const double bound = 1 / std::sqrt(double(C * R * R));
    for (float w : r.inputs.at("conv2d_weight")) CHECK(std::abs(w) <= bound);
    // Output (n=1, k=K-1, p=1, q=2).
    const auto P = H - R + 1, Q = W - R + 1;
    double acc = 0;
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t a = 0; a < R; ++a)
        for (std::int64_t b = 0; b < R; ++b)
          acc += double(r.inputs.at("x")[((1 * C + c) * H + 1 + a) * W + 2 + b]) *
                 r.inputs.at("conv2d_weight")[(((K - 1) * C + c) * R + a) * R + b];
    CHECK(r.outputs.at("output")[((1 * K + K - 1) * P + 1) * Q + 2] == doctest::Approx(acc));
  }
}

TEST_CASE("kernelbench native: KernelBench's tolerance at its corners (fp32, 1e-4, relative to the output)") {
  auto spec = load_task("kernelbench/level1/19_ReLU")->spec();
  auto check = [&](float out, float ref) {
    return eval::compare_elements(&out, &ref, DType::f32, 1, spec.tolerance).mismatches == 0;
  };
  CHECK(check(1000.1f, 1000.0f));     // 0.1 <= 1e-4 + 1e-4 * 1000.1
  CHECK(!check(1000.2f, 1000.0f));    // 0.2 >  1e-4 + 1e-4 * 1000.2
  CHECK(check(0.0f, 0.00009f));       // atol alone near zero
  CHECK(!check(0.0f, 0.0002f));
  // The relative term follows the output: a too-large output gets more slack than a too-small one.
  CHECK(check(2.0002f, 2.0f));
  CHECK(check(1.9998f, 2.0f));
  CHECK(!check(std::nanf(""), 1.0f));
  CHECK(check(INFINITY, INFINITY));  // a matching infinity, as torch.allclose
}

TEST_CASE("kernelbench native: every CUDA reference and starting kernel compiles for sm_90a") {
  try {
    eval::cuda::nvrtc();
  } catch (const Error& e) {
    MESSAGE("skipped: " << e.what());
    return;
  }
  auto dir = test::scratch_dir("kernelbench_native");
  eval::CudaCompilerOptions o;
  o.arch = "sm_90a";
  o.use_pch = true;
  eval::cuda::CudaCompiler compiler(o);
  for (const auto& p : level1_problems()) {
    for (const Solution* s : {&p.reference, &p.start}) {
      CAPTURE(p.stem);
      CAPTURE(s->name);
      eval::CompileRequest req;
      req.solution = *s;
      req.arch = "sm_90a";
      req.cache_dir = dir.string();
      eval::Artifact a;
      try {
        a = compiler.compile(req);
      } catch (const eval::CompileError& e) {
        FAIL(e.what() << "\n" << e.log());
      }
      for (const auto& name : s->launch_plan.names())
        CHECK(std::find(a.kernels.begin(), a.kernels.end(), name) != a.kernels.end());
    }
  }
}

TEST_CASE("fast_p: counts correct problems faster than p over all problems; geometric mean over correct ones") {
  std::vector<ProblemOutcome> o = {
      {"a", true, 1.0, 2.0, 1.0},   // 2x eager, 1x compile
      {"b", true, 4.0, 2.0, 8.0},   // 0.5x eager, 2x compile
      {"c", false, 0.1, 2.0, 2.0},  // fast but wrong: never counts
      {"d", true, 1.0, 0.0, 0.0},   // correct, no baseline: counts for p = 0 only
  };
  FastPTable t = fast_p_table(o);
  REQUIRE(t.p == std::vector<double>{0, 0.5, 0.8, 1, 1.5, 2});
  CHECK(t.n_total == 4);
  CHECK(t.n_correct == 3);
  CHECK(t.fast_p_eager == std::vector<double>{0.75, 0.25, 0.25, 0.25, 0.25, 0.0});  // "> p": 2x is not > 2
  CHECK(t.fast_p_compile == std::vector<double>{0.75, 0.5, 0.5, 0.25, 0.25, 0.0});
  CHECK(t.geomean_speedup_eager == doctest::Approx(1.0));  // sqrt(2 * 0.5)
  CHECK(t.geomean_speedup_compile == doctest::Approx(std::sqrt(2.0)));
  CHECK(t.n_eager == 2);
  Json j = t.to_json();
  CHECK(j.at("fast_p_over_eager").get_number("fast_0.5") == doctest::Approx(0.25));
  CHECK(fast_p_table({}).fast_p_eager == std::vector<double>(6, 0.0));
}
