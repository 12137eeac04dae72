#include "search/tune/tuner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ksearch/error.hpp"

namespace ks::core {
namespace {

// Latin hypercube designs tried per seed design; the most spread-out one wins.
constexpr int kDesignRestarts = 16;
// Best results whose neighbourhoods join every candidate pool.
constexpr std::size_t kNeighbourhoodSources = 3;
constexpr int kNeighbourRadius = 2;
// Draws per wanted pool point before sampling gives up (sparse admissible sets).
constexpr int kSampleTriesPerPoint = 20;
// Expected improvement (in log objective) below which the model sees nothing
// left to gain: 1e-4 is a 0.01 % expected speed-up, far below timing noise.
constexpr double kNegligibleImprovement = 1e-4;

}  // namespace

const char* to_string(TuneStop s) {
  switch (s) {
    case TuneStop::none: return "none";
    case TuneStop::budget: return "budget";
    case TuneStop::stalled: return "stalled";
    case TuneStop::exhausted: return "exhausted";
  }
  return "?";
}

// ---------------------------------------------------------------------------
// ConfigSearch

ConfigSearch::ConfigSearch(ParamSpace space, TunerOptions options, std::uint64_t seed)
    : space_(std::move(space), options.workload_dims),
      options_(std::move(options)),
      rng_(seed),
      best_objective_(std::numeric_limits<double>::infinity()) {
  if (options_.max_evaluations < 0 || options_.stall_evaluations < 0 || options_.initial_samples < 0 ||
      options_.candidate_pool < 1 || !(options_.min_improvement >= 0 && options_.min_improvement < 1) ||
      !(options_.failure_radius >= 0) || !(options_.exploration >= 0))
    throw Error(Status::invalid_argument,
                "tune: options out of range (counts must be >= 0, candidate_pool >= 1, "
                "min_improvement in [0, 1), failure_radius and exploration >= 0)");
  all_ = space_.enumerate_admissible(options_.enumerate_limit);
}

std::optional<std::uint64_t> ConfigSearch::admissible_count() const {
  if (!all_) return std::nullopt;
  return all_->size();
}

std::optional<util::Vars> ConfigSearch::ask() {
  if (done()) return std::nullopt;
  if (options_.max_evaluations > 0 && evaluations() + pending() >= options_.max_evaluations) {
    stop_ = TuneStop::budget;
    return std::nullopt;
  }
  std::optional<GridPoint> p = propose();
  if (!p) {
    stop_ = TuneStop::exhausted;
    return std::nullopt;
  }
  decision_.pending = pending();
  tried_.insert(*p);
  pending_.insert(*p);
  return space_.to_vars(*p);
}

std::vector<Proposal> ConfigSearch::ask_batch(int count) {
  if (count < 1) throw Error(Status::invalid_argument, fmt::format("tune: a batch needs at least one configuration, "
                                                                    "asked for {}", count));
  std::vector<Proposal> out;
  while (static_cast<int>(out.size()) < count) {
    std::optional<util::Vars> config = ask();
    if (!config) break;
    out.push_back({std::move(*config), decision_});
  }
  return out;
}

void ConfigSearch::tell(const util::Vars& config, double objective) {
  if (!(objective > 0) || !std::isfinite(objective))
    throw Error(Status::invalid_argument,
                fmt::format("tune: objective must be positive and finite, got {}", objective));
  GridPoint p = space_.to_point(config);
  std::string why;
  if (!space_.admissible(p, &why))
    throw Error(Status::invalid_argument, fmt::format("tune: told configuration is not admissible: {}", why));
  if (tried(p) && !pending_.count(p))
    throw Error(Status::state, "tune: this configuration's result was already told");
  pending_.erase(p);
  tried_.insert(p);
  // Counts as progress only when it beats the best by the required margin;
  // the best itself always moves.
  if (objective < best_objective_ * (1.0 - options_.min_improvement) || results_.empty())
    since_improvement_ = 0;
  else
    ++since_improvement_;
  best_objective_ = std::min(best_objective_, objective);
  results_.push_back({std::move(p), objective});
  if (stop_ == TuneStop::none) {
    if (options_.max_evaluations > 0 && evaluations() >= options_.max_evaluations)
      stop_ = TuneStop::budget;
    else if (options_.stall_evaluations > 0 && since_improvement_ >= options_.stall_evaluations)
      stop_ = TuneStop::stalled;
  }
}

void ConfigSearch::tell_failure(const util::Vars& config) {
  GridPoint p = space_.to_point(config);
  if (tried(p) && !pending_.count(p))
    throw Error(Status::state, "tune: this configuration's result was already told");
  pending_.erase(p);
  tried_.insert(p);
  failed_.push_back(std::move(p));
  ++since_improvement_;
  if (stop_ == TuneStop::none) {
    if (options_.max_evaluations > 0 && evaluations() >= options_.max_evaluations)
      stop_ = TuneStop::budget;
    else if (options_.stall_evaluations > 0 && since_improvement_ >= options_.stall_evaluations)
      stop_ = TuneStop::stalled;
  }
}

const ConfigSearch::Result* ConfigSearch::best_result() const {
  const Result* best = nullptr;
  for (const auto& r : results_)
    if (!best || r.objective < best->objective) best = &r;
  return best;
}

std::optional<util::Vars> ConfigSearch::best() const {
  if (const Result* r = best_result()) return space_.to_vars(r->point);
  return std::nullopt;
}

std::vector<GridPoint> ConfigSearch::candidate_pool() {
  std::vector<GridPoint> pool;
  std::set<GridPoint> in_pool;
  auto add = [&](const GridPoint& p) {
    if (!tried(p) && in_pool.insert(p).second) pool.push_back(p);
  };
  const std::size_t limit = static_cast<std::size_t>(options_.candidate_pool);
  if (all_) {
    std::vector<const GridPoint*> untried;
    for (const auto& p : *all_)
      if (!tried(p)) untried.push_back(&p);
    if (untried.size() <= limit) {
      for (const GridPoint* p : untried) add(*p);
      return pool;
    }
    // Partial Fisher-Yates: a uniform sample of `limit` untried points.
    for (std::size_t i = 0; i < limit; ++i) {
      const std::size_t j = i + uniform_below(rng_, untried.size() - i);
      std::swap(untried[i], untried[j]);
      add(*untried[i]);
    }
  } else {
    const std::size_t max_draws = limit * kSampleTriesPerPoint;
    for (std::size_t draws = 0; pool.size() < limit && draws < max_draws; ++draws)
      if (auto p = space_.sample_admissible(rng_, 1)) add(*p);
  }
  // Improvements are most often next to the best results, and a random
  // sample of a large grid rarely contains those neighbours.
  std::vector<const Result*> ranked;
  for (const auto& r : results_) ranked.push_back(&r);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const Result* a, const Result* b) { return a->objective < b->objective; });
  for (std::size_t k = 0; k < ranked.size() && k < kNeighbourhoodSources; ++k)
    for (const auto& q : space_.neighbours(ranked[k]->point, kNeighbourRadius)) add(q);
  return pool;
}

