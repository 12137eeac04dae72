// Extension interface (less stable: it may change in a minor release; see
// docs/api.md). The evaluator: compiles, checks and times candidate
// solutions. The built-in ones come from make_evaluator (ksearch/eval.hpp);
// a host's own (another machine, a cluster) implements this and is passed
// as SearchOptions::custom_evaluator.
#pragma once

#include <vector>

#include "ksearch/evaluator.hpp"
#include "ksearch/export.h"
#include "ksearch/task.hpp"
#include "ksearch/types.hpp"

KS_NAMESPACE_BEGIN

class KS_API Evaluator {
 public:
  virtual ~Evaluator() = default;

  // Evaluates one solution. Never throws for a bad candidate: compile errors,
  // crashes and hangs come back as an EvalResult with the matching status.
  // Throws ks::Error only when the evaluator itself cannot work (e.g.
  // Status::no_device).
  virtual EvalResult evaluate(const Task& task, const Solution& solution) = 0;

  // Evaluates several solutions, overlapping compilation with measurement
  // where the implementation can. Results come back in input order.
  virtual std::vector<EvalResult> evaluate_batch(const Task& task,
                                                 const std::vector<Solution>& solutions);

  virtual DeviceInfo device() const = 0;
  virtual EvalOptions& options() = 0;

  // Called from another thread when the run is cancelled: an evaluation in
  // flight should end promptly (its worker processes killed) by throwing
  // ks::Error(Status::cancelled), and so should every later one. Must be
  // thread-safe. The default does nothing; the engine then drops the
  // result of the evaluation in flight when it returns.
  virtual void cancel() {}
};

KS_NAMESPACE_END
