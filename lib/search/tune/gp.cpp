#include "search/tune/gp.hpp"

#include <fmt/format.h>

#include <Eigen/Cholesky>
#include <algorithm>
#include <cmath>
#include <numbers>

#include "ksearch/error.hpp"

namespace ks::core {
namespace {

constexpr double kMinLengthScale = 0.02, kMaxLengthScale = 20.0;
constexpr double kMinNoiseRatio = 1e-8, kMaxNoiseRatio = 1.0;
// Floor for the profiled signal variance: constant targets would otherwise
// give a model that is certain everywhere.
constexpr double kMinSignalVar = 1e-2;
// Weak log-normal prior on length scales (centre 0.5 in [0, 1]-scaled inputs):
// with a handful of points the likelihood alone often prefers absurdly short
// or long scales.
constexpr double kPriorLogCentre = -0.6931471805599453, kPriorLogSd = 1.5;

void check_inputs(const Eigen::MatrixXd& X, const Eigen::VectorXd& y) {
  if (X.rows() == 0) throw Error(Status::invalid_argument, "gaussian process: no training points");
  if (X.rows() != y.size())
    throw Error(Status::invalid_argument,
                fmt::format("gaussian process: {} input rows but {} targets", X.rows(), y.size()));
  if (!X.allFinite() || !y.allFinite())
    throw Error(Status::invalid_argument, "gaussian process: inputs and targets must be finite");
}

}  // namespace

Eigen::MatrixXd matern52(const Eigen::MatrixXd& A, const Eigen::MatrixXd& B,
                         const Eigen::VectorXd& length_scales) {
  const Eigen::RowVectorXd inv = length_scales.cwiseInverse().transpose();
  const Eigen::MatrixXd a = A.array().rowwise() * inv.array();
  const Eigen::MatrixXd b = B.array().rowwise() * inv.array();
  Eigen::MatrixXd r2 = (-2.0 * a * b.transpose()).colwise() + a.rowwise().squaredNorm();
  r2.rowwise() += b.rowwise().squaredNorm().transpose();
  const double s5 = std::sqrt(5.0);
  return r2.unaryExpr([s5](double d2) {
    const double r = std::sqrt(std::max(d2, 0.0));
    return (1.0 + s5 * r + 5.0 / 3.0 * r * r) * std::exp(-s5 * r);
  });
}

std::optional<double> GaussianProcess::profiled_lml(const GpHyper& h) const {
  Eigen::MatrixXd K = matern52(X_, X_, h.length_scales);
  K.diagonal().array() += h.noise_ratio;
  Eigen::LLT<Eigen::MatrixXd> llt(K);
  if (llt.info() != Eigen::Success) return std::nullopt;
  const Eigen::VectorXd alpha = llt.solve(ys_);
  const double n = static_cast<double>(n_);
  const double signal_var = std::max(ys_.dot(alpha) / n, kMinSignalVar);
  const double log_det = 2.0 * llt.matrixLLT().diagonal().array().log().sum();
  // With K = s * (C + noise I), the likelihood is maximised at s = y'(C + noise I)^-1 y / n.
  double lml = -0.5 * n * std::log(signal_var) - 0.5 * log_det - 0.5 * ys_.dot(alpha) / signal_var -
               0.5 * n * std::log(2.0 * std::numbers::pi);
  for (Eigen::Index j = 0; j < h.length_scales.size(); ++j) {
    const double z = (std::log(h.length_scales[j]) - kPriorLogCentre) / kPriorLogSd;
    lml -= 0.5 * z * z;
  }
  if (!std::isfinite(lml)) return std::nullopt;
  return lml;
}

// Keeps the inputs and standardises the targets (zero mean, unit spread).
void GaussianProcess::set_data(const Eigen::MatrixXd& X, const Eigen::VectorXd& y) {
  X_ = X;
  n_ = static_cast<int>(X.rows());
  y_mean_ = y.mean();
  const double sd = std::sqrt((y.array() - y_mean_).square().mean());
  y_scale_ = sd > 1e-12 ? sd : 1.0;
  ys_ = (y.array() - y_mean_) / y_scale_;
}

void GaussianProcess::fit(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, const GpHyper* warm_start) {
  check_inputs(X, y);
  set_data(X, y);

  const Eigen::Index d = X.cols();
  GpHyper best;
  double best_lml = -std::numeric_limits<double>::infinity();
  auto consider = [&](const GpHyper& h) {
    if (auto lml = profiled_lml(h); lml && *lml > best_lml) {
      best_lml = *lml;
      best = h;
    }
  };

  const bool warm = warm_start && warm_start->length_scales.size() == d;
  if (warm) {
    consider(*warm_start);
  } else {
    for (double l : {0.1, 0.2, 0.4, 0.8, 1.6, 3.2})
      for (double noise : {1e-6, 1e-4, 1e-3, 1e-2, 1e-1})
        consider(GpHyper{Eigen::VectorXd::Constant(d, l), noise});
  }
  if (best_lml == -std::numeric_limits<double>::infinity()) {
    // Every choice was numerically singular (e.g. duplicated inputs with no
    // noise): fall back to a noisy, smooth model that always factorises.
    best = GpHyper{Eigen::VectorXd::Constant(d, 0.5), kMaxNoiseRatio};
  } else {
    // Coordinate refinement: each length scale, then the noise ratio.
    for (int sweep = 0; sweep < (warm ? 1 : 2); ++sweep) {
      for (Eigen::Index j = 0; j < d; ++j) {
        const GpHyper centre = best;
        for (double m : {0.5, 0.7071, 1.4142, 2.0}) {
          GpHyper h = centre;
          h.length_scales[j] = std::clamp(centre.length_scales[j] * m, kMinLengthScale, kMaxLengthScale);
          consider(h);
        }
      }
      const GpHyper centre = best;
      for (double m : {0.1, 0.316, 3.16, 10.0}) {
        GpHyper h = centre;
        h.noise_ratio = std::clamp(centre.noise_ratio * m, kMinNoiseRatio, kMaxNoiseRatio);
        consider(h);
      }
    }
  }
  finish(best);
}

void GaussianProcess::fit_fixed(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, const GpHyper& hyper) {
  check_inputs(X, y);
  if (hyper.length_scales.size() != X.cols())
    throw Error(Status::invalid_argument,
                fmt::format("gaussian process: {} length scales for {} input dimensions",
                            hyper.length_scales.size(), X.cols()));
  set_data(X, y);
  finish(hyper);
}

Eigen::LLT<Eigen::MatrixXd> GaussianProcess::factorise() {
  Eigen::MatrixXd K = matern52(X_, X_, hyper_.length_scales);
  K.diagonal().array() += hyper_.noise_ratio;
  Eigen::LLT<Eigen::MatrixXd> llt(K);
  // Add jitter until it factorises; the noise floor keeps this short.
  for (double jitter = 1e-10; llt.info() != Eigen::Success && jitter < 1.0; jitter *= 10) {
    K.diagonal().array() += jitter;
    hyper_.noise_ratio += jitter;
    llt.compute(K);
  }
  if (llt.info() != Eigen::Success)
    throw Error(Status::internal, "gaussian process: kernel matrix is not positive definite");
  L_ = llt.matrixL();
  alpha_ = llt.solve(ys_);
  return llt;
}

void GaussianProcess::finish(const GpHyper& h) {
  hyper_ = h;
  believed_ = 0;
  const Eigen::LLT<Eigen::MatrixXd> llt = factorise();
  signal_var_ = std::max(ys_.dot(alpha_) / n_, kMinSignalVar);
  lml_ = profiled_lml(hyper_).value_or(-std::numeric_limits<double>::infinity());

  // Leave-one-out residuals in closed form: r_i = alpha_i / [K^-1]_ii.
  const Eigen::MatrixXd K_inv = llt.solve(Eigen::MatrixXd::Identity(n_, n_));
  double sum2 = 0;
  for (int i = 0; i < n_; ++i) {
    const double r = alpha_[i] / K_inv(i, i);
    sum2 += r * r;
  }
  loo_rmse_ = std::sqrt(sum2 / n_) * y_scale_;
}

GaussianProcess::Prediction GaussianProcess::predict(const Eigen::MatrixXd& Xs) const {
  if (!fitted()) throw Error(Status::state, "gaussian process: predict() before fit()");
  if (Xs.cols() != X_.cols())
    throw Error(Status::invalid_argument,
                fmt::format("gaussian process: {} input dimensions, model has {}", Xs.cols(), X_.cols()));
  const Eigen::MatrixXd Ks = matern52(Xs, X_, hyper_.length_scales);
  Prediction p;
  p.mean = (Ks * alpha_).array() * y_scale_ + y_mean_;
  const Eigen::MatrixXd V = L_.triangularView<Eigen::Lower>().solve(Ks.transpose());
  p.variance = ((1.0 - V.colwise().squaredNorm().array()).max(0.0) * signal_var_ * y_scale_ * y_scale_)
                   .matrix()
                   .transpose();
  return p;
}

Eigen::VectorXd GaussianProcess::believe(const Eigen::MatrixXd& Xp) {
  if (!fitted()) throw Error(Status::state, "gaussian process: believe() before fit()");
  if (Xp.cols() != X_.cols())
    throw Error(Status::invalid_argument,
                fmt::format("gaussian process: {} input dimensions, model has {}", Xp.cols(), X_.cols()));
  if (!Xp.allFinite()) throw Error(Status::invalid_argument, "gaussian process: inputs must be finite");
  if (Xp.rows() == 0) return Eigen::VectorXd();
  // Standardised predictive means: what the rows are believed to measure.
  const Eigen::VectorXd believed = matern52(Xp, X_, hyper_.length_scales) * alpha_;
  const Eigen::Index n = X_.rows(), m = Xp.rows();
  X_.conservativeResize(n + m, Eigen::NoChange);
  X_.bottomRows(m) = Xp;
  ys_.conservativeResize(n + m);
  ys_.tail(m) = believed;
  n_ = static_cast<int>(n + m);
  believed_ += static_cast<int>(m);
  factorise();
  return (believed.array() * y_scale_ + y_mean_).matrix();
}

double expected_improvement(double mean, double sd, double best, double xi) {
  const double gain = best - xi - mean;
  if (!(sd > 1e-12)) return std::max(gain, 0.0);
  const double z = gain / sd;
  const double cdf = 0.5 * std::erfc(-z / std::numbers::sqrt2);
  const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2.0 * std::numbers::pi);
  return std::max(gain * cdf + sd * pdf, 0.0);
}

}  // namespace ks::core
