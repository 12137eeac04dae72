// The Gaussian-process surrogate and expected improvement.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "search/tune/gp.hpp"
#include "ksearch/error.hpp"

using ks::core::expected_improvement;
using ks::core::GaussianProcess;
using ks::core::GpHyper;

namespace {

// A smooth 2-D test function on [0, 1]^2 with its minimum at (0.3, 0.7).
double bowl(double x, double y) { return (x - 0.3) * (x - 0.3) + 2 * (y - 0.7) * (y - 0.7) + 0.1 * x * y; }

void grid_data(int per_side, Eigen::MatrixXd& X, Eigen::VectorXd& y) {
  X.resize(per_side * per_side, 2);
  y.resize(per_side * per_side);
  int k = 0;
  for (int i = 0; i < per_side; ++i)
    for (int j = 0; j < per_side; ++j, ++k) {
      X(k, 0) = i / double(per_side - 1);
      X(k, 1) = j / double(per_side - 1);
      y[k] = bowl(X(k, 0), X(k, 1));
    }
}

// A model fitted to the bowl on a per_side x per_side grid (X, y: its data).
GaussianProcess fitted_on_grid(int per_side, Eigen::MatrixXd& X, Eigen::VectorXd& y) {
  grid_data(per_side, X, y);
  GaussianProcess gp;
  gp.fit(X, y);
  return gp;
}

}  // namespace

TEST_CASE("gp: Matern 5/2 correlation") {
  Eigen::MatrixXd A(2, 1), B(2, 1);
  A << 0.0, 1.0;
  B << 0.0, 0.5;
  const Eigen::MatrixXd K = ks::core::matern52(A, B, Eigen::VectorXd::Constant(1, 0.5));
  CHECK(K(0, 0) == doctest::Approx(1.0));
  CHECK(K(1, 1) == doctest::Approx(K(0, 1)));  // both at distance 0.5
  const double r = 1.0, s5 = std::sqrt(5.0);   // distance 0.5 over length 0.5
  CHECK(K(0, 1) == doctest::Approx((1 + s5 * r + 5.0 / 3.0 * r * r) * std::exp(-s5 * r)));
  CHECK(K(1, 0) < K(0, 1));  // farther apart, less alike
}

TEST_CASE("gp: the fit interpolates its training points and variance shrinks at data") {
  Eigen::MatrixXd X;
  Eigen::VectorXd y;
  const GaussianProcess gp = fitted_on_grid(5, X, y);
  REQUIRE(gp.fitted());
  CHECK(gp.size() == 25);
  CHECK(std::isfinite(gp.log_marginal_likelihood()));
  // Noise-free data: the fit prefers a tiny noise ratio.
  CHECK(gp.hyper().noise_ratio < 1e-2);

  const auto at_data = gp.predict(X);
  const double spread = y.maxCoeff() - y.minCoeff();
  for (int i = 0; i < X.rows(); ++i) CHECK(at_data.mean[i] == doctest::Approx(y[i]).epsilon(0.02 * spread));

  // Between grid points the model still predicts well, but is less sure.
  Eigen::MatrixXd mid(2, 2);
  mid << 0.125, 0.375, 0.625, 0.875;
  const auto between = gp.predict(mid);
  for (int i = 0; i < 2; ++i) {
    CHECK(between.mean[i] == doctest::Approx(bowl(mid(i, 0), mid(i, 1))).epsilon(0.05 * spread));
    CHECK(between.variance[i] > 10 * at_data.variance.maxCoeff());
  }
  // Far outside the data the variance returns towards the prior.
  Eigen::MatrixXd far(1, 2);
  far << 5.0, 5.0;
  CHECK(gp.predict(far).variance[0] > 100 * between.variance.maxCoeff());
  // The leave-one-out error is small on a smooth function sampled densely.
  CHECK(gp.loo_rmse() < 0.05 * spread);
}