double ConfigSearch::feasibility(const GridPoint& p) const {
  if (failed_.empty() || options_.failure_radius <= 0) return 1.0;
  const double inv = 1.0 / (2.0 * options_.failure_radius * options_.failure_radius);
  double ok = 0, bad = 0;
  for (const auto& f : failed_) bad += std::exp(-space_.feature_distance2(p, f) * inv);
  for (const auto& r : results_) ok += std::exp(-space_.feature_distance2(p, r.point) * inv);
  // One prior success keeps an isolated failure from ruling out its whole neighbourhood.
  return (1.0 + ok) / (1.0 + ok + bad);
}

// ---------------------------------------------------------------------------
// Tuner

Tuner::Tuner(ParamSpace space, TunerOptions options, std::uint64_t seed)
    : ConfigSearch(std::move(space), std::move(options), seed) {
  const int d = static_cast<int>(this->space().dimensions());
  int n = this->options().initial_samples;
  if (n == 0) {
    // Enough points to see every parameter's trend, few enough to leave most
    // of a small budget to the model.
    n = std::clamp(2 * d + 1, 5, 10);
    if (this->options().max_evaluations > 0) n = std::min(n, std::max(2, this->options().max_evaluations / 3));
  }
  initial_samples_ = n;
}

std::optional<GridPoint> Tuner::propose() {
  if (!design_made_) {
    design_made_ = true;
    // Results told before the first ask (a measured starting point) count as seeds.
    const int count = initial_samples_ - evaluations() - pending();
    if (count > 0) design_ = space_filling_design(count);
  }
  while (!design_.empty()) {
    GridPoint p = std::move(design_.front());
    design_.erase(design_.begin());
    if (tried(p)) continue;
    decision_ = TunerDecision{"seed"};
    decision_.feasibility = feasibility(p);
    return p;
  }
  std::vector<GridPoint> pool = candidate_pool();
  if (pool.empty()) return std::nullopt;
  if (results().size() < 2) {
    // Too little to model: keep spreading out.
    decision_ = TunerDecision{"explore"};
    decision_.candidates = static_cast<int>(pool.size());
    return farthest_point(pool);
  }
  return model_choice(pool);
}

