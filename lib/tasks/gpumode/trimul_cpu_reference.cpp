// The CPU reference of gpumode/trimul, written with Eigen in double
// precision so that it is an independent, more accurate check of the FP32
// CUDA reference. The steps follow reference.py one to one.
#include <Eigen/Dense>
#include <fmt/format.h>

#include <cmath>

#include "ksearch/error.hpp"
#include "tasks/gpumode/trimul.hpp"

namespace ks::tasks::gpumode {
namespace {

using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vec = Eigen::VectorXd;
using Index = Eigen::Index;

constexpr double kLayerNormEps = 1e-5;  // PyTorch's default

Mat to_matrix(const std::vector<float>& v, Index rows, Index cols) {
  return Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
             v.data(), rows, cols)
      .cast<double>();
}

Vec to_vector(const std::vector<float>& v) {
  return Eigen::Map<const Eigen::VectorXf>(v.data(), static_cast<Index>(v.size())).cast<double>();
}

// LayerNorm over each row (biased variance), then the affine weight and bias.
Mat layer_norm_rows(const Mat& m, const Vec& weight, const Vec& bias) {
  const Vec mean = m.rowwise().mean();
  Mat centered = m.colwise() - mean;
  const Vec var = centered.rowwise().squaredNorm() / static_cast<double>(m.cols());
  const Vec rstd = (var.array() + kLayerNormEps).rsqrt();
  centered = rstd.asDiagonal() * centered;
  return (centered * weight.asDiagonal()).rowwise() + bias.transpose();
}

Mat sigmoid(const Mat& m) { return (1.0 + (-m.array()).exp()).inverse().matrix(); }

}  // namespace

void trimul_cpu_reference(const TrimulInputs& in, float* out) {
  in.check_sizes();
  if (!out) throw Error(Status::invalid_argument, "trimul_cpu_reference: output pointer is null");
  const Index B = in.B, N = in.N, C = in.C, H = in.H;
  const Index NN = N * N, M = B * NN;

  // 1. LayerNorm over C.
  const Mat xn = layer_norm_rows(to_matrix(in.x, M, C), to_vector(in.norm_weight),
                                 to_vector(in.norm_bias));
  // 2-5. Projections (nn.Linear: y = x W^T), mask, gates. Rows are positions
  // (b, i, k) in row-major order, columns the hidden channel h.
  const Vec mask = to_vector(in.mask);
  auto project = [&](const std::vector<float>& w) -> Mat { return xn * to_matrix(w, H, C).transpose(); };
  const Mat left = (mask.asDiagonal() * project(in.left_proj)).cwiseProduct(sigmoid(project(in.left_gate)));
  const Mat right = (mask.asDiagonal() * project(in.right_proj)).cwiseProduct(sigmoid(project(in.right_gate)));
  const Mat out_gate = sigmoid(project(in.out_gate));

  // 6. Outgoing triangle product: tri[b,i,j,h] = sum_k left[b,i,k,h] * right[b,j,k,h].
  Mat tri(M, H);
  Mat lh(N, N), rh(N, N);
  for (Index b = 0; b < B; ++b) {
    for (Index h = 0; h < H; ++h) {
      for (Index i = 0; i < N; ++i)
        for (Index k = 0; k < N; ++k) {
          lh(i, k) = left(b * NN + i * N + k, h);
          rh(i, k) = right(b * NN + i * N + k, h);
        }
      const Mat p = lh * rh.transpose();
      for (Index i = 0; i < N; ++i)
        for (Index j = 0; j < N; ++j) tri(b * NN + i * N + j, h) = p(i, j);
    }
  }

  // 7-9. LayerNorm over H, the out gate, the output projection.
  const Mat hidden = layer_norm_rows(tri, to_vector(in.to_out_norm_weight),
                                     to_vector(in.to_out_norm_bias))
                         .cwiseProduct(out_gate);
  const Mat y = hidden * to_matrix(in.to_out, C, H).transpose();
  Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(out, M, C) =
      y.cast<float>();
}

}  // namespace ks::tasks::gpumode