TEST_CASE("gp: noisy data gets a noise term and does not chase the noise") {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0.0, 0.05);
  Eigen::MatrixXd X;
  Eigen::VectorXd y;
  grid_data(7, X, y);
  Eigen::VectorXd clean = y;
  for (int i = 0; i < y.size(); ++i) y[i] += noise(rng);
  GaussianProcess gp;
  gp.fit(X, y);
  // The noise it attributes to the data is of the right size (sd 0.05).
  CHECK(std::sqrt(gp.noise_variance()) == doctest::Approx(0.05).epsilon(0.5));
  // The fitted mean is closer to the clean function than the noisy data is.
  const auto p = gp.predict(X);
  CHECK((p.mean - clean).norm() < (y - clean).norm());
}

TEST_CASE("gp: fixed hyperparameters and warm starts") {
  Eigen::MatrixXd X;
  Eigen::VectorXd y;
  grid_data(4, X, y);
  GaussianProcess a, b;
  GpHyper h{Eigen::VectorXd::Constant(2, 0.4), 1e-4};
  a.fit_fixed(X, y, h);
  CHECK(a.hyper().length_scales[0] == doctest::Approx(0.4));
  b.fit(X, y, &h);  // local refinement from h: at least as likely as h itself
  CHECK(b.log_marginal_likelihood() >= a.log_marginal_likelihood() - 1e-9);
}

TEST_CASE("gp: degenerate and bad inputs") {
  GaussianProcess gp;
  Eigen::MatrixXd X(1, 2);
  X << 0.5, 0.5;
  Eigen::VectorXd y(1);
  y << 3.0;
  gp.fit(X, y);  // one point: a flat prior around it
  Eigen::MatrixXd q(2, 2);
  q << 0.5, 0.5, 0.0, 1.0;
  auto p = gp.predict(q);
  CHECK(p.mean[0] == doctest::Approx(3.0));
  CHECK(p.variance[1] > p.variance[0]);

  // Duplicated inputs with different targets still factorise (noise absorbs them).
  Eigen::MatrixXd Xd(3, 1);
  Xd << 0.2, 0.2, 0.8;
  Eigen::VectorXd yd(3);
  yd << 1.0, 1.2, 2.0;
  gp.fit(Xd, yd);
  CHECK(gp.predict(Xd).mean.allFinite());

  auto status_of = [](auto fn) {
    try {
      fn();
    } catch (const ks::Error& e) {
      return e.status();
    }
    return ks::Status::ok;
  };
  GaussianProcess fresh;
  CHECK(status_of([&] { fresh.predict(q); }) == ks::Status::state);
  CHECK(status_of([&] { fresh.fit(Eigen::MatrixXd(0, 2), Eigen::VectorXd(0)); }) == ks::Status::invalid_argument);
  CHECK(status_of([&] { fresh.fit(X, Eigen::VectorXd(2)); }) == ks::Status::invalid_argument);
  Eigen::VectorXd nan(1);
  nan << std::nan("");
  CHECK(status_of([&] { fresh.fit(X, nan); }) == ks::Status::invalid_argument);
  CHECK(status_of([&] { gp.predict(Eigen::MatrixXd(1, 3)); }) == ks::Status::invalid_argument);
}

TEST_CASE("gp: expected improvement") {
  // Sure and worse: nothing to gain.
  CHECK(expected_improvement(2.0, 1e-9, 1.0) == 0.0);
  CHECK(expected_improvement(2.0, 0.05, 1.0) < 1e-20);
  // Sure and better: the gain itself.
  CHECK(expected_improvement(0.5, 1e-9, 1.0) == doctest::Approx(0.5));
  // At the incumbent, EI = sd * phi(0).
  CHECK(expected_improvement(1.0, 0.2, 1.0) == doctest::Approx(0.2 / std::sqrt(2 * 3.141592653589793)));
  // More uncertainty, more EI; lower mean, more EI; exploration margin lowers it.
  CHECK(expected_improvement(1.2, 0.5, 1.0) > expected_improvement(1.2, 0.1, 1.0));
  CHECK(expected_improvement(0.9, 0.1, 1.0) > expected_improvement(1.1, 0.1, 1.0));
  CHECK(expected_improvement(1.0, 0.1, 1.0, 0.05) < expected_improvement(1.0, 0.1, 1.0));
}