std::vector<GridPoint> Tuner::space_filling_design(int count) {
  std::vector<GridPoint> pool = candidate_pool();
  if (pool.size() <= static_cast<std::size_t>(count)) return pool;
  const std::size_t d = space().dimensions(), P = pool.size();
  std::vector<std::vector<double>> feats;
  for (const auto& p : pool) feats.push_back(space().features(p));
  std::vector<std::vector<double>> fixed;
  for (const auto& p : tried_points()) fixed.push_back(space().features(p));
  auto dist2 = [d](const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (std::size_t j = 0; j < d; ++j) s += (a[j] - b[j]) * (a[j] - b[j]);
    return s;
  };

  std::vector<std::size_t> best_design;
  double best_score = -1;
  for (int restart = 0; restart < kDesignRestarts; ++restart) {
    // One Latin hypercube over value ranks: each parameter's range is cut in
    // `count` strata and every stratum is used once.
    std::vector<std::vector<int>> strata(d, std::vector<int>(static_cast<std::size_t>(count)));
    for (auto& perm : strata) {
      for (int i = 0; i < count; ++i) perm[static_cast<std::size_t>(i)] = i;
      for (std::size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[uniform_below(rng(), i)]);
    }
    std::vector<std::size_t> chosen;
    std::vector<bool> used(P, false);
    for (int i = 0; i < count; ++i) {
      GridPoint target(d);
      for (std::size_t j = 0; j < d; ++j) {
        const double u = (strata[j][static_cast<std::size_t>(i)] + uniform01(rng())) / count;
        target[j] = std::min(space().levels(j) - 1, static_cast<int>(u * space().levels(j)));
      }
      // Repair: the nearest admissible, untried point not yet in the design.
      const std::vector<double> tf = space().features(target);
      std::size_t pick = P;
      double pick_d = std::numeric_limits<double>::infinity();
      for (std::size_t k = 0; k < P; ++k) {
        if (used[k]) continue;
        const double dk = dist2(tf, feats[k]);
        if (dk < pick_d) {
          pick_d = dk;
          pick = k;
        }
      }
      used[pick] = true;
      chosen.push_back(pick);
    }
    // Maximin score: the closest pair among the design and the points already tried.
    double score = std::numeric_limits<double>::infinity();
    for (std::size_t a = 0; a < chosen.size(); ++a) {
      for (std::size_t b = a + 1; b < chosen.size(); ++b)
        score = std::min(score, dist2(feats[chosen[a]], feats[chosen[b]]));
      for (const auto& f : fixed) score = std::min(score, dist2(feats[chosen[a]], f));
    }
    if (score > best_score) {
      best_score = score;
      best_design = chosen;
    }
  }
  std::vector<GridPoint> out;
  for (std::size_t k : best_design) out.push_back(pool[k]);
  return out;
}

std::optional<GridPoint> Tuner::farthest_point(const std::vector<GridPoint>& pool) const {
  std::size_t pick = 0;
  double pick_d = -1;
  for (std::size_t k = 0; k < pool.size(); ++k) {
    double nearest = std::numeric_limits<double>::infinity();
    for (const auto& t : tried_points()) nearest = std::min(nearest, space().feature_distance2(pool[k], t));
    const double score = nearest * feasibility(pool[k]);
    if (score > pick_d) {
      pick_d = score;
      pick = k;
    }
  }
  return pool[pick];
}

