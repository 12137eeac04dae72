// A Gaussian-process surrogate for the tuner: Matern 5/2 kernel with one
// length scale per input, targets standardised internally, signal variance
// profiled out of the marginal likelihood, and length scales and noise chosen
// by maximising it (coarse grid, then per-dimension refinement).
#pragma once

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <optional>

namespace ks::core {

struct GpHyper {
  Eigen::VectorXd length_scales;  // one per input dimension, in input units
  double noise_ratio = 1e-4;      // noise variance over signal variance
};

class GaussianProcess {
 public:
  // Fits to inputs X (one row per point) and targets y. Hyperparameters are
  // searched around `warm_start` when given (cheaper), else from a coarse
  // grid. Throws ks::Error(Status::invalid_argument) on mismatched or empty
  // inputs or non-finite values.
  void fit(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, const GpHyper* warm_start = nullptr);
  // Fits with the given hyperparameters, no search.
  void fit_fixed(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, const GpHyper& hyper);

  struct Prediction {
    Eigen::VectorXd mean;      // in units of y
    Eigen::VectorXd variance;  // of the latent function (noise excluded), in units of y squared
  };
  Prediction predict(const Eigen::MatrixXd& Xs) const;

  // Kriging believer, for choosing several points before any is measured:
  // takes each row of Xp as observed at the model's predictive mean there,
  // and returns those means (in units of y). The mean stays where it was
  // everywhere (an observation equal to its prediction moves nothing); the
  // uncertainty near the rows shrinks as if they had been measured, so
  // expected improvement stops favouring them and their neighbours. The
  // hyperparameters, the standardisation and the signal variance stay those
  // of the real data, and so do log_marginal_likelihood() and loo_rmse().
  // Throws ks::Error(Status::state) before a fit, and
  // ks::Error(Status::invalid_argument) for rows of the wrong width or
  // non-finite values.
  Eigen::VectorXd believe(const Eigen::MatrixXd& Xp);
  int believed() const { return believed_; }  // rows taken by believe() since the last fit

  bool fitted() const { return n_ > 0; }
  int size() const { return n_; }
  const GpHyper& hyper() const { return hyper_; }
  // Log marginal likelihood of the standardised targets at the chosen
  // hyperparameters, plus the weak length-scale prior the search maximises.
  double log_marginal_likelihood() const { return lml_; }
  // Variance of the observation noise the fit attributes to the data, in
  // units of y squared.
  double noise_variance() const { return hyper_.noise_ratio * signal_var_ * y_scale_ * y_scale_; }
  // Leave-one-out root mean square prediction error, in units of y: how well
  // the model generalises from the data it has (closed form, no refits).
  double loo_rmse() const { return loo_rmse_; }

 private:
  // Log marginal likelihood (plus a weak length-scale prior) with the signal
  // variance profiled out; nullopt when the kernel matrix is not positive definite.
  std::optional<double> profiled_lml(const GpHyper& h) const;
  void set_data(const Eigen::MatrixXd& X, const Eigen::VectorXd& y);
  void finish(const GpHyper& h);
  // Factorises K / signal_var + noise_ratio I of the current inputs (adding
  // jitter until it factorises), keeps L_ and solves for alpha_.
  Eigen::LLT<Eigen::MatrixXd> factorise();

  Eigen::MatrixXd X_;
  Eigen::VectorXd ys_;      // standardised targets
  double y_mean_ = 0, y_scale_ = 1;
  int n_ = 0;
  GpHyper hyper_;
  double signal_var_ = 1;   // of the standardised targets
  Eigen::MatrixXd L_;       // Cholesky factor of K/signal_var + noise_ratio I
  Eigen::VectorXd alpha_;   // (K/signal_var + noise_ratio I)^-1 ys
  double lml_ = 0, loo_rmse_ = 0;
  int believed_ = 0;
};

// Matern 5/2 correlation between the rows of A and B under `length_scales`.
Eigen::MatrixXd matern52(const Eigen::MatrixXd& A, const Eigen::MatrixXd& B,
                         const Eigen::VectorXd& length_scales);

// Expected improvement below `best` of a Gaussian prediction (mean, sd), for
// minimisation: E[max(best - xi - f, 0)]. Zero-ish where the model is sure the
// value is worse; grows with the predicted gain and with uncertainty.
double expected_improvement(double mean, double sd, double best, double xi = 0.0);

}  // namespace ks::core
