// The Eigen CPU reference: a case small enough to work out by hand, and
// random small shapes against a plain-loop implementation written
// independently here, step by step as in reference.py.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "tasks/gpumode/trimul.hpp"

using namespace ks::tasks::gpumode;

namespace {

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// out[b,i,j,:] by nested loops over the definition, in double.
std::vector<double> naive_trimul(const TrimulInputs& in) {
  const auto B = in.B, N = in.N, C = in.C, H = in.H;
  auto X = [&](std::int64_t b, std::int64_t i, std::int64_t k, std::int64_t c) {
    return static_cast<double>(in.x[static_cast<std::size_t>(((b * N + i) * N + k) * C + c)]);
  };
  // LayerNorm over C, projections, mask and gates.
  std::vector<double> left(static_cast<std::size_t>(B * N * N * H)), right(left.size()), og(left.size());
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < N; ++i)
      for (std::int64_t k = 0; k < N; ++k) {
        double mean = 0, var = 0;
        for (std::int64_t c = 0; c < C; ++c) mean += X(b, i, k, c);
        mean /= static_cast<double>(C);
        for (std::int64_t c = 0; c < C; ++c) var += (X(b, i, k, c) - mean) * (X(b, i, k, c) - mean);
        var /= static_cast<double>(C);
        std::vector<double> xn(static_cast<std::size_t>(C));
        for (std::int64_t c = 0; c < C; ++c)
          xn[static_cast<std::size_t>(c)] = (X(b, i, k, c) - mean) / std::sqrt(var + 1e-5) * in.norm_weight[static_cast<std::size_t>(c)] +
                                            in.norm_bias[static_cast<std::size_t>(c)];
        const double m = in.mask[static_cast<std::size_t>((b * N + i) * N + k)];
        for (std::int64_t h = 0; h < H; ++h) {
          auto dot = [&](const std::vector<float>& w) {
            double s = 0;
            for (std::int64_t c = 0; c < C; ++c) s += xn[static_cast<std::size_t>(c)] * w[static_cast<std::size_t>(h * C + c)];
            return s;
          };
          const auto at = static_cast<std::size_t>(((b * N + i) * N + k) * H + h);
          left[at] = dot(in.left_proj) * m * sigmoid(dot(in.left_gate));
          right[at] = dot(in.right_proj) * m * sigmoid(dot(in.right_gate));
          og[at] = sigmoid(dot(in.out_gate));
        }
      }
  std::vector<double> out(static_cast<std::size_t>(B * N * N * C));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < N; ++i)
      for (std::int64_t j = 0; j < N; ++j) {
        std::vector<double> t(static_cast<std::size_t>(H), 0.0);
        for (std::int64_t h = 0; h < H; ++h)
          for (std::int64_t k = 0; k < N; ++k)
            t[static_cast<std::size_t>(h)] += left[static_cast<std::size_t>(((b * N + i) * N + k) * H + h)] *
                                              right[static_cast<std::size_t>(((b * N + j) * N + k) * H + h)];
        double mean = 0, var = 0;
        for (double v : t) mean += v;
        mean /= static_cast<double>(H);
        for (double v : t) var += (v - mean) * (v - mean);
        var /= static_cast<double>(H);
        for (std::int64_t h = 0; h < H; ++h) {
          const auto hs = static_cast<std::size_t>(h);
          t[hs] = ((t[hs] - mean) / std::sqrt(var + 1e-5) * in.to_out_norm_weight[hs] + in.to_out_norm_bias[hs]) *
                  og[static_cast<std::size_t>(((b * N + i) * N + j) * H + h)];
        }
        for (std::int64_t c = 0; c < C; ++c) {
          double s = 0;
          for (std::int64_t h = 0; h < H; ++h)
            s += t[static_cast<std::size_t>(h)] * in.to_out[static_cast<std::size_t>(c * H + h)];
          out[static_cast<std::size_t>(((b * N + i) * N + j) * C + c)] = s;
        }
      }
  return out;
}

TrimulInputs random_inputs(std::int64_t B, std::int64_t N, std::int64_t C, std::int64_t H, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::bernoulli_distribution coin(0.5);
  TrimulInputs in;
  in.B = B, in.N = N, in.C = C, in.H = H;
  auto fill = [&](std::vector<float>& v, std::int64_t n, float scale) {
    v.resize(static_cast<std::size_t>(n));
    for (auto& f : v) f = normal(gen) * scale;
  };
  fill(in.x, B * N * N * C, 1.f);
  in.mask.resize(static_cast<std::size_t>(B * N * N));
  for (auto& m : in.mask) m = coin(gen) ? 1.f : 0.f;
  fill(in.norm_weight, C, 1.f);
  fill(in.norm_bias, C, 1.f);
  for (auto* w : {&in.left_proj, &in.right_proj, &in.left_gate, &in.right_gate, &in.out_gate})
    fill(*w, H * C, 1.f / std::sqrt(static_cast<float>(H)));
  fill(in.to_out_norm_weight, H, 1.f);
  fill(in.to_out_norm_bias, H, 1.f);
  fill(in.to_out, C * H, 1.f / std::sqrt(static_cast<float>(C)));
  return in;
}

}  // namespace

