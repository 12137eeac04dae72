#include "ksearch/metrics.hpp"

#include <cmath>
#include <cstdio>

KS_NAMESPACE_BEGIN

std::vector<double> default_fast_p_thresholds() { return {0.0, 0.5, 0.8, 1.0, 1.5, 2.0}; }

FastPTable fast_p_table(const std::vector<ProblemOutcome>& outcomes, const std::vector<double>& thresholds) {
  FastPTable t;
  t.p = thresholds;
  t.n_total = static_cast<int>(outcomes.size());
  double log_eager = 0, log_compile = 0;
  for (const auto& o : outcomes) {
    if (!o.correct) continue;
    ++t.n_correct;
    if (double s = o.speedup_over_eager(); s > 0) {
      log_eager += std::log(s);
      ++t.n_eager;
    }
    if (double s = o.speedup_over_compile(); s > 0) {
      log_compile += std::log(s);
      ++t.n_compile;
    }
  }
  if (t.n_eager) t.geomean_speedup_eager = std::exp(log_eager / t.n_eager);
  if (t.n_compile) t.geomean_speedup_compile = std::exp(log_compile / t.n_compile);
  auto rate = [&](double p, double (ProblemOutcome::*speedup)() const) {
    if (t.n_total == 0) return 0.0;
    int n = 0;
    for (const auto& o : outcomes) {
      if (!o.correct) continue;
      const double s = (o.*speedup)();
      // Speedups are positive, so a correct problem is "faster than 0x"
      // even where its baseline is unknown: fast_0 is the correctness rate.
      if (p <= 0 ? true : s > p) ++n;
    }
    return static_cast<double>(n) / t.n_total;
  };
  for (double p : thresholds) {
    t.fast_p_eager.push_back(rate(p, &ProblemOutcome::speedup_over_eager));
    t.fast_p_compile.push_back(rate(p, &ProblemOutcome::speedup_over_compile));
  }
  return t;
}

Json FastPTable::to_json() const {
  Json eager = Json::object(), compiled = Json::object();
  for (std::size_t i = 0; i < p.size(); ++i) {
    char key[32];
    std::snprintf(key, sizeof key, "fast_%g", p[i]);
    eager[key] = fast_p_eager[i];
    compiled[key] = fast_p_compile[i];
  }
  return Json::obj({{"n_total", n_total},
                    {"n_correct", n_correct},
                    {"fast_p_over_eager", eager},
                    {"fast_p_over_compile", compiled},
                    {"geomean_speedup_over_eager", geomean_speedup_eager},
                    {"geomean_speedup_over_compile", geomean_speedup_compile},
                    {"correct_with_eager_baseline", n_eager},
                    {"correct_with_compile_baseline", n_compile}});
}

KS_NAMESPACE_END