std::optional<GridPoint> Tuner::model_choice(const std::vector<GridPoint>& pool) {
  const std::size_t d = space().dimensions();
  const Eigen::Index n = static_cast<Eigen::Index>(results().size());
  Eigen::MatrixXd X(n, static_cast<Eigen::Index>(d));
  Eigen::VectorXd y(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto& r = results()[static_cast<std::size_t>(i)];
    const std::vector<double> f = space().features(r.point);
    for (std::size_t j = 0; j < d; ++j) X(i, static_cast<Eigen::Index>(j)) = f[j];
    y[i] = std::log(r.objective);
  }
  // A later choice of the same batch (points pending, no result told since
  // the last fit) keeps that fit: the data is the same.
  if (pending() == 0 || fit_points_ != static_cast<int>(n)) {
    // A full hyperparameter search when the data has grown by a quarter,
    // otherwise a local refinement from the last choice.
    const bool full = !hyper_ || n >= full_fit_points_ + std::max<Eigen::Index>(3, full_fit_points_ / 4);
    gp_.fit(X, y, full ? nullptr : &*hyper_);
    if (full) full_fit_points_ = static_cast<int>(n);
    fit_points_ = static_cast<int>(n);
    hyper_ = gp_.hyper();
    SurrogateInfo info;
    info.points = static_cast<int>(n);
    info.length_scales.assign(gp_.hyper().length_scales.data(),
                              gp_.hyper().length_scales.data() + gp_.hyper().length_scales.size());
    info.noise_ratio = gp_.hyper().noise_ratio;
    info.log_marginal_likelihood = gp_.log_marginal_likelihood();
    info.loo_rmse = gp_.loo_rmse();
    surrogate_ = std::move(info);
  }
  auto features_of = [&](const auto& points) {
    Eigen::MatrixXd F(static_cast<Eigen::Index>(points.size()), static_cast<Eigen::Index>(d));
    Eigen::Index k = 0;
    for (const GridPoint& p : points) {
      const std::vector<double> f = space().features(p);
      for (std::size_t j = 0; j < d; ++j) F(k, static_cast<Eigen::Index>(j)) = f[j];
      ++k;
    }
    return F;
  };
  // Kriging believer: points asked but not yet told (earlier members of
  // this batch) count as measured at the model's prediction, which leaves
  // the predicted means as they are and shrinks the uncertainty around
  // them, so expected improvement looks elsewhere; what they are believed
  // to measure also counts towards the best so far.
  double best_y = y.minCoeff();
  const GaussianProcess* model = &gp_;
  GaussianProcess believer;
  if (pending() > 0) {
    believer = gp_;
    best_y = std::min(best_y, believer.believe(features_of(pending_points())).minCoeff());
    model = &believer;
  }
  const GaussianProcess::Prediction pred = model->predict(features_of(pool));

  std::size_t pick = 0, exploit = 0;
  double pick_score = -1, pick_ei = 0, exploit_score = std::numeric_limits<double>::infinity();
  std::vector<double> feas(pool.size());
  for (std::size_t k = 0; k < pool.size(); ++k) {
    const auto K = static_cast<Eigen::Index>(k);
    const double sd = std::sqrt(pred.variance[K]);
    const double ei = expected_improvement(pred.mean[K], sd, best_y, options().exploration);
    feas[k] = feasibility(pool[k]);
    if (ei * feas[k] > pick_score) {
      pick_score = ei * feas[k];
      pick = k;
      pick_ei = ei;
    }
    // Predicted log objective, with a likely failure costing like a slowdown.
    const double guess = pred.mean[K] - std::log(std::max(feas[k], 1e-12));
    if (guess < exploit_score) {
      exploit_score = guess;
      exploit = k;
    }
  }
  // Once the model expects no measurable gain anywhere, EI's ranking is
  // numerical dust that favours far, uncertain corners (and failures); take
  // the model's best guess instead.
  const bool exploiting = !(pick_score > kNegligibleImprovement);
  if (exploiting) pick = exploit;
  const auto P = static_cast<Eigen::Index>(pick);
  decision_ = TunerDecision{exploiting ? "exploit" : "model"};
  decision_.candidates = static_cast<int>(pool.size());
  decision_.expected_improvement = exploiting ? 0.0 : pick_ei;
  decision_.feasibility = feas[pick];
  decision_.predicted = std::exp(pred.mean[P]);
  decision_.predicted_log_sd = std::sqrt(pred.variance[P]);
  return pool[pick];
}

// ---------------------------------------------------------------------------
// RandomSearch

RandomSearch::RandomSearch(ParamSpace space, TunerOptions options, std::uint64_t seed)
    : ConfigSearch(std::move(space), std::move(options), seed) {}

std::optional<GridPoint> RandomSearch::propose() {
  decision_ = TunerDecision{"random"};
  decision_.candidates = 1;
  if (all_admissible()) {
    if (!shuffled_) {
      order_ = *all_admissible();
      for (std::size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[uniform_below(rng(), i)]);
      shuffled_ = true;
    }
    while (next_ < order_.size()) {
      const GridPoint& p = order_[next_++];
      if (!tried(p)) return p;
    }
    return std::nullopt;
  }
  // Too large to list: rejection sampling, giving up when untried points have become rare.
  for (int attempt = 0; attempt < 1000; ++attempt) {
    std::optional<GridPoint> p = space().sample_admissible(rng(), kSampleTriesPerPoint);
    if (!p) return std::nullopt;
    if (!tried(*p)) return p;
  }
  return std::nullopt;
}

std::unique_ptr<ConfigSearch> make_config_search(const std::string& method, ParamSpace space,
                                                 TunerOptions options, std::uint64_t seed) {
  if (method == "gp-ei") return std::make_unique<Tuner>(std::move(space), std::move(options), seed);
  if (method == "random") return std::make_unique<RandomSearch>(std::move(space), std::move(options), seed);
  throw Error(Status::not_found, fmt::format("tune: unknown search method \"{}\" (known: gp-ei, random)", method));
}

}  // namespace ks::core