TEST_CASE("trimul CPU reference: a case worked out by hand") {
  // B=1, N=2, C=2, H=2. Every row of x is (1, -1), so LayerNorm gives
  // (e, -e) with e = 1/sqrt(1 + 1e-5). left_proj = I and right_proj = [[1,0],[1,0]]
  // give left = (e, -e), right = (e, e); zero gate weights make every gate
  // sigmoid(0) = 1/2. With mask [[1,1],[0,1]], tri[i,j,:] = (s, -s) with
  // s = e^2/4 * S_ij and S = sum_k mask[i,k] mask[j,k] = [[2,1],[1,1]].
  // LayerNorm over H maps (s, -s) to (u, -u), u = s / sqrt(s^2 + 1e-5); with
  // bias (0.5, 0) and the out gate 1/2, hidden = ((u + 0.5)/2, -u/2); to_out
  // = [[1, 0], [0, 2]] gives out = ((u + 0.5)/2, -u).
  TrimulInputs in;
  in.B = 1, in.N = 2, in.C = 2, in.H = 2;
  in.x = {1, -1, 1, -1, 1, -1, 1, -1};
  in.mask = {1, 1, 0, 1};
  in.norm_weight = {1, 1};
  in.norm_bias = {0, 0};
  in.left_proj = {1, 0, 0, 1};
  in.right_proj = {1, 0, 1, 0};
  in.left_gate = {0, 0, 0, 0};
  in.right_gate = {0, 0, 0, 0};
  in.out_gate = {0, 0, 0, 0};
  in.to_out_norm_weight = {1, 1};
  in.to_out_norm_bias = {0.5f, 0};
  in.to_out = {1, 0, 0, 2};
  std::vector<float> out(in.output_size());
  trimul_cpu_reference(in, out.data());

  const double e2 = 1.0 / (1.0 + 1e-5);
  const int S[2][2] = {{2, 1}, {1, 1}};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      CAPTURE(i);
      CAPTURE(j);
      const double s = e2 / 4 * S[i][j];
      const double u = s / std::sqrt(s * s + 1e-5);
      CHECK(out[static_cast<std::size_t>((i * 2 + j) * 2 + 0)] == doctest::Approx((u + 0.5) / 2).epsilon(1e-6));
      CHECK(out[static_cast<std::size_t>((i * 2 + j) * 2 + 1)] == doctest::Approx(-u).epsilon(1e-6));
    }
}

TEST_CASE("trimul CPU reference: agrees with plain loops on random small shapes") {
  struct Shape {
    std::int64_t B, N, C, H;
  };
  for (Shape s : {Shape{1, 3, 4, 2}, Shape{2, 5, 6, 4}, Shape{1, 7, 16, 8}}) {
    CAPTURE(s.B);
    CAPTURE(s.N);
    CAPTURE(s.C);
    CAPTURE(s.H);
    const TrimulInputs in = random_inputs(s.B, s.N, s.C, s.H, static_cast<unsigned>(s.N * 131 + s.C));
    std::vector<float> out(in.output_size());
    trimul_cpu_reference(in, out.data());
    const std::vector<double> want = naive_trimul(in);
    for (std::size_t i = 0; i < out.size(); ++i) {
      CAPTURE(i);
      REQUIRE(out[i] == doctest::Approx(want[i]).epsilon(1e-5).scale(1.0));
    }
  }
}

TEST_CASE("trimul CPU reference: the task's generated inputs give finite outputs, Cauchy included") {
  const ks::TaskSpec spec = make_trimul_spec();
  for (const char* name : {"test_01_n32_b1_c128_normal_mask", "test_11_n32_b1_c128_cauchy_nomask"}) {
    INFO("workload " << name);
    const TrimulInputs in = generate_trimul_inputs(spec, *spec.find_workload(name));
    std::vector<float> out(in.output_size());
    trimul_cpu_reference(in, out.data());
    double sq = 0;
    for (float f : out) {
      REQUIRE(std::isfinite(f));
      sq += static_cast<double>(f) * f;
    }
    // Outputs are O(1): LayerNorm bounds the hidden state, to_out ~ N(0, 1/C).
    const double rms = std::sqrt(sq / static_cast<double>(out.size()));
    CHECK(rms > 0.05);
    CHECK(rms < 20);
  }
}
