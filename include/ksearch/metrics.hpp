// Suite-level metrics over a set of problems: KernelBench's fast_p and the
// geometric-mean speedup (docs/tasks/kernelbench.md).
#pragma once

#include <string>
#include <vector>

#include "ksearch/export.h"
#include "ksearch/json.hpp"

KS_NAMESPACE_BEGIN

// One problem's outcome: whether the solution is correct (all trials
// passed), its time and the baselines' times (0 = unknown).
struct KS_API ProblemOutcome {
  std::string problem;
  bool correct = false;
  double kernel_ms = 0;
  double eager_ms = 0;    // PyTorch eager
  double compile_ms = 0;  // torch.compile (inductor, default mode)

  double speedup_over_eager() const { return correct && kernel_ms > 0 && eager_ms > 0 ? eager_ms / kernel_ms : 0; }
  double speedup_over_compile() const {
    return correct && kernel_ms > 0 && compile_ms > 0 ? compile_ms / kernel_ms : 0;
  }
};

// fast_p = (problems that are correct and have speedup > p) / all problems;
// incorrect or missing problems count as failures. fast_0 is the correctness
// rate (a correct problem whose baseline is unknown counts there only).
struct KS_API FastPTable {
  std::vector<double> p;               // the thresholds
  std::vector<double> fast_p_eager;    // per threshold, a fraction of n_total
  std::vector<double> fast_p_compile;
  int n_total = 0;
  int n_correct = 0;
  // Geometric mean of the speedup over the correct problems whose baseline
  // is known (0 when there are none), and how many that is.
  double geomean_speedup_eager = 0;
  double geomean_speedup_compile = 0;
  int n_eager = 0, n_compile = 0;

  Json to_json() const;
};

// KernelBench's thresholds: 0, 0.5, 0.8, 1, 1.5, 2.
KS_API std::vector<double> default_fast_p_thresholds();

KS_API FastPTable fast_p_table(const std::vector<ProblemOutcome>& outcomes,
                               const std::vector<double>& thresholds = default_fast_p_thresholds());

KS_NAMESPACE_END
