// When the parent stops waiting for a worker that evaluates one candidate
// (ProcessEvaluator's run slots): the deadline moves with the steps the
// worker reports, and the timeout message says what the step was allowed.
//
// Loading the candidate gets run_timeout_s plus a grace. Each workload gets
// run_timeout_s for the candidate's own work, plus each step's allowance
// (FlowPhase::extra_s, a timing's caps) when the step starts. The task's
// reference runs on a clock of its own, run_timeout_s plus its step's
// allowance, and the candidate's clock resumes where it stopped.
#pragma once

#include <chrono>

#include "eval/flow.hpp"

namespace ks::eval {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  // `limit_s`: run_timeout_s; `load_grace_s`: what loading gets beyond it.
  Deadline(double limit_s, double load_grace_s, Clock::time_point now);

  // The worker started a workload: the candidate's clock starts afresh.
  void workload_started(Clock::time_point now);
  // The worker entered a step: its allowance is added, or the reference's
  // clock starts, or the candidate's resumes.
  void enter(FlowPhase step, Clock::time_point now);

  Clock::time_point at() const { return at_; }
  const FlowPhase& step() const { return step_; }  // the step in progress
  double limit_s() const { return limit_s_; }
  double load_allowed_s() const { return limit_s_ + load_grace_s_; }
  // The candidate's time for the workload in progress so far: run_timeout_s
  // plus the allowances of the steps entered.
  double allowed_s() const { return allowed_s_; }
  // The reference's time for its step in progress.
  double reference_allowed_s() const { return reference_allowed_s_; }

 private:
  double limit_s_;
  double load_grace_s_;
  Clock::time_point at_;
  double allowed_s_ = 0;
  double candidate_left_s_ = 0;  // what the candidate had left when the reference took over
  double reference_allowed_s_ = 0;
  FlowPhase step_;
};

}  // namespace ks::eval