TEST_CASE("gp: expected improvement from a fitted model is near zero where the model is sure and worse") {
  Eigen::MatrixXd X;
  Eigen::VectorXd y;
  grid_data(6, X, y);
  GaussianProcess gp;
  gp.fit(X, y);
  const auto p = gp.predict(X);
  const double best = y.minCoeff();
  Eigen::Index worst = 0, best_i = 0;
  y.maxCoeff(&worst);
  y.minCoeff(&best_i);
  const double ei_worst = expected_improvement(p.mean[worst], std::sqrt(p.variance[worst]), best);
  Eigen::MatrixXd unseen(1, 2);
  unseen << 0.3, 0.7;  // the true minimum, between grid points
  const auto u = gp.predict(unseen);
  const double ei_unseen = expected_improvement(u.mean[0], std::sqrt(u.variance[0]), best);
  CHECK(ei_worst < 1e-6);
  CHECK(ei_unseen > 1e3 * ei_worst);
}

TEST_CASE("gp: a believed point keeps the mean everywhere and takes the uncertainty around it") {
  Eigen::MatrixXd X;
  Eigen::VectorXd y;
  GaussianProcess gp = fitted_on_grid(3, X, y);
  Eigen::MatrixXd probe(4, 2);
  probe << 0.25, 0.25,  // the point believed
      0.3, 0.25,        // next to it
      0.95, 0.95,       // far away, near data
      0.75, 0.25;       // between data, farther from it
  const auto before = gp.predict(probe);
  const double lml = gp.log_marginal_likelihood(), loo = gp.loo_rmse();
  const GpHyper hyper = gp.hyper();

  GaussianProcess believer = gp;
  const Eigen::VectorXd believed = believer.believe(probe.topRows(1));
  REQUIRE(believed.size() == 1);
  CHECK(believed[0] == doctest::Approx(before.mean[0]));
  CHECK(believer.believed() == 1);
  CHECK(believer.size() == gp.size() + 1);
  const auto after = believer.predict(probe);
  for (int i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(after.mean[i] == doctest::Approx(before.mean[i]).epsilon(1e-6));
    CHECK(after.variance[i] <= before.variance[i] + 1e-12);
  }
  // At the believed point the uncertainty is nearly gone; the farther from
  // it, the less it shrinks.
  CHECK(after.variance[0] < 0.01 * before.variance[0]);
  CHECK(after.variance[1] < 0.5 * before.variance[1]);
  CHECK(after.variance[1] / before.variance[1] < after.variance[3] / before.variance[3]);
  // What was fitted to real data stays as it was.
  CHECK(believer.hyper().length_scales == hyper.length_scales);
  CHECK(believer.log_marginal_likelihood() == lml);
  CHECK(believer.loo_rmse() == loo);
  // So its expected improvement there drops to what the mean alone promises.
  const double best = y.minCoeff();
  CHECK(expected_improvement(after.mean[0], std::sqrt(after.variance[0]), best) <
        expected_improvement(before.mean[0], std::sqrt(before.variance[0]), best));

  // Believing nothing changes nothing; a refit forgets what was believed.
  CHECK(believer.believe(Eigen::MatrixXd(0, 2)).size() == 0);
  believer.fit(X, y);
  CHECK(believer.believed() == 0);
  CHECK(believer.size() == gp.size());

  GaussianProcess empty;
  CHECK_THROWS_AS(empty.believe(probe), ks::Error);
  CHECK_THROWS_AS(gp.believe(Eigen::MatrixXd::Zero(1, 3)), ks::Error);
  Eigen::MatrixXd nan = probe.topRows(1);
  nan(0, 0) = std::nan("");
  CHECK_THROWS_AS(gp.believe(nan), ks::Error);
}
