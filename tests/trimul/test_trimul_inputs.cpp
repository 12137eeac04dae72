// Input generation for gpumode/trimul: the distributions of reference.py
// (moments of the normal draws, quartiles of the Cauchy draws, mask density)
// and the seed and stream conventions the GPU backend shares.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/rng/ks_rng.h"
#include "core/rng/rng_stream.hpp"
#include "ksearch/error.hpp"
#include "tasks/gpumode/trimul.hpp"

using namespace ks;
using namespace ks::tasks::gpumode;

namespace {

const TaskSpec& spec() {
  static const TaskSpec s = make_trimul_spec();
  return s;
}

const WorkloadSpec& workload(const char* name) {
  const WorkloadSpec* w = spec().find_workload(name);
  REQUIRE(w);
  return *w;
}

struct Moments {
  double mean = 0, std = 0;
};

Moments moments(const std::vector<float>& v) {
  Moments m;
  for (float f : v) m.mean += f;
  m.mean /= static_cast<double>(v.size());
  for (float f : v) m.std += (f - m.mean) * (f - m.mean);
  m.std = std::sqrt(m.std / static_cast<double>(v.size()));
  return m;
}

double quantile(std::vector<float> v, double q) {
  const auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

TEST_CASE("trimul inputs: x ~ N(0, 1) for normal workloads") {
  // test_09: B=1, N=1024 would be large; test_04 has 128*128*768 = 12.6M draws.
  const TrimulInputs in = generate_trimul_inputs(spec(), workload("test_04_n128_b1_c768_normal_nomask"));
  REQUIRE(in.x.size() == 128u * 128u * 768u);
  const Moments m = moments(in.x);
  // Standard error of the mean is 1/sqrt(12.6M) = 3e-4.
  CHECK(std::fabs(m.mean) < 2e-3);
  CHECK(m.std == doctest::Approx(1.0).epsilon(2e-3));
  CHECK(std::all_of(in.x.begin(), in.x.end(), [](float f) { return std::isfinite(f); }));
}

TEST_CASE("trimul inputs: x ~ Cauchy(0, 2) for cauchy workloads: median 0, quartiles -2 and 2") {
  const TrimulInputs in = generate_trimul_inputs(spec(), workload("test_13_n128_b1_c768_cauchy_nomask"));
  // The quartile's standard error is sqrt(3/16 / n) / f(2) with density f(2) = 1/(4 pi): ~2e-3.
  CHECK(std::fabs(quantile(in.x, 0.5)) < 0.02);
  CHECK(quantile(in.x, 0.25) == doctest::Approx(-2.0).epsilon(0.01));
  CHECK(quantile(in.x, 0.75) == doctest::Approx(2.0).epsilon(0.01));
  // Heavy tails: about 2/pi * atan(2/1000)... of draws beyond |x| > 1000 is 1.27e-3.
  const auto beyond = std::count_if(in.x.begin(), in.x.end(), [](float f) { return std::fabs(f) > 1000; });
  const double frac = static_cast<double>(beyond) / static_cast<double>(in.x.size());
  CHECK(frac == doctest::Approx(1.0 - 2.0 / M_PI * std::atan(1000.0 / 2.0)).epsilon(0.1));
}

TEST_CASE("trimul inputs: a random 0/1 mask where nomask is false, all ones otherwise") {
  const TrimulInputs masked = generate_trimul_inputs(spec(), workload("test_06_n256_b1_c128_normal_mask"));
  REQUIRE(masked.mask.size() == 256u * 256u);
  CHECK(std::all_of(masked.mask.begin(), masked.mask.end(), [](float f) { return f == 0.f || f == 1.f; }));
  const double density = std::accumulate(masked.mask.begin(), masked.mask.end(), 0.0) /
                         static_cast<double>(masked.mask.size());
  CHECK(density == doctest::Approx(0.5).epsilon(0.02));  // 65536 draws: SE 0.002

  const TrimulInputs plain = generate_trimul_inputs(spec(), workload("test_05_n256_b1_c128_normal_nomask"));
  CHECK(std::all_of(plain.mask.begin(), plain.mask.end(), [](float f) { return f == 1.f; }));
}

TEST_CASE("trimul inputs: parameters are scaled like reference.py") {
  const TrimulInputs in = generate_trimul_inputs(spec(), workload("test_04_n128_b1_c768_normal_nomask"));
  for (const auto* w : {&in.left_proj, &in.right_proj, &in.left_gate, &in.right_gate, &in.out_gate}) {
    REQUIRE(w->size() == 128u * 768u);
    const Moments m = moments(*w);
    CHECK(std::fabs(m.mean) < 1e-3);
    CHECK(m.std == doctest::Approx(1.0 / std::sqrt(128.0)).epsilon(0.02));
  }
  const Moments out = moments(in.to_out);
  CHECK(out.std == doctest::Approx(1.0 / std::sqrt(768.0)).epsilon(0.02));
  // LayerNorm affines are N(0, 1) draws, not ones and zeros.
  const Moments nw = moments(in.norm_weight);
  CHECK(nw.std == doctest::Approx(1.0).epsilon(0.1));
  CHECK(std::fabs(nw.mean) < 0.15);
  CHECK(in.to_out_norm_weight.size() == 128u);
  CHECK(in.to_out_norm_bias.size() == 128u);
}

TEST_CASE("trimul inputs: element i is ks_rng_value(seed, rng_stream_of(name), i), as on the GPU") {
  const WorkloadSpec& w = workload("test_12_n64_b2_c256_cauchy_nomask");
  const TrimulInputs in0 = generate_trimul_inputs(spec(), w, 0);
  const TrimulInputs again = generate_trimul_inputs(spec(), w, 0);
  CHECK(in0.x == again.x);
  for (std::uint64_t i : {0ull, 1ull, 77ull, 1048575ull}) {
    CAPTURE(i);
    const double x = ks_rng_value(KS_DIST_CAUCHY, 0.0, 2.0, w.seed, core::rng_stream_of("x"), i);
    CHECK(in0.x[i] == static_cast<float>(x));
    const double lp = ks_rng_value(KS_DIST_NORMAL, 0.0, 1.0 / std::sqrt(128.0), w.seed,
                                   core::rng_stream_of("left_proj"), i % (128 * 256));
    CHECK(in0.left_proj[i % (128 * 256)] == static_cast<float>(lp));
  }
  // Seed index k draws from ks_rng_derive_seed(seed, k): a different input set.
  const TrimulInputs in1 = generate_trimul_inputs(spec(), w, 1);
  CHECK(in1.x != in0.x);
  CHECK(in1.x[5] == static_cast<float>(ks_rng_value(KS_DIST_CAUCHY, 0.0, 2.0, ks_rng_derive_seed(w.seed, 1),
                                                    core::rng_stream_of("x"), 5)));
  // Tensors have independent streams: the four N(0,1) affines differ.
  CHECK(in0.norm_weight != in0.norm_bias);
  // test_02 has the same seed and shape as test_12 but a normal x: same weights, other x.
  const TrimulInputs normal = generate_trimul_inputs(spec(), workload("test_02_n64_b2_c256_normal_nomask"));
  CHECK(normal.left_proj == in0.left_proj);
  CHECK(normal.x != in0.x);
}

TEST_CASE("trimul inputs: inconsistent sizes are rejected with the tensor's name") {
  TrimulInputs in = generate_trimul_inputs(spec(), workload("test_00_n32_b1_c128_normal_nomask"));
  in.to_out.pop_back();
  CHECK_THROWS_WITH_AS(in.check_sizes(), doctest::Contains("\"to_out\""), Error);
  std::vector<float> out(in.output_size());
  CHECK_THROWS_AS(trimul_cpu_reference(in, out.data()), Error);
  TaskSpec other = spec();
  other.tensors.erase(other.tensors.begin() + 1);  // no "mask"
  CHECK_THROWS_WITH_AS(generate_trimul_inputs(other, workload("test_00_n32_b1_c128_normal_nomask")),
                       doctest::Contains("\"mask\""), Error);
}
